"""One screen of the app: the tables of one comparison, switchable views, drill-down, call stacks.

A screen that is not shown only records what arrives: its table is drawn when it is first shown
(:meth:`TablePane.activate`), and the call-stack panel is built the first time it opens. Start-up
then builds and styles only what the first screen needs, and results arriving for other screens
cost the app next to nothing while the user already reads the overall one.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from perfcmp_core.advisor.table import TABLE_NAME as ADVISOR
from perfcmp_core.compat import as_text
from perfcmp_core.compare.behind import ENTER_OPENS, enter_opens
from perfcmp_core.compare.kernel_drill import detail_keys, op_kernels, rows_matching
from perfcmp_core.compare.result import IS_TOTAL, Screen, Table
from perfcmp_core.insight import Headline, time_parts
from perfcmp_core.notes import Note
from perfcmp_core.view import TableView, display_header

from .frame_view import FrameView
from .pictures import AdvisorPicture, OverallPicture

#: Terminal rows from which the pictures (Overall, Advisor) show without asking (`p` toggles
#: them): below, the bars would leave the table a handful of rows.
PICTURE_MIN_ROWS = 36


class FilterBox(Input):
    """The filter's text box. Enter keeps the text at once, inside the key's own handling (a
    plain Input posts a message and keeps it later): keys typed right behind the Enter, in the
    same burst, then reach the table instead of this box."""

    def __init__(self, keep: Callable[[str], None], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._keep = keep

    async def action_submit(self) -> None:
        self._keep(self.value)


def _set_line(widget: Static, content: RenderableType) -> None:
    """New text for a widget whose size the text never changes (a one-line status, the message
    filling its box): no layout pass, which repaints the whole screen — on a large table, done
    on every cursor move, it made the keys twice as slow."""
    widget.update(content, layout=False)


class ExtraBox(ScrollView, can_focus=False):
    """The panel above the table (headlines, the sentence reading it, the advisor's findings):
    scrolled by `[` / `]`, never focused (the table keeps the keys); when it holds more than it
    shows, its border says which lines show and the keys. One widget drawing its own lines
    (not a scroll container around a Static): every pane has one, and each widget of the screen
    costs every key a visit when the app goes idle."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._text = Text()
        self._lines: list[Strip] = []
        self._wrapped_at = -1  # the width ``_lines`` were wrapped at (-1: not yet)

    @property
    def text(self) -> Text:
        """What the panel holds (all of it, not only the lines in view)."""
        return self._text

    def set_text(self, text: Text) -> None:
        self._text = text
        self._wrapped_at = -1
        self.refresh(layout=True)  # its height follows its lines
        self.call_after_refresh(self.hint)

    def _wrap(self, width: int) -> list[Strip]:
        """The text wrapped at ``width`` columns, one strip per line, in the panel's style."""
        if width != self._wrapped_at:
            console = self.app.console
            self._lines = [Strip(line) for line in console.render_lines(
                self._text, console.options.update_width(max(1, width)), style=self.rich_style)]
            self._wrapped_at = width
            self.virtual_size = Size(width, len(self._lines))
        return self._lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._wrap(width))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        lines = self._wrap(width)
        index = y + int(self.scroll_y)
        if index < len(lines):
            return lines[index].crop_extend(0, width, self.rich_style)
        return Strip.blank(width, self.rich_style)

    def hint(self) -> None:
        self.border_subtitle = (f"[ / ] scroll ({int(self.scroll_y) + 1}–"
                                f"{int(self.scroll_y) + self.scrollable_content_region.height} of "
                                f"{self.virtual_size.height} lines)"
                                if self.max_scroll_y > 0 else "")

    def on_resize(self) -> None:
        self.call_after_refresh(self.hint)


