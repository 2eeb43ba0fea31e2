"""A scrolling table over a pandas-backed :class:`~perfcmp_core.view.TableView`.

Textual's DataTable builds a widget row per data row (≈ 24 s for 100k rows); this view uses the
Line API instead: it formats and draws only the rows in the window, so a 100k-row table scrolls,
sorts and filters as fast as numpy can reorder an index.

It scrolls sideways by whole columns, never showing half a column under a whole header: the row's
label stays pinned on the left and as many whole columns follow as fit. A cell cursor (`h`/`l`)
picks the column that `y` copies, that `-` hides, and whose full header and text the pane shows
under the table. Headers that do not fit their column take two lines; names too long for theirs
are cut in the middle, keeping both ends (``[ BACKWARD ]/… MLP_1/ Linear_6``; words as words:
``Flash Atte… (Forward)``).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

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

from perfcmp_core.compare.result import IS_TOTAL, LEVEL, Column, is_ratio, tone
from perfcmp_core.export.view_csv import one_line
from perfcmp_core.view import TableView, display_header, label_column, screen_text, sign

MIN_TEXT_WIDTH = 16
#: Other text columns (shapes, kernel lists) get at most this many cells, and a fifth of the
#: screen: the numbers must show beside the names even at 80 columns.
MAX_TEXT_WIDTH = 48
#: The row's label gets a third of the screen (it grows with the terminal); `<` / `>` change it.
LABEL_SHARE = 3
LABEL_STEP = 4
MAX_NUM_WIDTH = 18
#: A header line holds at most this many cells (a longer word is cut; the full header is in the
#: cell line under the table).
MAX_HEADER_WIDTH = 24
GAP = 2
#: Room for the sort mark (" ▼") after a header.
MARK = 2
#: Rows measured to size the columns: the first half of them, the rest spread over the table.
SAMPLE_ROWS = 400
#: Data columns after the pinned label that must fit beside it: the label gives way to them.
MIN_BESIDE = 24

_PATH_PARTS = re.compile(r"(?<=/)")
#: A path cut in the middle keeps its first part when this much of its end still fits after it.
MIN_TAIL = 8
#: Cells a text cut between words keeps of its head at least.
MIN_HEAD = 4
#: A module path: a "/" right after a name (``Model/ MLP_1``); " / " separates words
#: (``copy / cast / memset``).
_IS_PATH = re.compile(r"[^\s]/")


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells in the middle, marked by "…", keeping both ends.

    A path keeps its first part and as many whole last parts as fit (else the end of the last)
    (``[ BACKWARD ]/… MLP_1/ Linear_6``: the direction and the leaf both name the row); other
    text keeps two fifths of its head and the rest of its tail
    (``autograd::engi…: MmBackward0``).
    """
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…" if width == 1 else ""
    if _IS_PATH.search(text):
        parts = _PATH_PARTS.split(text)
        first = 1
        head = parts[0]
        while not head.strip("/ ") and first < len(parts) - 1:  # "/[ BACKWARD ]/ …": a root "/"
            head += parts[first]
            first += 1
        room = width - cell_len(head) - 1
        if len(parts) > first and room >= MIN_TAIL:
            tail = ""
            for part in reversed(parts[first:]):
                if cell_len(part) + cell_len(tail) > room:
                    break
                tail = part + tail
            return head + "…" + (tail or _tail(parts[-1], room))
    if " " in text.strip():
        between = _between_words(text, width)
        if between is not None:
            return between
    head = _head(text, (width - 1) * 2 // 5)
    return head + "…" + _tail(text, width - 1 - cell_len(head))


def _between_words(text: str, width: int) -> str | None:
    """Words cut as words (issue 30 #8: ``Flash A…ion (Forward)``): whole last words — as many as
    fit in half the width, else the last that leaves room for a head — after the head of the text
    cut at its end (``Flash Atte… (Forward)``, ``reduction… / sort``); None when no last word
    fits."""
    starts = [m.start() for m in re.finditer(" ", text) if m.start() > 0]
    fitting = [s for s in starts if cell_len(text[s:]) <= width - 1 - MIN_HEAD]
    if not fitting:
        return None
    half = [s for s in fitting if cell_len(text[s:]) <= (width - 1) // 2]
    tail = text[min(half) if half else max(fitting):]
    head = _head(text, width - 1 - cell_len(tail)).rstrip(" /(")
    return head + "…" + tail if head else None


def _head(text: str, room: int) -> str:
    """The start of ``text`` that fits in ``room`` cells."""
    chars: list[str] = []
    used = 0
    for ch in text:
        w = cell_len(ch)
        if used + w > room:
            break
        chars.append(ch)
        used += w
    return "".join(chars)


def _tail(text: str, room: int) -> str:
    """The end of ``text`` that fits in ``room`` cells."""
    chars: list[str] = []
    used = 0
    for ch in reversed(text):
        w = cell_len(ch)
        if used + w > room:
            break
        chars.append(ch)
        used += w
    return "".join(reversed(chars))


def fit(text: str, width: int, right: bool) -> str:
    """Pad or cut ``text`` (one line) to exactly ``width`` cells (see :func:`shorten`)."""
    text = shorten(text, width)
    pad = " " * max(width - cell_len(text), 0)
    return pad + text if right else text + pad


def split_header(text: str, width: int) -> tuple[str, str]:
    """A header on one line, or on two when it is wider than ``width`` (split at the space that
    makes the longer line shortest); the second line is empty when one suffices."""
    if cell_len(text) <= width:
        return text, ""
    words = text.split(" ")
    best: tuple[int, str, str] | None = None
    for i in range(1, len(words)):
        first, second = " ".join(words[:i]), " ".join(words[i:])
        longest = max(cell_len(first), cell_len(second) + MARK)
        if best is None or longest < best[0]:
            best = (longest, first, second)
    return (best[1], best[2]) if best is not None else (text, "")


def header_width(text: str) -> int:
    """Narrowest width that shows ``text`` (and a sort mark) on at most two lines, capped."""
    if " " not in text:
        return min(cell_len(text) + MARK, MAX_HEADER_WIDTH)
    one = cell_len(text) + MARK
    words = text.split(" ")
    two = min(max(cell_len(" ".join(words[:i])), cell_len(" ".join(words[i:])) + MARK)
              for i in range(1, len(words)))
    # One line when it costs at most a few cells more than two: short headers stay whole.
    return min(one if one <= two + 4 else two, MAX_HEADER_WIDTH)


class Slot(NamedTuple):
    """One column as drawn: its index in ``FrameView.columns``, where it starts, its width."""

    column: int
    x: int
    width: int


#: A row cursor's keys (VisiData's habits), for every view with one: the tables and `K`'s list
#: (``action_cursor(step)``, ``action_page(direction)``, ``action_jump(0 | -1)``).
ROW_CURSOR_BINDINGS = [
    Binding("j,down", "cursor(1)", "Down", show=False),
    Binding("k,up", "cursor(-1)", "Up", show=False),
    Binding("pagedown", "page(1)", "PgDn", show=False),
    Binding("pageup", "page(-1)", "PgUp", show=False),
    Binding("g,home", "jump(0)", "Top", show=False),
    Binding("G,end", "jump(-1)", "Bottom", show=False),
]


class FrameView(ScrollView, can_focus=True):
    """Render a TableView: a sticky header of one or two lines, the label column pinned, whole
    columns beside it, a row cursor and a cell cursor."""

    COMPONENT_CLASSES = {
        "frame-view--header",
        "frame-view--cursor",
        "frame-view--cell",
        "frame-view--worse",
        "frame-view--better",
        "frame-view--total",
    }
    DEFAULT_CSS = """
    FrameView { height: 1fr; }
    FrameView > .frame-view--header { text-style: bold; background: $panel; }
    FrameView > .frame-view--cursor { background: $accent 40%; }
    FrameView:focus > .frame-view--cursor { background: $accent; color: $text; }
    FrameView > .frame-view--cell { text-style: bold underline; }
    FrameView > .frame-view--worse { color: $error; }
    FrameView > .frame-view--better { color: $success; }
    FrameView > .frame-view--total { text-style: bold; }
    """
    BINDINGS = [
        *ROW_CURSOR_BINDINGS,
        Binding("l,right", "column(1)", "Right", show=False),
        Binding("h,left", "column(-1)", "Left", show=False),
        Binding("less_than_sign", "label_width(-1)", "Narrower names", show=False),
        Binding("greater_than_sign", "label_width(1)", "Wider names", show=False),
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
        """The row or the cell cursor moved (``row`` indexes ``view.table.data``)."""

        def __init__(self, frame: FrameView, row: int | None) -> None:
            self.frame_view = frame
            self.row = row
            super().__init__()

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: TableView | None = None
        self.columns: tuple[Column, ...] = ()
        self.headers: list[str] = []
        #: The cell cursor: an index into ``columns`` (0 is the pinned label).
        self.col = 0
        self._first = 1  # first column drawn after the pinned label
        self._label_delta = 0  # `<` / `>`: cells taken from / given to the label column
        #: Whether Enter on a row opens it (Activated) even when it is a tree node that would fold:
        #: set by the pane from core's :func:`~perfcmp_core.compare.behind.enter_opens`.
        self.opens_first: Callable[[int], bool] | None = None
        self._widths: list[int] = []
        self._right: list[bool] = []
        self._header_lines: list[tuple[str, str]] = []
        self._header_h = 1
        self._label_col = 0
        self._arrays: list[np.ndarray | None] = []
        self._levels: np.ndarray | None = None
        self._totals: np.ndarray | None = None
        self._slots: tuple[tuple[object, ...], list[Slot]] | None = None

    def set_view(self, view: TableView | None) -> None:
        """Show another table (each keeps its own sort, filter and expansion in its TableView)."""
        self.view = view
        self.columns = view.columns if view is not None else ()
        self.headers = [display_header(c, view.table) for c in self.columns] if view else []
        self._label_col = label_column(self.columns)
        data = view.table.data if view is not None else None
        self._arrays = ([None if c.fmt in ("text", "bold") else data[c.key].to_numpy()
                         for c in self.columns] if data is not None else [])
        self._levels = data[LEVEL].to_numpy() if data is not None and LEVEL in data else None
        self._totals = (data[IS_TOTAL].to_numpy(dtype=bool) if data is not None and IS_TOTAL in data
                        else None)
        self.col, self._first = 0, 1
        self._measure()
        self.scroll_to(0, 0, animate=False)
        self.refresh_data(cursor=0)

    # -- sizes --------------------------------------------------------------------------------
    def _measure(self) -> None:
        """Column widths from a sample spread over the whole table, capped by the screen width.

        Measured once per table (and on resize or `<` / `>`), not per sort: columns must not jump
        around when the rows under them change order.
        """
        view = self.view
        self._slots = None
        if view is None:
            self._widths, self._right, self._header_lines, self._header_h = [], [], [], 1
            return
        n = len(view.table.data)
        sample = np.unique(np.concatenate([np.arange(min(n, SAMPLE_ROWS // 2)),
                                           np.linspace(0, n - 1, min(n, SAMPLE_ROWS // 2),
                                                       dtype="int64")])) if n else np.arange(0)
        cells = view.cells(sample, self.columns)
        depth = int(view.table.data[LEVEL].max()) if LEVEL in view.table.data and n else 0
        widths, right = [], []
        for j, c in enumerate(self.columns):
            numeric = c.fmt in ("int", "float", "percent") or is_ratio(c)
            cap = MAX_NUM_WIDTH if numeric else self._text_cap(j == self._label_col)
            longest = max((_width(r[j], cap) for r in cells), default=0)
            extra = 1 if is_ratio(c) else 0  # room for ▲/▼
            if j == self._label_col:
                extra += 2 * depth + (2 if view.is_tree else 0)
            # The header decides the least width: it is never cut (two lines at most).
            widths.append(max(min(longest + extra, cap), header_width(self.headers[j]), 3))
            right.append(numeric)
        self._widths, self._right = widths, right
        self._header_lines = [split_header(h, w - MARK) for h, w in zip(self.headers, widths)]
        self._header_h = 2 if any(second for _, second in self._header_lines) else 1

    def _text_cap(self, label: bool) -> int:
        """Widest a text column gets: a third of the screen for the row's label (plus what `<` /
        `>` changed), a fifth for other text."""
        width = self.room or 120
        if label:
            cap = max(MIN_TEXT_WIDTH, width // LABEL_SHARE) + self._label_delta
            return max(8, min(cap, width - MIN_BESIDE))
        return max(MIN_TEXT_WIDTH, min(MAX_TEXT_WIDTH, width // 5))

    @property
    def room(self) -> int:
        """Cells a line has: the widget's width less its vertical scrollbar."""
        return self.scrollable_content_region.width

    @property
    def header_height(self) -> int:
        return self._header_h if self.view is not None else 0

    @property
    def body_height(self) -> int:
        """Rows of data that fit under the header."""
        return max(self.size.height - self.header_height, 1)

    def on_resize(self, event: events.Resize) -> None:
        if self.view is not None:
            self._measure()
            self.refresh_data(keep_row=self.current_row)
            self._bring_into_view(self.col)

    # -- columns on screen --------------------------------------------------------------------
    def _shown(self) -> list[int]:
        """Columns that can be drawn (the label, and every column the user did not hide)."""
        hidden = self.view.hidden if self.view is not None else set()
        return [j for j, c in enumerate(self.columns) if j == 0 or c.key not in hidden]

    def slots(self) -> list[Slot]:
        """The columns drawn now, left to right: the pinned label, then whole columns from the
        first scrolled one while they fit (one wider than the room left is cut to it)."""
        key = (self.room, self._first, tuple(self._widths),
               frozenset(self.view.hidden) if self.view else frozenset())
        if self._slots is not None and self._slots[0] == key:
            return self._slots[1]
        out: list[Slot] = []
        width = self.room
        if self._widths and width > 0:
            label_w = min(self._widths[0], width)
            out.append(Slot(0, 0, label_w))
            x = label_w + GAP
            for j in self._shown()[1:]:
                if j < self._first:
                    continue
                w = self._widths[j]
                if x + w > width:
                    if len(out) == 1 and width - x >= 3:  # nothing beside the label yet: cut it
                        out.append(Slot(j, x, width - x))
                    break
                out.append(Slot(j, x, w))
                x += w + GAP
        self._slots = (key, out)
        return out

    def visible_columns(self) -> list[Column]:
        """The columns on screen now."""
        return [self.columns[s.column] for s in self.slots()]

    def _bring_into_view(self, j: int) -> None:
        """Scroll sideways so that column ``j`` is drawn (the label always is)."""
        if j <= 0 or not self._widths:
            return
        shown = self._shown()
        if j < self._first:
            self._first = j
        elif j not in [s.column for s in self.slots()]:
            # j becomes the last column drawn: walk back from it while the columns fit.
            room = self.room - self._widths[0] - GAP
            first, used = j, self._widths[j]
            for k in reversed([s for s in shown[1:] if s < j]):
                if used + GAP + self._widths[k] > room:
                    break
                first, used = k, used + GAP + self._widths[k]
            self._first = first
        self._slots = None
        self.refresh()

    def show_column(self, key: str) -> None:
        """Put the cell cursor on column ``key`` and scroll it into view (after a sort by it)."""
        for j, c in enumerate(self.columns):
            if c.key == key:
                if self.view is not None:
                    self.view.hidden.discard(key)
                self._set_col(j)
                return

    def _set_col(self, j: int) -> None:
        self.col = j
        self._bring_into_view(j)
        self.post_message(self.CursorMoved(self, self.current_row))

    @property
    def current_column(self) -> Column | None:
        return self.columns[self.col] if 0 <= self.col < len(self.columns) else None

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
        self.virtual_size = Size(self.room, len(order) + self.header_height)
        if keep_row is not None:
            hits = (order == keep_row).nonzero()[0]
            self.cursor = int(hits[0]) if len(hits) else 0
        elif cursor is not None:
            self.cursor = max(0, min(cursor, len(order) - 1))
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
    def _label_prefix(self, row: int) -> str:
        view = self.view
        assert view is not None
        level = int(self._levels[row]) if self._levels is not None else 0
        if view.is_tree and not view.flat:
            node = view.node_of(row)
            if node in view.parent_nodes():
                return "  " * level + ("▾ " if node in view.expanded else "▸ ")
            return "  " * level + "  "
        return "  " * level

    def _header_text(self, j: int) -> tuple[str, str]:
        """Column ``j``'s header lines, the sort mark after the last."""
        assert self.view is not None
        first, second = self._header_lines[j]
        if self.columns[j].key == self.view.sort_key:
            mark = " ▼" if self.view.descending else " ▲"
            if second:
                second += mark
            else:
                first += mark
        return first, second

    def _cell_text(self, j: int, row: int) -> tuple[str, int]:
        """Text of column ``j`` on data row ``row`` and its direction (+1 worse, -1 better)."""
        assert self.view is not None
        c = self.columns[j]
        array = self._arrays[j]
        if array is None:
            text = self.view.cell(row, c)
            direction = 0
        else:
            value = array[row]
            text = screen_text(value, c)
            direction = tone(value, c)
            if direction:
                text = ("▲" if direction > 0 else "▼") + text
            else:
                direction = sign(value, c)
        if j == self._label_col:
            prefix = self._label_prefix(row)
            text = prefix + shorten(text, max(self._widths[j] - cell_len(prefix), 1))
        return text, direction

    def _line(self, cells: list[tuple[Slot, str, Style]], style: Style) -> Strip:
        segs: list[Segment] = []
        x = 0
        for slot, text, cell_style in cells:
            if slot.x > x:
                segs.append(Segment(" " * (slot.x - x), style))
            segs.append(Segment(fit(text, slot.width, self._right[slot.column]), cell_style))
            x = slot.x + slot.width
        return Strip(segs).extend_cell_length(self.room, style).crop(0, self.room)

    def _header_strip(self, line: int) -> Strip:
        style = self.rich_style + self.get_component_rich_style("frame-view--header")
        cells = []
        for slot in self.slots():
            text = self._header_text(slot.column)[line]
            cells.append((slot, text, style))
        return self._line(cells, style)

    def _row_style(self, index: int, row: int) -> Style:
        style = self.rich_style
        if self._totals is not None and self._totals[row]:
            style = style + self.get_component_rich_style("frame-view--total")
        if index == self.cursor:
            style = style + self.get_component_rich_style("frame-view--cursor")
        return style

    def _row_strip(self, index: int) -> Strip:
        view = self.view
        assert view is not None
        row = int(view.order()[index])
        line_style = self._row_style(index, row)
        worse = self.get_component_rich_style("frame-view--worse")
        better = self.get_component_rich_style("frame-view--better")
        cell = self.get_component_rich_style("frame-view--cell")
        cells = []
        for slot in self.slots():
            text, direction = self._cell_text(slot.column, row)
            style = line_style + (worse if direction > 0 else better) if direction else line_style
            if index == self.cursor and slot.column == self.col:
                style = style + cell
            cells.append((slot, text, style))
        return self._line(cells, line_style)

    def render_line(self, y: int) -> Strip:
        view = self.view
        if view is None:
            return Strip.blank(self.room, self.rich_style)
        if y < self.header_height:
            return self._header_strip(y)
        index = self.scroll_offset.y + y - self.header_height
        if index >= len(view.order()):
            return Strip.blank(self.room, self.rich_style)
        return self._row_strip(index)

    # -- what tests and the pane read ---------------------------------------------------------
    def header_cells(self) -> list[str]:
        """Every column's header as drawn (two lines joined by a space), on screen or not."""
        out = []
        for j in range(len(self.columns)):
            first, second = self._header_text(j)
            cells = [fit(first, self._widths[j], self._right[j]).strip()]
            if second:
                cells.append(fit(second, self._widths[j], self._right[j]).strip())
            out.append(" ".join(cells))
        return out

    def row_cells(self, index: int) -> list[str]:
        """Display row ``index`` as drawn, one string per column, on screen or not (▲/▼, signs,
        tree marks, cuts)."""
        assert self.view is not None
        row = int(self.view.order()[index])
        out = []
        for j in range(len(self.columns)):
            text = fit(self._cell_text(j, row)[0], self._widths[j], self._right[j])
            out.append(text.strip() if self._right[j] else text.rstrip())
        return out

    def cell_full_text(self) -> str:
        """The cursor cell in full (what `y` copies)."""
        row, col = self.current_row, self.current_column
        if self.view is None or row is None or col is None:
            return ""
        return self.view.full_text(row, col)

    def row_full_text(self) -> str:
        """The cursor row, tab-separated, every shown column in screen order (what `Y` copies)."""
        row = self.current_row
        if self.view is None or row is None:
            return ""
        cols = [self.columns[j] for j in self._shown()]
        return "\t".join(one_line(self.view.full_text(row, c)) for c in cols)

    # -- cursor & keys ------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        scroll_y = self.scroll_offset.y
        visible = self.body_height
        if new < scroll_y:
            self.scroll_to(y=new, animate=False)
        elif new >= scroll_y + visible:
            self.scroll_to(y=new - visible + 1, animate=False)
        self.refresh()
        self.post_message(self.CursorMoved(self, self.current_row))

    def goto_row(self, row: int) -> None:
        """Put the cursor on data row ``row`` (it must be visible)."""
        if self.view is not None:
            hits = (self.view.order() == row).nonzero()[0]
            if len(hits):
                self._move(int(hits[0]))

    def _move(self, pos: int) -> None:
        n = len(self.view.order()) if self.view is not None else 0
        self.cursor = max(0, min(pos, n - 1)) if n else 0

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(self.body_height - 1, 1))

    def action_jump(self, where: int) -> None:
        self._move(0 if where == 0 else len(self.view.order()) - 1 if self.view else 0)

    def action_column(self, delta: int) -> None:
        """`h` / `l`: the cell cursor one column left / right; the table scrolls by columns."""
        shown = self._shown()
        if self.col not in shown:
            shown = sorted({*shown, self.col})
        pos = shown.index(self.col) + delta
        if 0 <= pos < len(shown):
            self._set_col(shown[pos])

    def action_label_width(self, step: int) -> None:
        """`<` / `>`: narrower / wider name column."""
        before = self._widths[0] if self._widths else 0
        self._label_delta += step * LABEL_STEP
        self._measure()
        if self._widths and self._widths[0] == before and step > 0:
            self._label_delta -= step * LABEL_STEP  # nothing longer to show: do not build up
        self._bring_into_view(self.col)
        self.refresh()

    def hide_column(self) -> Column | None:
        """`-`: hide the cursor column (not the row's label); the cursor moves to the next."""
        col = self.current_column
        if self.view is None or col is None or self.col == 0:
            return None
        shown = self._shown()
        pos = shown.index(self.col)
        self.view.hidden.add(col.key)
        rest = self._shown()
        self._set_col(rest[min(pos, len(rest) - 1)])
        return col

    def unhide_columns(self) -> int:
        """`+`: show every hidden column again; how many there were."""
        if self.view is None:
            return 0
        n = len(self.view.hidden)
        self.view.hidden.clear()
        self._slots = None
        self._bring_into_view(self.col)
        return n

    def goto_match(self, step: int) -> bool:
        """`n` / `N`: the cell cursor to the next / previous cell the filter matched (row by row,
        left to right, wrapping); False when nothing matched."""
        view = self.view
        if view is None or not view.filter_text:
            return False
        order = view.order()
        keyed = [(j, view.matched_in(c.key)) for j, c in enumerate(self.columns)]
        keyed = [(j, m) for j, m in keyed if m is not None]
        if not len(order) or not keyed:
            return False
        grid = np.stack([m[order] for _, m in keyed], axis=1)  # visible rows × matched columns
        cols = [j for j, _ in keyed]
        flat = np.flatnonzero(grid.ravel())
        if not len(flat):
            return False
        # Position of the cursor in the same row-major numbering (between columns when the
        # cursor column never matched).
        here = self.cursor * len(cols) + sum(1 for j in cols if j < self.col)
        on_match = self.col in cols and grid[self.cursor, cols.index(self.col)]
        if step > 0:
            after = flat[flat > here] if on_match else flat[flat >= here]
            target = after[0] if len(after) else flat[0]
        else:
            before = flat[flat < here]
            target = before[-1] if len(before) else flat[-1]
        row, k = divmod(int(target), len(cols))
        self.cursor = row
        self._set_col(cols[k])
        return True

    def action_activate(self) -> None:
        row = self.current_row
        if row is None or self.view is None:
            return
        if self.opens_first is not None and self.opens_first(row):
            self.post_message(self.Activated(self, row))
            return
        if self.view.is_tree and not self.view.flat and self.view.toggle_node(row):
            self.refresh_data(keep_row=row)
            return
        self.post_message(self.Activated(self, row))

    def on_click(self, event: events.Click) -> None:
        if event.y >= self.header_height:
            self._move(self.scroll_offset.y + event.y - self.header_height)
        for slot in self.slots():
            if slot.x <= event.x < slot.x + slot.width + GAP:
                if slot.column != self.col:
                    self._set_col(slot.column)
                break


def _width(text: str, cap: int) -> int:
    """Cells ``text`` takes, counted no further than ``cap`` (enough to size a column)."""
    if text.isascii():
        return len(text)
    return cell_len(text[: cap + 1])

