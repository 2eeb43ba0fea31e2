"""The device side of an NPU Text export: Ascend Hardware tasks, HCCL communication, the
profiler's Overlap Analysis, and the KERNELS table built from them and ``kernel_details.csv``.

Device tasks are linked to the host ``cpu_op`` that launched them through ``async_npu`` flows
(exact ns joins); kernel_details rows are merged into the tasks they describe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import COMM_OPS, COMM_TASKS, KERNELS, OVERLAP, frame
from .common import assign_step, innermost, thread_key
from .npu_trace import Events, Layout, arg_texts, arg_values, numbers


def hardware_tasks(ev: Events, layout: Layout) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Ascend Hardware ``X`` events as KERNELS rows (file order) with their pid/tid."""
    if layout.hardware_pid is None:
        return frame(KERNELS, n=0), np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64")
    rows = ev.complete(ev.pid == layout.hardware_pid)
    args = ev.args(rows)
    table = frame(KERNELS, {
        "name": ev.name[rows],
        "task_type": arg_texts(args, "Task Type"),
        "stream": numbers(arg_values(args, "Stream Id")),
        "task_id": arg_texts(args, "Task Id"),
        "start_ns": ev.ts_ns[rows],
        "dur_ns": ev.dur_ns[rows],
        "in_trace": np.ones(len(rows), dtype=bool),
    }, n=len(rows))
    return table, ev.pid[rows], ev.tid[rows]


@dataclass
class Comm:
    """The HCCL tables plus what flow linking needs to reach the ops."""

    ops: pd.DataFrame  # COMM_OPS
    tasks: pd.DataFrame  # COMM_TASKS
    op_pid: np.ndarray  # per COMM_OPS row: where its flow ends land
    op_tid: np.ndarray
    op_launch: np.ndarray | None = None  # per COMM_OPS row: launching host op (set by flows)


def _assign_tasks(ops: pd.DataFrame, group: np.ndarray, start: np.ndarray) -> np.ndarray:
    """COMM_OPS row of the op of the task's own group that holds the task's start; -1 if none."""
    out = np.full(len(start), -1, dtype="int64")
    op_groups = ops.groupby("group", sort=False).indices
    for name, tpos in pd.Series(group).groupby(group, sort=False).indices.items():
        rows = op_groups.get(name)
        if rows is None:
            continue
        rows = rows[np.argsort(ops["start_ns"].to_numpy()[rows], kind="stable")]
        op_start = ops["start_ns"].to_numpy()[rows]
        op_end = op_start + ops["dur_ns"].to_numpy()[rows]
        t = start[tpos]
        pos = np.searchsorted(op_start, t, side="right") - 1
        hit = pos >= 0
        hit[hit] = t[hit] <= op_end[pos[hit]]
        out[tpos[hit]] = rows[pos[hit]]
    return out


def communication(ev: Events, layout: Layout) -> Comm:
    """HCCL ``X`` events: group threads → COMM_OPS, plane threads → COMM_TASKS.

    COMM_OPS is ordered by group (thread sort order) then start, so the first appearance of each
    group name gives the group order the OverallMetrics pair rows use (as for Db).
    """
    if layout.hccl_pid is None:
        empty = np.zeros(0, dtype="int64")
        return Comm(frame(COMM_OPS, n=0), frame(COMM_TASKS, n=0), empty, empty)
    rows = ev.complete(ev.pid == layout.hccl_pid)
    tids = ev.tid[rows]
    is_op = np.isin(tids, list(layout.group_threads))
    op_rows, task_rows = rows[is_op], rows[~is_op]

    op_info = [layout.group_threads[t] for t in ev.tid[op_rows].tolist()]
    op_order = np.array([o for _, o in op_info], dtype="int64")
    op_rows = op_rows[np.lexsort((ev.ts_ns[op_rows], op_order))]
    op_group = [layout.group_threads[t][0] for t in ev.tid[op_rows].tolist()]
    ops = frame(COMM_OPS, {
        "name": ev.name[op_rows],
        "op_type": ev.name[op_rows],
        "group": op_group,
        "start_ns": ev.ts_ns[op_rows],
        "dur_ns": ev.dur_ns[op_rows],
    }, n=len(op_rows))

    task_rows = task_rows[np.argsort(ev.ts_ns[task_rows], kind="stable")]
    planes = [layout.plane_threads.get(t, ("", layout.thread_names.get((layout.hccl_pid, t), ""), -1))
              for t in ev.tid[task_rows].tolist()]
    task_group = np.array([p[0] for p in planes], dtype=object)
    task_start = ev.ts_ns[task_rows]
    tasks = frame(COMM_TASKS, {
        "name": ev.name[task_rows],
        "group": task_group,
        "plane": [p[1] for p in planes],
        "plane_order": [p[2] for p in planes],
        "start_ns": task_start,
        "dur_ns": ev.dur_ns[task_rows],
        "op_row": _assign_tasks(ops, task_group, task_start),
    }, n=len(task_rows))
    return Comm(ops, tasks, ev.pid[op_rows], ev.tid[op_rows])