class TablePane(Vertical):
    """Shows one of the screen's tables; the others are a `v` (or an Enter) away."""

    def __init__(self, spec: Screen) -> None:
        super().__init__(id=f"pane-{spec.id}")
        self.spec = spec
        self.tables: dict[str, Table] = {}
        self.views: dict[str, TableView] = {}
        self.reasons: list[str] = []
        self.current: str | None = None
        self.finished = False
        self.show_stacks = False
        self.back: list[str] = []  # views Enter drilled from; `q` returns to the last one
        #: The screen whose row `o` (or Enter) opened the rows shown here: `q` / Backspace / Esc
        #: return there (None: nothing opened from another screen).
        self.came_from: str | None = None
        self._chosen = False  # the user picked a view: arriving tables no longer switch it
        self._filter_before = ""
        #: What the text box edits now: the filter (`|`) or the search in place (`/`).
        self._box_mode = "filter"
        self._find_from = 0  # the cursor when the search opened (Esc returns there)
        self._cursors: dict[str, int] = {}  # cursor per view, restored when it shows again
        #: The filter / search box, mounted when first opened (:meth:`_box`).
        self._filter_box: FilterBox | None = None
        #: The current view is not drawn yet (it arrived while the pane was hidden).
        self._stale = False
        #: The call-stack panel and its two texts, built when first opened.
        self._stacks: Horizontal | None = None
        self._stack_texts: dict[str, Static] = {}
        self._headlines: list[Headline] = []
        self.notes: list[Note] = []  # the run's notes shown on this screen
        #: The user's `p`: pictures on / off; None: shown when the terminal is tall enough.
        self.pictures: bool | None = None
        #: How long the comparison took (the status line's last part once it finished).
        self.finished_in = ""

    def compose(self) -> ComposeResult:
        yield Static(self.spec.title, id="pane-status", classes="status")
        # Scrolls when taller than its share of the screen ([ / ]): the advisor's later findings
        # were cut off, out of the keyboard's reach.
        yield ExtraBox(id="extra-box", classes="hidden")
        if self.spec.headlines:  # the Overall screen
            yield OverallPicture(id="picture", classes="hidden")
        elif ADVISOR in self.spec.sheets:
            yield AdvisorPicture(id="picture", classes="hidden")
        yield Static(f"{self.spec.title}: waiting for results…", id="message")
        yield FrameView(id="frame", classes="hidden")
        yield Static("", id="cell-line", classes="status hidden")

    @property
    def frame(self) -> FrameView:
        return self.query_one("#frame", FrameView)

    @property
    def view(self) -> TableView | None:
        return self.views.get(self.current) if self.current else None

    def names(self) -> list[str]:
        """The views this pane offers now (those of its tables that arrived)."""
        return [t for t in self.spec.sheets if t in self.tables]

    # -- data arrival -------------------------------------------------------------------------
    def add_table(self, table: Table, view: TableView | None = None) -> None:
        """A table arrived; ``view`` is its view already prepared off the UI thread
        (:meth:`~perfcmp_core.view.TableView.prepare`), else one is made here."""
        self.tables[table.name] = table
        self.views[table.name] = view if view is not None else TableView(table)
        names = self.names()
        if table.name in names and (self.current not in names or
                                    (not self._chosen and names[0] == table.name)):
            self.show(names[0])
        self._show_extra()
        self._show_picture()

    def reset(self) -> None:
        """Forget every table (a retried run starts from nothing)."""
        self.tables.clear()
        self.views.clear()
        self.reasons.clear()
        self._cursors.clear()
        self.back.clear()
        self.came_from = None
        self.current = None
        self.finished_in = ""
        self.finished = self._chosen = self._stale = False
        self.frame.set_view(None)
        self.frame.add_class("hidden")
        self.query_one("#cell-line").add_class("hidden")
        self.query_one("#message").remove_class("hidden")
        self._headlines = []
        self.notes = []
        self._show_extra()
        self._show_notes()
        self._show_picture()
        self._status()

    def set_headlines(self, headlines: list[Headline]) -> None:
        """The run's headline figures, shown above the table (screens that declare them)."""
        self._headlines = headlines
        self._show_extra()

    def _show_extra(self) -> None:
        """Above the table: the headline figures, then the sentence that reads the table."""
        text = headline_text(self._headlines)
        table = self.tables.get(self.current) if self.current else None
        text.append(table.lead if table is not None else "")
        box = self.query_one("#extra-box", ExtraBox)
        box.set_text(text)
        box.set_class(not text.plain.strip(), "hidden")

    def scroll_extra(self, direction: int) -> bool:
        """`[` / `]`: the panel above the table (headlines, findings) a page up / down; False
        when it shows everything."""
        box = self.query_one("#extra-box", ExtraBox)
        if box.has_class("hidden") or box.max_scroll_y <= 0:
            return False
        page = max(1, box.scrollable_content_region.height - 1)
        box.scroll_to(y=box.scroll_y + direction * page, animate=False, immediate=True)
        box.hint()
        return True

    # -- pictures -----------------------------------------------------------------------------
    def _picture_table(self) -> Table | None:
        """The table this screen's picture draws (None: it has no picture, or not yet)."""
        overall = self.tables.get("OverallMetrics")
        return overall if overall is not None else self.tables.get(ADVISOR)

    def _show_picture(self) -> None:
        """When on: the Overall bars (OverallMetrics) and step sparkline (StepCompare), or the
        Advisor's share bars (the Advisor table)."""
        found = self.query("#picture")
        if not found:
            return
        picture = found.first()
        table = self._picture_table()
        on = table is not None and self.pictures_on()
        picture.set_class(not on, "hidden")
        if not on or table is None:
            return
        if isinstance(picture, AdvisorPicture):
            picture.set_data(table.data)
        elif isinstance(picture, OverallPicture):
            steps = self.tables.get("StepCompare")
            series = ((steps.data["base_e2e"].tolist(), steps.data["comp_e2e"].tolist())
                      if steps is not None else ([], []))
            picture.set_data(time_parts(table), series)

    def pictures_on(self) -> bool:
        return self.pictures if self.pictures is not None else (
            self.app.size.height >= PICTURE_MIN_ROWS)

    def toggle_pictures(self) -> bool:
        """`p`: pictures on / off (False: this screen has none)."""
        if not self.query("#picture") or self._picture_table() is None:
            return False
        self.pictures = not self.pictures_on()
        self._show_picture()
        return True

    def on_resize(self, event: events.Resize) -> None:
        if self.pictures is None:
            self._show_picture()

    def set_notes(self, notes: list[Note]) -> None:
        """The run's notes about this screen: the first on one line above the table, all of
        them one key (``!``) away."""
        self.notes = notes
        self._show_notes()

    def _show_notes(self) -> None:
        """The notes line, mounted when the screen first has a note to show (most have none)."""
        # Without a table the screen's message already says why (the absent-table notes).
        shown = bool(self.notes) and self.current is not None
        found = self.query("#notes-line")
        if not found and not shown:
            return
        if shown:
            more = f" (+{len(self.notes) - 1} more)" if len(self.notes) > 1 else ""
            text = Text("note: ", style="bold")
            text.append(self.notes[0].line)
            text.append(f"{more}  · ! lists every note", style="dim")
        if not found:
            self.mount(Static(text, id="notes-line"), before="#message")
            return
        line = found.first(Static)
        line.set_class(not shown, "hidden")
        if shown:
            line.update(text)

    def add_reason(self, reason: str) -> None:
        """Why a table of this screen is missing (shown while the screen has no table)."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        self._status()

    def set_finished_in(self, seconds: float) -> None:
        """The run's time, at the end of the status line (where it hides nothing)."""
        self.finished_in = f"comparison finished in {seconds:.2f} s"
        self._status()

    def mark_finished(self) -> None:
        self.finished = True
        self._status()

    def show(self, name: str) -> None:
        """Make ``name`` the current view; drawn now if the pane is shown, else when it is."""
        if self.current is not None and not self._stale:
            self._cursors[self.current] = self.frame.cursor
        self.current = name
        self._stale = not self.display
        if self._stale:
            self._status()
            return
        self.frame.set_view(self.views[name])
        table = self.views[name].table
        self.frame.opens_first = ((lambda row: enter_opens(table, row))
                                  if table.name in ENTER_OPENS else None)
        self.frame.refresh_data(cursor=self._cursors.get(name, 0))
        self.frame.remove_class("hidden")
        self.query_one("#cell-line").remove_class("hidden")
        self.query_one("#message").add_class("hidden")
        self._status()
        self._show_extra()  # the sentence that reads the table is the view's own
        self._show_notes()
        self._cell_line()
        self.update_stacks()

    def activate(self) -> None:
        """The pane is now shown: draw the view that arrived while it was hidden."""
        if self._stale and self.current is not None:
            self.show(self.current)

    # -- state --------------------------------------------------------------------------------
    def empty_reason(self) -> str:
        """Why there is no table: the comparisons' own reasons, else what the screen needs."""
        if self.reasons:
            return "; ".join(self.reasons)
        return self.spec.hint if self.finished else ""

    def _status(self) -> None:
        status = self.query_one("#pane-status", Static)
        if self.current is None:
            reason = self.empty_reason()
            text = (f"{self.spec.title}: nothing to show — {reason}" if reason
                    else f"{self.spec.title}: waiting for results…")
            _set_line(status, Text(self.spec.title))
            _set_line(self.query_one("#message", Static), Text(text))
            return
        view = self.views[self.current]
        table = view.table
        parts = [table.title or table.name, f"{len(view):,}/{len(table.data):,} rows"]
        if view.sort_key:
            header = display_header(table.column(view.sort_key), table)
            parts.append(f"sort {header} {'▼' if view.descending else '▲'}")
        if view.focus_label:
            parts.append(f"rows of {view.focus_label} (q: back)")
        if view.filter_text:
            parts.append(self._filter_status(view))
        if view.find_text:
            parts.append(self._find_status(view))
        if view.totals_only:
            parts.append("[ TOTAL ] only")
        if view.hide_unchanged:
            parts.append("unchanged hidden (u)")
        if view.hidden:
            parts.append(f"{len(view.hidden)} hidden column{'s' if len(view.hidden) > 1 else ''} (+)")
        others = [t for t in self.names() if t != self.current]
        if others:
            parts.append("v: " + ", ".join(others))
        if self.finished_in:
            parts.append(self.finished_in)
        _set_line(status, Text("  ·  ".join(parts)))

    def _find_status(self, view: TableView) -> str:
        """The search and where the cursor is among its matches: ``“aten” match 2/5``."""
        found = view.found()
        if not len(found):
            return f"search “{view.find_text}”: no row matches"
        at = np.flatnonzero(found == self.frame.cursor)
        where = f"{int(at[0]) + 1}/{len(found):,}" if len(at) else f"–/{len(found):,}"
        return f"search “{view.find_text}” match {where} (n / N)"

    def _filter_status(self, view: TableView) -> str:
        """The filter, and whether some rows matched only in text not on screen (kernel lists,
        columns scrolled away or hidden): `n` takes the cursor there."""
        search = view.search
        kind = "regex " if search is not None and search.is_regex else ""
        text = f"filter {kind}“{view.filter_text}”"
        if not len(view):
            return text + ": no row matches"
        shown = [c.key for c in self.frame.visible_columns()]
        count, where = view.matched_elsewhere(shown)
        if count:
            headers = ", ".join(display_header(view.table.column(k), view.table) for k in where)
            rows = "all rows" if count == len(view) else f"{count:,} row{'s' if count > 1 else ''}"
            text += f" ({rows} only in {headers}; n: next match)"
        return text

    def _cell_line(self) -> None:
        """Under the table: the cursor cell's full header and text (names cut in the middle on
        screen read in full here)."""
        line = self.query_one("#cell-line", Static)
        frame = self.frame
        col, row = frame.current_column, frame.current_row
        if self.view is None or col is None or row is None:
            _set_line(line, "")
            return
        header = frame.headers[frame.col]
        text = Text(header + ": ", style="bold")
        text.append(self.view.cell(row, col) or "—")
        _set_line(line, text)  # on every cursor move

    def refresh_view(self, keep_row: int | None = None) -> None:
        if self.view is not None:
            self.frame.refresh_data(keep_row=keep_row)
        self._status()
        self._cell_line()
        self.update_stacks()

    # -- actions (called by the app) ----------------------------------------------------------
    def cycle_view(self) -> bool:
        names = self.names()
        if len(names) < 2 or self.current is None:
            return False
        self._chosen = True
        self.back.clear()
        self.show(names[(names.index(self.current) + 1) % len(names)])
        return True

    def sort_diff(self) -> bool:
        """`d`: sort by the Diff column, descending; pressed again, flip."""
        view = self.view
        key = view.diff_key() if view is not None else None
        if view is None or key is None:
            return False
        view.sort_by(key)
        self.refresh_view(keep_row=self.frame.current_row)
        return True

    def sort_column(self, key: str) -> None:
        """Sort by ``key`` (descending; the current sort column flips), the cell cursor on it:
        a column sorted by is always on screen."""
        if self.view is not None:
            self.view.sort_by(key)
            self.frame.show_column(key)
            self.refresh_view(keep_row=self.frame.current_row)

    def toggle_unchanged(self) -> bool:
        """`u`: hide / show the rows whose differences are all 0 (ratios 1)."""
        view = self.view
        if view is None or not view.toggle_unchanged():
            return False
        self.refresh_view(keep_row=self.frame.current_row)
        return True

    def hide_column(self) -> str | None:
        """`-`: hide the cursor column; its header, or None (the label cannot be hidden)."""
        col = self.frame.hide_column() if self.view is not None else None
        self.refresh_view(keep_row=self.frame.current_row)
        return display_header(col, self.view.table) if col is not None and self.view else None

    def unhide_columns(self) -> int:
        """`+`: show the hidden columns again; how many there were."""
        n = self.frame.unhide_columns()
        self.refresh_view(keep_row=self.frame.current_row)
        return n

    def next_match(self, step: int) -> bool:
        """`n` / `N`: the next / previous row the search matched (wrapping); without a search,
        the next / previous cell the filter matched."""
        if self.view is not None and self.view.find_text:
            found = self.view.found()
            if not len(found):
                return False
            here = self.frame.cursor
            ahead = found[found > here] if step > 0 else found[found < here][::-1]
            self.frame.cursor = int(ahead[0] if len(ahead) else (found[0] if step > 0 else found[-1]))
            self._status()
            return True
        if self.view is None or not self.frame.goto_match(step):
            return False
        self._status()
        return True

    def toggle_totals(self) -> bool:
        view = self.view
        if view is None or IS_TOTAL not in view.table.data:
            return False
        view.toggle_totals()
        self.refresh_view(keep_row=self.frame.current_row)
        return True

    def drill(self, row: int) -> bool:
        """Enter on a statistic row: its detail rows (the matched base/comparison entries)."""
        view = self.view
        if view is None or view.table.drill is None or view.table.drill.target not in self.views:
            return False
        target_name = view.table.drill.target
        conditions, label = view.drill(row)
        self.views[target_name].set_focus(conditions, label)
        self._cursors.pop(target_name, None)  # new rows: start at the top
        assert self.current is not None
        self.back.append(self.current)
        self._chosen = True
        self.show(target_name)
        return True

    def open_rows(self, name: str, rows: np.ndarray, label: str, origin: str | None) -> None:
        """Show only ``rows`` of view ``name``: what is behind a row (`o`). ``origin``: the
        screen that row is on (`q` returns there), None: this screen (`q` returns to its view)."""
        while self.go_back():  # an earlier drill on this screen ends
            pass
        self.views[name].set_focus_rows(rows, label)
        self._cursors.pop(name, None)  # new rows: start at the top
        if origin is None:
            assert self.current is not None
            self.back.append(self.current)
        else:
            self.came_from = origin
        self._chosen = True
        self.show(name)

    def leave_rows(self) -> str | None:
        """`q` on rows opened from another screen: the focus ends; that screen's id (None when
        nothing was opened from one)."""
        origin, self.came_from = self.came_from, None
        if origin is None:
            return None
        if self.view is not None and self.view.focus_rows is not None:
            self.view.set_focus(())
            self.refresh_view()
        return origin

    def expand_all(self, expand: bool) -> bool:
        """`E` / `C`: open every node of the tree, or close them all (the cursor stays on its
        row, or on the root above it once that row is folded away); False when no tree shows."""
        view, row = self.view, self.frame.current_row  # the row before the tree changes
        if view is None or not view.expand_all(expand):
            return False
        while not expand and row is not None and view.parent_row(row) is not None:
            row = view.parent_row(row)
        self.frame.refresh_data(keep_row=row)
        return True

    def go_parent(self) -> bool:
        """`P`: the cursor to the node holding the cursor row; False at a root or off a tree."""
        view, row = self.view, self.frame.current_row
        parent = view.parent_row(row) if view is not None and row is not None else None
        if parent is None:
            return False
        self.frame.goto_row(parent)
        return True

    def go_back(self) -> bool:
        """`q` after a drill: back to the view Enter came from (the focus is dropped)."""
        if not self.back or self.view is None:
            return False
        left = self.current
        self.view.set_focus(())
        self.show(self.back.pop())
        self._cursors.pop(left, None)  # its rows were those of the drill
        return True

    # -- filter -------------------------------------------------------------------------------
    def open_filter(self) -> bool:
        """Show the filter box and focus it *now* (``focus()`` would only schedule it): the app
        holds the keys behind the ``|`` until this ran, then they land in the box."""
        if self.view is None:
            return False
        return self._open_box("filter", self.view.filter_text,
                              "filter: text, a|b or a regex; Enter keeps, Esc reverts")

    def open_search(self) -> bool:
        """`/`: search in place — the rows stay, the cursor goes to the first match from where
        it is, `n` / `N` step through the matches (the status counts them)."""
        if self.view is None:
            return False
        self._find_from = self.frame.cursor
        self.view.set_find("")
        return self._open_box("search", "", "search: text, a|b or a regex; Enter keeps "
                                            "(n / N: next / previous), Esc ends; | filters")

    def _box(self) -> FilterBox:
        """The filter / search box, mounted the first time it opens: most screens are never
        filtered, and every widget of the screen is visited when the app goes idle."""
        if self._filter_box is None:
            self._filter_box = FilterBox(self.apply_filter, id="filter", classes="hidden")
            self.mount(self._filter_box)
        return self._filter_box

    def _open_box(self, mode: str, value: str, placeholder: str) -> bool:
        box = self._box()
        self._box_mode = mode
        self._filter_before = value
        box.placeholder = placeholder
        box.value = value
        box.remove_class("hidden")
        self.screen.set_focus(box)
        return True

    def _find_first(self) -> None:
        """The cursor to the first match at or after where the search opened (wrapping)."""
        assert self.view is not None
        found = self.view.found()
        if len(found):
            after = found[found >= self._find_from]
            self.frame.cursor = int(after[0] if len(after) else found[0])
        else:
            self.frame.cursor = self._find_from
        self._status()

    def filter_open(self) -> bool:
        return self._filter_box is not None and not self._filter_box.has_class("hidden")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if not self.filter_open() or self.view is None:
            return
        if self._box_mode == "search":
            self.view.set_find(event.value)
            self._find_first()
        else:
            self.view.set_filter(event.value)
            self.refresh_view()

    def on_paste(self, event: events.Paste) -> None:
        """Text pasted on a table filters it by that text (the box opens holding it; Esc
        reverts); pasted into the open box, the box itself takes it. The paste bubbles on to
        the app, which holds the keys behind it until here."""
        text = event.text.strip().splitlines()[0] if event.text.strip() else ""
        if text and not self.filter_open() and self.view is not None:
            box = self._box()
            # Typing on goes after the pasted text (not over it: the box selects its text when
            # focused, unless told otherwise until that Focus event was handled).
            box.select_on_focus = False
            if self.open_filter():
                box.value = text
                box.cursor_position = len(text)
            box.call_later(setattr, box, "select_on_focus", True)

    def apply_filter(self, text: str) -> None:
        """Enter: keep ``text`` as the filter (empty clears it) or as the search, and return to
        the table (focused at once, for the keys held behind an Enter or Esc)."""
        self._box().add_class("hidden")
        if self.view is not None and self._box_mode == "search":
            self.view.set_find(text)
            self._status()
        elif self.view is not None:
            self.view.set_filter(text)
            self.refresh_view()
        self.screen.set_focus(self.frame)

    def close_filter(self) -> bool:
        """Esc in the box: revert to the filter it started with, or end the search with the
        cursor back where it started."""
        if not self.filter_open():
            return False
        if self._box_mode == "search":
            self.apply_filter("")
            self.frame.cursor = self._find_from
            self._status()
        else:
            self.apply_filter(self._filter_before)
        return True

    # -- call stacks --------------------------------------------------------------------------
    def _stack_keys(self) -> tuple[str, str] | None:
        """The current table's call-stack columns, as its sheet declares them."""
        return self.view.table.stacks if self.view is not None else None

    def toggle_stacks(self) -> bool:
        if self._stack_keys() is None:
            return False
        self.show_stacks = not self.show_stacks
        self.update_stacks()
        return True

    def update_stacks(self) -> None:
        keys = self._stack_keys()
        shown = bool(self.show_stacks and keys) and not self._stale
        if self._stacks is not None:
            self._stacks.set_class(not shown, "hidden")
        if not shown or keys is None or self.view is None:
            return
        row = self.frame.current_row
        df = self.view.table.data
        base = comp = ""
        if row is not None:
            base, comp = (_text(df[k].iat[row]) for k in keys)
        texts = {}
        for side, title, stack in (("base", "Base call stack", base),
                                   ("comp", "Comparison call stack", comp)):
            texts[side] = Text(title + "\n", style="bold")
            texts[side].append(stack_text(stack), style="")
        if self._stacks is None:  # first opened: build the panel with its texts
            self._stack_texts = {side: Static(text, id=f"stack-{side}")
                                 for side, text in texts.items()}
            self._stacks = Horizontal(
                *(VerticalScroll(w, classes="stack-side") for w in self._stack_texts.values()),
                id="stacks")
            self.mount(self._stacks, after=self.frame)
            return
        for side, text in texts.items():
            self._stack_texts[side].update(text)

    # -- kernels of a row ---------------------------------------------------------------------
    def row_kernels(self) -> tuple[Table, tuple[str, str] | None] | None:
        """`K`: the kernel comparison of the cursor row (its own ``Kernel Details``, or those of
        the rows Enter would open) and the row's call stacks; None when the row has neither."""
        view, row = self.view, self.frame.current_row
        if view is None or row is None:
            return None
        table = view.table
        keys = detail_keys(table)
        label = str(table.data[self.frame.columns[0].key].iat[row]).strip()
        if keys is not None:
            source, rows = table, [row]
            if IS_TOTAL in table.data and bool(table.data[IS_TOTAL].iat[row]):
                # A module instance's [ TOTAL ] row: its kernels are those of its op rows below.
                totals = np.flatnonzero(table.data[IS_TOTAL].to_numpy(dtype=bool))
                end = next((int(t) for t in totals if t > row), len(table.data))
                rows = list(range(row + 1, end))
        elif table.drill is not None and table.drill.target in self.tables:
            source = self.tables[table.drill.target]
            keys = detail_keys(source)
            conditions, label = view.drill(row)
            rows = list(rows_matching(source.data, conditions))
        if keys is None:
            return None
        kernels = op_kernels(source, keys, np.asarray(rows, dtype="int64"), label)
        stacks = None
        if table.stacks is not None:
            stacks = (_text(table.data[table.stacks[0]].iat[row]),
                      _text(table.data[table.stacks[1]].iat[row]))
        elif source is not table and source.stacks is not None and rows:
            stacks = largest_change_stacks(source, rows)
        return kernels, stacks

    def on_frame_view_cursor_moved(self, event: FrameView.CursorMoved) -> None:
        if self.view is not None and (self.view.filter_text or self.view.find_text):
            self._status()  # the filter's hint, the search's "match i/n"
        self._cell_line()
        self.update_stacks()


