"""Lane cells as glyphs (and their colours), and the whole Timeline picture as plain text.

One owner for what a cell looks like, so the screen and the exported text never differ. Every
class has its own glyphs (colour only repeats them), so the picture reads under ``NO_COLOR``, on
16-colour terminals and pasted into a report:

* device lanes — the covered share of the cell as the height or density of the class's glyph:
  compute ``▂▄▆█``, communication ``·░▒▓``, copy ``.-=≡``, wait ``,~≈≋``;
* host and module lanes — each run of cells under one op / module reads ``▏name…`` (the name
  as far as the run allows);
* the idle lane — the cause's letter (:data:`CAUSE_LETTER`), upper case when idle time of that
  cause fills at least half the cell, lower case below;
* a marks row under each side's lanes — ``^`` where one of the kernels that grew most runs
  (:func:`grown`), ``▾`` where the op asked for runs (`T` on an operator row).

Cells are placed by :meth:`~.bins.LaneIndex.cells`; a view is ``(t0, t1)`` in ns from each
step's start. On the *common* scale both steps share one ``t0 … t1``; on their *own* scale each
side's view is the same share of its own window, so both steps fill the width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..explain.idle import CAUSES
from .bins import Cells
from .build import DEVICE, HOST, IDLE_LANE, MODULE
from .table import Lane, SideLanes

#: Device glyphs by class, from a sliver of the cell covered to all of it.
LEVELS: dict[str, str] = {"compute": "▂▄▆█", "communication": "·░▒▓", "copy": ".-=≡", "wait": ",~≈≋"}
#: The idle lane's letter per cause.
CAUSE_LETTER: dict[str, str] = {"sync": "S", "host": "H", "launch": "L", "copy": "C", "device": "D",
                                "unknown": "U"}
#: What each idle cause means, for the legend (docs/explain.md says it in full).
CAUSE_WORDS: dict[str, str] = {"sync": "synchronisation", "host": "host work", "launch": "launch-bound",
                               "copy": "copy", "device": "device-side", "unknown": "unknown"}
assert set(CAUSE_LETTER) == set(CAUSES)
#: Width of the lane titles in front of the cells (at most).
TITLE = 22


@dataclass(frozen=True)
class Row:
    """One lane drawn: ``text`` has one glyph per cell; ``cls[i]`` is the class of cell ``i``
    ('' where empty), which the screen colours."""

    text: str
    cls: list[str]
    cells: Cells


def draw(lane: Lane, t0: float, t1: float, width: int) -> Row:
    """``lane`` over ``[t0, t1)`` in ``width`` cells."""
    cells = lane.index.cells(t0, t1, width)
    item, frac = cells.item, cells.fraction
    cls = np.where(item >= 0, lane.cls[np.maximum(item, 0)] if len(lane.cls) else "", "").astype(object)
    if lane.kind == IDLE_LANE:
        letter = np.array([CAUSE_LETTER.get(c, "?") if c else " " for c in cls], dtype=object)
        text = np.where(frac >= 0.5, letter, np.char.lower(letter.astype(str)).astype(object))  # dtype-neutral: a numpy unicode array for np.char, never a pandas column
    elif lane.kind in (HOST, MODULE):
        text = _names(lane.name, item)
    else:
        text = np.full(width, " ", dtype=object)
        level = np.clip(np.ceil(frac * 4).astype("int64") - 1, 0, 3)
        for c in np.unique(cls[item >= 0]):  # a handful of classes, never one per cell
            sel = (cls == c) & (item >= 0)
            text[sel] = np.array(list(LEVELS.get(c, "▂▄▆█")), dtype=object)[level[sel]]
    return Row("".join(text), [str(c) for c in cls], cells)


#: Glyphs of the marks row under a side's lanes: a cell where one of the kernels that grew most
#: runs, and one where the op asked for runs (which wins when both do).
GREW, FOCUS = "^", "▾"
#: How many grown kernels are marked.
GROWN = 3


def grown(sides: tuple[SideLanes, SideLanes], n: int = GROWN) -> list[str]:
    """The ``n`` kernels whose device time in the step grew most, comparison over base, largest
    first: only names both steps ran (GPU and NPU kernels are named apart; a kernel only one side
    runs is no growth of that kernel)."""
    totals = []
    for side in sides:
        per: dict[str, float] = {}
        for lane in side.lanes:
            if lane.kind == DEVICE and len(lane.index):
                dur = lane.index.end - lane.index.start
                codes, names = pd.factorize(pd.Series(lane.name, dtype=object))
                sums = np.bincount(codes, weights=dur, minlength=len(names))
                for name, ns in zip(names, sums):
                    per[str(name)] = per.get(str(name), 0.0) + float(ns)
        totals.append(per)
    base, comp = totals
    growth = sorted(((comp[k] - base[k], k) for k in base.keys() & comp.keys() if comp[k] > base[k]),
                    key=lambda g: (-g[0], g[1]))
    return [k for _, k in growth[:n]]


def marks(side: SideLanes, rows: list[Row], kernels: set[str], op: str = "",
          view: tuple[float, float] | None = None) -> str:
    """The marks row of a side drawn as ``rows`` (one per lane, in order) over ``view``:
    :data:`FOCUS` where ``op`` runs (:func:`focused`: the host op itself, device work it launched,
    or a kernel of that name) and over every cell a module of that name spans (:func:`spanned`;
    ``view`` needed), :data:`GREW` where one of ``kernels`` covers most of a device cell, blank
    elsewhere."""
    width = len(rows[0].text) if rows else 0
    out = np.full(width, " ", dtype=object)
    if op and view is not None and width:
        out[spanned(side, op, view[0], view[1], width)] = FOCUS
    for lane, row in zip(side.lanes, rows):
        item = row.cells.item
        has = item >= 0
        at = np.maximum(item, 0)
        if lane.kind == DEVICE and kernels and len(lane.name):
            out[has & np.isin(lane.name[at], list(kernels)) & (out != FOCUS)] = GREW
        if op and lane.kind in (DEVICE, HOST) and len(lane.op):
            out[has & focused(lane, op)[at]] = FOCUS
    return "".join(out)


def spanned(side: SideLanes, module: str, t0: float, t1: float, width: int) -> np.ndarray:
    """Which of ``width`` cells over ``[t0, t1)`` a module frame named ``module`` overlaps (any
    depth: :attr:`SideLanes.spans`), in work proportional to its frames and the cells."""
    sp = side.spans
    mine = np.flatnonzero(sp.name == module) if len(sp.name) else np.empty(0, dtype="int64")
    cell = (t1 - t0) / width
    first = np.clip(np.floor((sp.start[mine] - t0) / cell), 0, width).astype("int64")
    last = np.clip(np.ceil((sp.end[mine] - t0) / cell), 0, width).astype("int64")  # one past
    edges = np.zeros(width + 1, dtype="int64")
    np.add.at(edges, first, 1)
    np.add.at(edges, last, -1)
    return np.cumsum(edges[:-1]) > 0


def first_start(side: SideLanes, op: str) -> float | None:
    """When ``op`` first runs on the side (:func:`focused`) or a module of that name starts."""
    starts = [float(lane.index.start[focused(lane, op)].min()) for lane in side.lanes if focused(lane, op).any()]
    starts += [float(side.spans.start[side.spans.name == op].min())] if (side.spans.name == op).any() else []
    return min(starts) if starts else None


def focused(lane: Lane, op: str) -> np.ndarray:
    """Which items of a device or host lane are ``op`` at work: the op itself or what it
    launched, or a kernel so named (a row of the Kernels screen names kernels)."""
    if lane.kind not in (DEVICE, HOST):
        return np.zeros(len(lane.name), dtype=bool)
    return (lane.op == op) | (lane.name == op)


def runs(sides: tuple[SideLanes, SideLanes], op: str) -> bool:
    """Whether ``op`` runs in either step (as :func:`focused` finds it), or a module of that name."""
    return any(first_start(side, op) is not None for side in sides)


def _names(names: np.ndarray, item: np.ndarray) -> np.ndarray:
    """Each run of cells under one item as ``▏`` and its name (the loop is over runs: at most
    one per cell)."""
    out = np.full(len(item), " ", dtype=object)
    if not len(item):
        return out
    starts = np.flatnonzero(np.concatenate([[True], item[1:] != item[:-1]]))
    ends = np.concatenate([starts[1:], [len(item)]])
    for a, b in zip(starts.tolist(), ends.tolist()):
        if item[a] < 0:
            continue
        label = ("▏" + str(names[item[a]]))[: b - a]
        out[a:a + len(label)] = list(label)
        out[a + len(label):b] = "─"
    return out


def views(sides: tuple[SideLanes, SideLanes], f0: float, f1: float, common: bool,
          anchor: Anchor | None = None) -> tuple[tuple[float, float], ...]:
    """Each side's ``(t0, t1)`` for the share ``f0 … f1`` of the scale: the longer window on the
    common scale, each side's own window otherwise. ``anchor`` (common scale only): the
    comparison shifted so that the anchor's point falls in the same column on both sides."""
    longest = max(s.window_ns for s in sides)
    out = [((f0 * (longest if common else s.window_ns)), (f1 * (longest if common else s.window_ns)))
           for s in sides]
    shift = anchor.shift if anchor is not None and common else 0.0
    (b0, b1), (c0, c1) = out
    return (b0, b1), (c0 + shift, c1 + shift)


