"""Both sides' lanes as one table — the form every result takes on its way to the app, the
``--json`` document and ``export`` — and back as indexed lanes.

The comparison runs in a child process; the app receives tables. So the Timeline travels as the
``Timeline`` table (screens and ``--json`` only, never a workbook sheet): one row per lane item
with its side, plus one ``step`` row per side holding the step's id and window (so a side whose
step has no item still says how long it was), and a ``span`` row per module frame of the step.
:func:`sides_of` turns it back into :class:`SideLanes`, each lane indexed once
(:class:`~.bins.LaneIndex`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare.result import Column, Table
from ..explain.explanation import StepExplanation
from ..model import Profile
from .bins import LaneIndex
from .build import KINDS, SPAN, median_step, step_lanes

#: The table's name (declared in :data:`perfcmp_core.compare.STEPS`).
TIMELINE = "Timeline"
#: ``kind`` of the row that carries a side's step and window.
STEP_ROW = "step"
SIDES = ("base", "comparison")

_COLUMNS = (
    Column("side", "Side", "key", "text", width=10),
    Column("lane", "Lane", "text", "text", width=24),
    Column("kind", "Kind", "text", "text", width=8),
    Column("start_ns", "Start(ns)", "text", "int", "ns", 14),
    Column("end_ns", "End(ns)", "text", "int", "ns", 14),
    Column("name", "Name", "text", "text", width=40),
    Column("cls", "Class", "text", "text", width=14),
    Column("stream", "Stream", "text", "int", width=8),
    Column("op", "Op", "text", "text", width=30),
)


#: One side's Timeline step: the step's id, its lanes (times from the window's start) and the
#: window's length in ns.
SideStep = tuple[int, pd.DataFrame, int]


def side_step(profile: Profile, explanation: StepExplanation, step: int | None = None) -> SideStep | str:
    """One side's part of the ``Timeline`` table: ``step`` (None: the side's median step), or
    why there is none."""
    chosen = median_step(explanation) if step is None else step
    if chosen is None:
        return f"timeline: no device activity and no steps in {profile.meta.source}"
    lanes, window = step_lanes(profile, explanation, chosen)
    return chosen, lanes, window


def timeline_table(base: tuple[Profile, StepExplanation], comp: tuple[Profile, StepExplanation],
                   steps: tuple[int | None, int | None] = (None, None)) -> Table | str:
    """The ``Timeline`` table of one step per side (``steps``; None: the side's median step),
    or why there is none."""
    first = side_step(*base, steps[0])
    return first if isinstance(first, str) else timeline_of((first, side_step(*comp, steps[1])))


def timeline_of(sides: tuple[SideStep | str, SideStep | str]) -> Table | str:
    """The ``Timeline`` table of both sides' steps (:func:`side_step`), or why there is none."""
    frames = []
    for side, made in zip(SIDES, sides):
        if isinstance(made, str):
            return made
        chosen, lanes, window = made
        head = pd.DataFrame({"lane": [""], "kind": [STEP_ROW], "start_ns": [0], "end_ns": [window],
                             "name": [f"step {chosen}"], "cls": [""], "stream": [chosen], "op": [""]})
        frames.append(pd.concat([head, lanes], ignore_index=True).assign(side=side))
    data = pd.concat(frames, ignore_index=True)[[c.key for c in _COLUMNS]]
    data = data.astype({"start_ns": "int64", "end_ns": "int64", "stream": "int64"})
    return Table(TIMELINE, _COLUMNS, data, (0, 0), (0, 0), title="Timeline of one step per side",
                 export=False)


@dataclass(frozen=True)
class Lane:
    """One lane: its title, kind and disjoint items in time order (ns from the step's start)."""

    title: str
    kind: str
    index: LaneIndex
    name: np.ndarray  # object
    cls: np.ndarray  # object
    stream: np.ndarray  # int64
    op: np.ndarray  # object


@dataclass(frozen=True)
class Spans:
    """Every module frame of a step (nested, so no lane): names and times from the step's start."""

    name: np.ndarray  # object
    start: np.ndarray  # int64
    end: np.ndarray  # int64


NO_SPANS = Spans(np.empty(0, dtype=object), np.empty(0, dtype="int64"), np.empty(0, dtype="int64"))


@dataclass(frozen=True)
class SideLanes:
    """One side's step: which step, how long its window is, its lanes in drawing order and its
    module frames."""

    side: str
    step: int
    window_ns: int
    lanes: tuple[Lane, ...]
    spans: Spans = NO_SPANS


def sides_of(table: Table) -> tuple[SideLanes, SideLanes]:
    """The base and comparison lanes of a ``Timeline`` table, lanes ordered by kind
    (:data:`~.build.KINDS`), then stream (device lanes: stream 2 above stream 10), then title;
    each lane's items sorted by start and indexed.

    Columnar (one sort per side, then a slice per lane): the app runs it as the table arrives, so
    opening the Timeline costs no key its time."""
    data = table.data
    side_of = data["side"].to_numpy(dtype=object)
    kind = data["kind"].to_numpy(dtype=object)
    lane = data["lane"].to_numpy(dtype=object)
    start, end = data["start_ns"].to_numpy(dtype="int64"), data["end_ns"].to_numpy(dtype="int64")
    text = {c: data[c].to_numpy(dtype=object) for c in ("name", "cls", "op")}
    stream = data["stream"].to_numpy(dtype="int64")
    out = []
    for side in SIDES:
        mine = side_of == side
        head = np.flatnonzero(mine & (kind == STEP_ROW))
        if not len(head):
            raise ValueError(f"{TIMELINE}: no {side} step row")
        span = np.flatnonzero(mine & (kind == SPAN))
        rows = np.flatnonzero(mine & (kind != STEP_ROW) & (kind != SPAN))
        rank = np.select([kind[rows] == k for k in KINDS], list(range(len(KINDS))), len(KINDS))
        codes, _ = pd.factorize(lane[rows], sort=True)
        rows = rows[np.lexsort((start[rows], codes, stream[rows], rank))]
        cut = np.flatnonzero(lane[rows][1:] != lane[rows][:-1]) + 1
        lanes = []
        for part in np.split(rows, cut) if len(rows) else []:
            lanes.append(Lane(str(lane[part[0]]), str(kind[part[0]]), LaneIndex.of(start[part], end[part]),
                              text["name"][part], text["cls"][part], stream[part], text["op"][part]))
        out.append(SideLanes(side, int(stream[head[0]]), int(end[head[0]]), tuple(lanes),
                             Spans(text["name"][span], start[span], end[span])))
    return out[0], out[1]