def headline_text(headlines: list[Headline]) -> Text:
    """One line per headline figure: base → comparison, then ▲/▼ and the difference in red /
    green (the arrow carries the meaning without colour)."""
    text = Text()
    width = max((len(h.label) for h in headlines), default=0)
    for h in headlines:
        arrow = "▲" if h.direction > 0 else "▼" if h.direction < 0 else "="
        style = "red" if h.direction > 0 else "green" if h.direction < 0 else ""
        text.append(f"{h.label:<{width}}  {h.base:>13} → {h.comparison:>13}  ")
        text.append(f"{arrow + ' ' + h.diff:>14} {h.change:>7}", style=style)
        text.append("\n")
    return text


def largest_change_stacks(table: Table, rows: list[int]) -> tuple[str, str] | None:
    """The call stacks of the row, among ``rows`` of ``table``, whose difference is largest (a
    statistic row groups many calls: `K` shows the one that moved most); None when none of them
    has a stack."""
    keys = table.stacks
    assert keys is not None
    df = table.data.iloc[rows]
    has = (as_text(df[keys[0]]).str.strip() != "") | (as_text(df[keys[1]]).str.strip() != "")
    if not has.any():
        return None
    diff_key = next((c.key for c in table.columns if c.role == "diff"), None)
    size = (df[diff_key].abs().where(has, -1.0) if diff_key is not None
            else has.astype(float))
    at = int(np.argmax(size.to_numpy(dtype="float64")))
    return _text(df[keys[0]].iat[at]), _text(df[keys[1]].iat[at])


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def stack_text(stack: str) -> str:
    """One frame per line (the sheets join frames with ``;`` and a newline)."""
    frames = [f.strip() for f in stack.replace(";\n", "\n").replace(";", "\n").splitlines()]
    frames = [f for f in frames if f and f not in ("nan", "N/A")]
    return "\n".join(frames) if frames else "(none)"