def overlap(ev: Events, layout: Layout, notes: list[str]) -> pd.DataFrame:
    """Overlap Analysis events; the kind is the thread name (Computing, Free …), falling back to
    the event name on an unnamed thread."""
    if layout.overlap_pid is None:
        notes.append("no Overlap Analysis process in trace_view.json: Computing, uncovered "
                     "communication and E2E time are 0")
        return frame(OVERLAP, n=0)
    rows = ev.complete(ev.pid == layout.overlap_pid)
    kinds = [layout.thread_names.get((layout.overlap_pid, t)) or n
             for t, n in zip(ev.tid[rows].tolist(), ev.name[rows].tolist())]
    return frame(OVERLAP, {"kind": kinds, "start_ns": ev.ts_ns[rows], "dur_ns": ev.dur_ns[rows]},
                 n=len(rows))


# ------------------------------------------------------------------------------------------------
# Kernels: flows, kernel_details merge, steps
# ------------------------------------------------------------------------------------------------


def link(targets: pd.DataFrame, flows: pd.DataFrame, ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(flow id, launching op row) per target (device task or HCCL op), -1 where unlinked.

    A flow's ``f`` end sits on the task at the same (pid, tid, ts); its ``s`` end sits on the
    launching ``cpu_op``, found as the innermost op of the ``s`` thread running at the ``s`` ts.
    A target reached by several flows keeps the first one.
    """
    link = np.full(len(targets), -1, dtype="int64")
    op_row = np.full(len(targets), -1, dtype="int64")
    if targets.empty or flows.empty:
        return link, op_row
    keyed = targets.assign(target=np.arange(len(targets))).drop_duplicates(
        ["pid", "tid", "start_ns"], keep="last")
    hits = flows.merge(keyed, left_on=["pid_f", "tid_f", "ts_f"], right_on=["pid", "tid", "start_ns"])
    hits = hits.drop_duplicates("target", keep="first")
    target = hits["target"].to_numpy()
    link[target] = numbers(hits["id"].tolist())
    # The launching op: the innermost one on the flow start's thread running at its time.
    op_row[target] = innermost(thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy()),
                               ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy(),
                               ops["parent"].to_numpy(),
                               thread_key(hits["pid_s"].to_numpy(), hits["tid_s"].to_numpy()),
                               hits["ts_s"].to_numpy(), strict=False)
    return link, op_row


def _merge_details(hw: pd.DataFrame, details: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill trace tasks from kernel_details rows with the same start ns.

    Equal starts are paired in order (k-th csv row ↔ k-th task at that ns), so two tasks that
    start together on different streams each get their own row. Returns the filled tasks and the
    csv rows that matched no task (kept as ``in_trace`` False kernels).
    """
    if details.empty or hw.empty:
        return hw, details
    order = np.argsort(hw["start_ns"].to_numpy(), kind="stable")
    left = pd.DataFrame({"start_ns": hw["start_ns"].to_numpy()[order], "h": order})
    left["k"] = left.groupby("start_ns").cumcount()
    right = pd.DataFrame({"start_ns": details["start_ns"].to_numpy(), "d": np.arange(len(details))})
    right["k"] = right.groupby("start_ns").cumcount()
    pairs = left.merge(right, on=["start_ns", "k"])
    h, d = pairs["h"].to_numpy(), pairs["d"].to_numpy()
    hw = hw.copy()
    fill = ["op_type", "core", "input_shapes", "input_dtypes", "step", "has_details",
            "aicore_us", "mac_us", "mte2_us", "aiv_us", "aiv_vec_us"]
    for col in fill:
        values = hw[col].to_numpy(copy=True)
        values[h] = details[col].to_numpy()[d]
        hw[col] = values
    unmatched = np.ones(len(details), dtype=bool)
    unmatched[d] = False
    return hw, details[unmatched]


def kernels(hw: pd.DataFrame, comm: Comm, details: pd.DataFrame | None, ops: pd.DataFrame,
             steps: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """KERNELS: device tasks (merged with kernel_details), HCCL ops as ``is_comm`` kernels of
    their host op, and kernel_details rows absent from the trace; sorted by start.

    Step: the csv ``Step Id`` when given, else the launching op's step, else the step window
    holding the start (a kernel runs after its host op, possibly past the host step's end).
    """
    comm_kernels = frame(KERNELS, {
        "name": comm.ops["name"],
        "start_ns": comm.ops["start_ns"],
        "dur_ns": comm.ops["dur_ns"],
        "link": comm.ops["link"],
        "op_row": comm.op_launch,
        "is_comm": np.ones(len(comm.ops), dtype=bool),
        "in_trace": np.ones(len(comm.ops), dtype=bool),
    }, n=len(comm.ops))
    extra = frame(KERNELS, n=0)
    if details is not None:
        hw, extra = _merge_details(hw, details)
        lost = int((~extra["is_comm"]).sum())
        if lost and not hw.empty:
            notes.append(f"kernel_details.csv: {lost} of {len(details)} row(s) match no Ascend "
                         "Hardware task start in trace_view.json")
    kernels = pd.concat([hw, comm_kernels, extra], ignore_index=True)
    kernels = kernels.iloc[np.argsort(kernels["start_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    step = kernels["step"].to_numpy(copy=True)
    op_row = kernels["op_row"].to_numpy()
    need = (step < 0) & (op_row >= 0)
    step[need] = ops["step"].to_numpy()[op_row[need]]
    need = step < 0
    step[need] = assign_step(kernels["start_ns"].to_numpy()[need], steps)
    kernels["step"] = step
    return frame(KERNELS, {c: kernels[c] for c in KERNELS})