#: Where the backward pass starts: the autograd engine's first op (torch and torch_npu alike).
BACKWARD = "autograd::engine::evaluate_function"


def anchor_ns(side: SideLanes) -> float | None:
    """When the side's first backward op starts, in ns from its step's start (None: no host op
    of the step is one)."""
    starts = [float(lane.index.start[i]) for lane in side.lanes if lane.kind == HOST
              for i in np.flatnonzero(pd.Series(lane.name, dtype=object).str.startswith(BACKWARD).to_numpy())[:1]]
    return min(starts) if starts else None


@dataclass(frozen=True)
class Anchor:
    """A point both steps pass (the backward pass starting, a module starting): what it is and
    when it comes on each side, in ns from the step's start. Aligning at it shifts the
    comparison's view by :attr:`shift`, so a layer that runs late shows as that shift."""

    label: str
    base_ns: float
    comp_ns: float

    @property
    def shift(self) -> float:
        """How much later the comparison reaches the point than the base (negative: earlier)."""
        return self.comp_ns - self.base_ns


def anchors(sides: tuple[SideLanes, SideLanes]) -> list[Anchor]:
    """The points both steps can be aligned at, in the order ``a`` steps through them: the first
    backward op (when both sides have one), then the start of every top-level module — the items
    of each side's first module lane — that both steps ran, the k-th run of a name on one side
    matched with the k-th on the other, in the base's order."""
    out = []
    a, b = (anchor_ns(s) for s in sides)
    if a is not None and b is not None:
        out.append(Anchor("the first backward op", a, b))
    tops = [next((lane for lane in s.lanes if lane.kind == MODULE), None) for s in sides]
    if tops[0] is None or tops[1] is None:
        return out
    keyed = []
    for lane in tops:
        names = pd.Series(lane.name, dtype=object)
        keyed.append(pd.DataFrame({"name": names, "k": names.groupby(names, sort=False).cumcount(),
                                   "start": lane.index.start}))
    both = keyed[0].merge(keyed[1], on=["name", "k"], suffixes=("_b", "_c")).sort_values("start_b", kind="stable")
    return out + [Anchor(f"module {n}" + (f" (run {k + 1})" if k else ""), float(s0), float(s1))
                  for n, k, s0, s1 in zip(both["name"], both["k"], both["start_b"], both["start_c"])]


