"""`T`: the Timeline — one step of each side as lanes, the base above the comparison.

What a lane holds and what each cell shows come from :mod:`perfcmp_core.lanes` (the same glyphs
the exported text uses, so colour only repeats what the glyphs say); this screen keeps the view
— which share of the step is shown, which scale, where the cursor is — and draws it with
Textual's line API: every key rebuilds the visible rows, each lane costing work proportional to
the terminal's width (:class:`~perfcmp_core.lanes.bins.LaneIndex`), never to its events.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from perfcmp_core.compare.module_forest import BACKWARD_PREFIX
from perfcmp_core.compare.result import Table
from perfcmp_core.lanes import SideLanes
from perfcmp_core.lanes.build import DEVICE, HOST
from perfcmp_core.lanes.picture import (COLOURS, MARK_CLASS, TITLE, Anchor, anchors, describe, draw,
                                        first_start, grown, legend, marks, ms, ruler, side_title, under, views)

from ..widgets.pictures import draws_colour

#: The narrowest view, as a share of the scale (`+` halves the view, `-` doubles it).
MIN_SHARE = 1e-5


class TimelineView(ScrollView, can_focus=True):
    """The lanes of both sides over the view ``f0 … f1`` (shares of the scale), with a cursor
    column."""

    class Moved(Message):
        """The view or the cursor changed (the screen re-describes what is under it)."""

    def __init__(self, sides: tuple[SideLanes, SideLanes], colour: bool, op: str = "",
                 **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.sides = sides
        self.colour = colour
        self.op = op  # marked where it runs (T on an operator row); the cursor starts on it
        self.kernels = grown(sides)
        self.f0, self.f1 = 0.0, 1.0
        self.common = True
        self._anchors: list[Anchor] | None = None  # found on the first `a` (:func:`anchors`)
        self.anchor_at = -1  # which of them the comparison is shifted to meet (-1: none)
        self.cursor = 0  # cell column
        self._strips: list[Strip] = []
        self._built_for = -1  # the width the rows were drawn for

    # -- geometry -----------------------------------------------------------------------------
    @property
    def title_width(self) -> int:
        return min(TITLE, max(8, self.size.width // 5))

    @property
    def cells(self) -> int:
        return max(1, self.size.width - self.title_width - 1)

    def side_views(self) -> tuple[tuple[float, float], ...]:
        return views(self.sides, self.f0, self.f1, self.common, self.anchor)

    @property
    def anchors(self) -> list[Anchor]:
        if self._anchors is None:
            self._anchors = anchors(self.sides)
        return self._anchors

    @property
    def anchor(self) -> Anchor | None:
        """The point both steps are aligned at (None: not aligned)."""
        return self.anchors[self.anchor_at] if self.anchor_at >= 0 else None

    @property
    def anchored(self) -> bool:
        return self.anchor_at >= 0

    def cursor_times(self) -> tuple[float, float]:
        """Each side's time under the cursor (the middle of its cell)."""
        out = []
        for t0, t1 in self.side_views():
            out.append(t0 + (t1 - t0) * (self.cursor + 0.5) / self.cells)
        return out[0], out[1]

    # -- drawing ------------------------------------------------------------------------------
    def on_resize(self) -> None:
        """Redraw for a new width; a new height only shows more or fewer of the same rows."""
        if self._strips and self._built_for == self.size.width:
            return
        if not self._strips and self.op:
            self.cursor = self._first_cell(self.op)
        self.cursor = min(self.cursor, self.cells - 1)
        self.rebuild()

    def _first_cell(self, op: str) -> int:
        """The cell where ``op`` first runs (or the module so named starts) on the base side (or
        the comparison's), 0 if never."""
        for side, (t0, t1) in zip(self.sides, self.side_views()):
            start = first_start(side, op)
            if start is not None:
                return min(max(0, int((start - t0) / (t1 - t0) * self.cells)), self.cells - 1)
        return 0

    def rebuild(self) -> None:
        """Draw every row anew (each lane: a few binary searches per cell)."""
        width, cells, tw = self.size.width, self.cells, self.title_width
        strips: list[Strip] = []
        bold = Style(bold=True)
        for side, (t0, t1) in zip(self.sides, self.side_views()):
            strips.append(Strip([Segment(side_title(side, t0, t1)[:width], bold)]))
            strips.append(Strip([Segment(" " * (tw + 1) + ruler(t0, t1, cells))]))
            rows = [draw(lane, t0, t1, cells) for lane in side.lanes]
            for lane, row in zip(side.lanes, rows):
                strips.append(Strip([Segment(f"{lane.title[:tw]:<{tw}} "), *self._cells(row.text, row.cls)]))
            if self.kernels or self.op:
                text = marks(side, rows, set(self.kernels), self.op, (t0, t1))
                cls = [MARK_CLASS.get(c, "") for c in text]
                strips.append(Strip([Segment(f"{'marks':<{tw}} "), *self._cells(text, cls)]))
        self._strips = strips
        self._built_for = width
        self.virtual_size = Size(width, len(strips))
        self.refresh()
        self.post_message(self.Moved())

    def _cells(self, text: str, cls: list[str]) -> list[Segment]:
        """The cells as segments, one per run of one class (the cursor's cell reversed)."""
        out: list[Segment] = []
        start = 0
        for i in range(1, len(text) + 1):
            if i == len(text) or cls[i] != cls[start] or i == self.cursor or i == self.cursor + 1:
                colour = COLOURS.get(cls[start]) if self.colour and cls[start] else None
                style = Style.parse(colour or "") + Style(reverse=start == self.cursor)
                out.append(Segment(text[start:i], style))
                start = i
        return out

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        if index >= len(self._strips):
            return Strip.blank(self.size.width)
        return self._strips[index].crop_extend(0, self.size.width, None)

    # -- the view -----------------------------------------------------------------------------
    def zoom(self, factor: float) -> None:
        """Zoom by ``factor`` (> 1: in) around the cursor, which stays on the same time."""
        share = self.f1 - self.f0
        new = min(1.0, max(MIN_SHARE, share / factor))
        at = self.f0 + share * (self.cursor + 0.5) / self.cells
        f0 = at - new * (self.cursor + 0.5) / self.cells
        self._set(f0, new)

    def pan(self, cells: int) -> None:
        """Move the view by ``cells`` cells (the cursor stays in its column)."""
        share = self.f1 - self.f0
        self._set(self.f0 + share * cells / self.cells, share)

    def fit(self) -> None:
        self.f0, self.f1 = 0.0, 1.0
        self.rebuild()

    def _set(self, f0: float, share: float) -> None:
        self.f0 = min(max(0.0, f0), 1.0 - share)
        self.f1 = self.f0 + share
        self.rebuild()

    def toggle_scale(self) -> None:
        self.common = not self.common
        self.rebuild()

    def cycle_anchor(self, step: int = 1) -> bool:
        """Align both steps at the next (``step`` 1) or previous (-1) anchor, after the last one
        none; the cursor goes to the anchor (the view pans there if it is out of sight). False
        where the steps share no anchor."""
        found = self.anchors
        if not found:
            return False
        self.anchor_at = (self.anchor_at + 1 + step) % (len(found) + 1) - 1
        self.common = True
        if self.anchor is not None:
            self._cursor_to(self.anchor.base_ns)
        self.rebuild()
        return True

    def _cursor_to(self, t: float) -> None:
        """The cursor on the base's time ``t``: on the cell holding it when it is in view (else
        in its column), the view moved by what it takes (under a cell when in view) for that
        cell to start at ``t`` — so the cursor names the item starting there on both sides."""
        (t0, t1) = self.side_views()[0]
        if t0 <= t < t1:
            self.cursor = min(int((t - t0) / (t1 - t0) * self.cells), self.cells - 1)
        share = self.f1 - self.f0
        wanted = t / max(s.window_ns for s in self.sides) - share * self.cursor / self.cells
        self.f0 = min(max(0.0, wanted), 1.0 - share)
        self.f1 = self.f0 + share
        if self.f0 != wanted:  # against an edge of the step: the cursor goes to t's cell
            (t0, t1) = self.side_views()[0]
            self.cursor = min(max(0, int((t - t0) / (t1 - t0) * self.cells)), self.cells - 1)

    def move_cursor(self, step: int) -> None:
        """Move the cursor; past an edge the view pans instead."""
        to = self.cursor + step
        if 0 <= to < self.cells:
            self.cursor = to
            self.rebuild()
        else:
            self.pan(step)

    def under_cursor(self) -> list[list[str]]:
        """What the cursor is on, per side: one line per lane with an item there."""
        return [[f"{lane.title}: {describe(lane, i)}" for lane, i in under(side, t)]
                for side, t in zip(self.sides, self.cursor_times())]

    def op_under_cursor(self) -> str:
        """The op under the cursor: a device item's launching op, else a host op (base first)."""
        for side, t in zip(self.sides, self.cursor_times()):
            found = under(side, t)
            for kind in (DEVICE, HOST):
                for lane, i in found:
                    if lane.kind == kind and lane.op[i]:
                        return str(lane.op[i])
        return ""


