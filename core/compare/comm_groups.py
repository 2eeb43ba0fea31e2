"""Communication groups of the OverallMetrics sheet (spec ``inputs-and-overall.md`` §6.5): each
HCCL group's share of the uncovered communication time, split into waiting (inter-rank
``Notify_Wait``) and transmitting, and the time two groups' communication was uncovered together.

Deliberate difference from the reference (docs/differences.md O5): overlaps of wait tasks /
communication ops with uncovered spans are exact interval intersections; the reference's sweep
double-counts or drops time when the tasks of one list overlap each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import Profile
from ..timeline import Spans

_RDMA_SEND, _NOTIFY_WAIT = "RDMASend", "Notify_Wait"


@dataclass(frozen=True)
class GroupTime:
    """A communication group's share of the uncovered communication time."""

    wait_ns: int
    transmit_ns: int

    @property
    def uncovered_ns(self) -> int:
        return self.wait_ns + self.transmit_ns


def _counted_waits(tasks: pd.DataFrame) -> np.ndarray:
    """Which ``Notify_Wait`` tasks are inter-rank *waits* (bool per task row).

    Per plane, in start order, a Notify_Wait directly after ``RDMASend, RDMASend`` or after
    ``RDMASend, RDMASend, Notify_Wait, RDMASend`` completes an RDMA transfer: it is transmit
    time, not waiting. Vectorised with shifted views of the per-plane task-kind sequence.
    """
    n = len(tasks)
    if n == 0:
        return np.zeros(0, dtype=bool)
    plane = pd.factorize(tasks["group"] + "\x1f" + tasks["plane"])[0]
    names = tasks["name"].to_numpy()
    kind = np.where(names == _RDMA_SEND, 1, np.where(names == _NOTIFY_WAIT, 2, 0)).astype("int8")
    order = np.lexsort((np.arange(n), tasks["start_ns"].to_numpy(), plane))
    p, kd = plane[order], kind[order]

    def prev(j: int) -> np.ndarray:
        out = np.zeros(n, dtype="int8")  # "other" before a plane's first task
        if j < n:
            out[j:] = np.where(p[j:] == p[:-j], kd[:-j], 0)
        return out

    p1, p2, p3, p4 = prev(1), prev(2), prev(3), prev(4)
    rdma_done = ((p2 == 1) & (p1 == 1)) | ((p4 == 1) & (p3 == 1) & (p2 == 2) & (p1 == 1))
    counted = np.empty(n, dtype=bool)
    counted[order] = (kd == 2) & ~rdma_done
    return counted


def _op_spans(ops: pd.DataFrame) -> dict[str, Spans]:
    """Communication-op spans per group, groups in order of first appearance."""
    start = ops["start_ns"].to_numpy()
    end = start + ops["dur_ns"].to_numpy()
    out: dict[str, Spans] = {}
    for group, idx in ops.groupby("group", sort=False).indices.items():
        out[str(group)] = Spans.of(start[idx], end[idx])
    return out


def _group_time(uncovered: Spans, waits: Spans, ops: Spans | None) -> GroupTime:
    wait = (uncovered & waits).length
    total = (uncovered & ops).length if ops is not None else 0
    return GroupTime(wait, total - wait)


def _pairs(order: list[str], op_spans: dict[str, Spans], uncovered: Spans) -> dict[tuple[str, str], int]:
    """Time two groups' communication were both uncovered, for each ordered pair (i < j)."""
    clipped = [(g, uncovered & op_spans[g]) for g in order if g in op_spans]
    out: dict[tuple[str, str], int] = {}
    for i, (a, sa) in enumerate(clipped):
        for b, sb in clipped[i + 1:]:
            both = (sa & sb).length
            if both:
                out[(a, b)] = both
    return out


def _task_spans(tasks: pd.DataFrame, mask: np.ndarray) -> Spans:
    start = tasks["start_ns"].to_numpy()[mask]
    return Spans.of(start, start + tasks["dur_ns"].to_numpy()[mask])


def text_groups(profile: Profile, uncovered: Spans) -> tuple[dict[str, GroupTime], dict[tuple[str, str], int]]:
    """Text: groups in HCCL thread order; the wait plane is the one with the least counted wait
    (planes without counted waits included, so such a plane gives the group zero wait)."""
    tasks = profile.comm_tasks
    op_spans = _op_spans(profile.comm_ops)
    counted = _counted_waits(tasks)
    plane_order = tasks["plane_order"].to_numpy()
    group_col = tasks["group"].to_numpy()

    # Group threads precede their plane threads in sort order, so a group's rank is its first
    # plane's sort index; groups seen only through ops keep their op order, after those.
    first_plane = pd.Series(plane_order).groupby(group_col).min().to_dict() if len(tasks) else {}
    groups = list(dict.fromkeys([*op_spans, *first_plane]))
    groups = [g for g in groups if g]
    op_rank = {g: i for i, g in enumerate(op_spans)}
    groups.sort(key=lambda g: (first_plane.get(g, np.iinfo("int64").max), op_rank.get(g, len(op_rank))))

    dur = tasks["dur_ns"].to_numpy()
    out: dict[str, GroupTime] = {}
    for g in groups:
        in_group = group_col == g
        waits = Spans.empty()
        if in_group.any():
            per_plane = pd.DataFrame({
                "plane": tasks["plane"].to_numpy()[in_group],
                "order": plane_order[in_group],
                "wait": np.where(counted[in_group], dur[in_group], 0),
            }).groupby("plane", sort=False).agg(order=("order", "min"), wait=("wait", "sum"))
            chosen = per_plane.sort_values(["wait", "order"], kind="stable").index[0]
            waits = _task_spans(tasks, in_group & counted & (tasks["plane"].to_numpy() == chosen))
        out[g] = _group_time(uncovered, waits, op_spans.get(g))
    return out, _pairs(groups, op_spans, uncovered)


def db_groups(profile: Profile, uncovered: Spans) -> tuple[dict[str, GroupTime], dict[tuple[str, str], int]]:
    """Db: groups with counted waits first (in order of their first counted wait), the wait plane
    chosen among planes that have counted waits; then the other groups in op order."""
    tasks = profile.comm_tasks
    op_spans = _op_spans(profile.comm_ops)
    counted = _counted_waits(tasks)
    waits_df = pd.DataFrame({
        "group": tasks["group"].to_numpy()[counted],
        "plane": tasks["plane"].to_numpy()[counted],
        "start": tasks["start_ns"].to_numpy()[counted],
        "row": np.flatnonzero(counted),
        "dur": tasks["dur_ns"].to_numpy()[counted],
    }).sort_values(["start", "row"], kind="stable")

    out: dict[str, GroupTime] = {}
    for g, gw in waits_df.groupby("group", sort=False):
        per_plane = gw.groupby("plane", sort=False)["dur"].sum()
        chosen = per_plane.index[int(np.argmin(per_plane.to_numpy()))]
        rows = gw["row"].to_numpy()[gw["plane"].to_numpy() == chosen]
        mask = np.zeros(len(tasks), dtype=bool)
        mask[rows] = True
        out[str(g)] = _group_time(uncovered, _task_spans(tasks, mask), op_spans.get(str(g)))
    for g, spans in op_spans.items():
        if g not in out:
            out[g] = _group_time(uncovered, Spans.empty(), spans)
    return out, _pairs(list(op_spans), op_spans, uncovered)