def ms(ns: float) -> str:
    """A time as the timeline labels it (ms, three decimals)."""
    return f"{ns / 1e6:,.3f} ms"


def ruler(t0: float, t1: float, width: int) -> str:
    """Tick marks every ~12 cells labelled with their time from the step's start."""
    out = [" "] * width
    every = 12
    for c in range(0, width, every):
        label = f"╵{(t0 + (t1 - t0) * c / max(width, 1)) / 1e6:.3g}"
        if c + len(label) <= width:
            out[c:c + len(label)] = list(label)
    return "".join(out)


def side_title(side: SideLanes, t0: float, t1: float) -> str:
    return f"{side.side.upper()} step {side.step} · {ms(side.window_ns)} · showing {ms(t0)} … {ms(t1)}"


def under(side: SideLanes, t: float) -> list[tuple[Lane, int]]:
    """The item of each lane at time ``t`` (ns from the step's start): ``(lane, item)`` for the
    lanes that have one."""
    out = []
    for lane in side.lanes:
        i = int(np.searchsorted(lane.index.start, t, side="right")) - 1
        if i >= 0 and lane.index.end[i] > t:
            out.append((lane, i))
    return out


def describe(lane: Lane, i: int) -> str:
    """One item in words: name, duration, where (stream / op) and its offset in the step."""
    start, end = int(lane.index.start[i]), int(lane.index.end[i])
    what = str(lane.name[i])
    if lane.kind == IDLE_LANE:
        what = f"idle, {CAUSE_WORDS.get(str(lane.cls[i]), lane.cls[i])}: {what}"
    elif lane.kind == DEVICE:
        what = f"{lane.cls[i]} {what} · stream {lane.stream[i]}" + (f" · op {lane.op[i]}" if lane.op[i] else "")
    return f"{what} · {ms(end - start)} at +{ms(start)}"