#: What the screen is dismissed with for `S` (no op name holds a NUL).
PICK_STEPS = "\0steps"


class TimelineScreen(ModalScreen[str | None]):
    """The Timeline; dismissed with the op to show on the Operators screen (Enter),
    :data:`PICK_STEPS` (S: pick another step) or None."""

    DEFAULT_CSS = """
    TimelineScreen { align: left top; }
    #timeline-box { width: 100%; height: 100%; background: $surface; }
    #timeline-head { height: 1; padding: 0 1; background: $boost; }
    #timeline-view { height: 1fr; }
    #timeline-under { height: auto; max-height: 8; padding: 0 1; }
    #timeline-legend { height: auto; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom in"),
        Binding("minus", "zoom(0.5)", "Zoom out"),
        Binding("h", "pan(-1)", "Pan left"),
        Binding("l", "pan(1)", "Pan right"),
        Binding("left", "cursor(-1)", "Cursor left", show=False),
        Binding("right", "cursor(1)", "Cursor right", show=False),
        Binding("0", "fit", "Fit"),
        Binding("o", "scale", "Scale"),
        Binding("a", "anchor(1)", "Anchor"),
        Binding("A", "anchor(-1)", "Anchor back", show=False),
        Binding("enter", "open_op", "Op"),
        Binding("S", "steps", "Steps"),
        Binding("escape,q,T", "close", "Close"),
    ]

    def __init__(self, sides: tuple[SideLanes, SideLanes], op: str = "") -> None:
        super().__init__()
        self.sides = sides
        self.op = op

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline-box"):
            yield Static(id="timeline-head")
            view = TimelineView(self.sides, draws_colour(self.app), self.op, id="timeline-view")
            yield view
            yield Static(id="timeline-under")
            yield Static(Text("\n".join(legend(view.kernels, self.op)), overflow="ellipsis"),
                         id="timeline-legend")

    def on_mount(self) -> None:
        self.query_one(TimelineView).focus()

    @property
    def view(self) -> TimelineView:
        return self.query_one(TimelineView)

    def on_timeline_view_moved(self, _: TimelineView.Moved) -> None:
        view = self.view
        scale = "common scale" if view.common else "each step on its own length"
        if view.anchor is not None:
            scale += (f", comparison shifted {ms(view.anchor.shift)} to align {view.anchor.label} "
                      f"(anchor {view.anchor_at + 1} of {len(view.anchors)})")
        share = (view.side_views()[0][1] - view.side_views()[0][0]) / view.cells
        self.query_one("#timeline-head", Static).update(Text(
            f"Timeline · {scale} · a cell is {ms(share)}  (+/- zoom, h/l pan, ←/→ cursor, 0 fit, "
            "o scale, a/A anchor, Enter op, S step, q close)", no_wrap=True, overflow="ellipsis"))
        lines = []
        for side, found in zip(self.sides, view.under_cursor()):
            t = view.cursor_times()[self.sides.index(side)]
            lines.append(f"{side.side} +{ms(t)}: " + ("; ".join(found) if found else "nothing"))
        self.query_one("#timeline-under", Static).update(Text("\n".join(lines), overflow="ellipsis"))

    def action_zoom(self, factor: float) -> None:
        self.view.zoom(factor)

    def action_pan(self, direction: int) -> None:
        self.view.pan(direction * max(1, self.view.cells // 4))

    def action_cursor(self, step: int) -> None:
        self.view.move_cursor(step)

    def action_fit(self) -> None:
        self.view.fit()

    def action_scale(self) -> None:
        self.view.toggle_scale()

    def action_anchor(self, step: int) -> None:
        if not self.view.cycle_anchor(step):
            self.notify("no backward op (autograd::engine::evaluate_function) in one of the steps and "
                        "no top-level module both ran: nothing to align", severity="warning", timeout=3)

    def action_open_op(self) -> None:
        op = self.view.op_under_cursor()
        if not op:
            self.notify("no op under the cursor (device work with a launching op, or a host op)",
                        severity="warning", timeout=3)
            return
        self.dismiss(op)

    def action_steps(self) -> None:
        self.dismiss(PICK_STEPS)

    def action_close(self) -> None:
        self.dismiss(None)


#: The screens whose rows name an op (`T` there marks where it runs), and the columns naming it
#: (a ModuleTree row names its module: `T` marks the cells it spans).
OP_SCREENS = ("operators", "modules", "kernels", "api")
OP_COLUMNS = ("name", "op", "base_op", "base_name", "comp_op", "comp_name", "module")


def row_op(screen_id: str, table: Table | None, row: int | None) -> str:
    """The op the cursor row of a table names ("" for a row naming none, a [ TOTAL ] row, or a
    screen whose rows are no ops)."""
    if screen_id not in OP_SCREENS or table is None or row is None:
        return ""
    if "_path" in table.data.columns and BACKWARD_PREFIX in str(table.data["_path"].iat[row]):
        return ""  # a backward pseudo-module (ModuleTree): no frame, though named like the forward one
    for key in OP_COLUMNS:
        if key in table.data.columns:
            value = str(table.data[key].iat[row]).strip()
            if value and value != "[ TOTAL ]":
                return value
    return ""
