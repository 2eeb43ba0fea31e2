"""Communication groups of the OverallMetrics sheet (spec ``inputs-and-overall.md`` §6.5): each
HCCL group's share of the uncovered communication time, split into waiting (inter-rank
``Notify_Wait``) and transmitting, and the time two groups' communication was uncovered together.

What counts as waiting is defined once, by :func:`wait_spans` (the step explanation splits
exposed communication with the same spans): the counted ``Notify_Wait`` tasks of each
communication op on its *communication plane*, the lowest-numbered plane on which the op has
counted waits. That is the plane whose ``Notify_Wait`` time the profiler's own communication
analysis reports as Wait Time (``communication.json`` of a Text export, ``CommAnalyzerTime`` of
``analysis.db``; equal to the ns on the real torch_npu exports), and it is found the same way in
Text and Db exports, so the two exports of one job tell the same story.

Deliberate differences from the reference (docs/differences.md O5, O15): overlaps of wait tasks /
communication ops with uncovered spans are exact interval intersections (the reference's sweep
double-counts or drops time when the tasks of one list overlap each other); and the reference
picks a group's wait plane by the least total wait, counting in Text the planes without any wait
(plane 0 of every real torch_npu export copies and reduces only, so its Wait is always 0) and in
Db only the planes with waits (a plane that barely waited: 0.00018 ms on the real Db rank 1,
whose ``analysis.db`` reports 3.84 ms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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


def _counted_waits(profile: Profile) -> np.ndarray:
    """Which ``Notify_Wait`` tasks are inter-rank *waits* (bool per ``comm_tasks`` row).

    Per plane, in start order, a Notify_Wait directly after ``RDMASend, RDMASend`` or after
    ``RDMASend, RDMASend, Notify_Wait, RDMASend`` completes an RDMA transfer: it is transmit
    time, not waiting. Vectorised with shifted views of the per-plane task-kind sequence.
    """
    tasks = profile.comm_tasks
    n = len(tasks)
    if n == 0:
        return np.zeros(0, dtype=bool)
    group, _ = profile.codes("comm_tasks", "group")
    plane_code, planes = profile.codes("comm_tasks", "plane")
    plane = pd.factorize(group.astype(np.int64) * max(len(planes), 1) + plane_code)[0]
    code, names = profile.codes("comm_tasks", "name")
    kind = np.where(names == _RDMA_SEND, 1, np.where(names == _NOTIFY_WAIT, 2, 0)).astype("int8")[code]
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


def _wait_plane_rows(profile: Profile, counted: np.ndarray) -> np.ndarray:
    """The counted waits on each op's communication plane (bool per task row): per
    communication op (tasks outside any op: per group), the counted waits of the lowest
    ``plane_order`` that has counted waits."""
    if not counted.any():
        return counted
    tasks = profile.comm_tasks
    op_row = tasks["op_row"].to_numpy()
    # an op is its own key; tasks that no op contains fall back to their group
    group_code = profile.codes("comm_tasks", "group")[0]
    key = np.where(op_row >= 0, op_row, -2 - group_code)
    order = tasks["plane_order"].to_numpy()
    first = pd.Series(order[counted]).groupby(key[counted]).transform("min").to_numpy()
    chosen = np.zeros(len(tasks), dtype=bool)
    chosen[np.flatnonzero(counted)] = order[counted] == first
    return chosen


def _of_group(profile: Profile, rows: np.ndarray) -> Callable[[str], np.ndarray]:
    """``rows`` (a bool mask of comm_tasks) narrowed to one group's tasks, by the group's code."""
    code, groups = profile.codes("comm_tasks", "group")
    number = {g: i for i, g in enumerate(groups.tolist())}
    return lambda g: rows & (code == number.get(g, -1))


def records_waits(profile: Profile) -> bool:
    """Whether the profile's communication tasks name their ``Notify_Wait`` tasks, so that waiting
    can be told from transmitting: not on GPU traces, not without communication tasks, and not on
    a level-0 Db, whose tasks carry only the runtime type (``Notify Wait`` for waits and for the
    handshakes of a transfer alike, on planes it does not name)."""
    return bool((profile.comm_tasks["name"].to_numpy(dtype=object) == _NOTIFY_WAIT).any())


def wait_spans(profile: Profile) -> Spans:
    """Where ``profile`` waited for other ranks: the counted ``Notify_Wait`` tasks on each
    communication op's communication plane (see the module docstring), as one normalised interval
    set in int64 ns (``.start`` / ``.end`` arrays). Not clipped to the uncovered communication:
    callers intersect it with the busy set they split. Empty on GPU traces (NCCL records no
    waits) and on exports without communication tasks."""
    return _task_spans(profile.comm_tasks, _wait_plane_rows(profile, _counted_waits(profile)))


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
    """Text: groups in HCCL thread order (a group thread precedes its plane threads, so a
    group's rank is its first plane's sort index; groups seen only through ops follow, in op
    order); each group's wait is its share of :func:`wait_spans`."""
    tasks = profile.comm_tasks
    op_spans = _op_spans(profile.comm_ops)
    chosen = _of_group(profile, _wait_plane_rows(profile, _counted_waits(profile)))
    plane_order = tasks["plane_order"].to_numpy()
    first_plane: dict[str, int] = {}
    if len(tasks):
        group_code, names = profile.codes("comm_tasks", "group")
        lowest = pd.Series(plane_order).groupby(group_code).min()
        first_plane = dict(zip(names[lowest.index.to_numpy()].tolist(), lowest.tolist()))
    groups = list(dict.fromkeys([*op_spans, *first_plane]))
    groups = [g for g in groups if g]
    op_rank = {g: i for i, g in enumerate(op_spans)}
    groups.sort(key=lambda g: (first_plane.get(g, np.iinfo("int64").max), op_rank.get(g, len(op_rank))))

    out = {g: _group_time(uncovered, _task_spans(tasks, chosen(g)), op_spans.get(g)) for g in groups}
    return out, _pairs(groups, op_spans, uncovered)


def db_groups(profile: Profile, uncovered: Spans) -> tuple[dict[str, GroupTime], dict[tuple[str, str], int]]:
    """Db: groups with counted waits first (in order of their first counted wait), then the
    other groups in op order; each group's wait is its share of :func:`wait_spans`."""
    tasks = profile.comm_tasks
    op_spans = _op_spans(profile.comm_ops)
    counted = _counted_waits(profile)
    chosen = _of_group(profile, _wait_plane_rows(profile, counted))
    group_col = tasks["group"].to_numpy()
    first_wait = pd.DataFrame({
        "group": group_col[counted], "start": tasks["start_ns"].to_numpy()[counted],
        "row": np.flatnonzero(counted),
    }).sort_values(["start", "row"], kind="stable")["group"]

    out: dict[str, GroupTime] = {}
    for g in dict.fromkeys(first_wait.tolist()):
        out[str(g)] = _group_time(uncovered, _task_spans(tasks, chosen(g)), op_spans.get(str(g)))
    for g, spans in op_spans.items():
        if g not in out:
            out[g] = _group_time(uncovered, Spans.empty(), spans)
    return out, _pairs(list(op_spans), op_spans, uncovered)
