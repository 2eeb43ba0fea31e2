"""A scrolling table over a pandas-backed :class:`~perfcmp_core.view.TableView`.

Textual's DataTable builds a widget row per data row (≈ 24 s for 100k rows); this view uses the
Line API instead: it formats and draws only the rows in the window, so a 100k-row table scrolls,
sorts and filters as fast as numpy can reorder an index.
"""

from __future__ import annotations

import numpy as np
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

from perfcmp_core.compare.result import IS_TOTAL, LEVEL, SHOWN, Column, is_ratio, tone
from perfcmp_core.view import (TableView, display_columns, display_header, label_column,
                               screen_text, sign)

MAX_TEXT_WIDTH = 48
MIN_TEXT_WIDTH = 16
#: A header (plus room for the sort mark) widens its column up to this many cells (text,
#: numbers): short names such as "allreduce" keep narrow columns, numbers keep their unit visible.
HEADER_MIN = {False: 12, True: 24}
MAX_NUM_WIDTH = 18
GAP = 2
#: Rows measured to size the columns: the first half of them, the rest spread over the table.
SAMPLE_ROWS = 400
#: The first column stays put while scrolling sideways when it takes at most this share.
PIN_SHARE = 0.45


def fit(text: str, width: int, right: bool) -> str:
    """Pad or cut ``text`` to exactly ``width`` cells (one line; the cut is marked by …).

    Paths (``/ TransformerLM_0/ Layer_1/ Linear_4``) and qualified names
    (``autograd::engine::evaluate_function: MmBackward0``) lose their head, not their tail: the
    last part is what names the row.
    """
    text = text.replace("\r", "").replace("\n", "⏎").replace("\t", "")
    if cell_len(text) > width:
        tail = "/" in text or ": " in text
        chars = reversed(text) if tail else iter(text)
        out, used = [], 0
        for ch in chars:
            w = cell_len(ch)
            if used + w > width - 1:
                break
            out.append(ch)
            used += w
        pad = " " * (width - used - 1)
        if tail:
            cut = "…" + "".join(reversed(out))
            return pad + cut if right else cut + pad
        return "".join(out) + "…" + pad
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
        self._arrays: list[np.ndarray] = []
        self._levels: np.ndarray | None = None
        self._totals: np.ndarray | None = None

    def set_view(self, view: TableView | None) -> None:
        """Show another table (each keeps its own sort, filter and expansion in its TableView)."""
        self.view = view
        self.columns = display_columns(view.table) if view is not None else ()
        self.headers = [display_header(c, view.table) for c in self.columns] if view else []
        self._label_col = label_column(self.columns)
        data = view.table.data if view is not None else None
        self._arrays = [data[c.key].to_numpy() for c in self.columns] if data is not None else []
        if data is not None and SHOWN in data and self.columns:  # the label as screens say it
            self._arrays[self._label_col] = data[SHOWN].to_numpy()
        self._levels = data[LEVEL].to_numpy() if data is not None and LEVEL in data else None
        self._totals = (data[IS_TOTAL].to_numpy(dtype=bool) if data is not None and IS_TOTAL in data
                        else None)
        self._has_children = view.parent_nodes() if view else set()
        self._measure()
        self.scroll_to(0, 0, animate=False)
        self.refresh_data(cursor=0)

    def _measure(self) -> None:
        """Column widths from a sample spread over the whole table, capped by the screen width.

        Measured once per table (and on resize), not per sort: columns must not jump around
        when the rows under them change order.
        """
        view = self.view
        if view is None:
            self._widths, self._right = [], []
            return
        n = len(view.table.data)
        sample = np.unique(np.concatenate([np.arange(min(n, SAMPLE_ROWS // 2)),
                                           np.linspace(0, n - 1, min(n, SAMPLE_ROWS // 2),
                                                       dtype="int64")])) if n else np.arange(0)
        cells = view.cells(sample, self.columns)
        depth = int(view.table.data[LEVEL].max()) if LEVEL in view.table.data and n else 0
        widths, right = [], []
        for j, c in enumerate(self.columns):
            longest = max((cell_len(r[j]) for r in cells), default=0)
            numeric = c.fmt in ("int", "float", "percent")
            extra = 1 if is_ratio(c) else 0  # room for ▲/▼
            if j == self._label_col:
                extra += 2 * depth + (2 if view.is_tree else 0)
            cap = MAX_NUM_WIDTH if numeric else self._text_cap(j == self._label_col)
            head = min(cell_len(self.headers[j]) + 2, HEADER_MIN[numeric])
            widths.append(max(min(longest + extra, cap), head, 3))
            right.append(numeric)
        self._widths, self._right = widths, right

    # -- data ---------------------------------------------------------------------------------
    def refresh_data(self, keep_row: int | None = None, cursor: int | None = None) -> None:
        """Recompute the visible order and the virtual size after a sort, filter or expand.

        ``keep_row`` keeps the cursor on that data row when it is still visible.
        """
        view = self.view
        if view is None:
            self.virtual_size = Size(0, 0)
            self.refresh()
            return
        view.invalidate()
        order = view.order()
        self.virtual_size = Size(sum(self._widths) + GAP * len(self._widths), len(order) + 1)
        if keep_row is not None:
            hits = (order == keep_row).nonzero()[0]
            self.cursor = int(hits[0]) if len(hits) else 0
        elif cursor is not None:
            self.cursor = max(0, min(cursor, len(order) - 1))
        else:
            self.cursor = min(self.cursor, max(len(order) - 1, 0))
        self.refresh()

    def _text_cap(self, label: bool) -> int:
        """Widest a text column gets: a third of the screen for the row's label, a fifth for
        other text, so that the differences show beside the names even at 80 columns."""
        width = self.size.width or 120
        return max(MIN_TEXT_WIDTH, min(MAX_TEXT_WIDTH, width // (3 if label else 5)))

    def on_resize(self, event: events.Resize) -> None:
        if self.view is not None:
            self._measure()
            self.refresh_data(keep_row=self.current_row)

    @property
    def current_row(self) -> int | None:
        if self.view is None:
            return None
        order = self.view.order()
        return int(order[self.cursor]) if 0 <= self.cursor < len(order) else None

    # -- rendering ----------------------------------------------------------------------------
    def _pinned(self) -> int:
        """Width of the pinned first column, the row's label (0: nothing pinned)."""
        if not self._widths:
            return 0
        w = self._widths[0] + GAP
        return w if w <= self.size.width * PIN_SHARE and sum(self._widths) + GAP * len(
            self._widths) > self.size.width else 0

    def _label_prefix(self, row: int) -> str:
        view = self.view
        assert view is not None
        level = int(self._levels[row]) if self._levels is not None else 0
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
        line_style = self.rich_style
        if self._totals is not None and self._totals[row]:
            line_style = line_style + self.get_component_rich_style("frame-view--total")
        if index == self.cursor:
            line_style = line_style + self.get_component_rich_style("frame-view--cursor")
        worse = self.get_component_rich_style("frame-view--worse")
        better = self.get_component_rich_style("frame-view--better")
        segs: list[Segment] = []
        for j, c in enumerate(self.columns):
            value = self._arrays[j][row]
            text = screen_text(value, c)
            direction = tone(value, c)
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

    def header_cells(self) -> list[str]:
        """The header as drawn, one string per column (tests read the screen with it)."""
        return [self._trim(j, seg.text) for j, seg in enumerate(self._header_segments())]

    def row_cells(self, index: int) -> list[str]:
        """Display row ``index`` as drawn, one string per column (▲/▼, signs, tree marks, cuts)."""
        return [self._trim(j, seg.text) for j, seg in enumerate(self._row_segments(index)[0])]

    def _trim(self, column: int, text: str) -> str:
        """Cell text without its padding (a name keeps its tree indentation)."""
        return text.strip() if self._right[column] else text.rstrip()

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