def legend(kernels: list[str] | None = None, op: str = "") -> list[str]:
    """What the glyphs mean (plain text); ``kernels``: the grown kernels marked, ``op``: the op
    marked."""
    device = "  ".join(f"{c} {g}" for c, g in LEVELS.items())
    idle = "  ".join(f"{CAUSE_LETTER[c]} {CAUSE_WORDS[c]}" for c in CAUSES)
    out = [f"device (share of the cell busy): {device}; host / modules: ▏name",
           f"idle by cause (lower case: under half the cell): {idle}"]
    if kernels or op:
        out.append("marks: " + "; ".join(
            ([f"{FOCUS} {op} runs"] if op else [])
            + ([f"{GREW} grew most: " + ", ".join(short(k) for k in kernels)] if kernels else [])))
    return out


def short(name: str, width: int = 48) -> str:
    """A long name cut in the middle, keeping both ends (C++ kernel names differ at either)."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def picture_text(sides: tuple[SideLanes, SideLanes], width: int = 160, common: bool = True,
                 f0: float = 0.0, f1: float = 1.0) -> str:
    """The picture as plain text ``width`` characters wide: per side a title, a ruler (ms from
    the step's start) and every lane, base above comparison; the legend last."""
    return "\n".join(text for text, _ in picture_lines(sides, width, common, f0, f1)) + "\n"


def picture_lines(sides: tuple[SideLanes, SideLanes], width: int = 160, common: bool = True,
                  f0: float = 0.0, f1: float = 1.0) -> list[tuple[str, list[str]]]:
    """The lines of :func:`picture_text`, each with the class of every character ('' where
    none, an empty list for a line of words): what :data:`COLOURS` paints (the SVG export)."""
    title_w = min(TITLE, max(8, width // 5))
    cells = max(10, width - title_w - 1)
    (b0, b1), _ = views(sides, f0, f1, common)
    lines: list[tuple[str, list[str]]] = [(
        f"Timeline · {'common scale' if common else 'each step on its own length'} · "
        f"{cells} cells of {ms((b1 - b0) / cells)}" + ("" if common else " (base)"), [])]
    kernels = grown(sides)
    pad = [""] * (title_w + 1)
    for side, (t0, t1) in zip(sides, views(sides, f0, f1, common)):
        lines += [("", []), (side_title(side, t0, t1), []), (" " * (title_w + 1) + ruler(t0, t1, cells), [])]
        rows = [draw(lane, t0, t1, cells) for lane in side.lanes]
        lines += [(f"{lane.title[:title_w]:<{title_w}} " + row.text, pad + row.cls)
                  for lane, row in zip(side.lanes, rows)]
        if kernels:
            text = marks(side, rows, set(kernels))
            lines.append((f"{'marks':<{title_w}} " + text, pad + [MARK_CLASS.get(c, "") for c in text]))
    return [*lines, ("", []), *((line, []) for line in legend(kernels))]


#: The class of a marks-row glyph (for its colour).
MARK_CLASS = {FOCUS: "focus", GREW: "grew"}
#: Colour of a cell by its class (device classes, host ops, modules, idle causes, marks): the
#: screen's and the SVG's; the glyphs carry the same without it.
COLOURS: dict[str, str] = {
    "compute": "green3", "communication": "medium_purple2", "copy": "dark_cyan", "wait": "grey62",
    "op": "dodger_blue2", "module": "gold3",
    "sync": "red3", "host": "dark_orange", "launch": "orange_red1", "device": "steel_blue",
    "unknown": "grey50", "grew": "bold red3", "focus": "bold gold1",
}
