"""A scrolling table over a pandas-backed :class:`~perfcmp_core.view.TableView`.

Textual's DataTable builds a widget row per data row (≈ 24 s for 100k rows); this view uses the
Line API instead: it formats and draws only the rows in the window, so a 100k-row table scrolls,
sorts and filters as fast as numpy can reorder an index.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from perfcmp_core.compare.result import IS_TOTAL, LEVEL, RATIO_HEADERS, Column
from perfcmp_core.view import (TableView, display_columns, display_header, label_column,
                               screen_text, sign, trend)

MAX_TEXT_WIDTH = 48
MAX_NUM_WIDTH = 18
GAP = 2
#: Rows measured to size the columns (the first rows in display order).
SAMPLE_ROWS = 400
#: The first column stays put while scrolling sideways when it takes at most this share.
PIN_SHARE = 0.45


def fit(text: str, width: int, right: bool) -> str:
    """Pad or cut ``text`` to exactly ``width`` cells (one line; a cut ends in …)."""
    text = text.replace("\r", "").replace("\n", "⏎").replace("\t", "")
    if cell_len(text) > width:
        out, used = [], 0
        for ch in text:
            w = cell_len(ch)
            if used + w > width - 1:
                break
            out.append(ch)
            used += w
        return "".join(out) + "…" + " " * (width - used - 1)
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


class FrameView(ScrollView, can_focus=True):
    """Render a TableView; the first line is a sticky header, the first column may be pinned."""

    COMPONENT_CLASSES = {
        "frame-view--header",
        "frame-view--cursor",
        "frame-view--worse",
        "frame-view--better",
        "frame-view--total",
    }
    DEFAULT_CSS = """
    FrameView { height: 1fr; }
    FrameView > .frame-view--header { text-style: bold; background: $panel; }
    FrameView > .frame-view--cursor { background: $accent 40%; }
    FrameView:focus > .frame-view--cursor { background: $accent; color: $text; }
    FrameView > .frame-view--worse { color: $error; }
    FrameView > .frame-view--better { color: $success; }
    FrameView > .frame-view--total { text-style: bold; }
    App:nocolor FrameView > .frame-view--cursor { text-style: reverse; }
    App:nocolor FrameView > .frame-view--header { text-style: bold underline; }
    """
    BINDINGS = [
        Binding("j,down", "cursor(1)", "Down", show=False),
        Binding("k,up", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "page(1)", "PgDn", show=False),
        Binding("pageup", "page(-1)", "PgUp", show=False),
        Binding("g,home", "jump(0)", "Top", show=False),
        Binding("G,end", "jump(-1)", "Bottom", show=False),
        Binding("l,right", "hscroll(8)", "Right", show=False),
        Binding("h,left", "hscroll(-8)", "Left", show=False),
        Binding("enter,space", "activate", "Open"),
    ]

    cursor = reactive(0, always_update=True)

    class Activated(Message):
        """Enter/Space on a row that is not a tree node: ``row`` indexes ``view.table.data``."""

        def __init__(self, frame: FrameView, row: int) -> None:
            self.frame_view = frame
            self.row = row
            super().__init__()

    class CursorMoved(Message):
        def __init__(self, frame: FrameView, row: int | None) -> None:
            self.frame_view = frame
            self.row = row
            super().__init__()

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: TableView | None = None
        self.columns: tuple[Column, ...] = ()
        self.headers: list[str] = []
        self._widths: list[int] = []
        self._right: list[bool] = []
        self._label_col = 0
        self._has_children: set[int] = set()

    def set_view(self, view: TableView | None) -> None:
        """Show another table (each keeps its own sort, filter and cursor in its TableView)."""
        self.view = view
        self.columns = display_columns(view.table) if view is not None else ()
        self.headers = [display_header(c, view.table) for c in self.columns] if view else []
        self._label_col = label_column(self.columns)
        self.scroll_to(0, 0, animate=False)
        self.refresh_data(cursor=0)

    # -- data ---------------------------------------------------------------------------------
    def refresh_data(self, keep_row: int | None = None, cursor: int | None = None) -> None:
        """Recompute order, widths and virtual size after a sort, filter or expand.

        ``keep_row`` keeps the cursor on that data row when it is still visible.
        """
        view = self.view
        if view is None:
            self.virtual_size = Size(0, 0)
            self.refresh()
            return
        view.invalidate()
        order = view.order()
        self._has_children = view.parents_with_children()
        cells = view.cells(order[:SAMPLE_ROWS], self.columns)
        widths, right = [], []
        depth = int(view.table.data[LEVEL].max()) if LEVEL in view.table.data and len(
            view.table.data) else 0
        for j, c in enumerate(self.columns):
            longest = max((cell_len(r[j]) for r in cells), default=0)
            numeric = c.fmt in ("int", "float", "percent")
            extra = 1 if c.header in RATIO_HEADERS else 0  # room for ▲/▼
            if j == self._label_col:
                extra += 2 * depth + (2 if view.is_tree else 0)
            cap = MAX_NUM_WIDTH if numeric else MAX_TEXT_WIDTH
            widths.append(max(min(longest + extra, cap), min(cell_len(self.headers[j]), 24), 3))
            right.append(numeric)
        self._widths, self._right = widths, right
        self.virtual_size = Size(sum(widths) + GAP * len(widths), len(order) + 1)
        if keep_row is not None:
            hits = (order == keep_row).nonzero()[0]
            self.cursor = int(hits[0]) if len(hits) else 0
        elif cursor is not None:
            self.cursor = cursor
        else:
            self.cursor = min(self.cursor, max(len(order) - 1, 0))
        self.refresh()

    @property
    def current_row(self) -> int | None:
        if self.view is None:
            return None
        order = self.view.order()
        return int(order[self.cursor]) if 0 <= self.cursor < len(order) else None

    # -- rendering ----------------------------------------------------------------------------
    def _pinned(self) -> int:
        """Width of the pinned first column (0: nothing pinned)."""
        if not self._widths or self.columns[0].role != "key":
            return 0
        w = self._widths[0] + GAP
        return w if w <= self.size.width * PIN_SHARE and sum(self._widths) + GAP * len(
            self._widths) > self.size.width else 0

    def _label_prefix(self, row: int) -> str:
        view = self.view
        assert view is not None
        df = view.table.data
        level = int(df[LEVEL].iat[row]) if LEVEL in df else 0
        if view.is_tree and not view.flat:
            node = view.node_of(row)
            if node in self._has_children:
                return "  " * level + ("▾ " if node in view.expanded else "▸ ")
            return "  " * level + "  "
        return "  " * level

    def _strip(self, segs: list[Segment], style: Style) -> Strip:
        width = self.size.width
        scroll_x = self.scroll_offset.x
        pin = self._pinned()
        if not pin:
            return Strip(segs).crop_extend(scroll_x, scroll_x + width, style)
        head = Strip(segs[:1]).crop_extend(0, pin, style)
        body = Strip(segs[1:]).crop_extend(scroll_x, scroll_x + width - pin, style)
        return Strip.join([head, body])

    def _header_segments(self) -> list[Segment]:
        assert self.view is not None
        style = self.rich_style + self.get_component_rich_style("frame-view--header")
        segs = []
        for j, c in enumerate(self.columns):
            label = self.headers[j]
            if c.key == self.view.sort_key:
                label += " ▼" if self.view.descending else " ▲"
            segs.append(Segment(fit(label, self._widths[j], self._right[j]) + " " * GAP, style))
        return segs

    def _row_segments(self, index: int) -> tuple[list[Segment], Style]:
        """Segments of display row ``index`` (position in the view's order), full width."""
        view = self.view
        assert view is not None
        row = int(view.order()[index])
        df = view.table.data
        line_style = self.rich_style
        if IS_TOTAL in df and bool(df[IS_TOTAL].iat[row]):
            line_style = line_style + self.get_component_rich_style("frame-view--total")
        if index == self.cursor:
            line_style = line_style + self.get_component_rich_style("frame-view--cursor")
        worse = self.get_component_rich_style("frame-view--worse")
        better = self.get_component_rich_style("frame-view--better")
        segs: list[Segment] = []
        for j, c in enumerate(self.columns):
            value = df[c.key].iat[row]
            text = screen_text(value, c)
            direction = trend(value, c)
            if direction:
                text = ("▲" if direction > 0 else "▼") + text
            else:
                direction = sign(value, c)
            style = line_style + (worse if direction > 0 else better) if direction else line_style
            if j == self._label_col:
                text = self._label_prefix(row) + text
            segs.append(Segment(fit(text, self._widths[j], self._right[j]) + " " * GAP, style))
        return segs, line_style

    def render_line(self, y: int) -> Strip:
        view = self.view
        if view is None:
            return Strip.blank(self.size.width, self.rich_style)
        if y == 0:
            return self._strip(self._header_segments(), self.rich_style)
        index = self.scroll_offset.y + y - 1
        if index >= len(view.order()):
            return Strip.blank(self.size.width, self.rich_style)
        segs, style = self._row_segments(index)
        return self._strip(segs, style)

    def header_text(self) -> str:
        """The header line as drawn, every column, not scrolled (tests read the screen with it)."""
        return "".join(s.text for s in self._header_segments()).rstrip() if self.view else ""

    def row_text(self, index: int) -> str:
        """Display row ``index`` as drawn (▲/▼, signs, tree marks; cells cut to their width)."""
        return "".join(s.text for s in self._row_segments(index)[0]).rstrip()

    # -- cursor & keys ------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        scroll_y = self.scroll_offset.y
        visible = max(self.size.height - 1, 1)
        if new < scroll_y:
            self.scroll_to(y=new, animate=False)
        elif new >= scroll_y + visible:
            self.scroll_to(y=new - visible + 1, animate=False)
        self.refresh()
        self.post_message(self.CursorMoved(self, self.current_row))

    def _move(self, pos: int) -> None:
        n = len(self.view.order()) if self.view is not None else 0
        self.cursor = max(0, min(pos, n - 1)) if n else 0

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(self.size.height - 2, 1))

    def action_jump(self, where: int) -> None:
        self._move(0 if where == 0 else len(self.view.order()) - 1 if self.view else 0)

    def action_hscroll(self, delta: int) -> None:
        self.scroll_to(x=self.scroll_offset.x + delta, animate=False)

    def action_activate(self) -> None:
        row = self.current_row
        if row is None or self.view is None:
            return
        if self.view.is_tree and not self.view.flat and self.view.toggle_node(row):
            self.refresh_data(keep_row=row)
            return
        self.post_message(self.Activated(self, row))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._move(self.scroll_offset.y + event.y - 1)
