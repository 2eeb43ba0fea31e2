"""The device side of an NPU Text export: Ascend Hardware tasks, HCCL communication, the
profiler's Overlap Analysis, and the KERNELS table built from them and ``kernel_details.csv``.

Device tasks are linked to the host ``cpu_op`` that launched them through ``async_npu`` flows
(exact ns joins); kernel_details rows are merged into the tasks they describe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..heap import return_free_memory
from ..model import COMM_OPS, COMM_TASKS, KERNELS, OVERLAP, frame
from ..notes import Note
from ..timeline import innermost, thread_key
from .common import assign_step
from .npu_trace import Events, Layout, numbers


#: The KERNELS columns an Ascend Hardware task has of its own: the others (kernel_details'
#: columns, the PMU times) are absent until :func:`kernels`. A whole KERNELS frame of the ≈ 0.5M
#: tasks of the 32×92 side was ≈ 80 MB, half of it filler, alive through the loader's peaks.
TASK_COLUMNS = ("name", "task_type", "stream", "task_id", "start_ns", "dur_ns", "in_trace")


@dataclass
class Hardware:
    """Ascend Hardware tasks as KERNELS rows (file order) plus where they sit in the trace."""

    tasks: pd.DataFrame  # the KERNELS columns of TASK_COLUMNS (``link``, ``op_row`` set by flows)
    pid: np.ndarray
    tid: np.ndarray
    conn: np.ndarray  # ``connection_id``: the CANN call that issued the task (-1 absent)


def _stream_ids(ev: Events, rows: np.ndarray) -> np.ndarray:
    """Stream of each task: ``Stream Id`` (older exports), else ``Physic Stream Id`` (torch_npu
    2.x exports name it so), else the ``Stream N`` thread the exporter puts the task on."""
    stream = numbers(ev.arg_values(rows, "Stream Id"))
    physical = numbers(ev.arg_values(rows, "Physic Stream Id"))
    stream = np.where(stream >= 0, stream, physical)
    return np.where(stream >= 0, stream, ev.tid[rows])


_TASK_SCHEMA = {c: KERNELS[c] for c in TASK_COLUMNS}
#: The device args only :func:`hardware_tasks` reads (:func:`communication` reads the others).
TASK_ONLY_ARGS = ("Task Type", "Stream Id", "Physic Stream Id", "Task Id")


def hardware_tasks(ev: Events, layout: Layout) -> Hardware:
    """Ascend Hardware ``X`` events as KERNELS rows (file order) with their pid/tid."""
    if layout.hardware_pid is None:
        empty = np.zeros(0, dtype="int64")
        return Hardware(frame(_TASK_SCHEMA, n=0), empty, empty, empty)
    rows = ev.complete(ev.pid == layout.hardware_pid)
    table = frame(_TASK_SCHEMA, {
        "name": ev.name[rows],
        "task_type": ev.arg_texts(rows, "Task Type"),
        "stream": _stream_ids(ev, rows),
        "task_id": numbers(ev.arg_values(rows, "Task Id")),
        "start_ns": ev.ts_ns[rows],
        "dur_ns": ev.dur_ns[rows],
        "in_trace": np.ones(len(rows), dtype=bool),
    }, n=len(rows), owned=True)
    return Hardware(table, ev.pid[rows], ev.tid[rows], numbers(ev.arg_values(rows, "connection_id")))


@dataclass
class Comm:
    """The HCCL tables plus what flow linking needs to reach the ops."""

    ops: pd.DataFrame  # COMM_OPS
    tasks: pd.DataFrame  # COMM_TASKS
    op_pid: np.ndarray  # per COMM_OPS row: where its flow ends land
    op_tid: np.ndarray
    op_conn: np.ndarray  # per COMM_OPS row: ``connection_id``, shared by its Ascend Hardware tasks
    task_stream: np.ndarray  # per COMM_TASKS row: the ``stream id`` its task runs on (-1 absent)
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
        return Comm(frame(COMM_OPS, n=0), frame(COMM_TASKS, n=0), empty, empty, empty, empty)
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
    threads, thread_of = np.unique(ev.tid[task_rows], return_inverse=True)  # a plane per thread
    planes = [layout.plane_threads.get(t, ("", layout.thread_names.get((layout.hccl_pid, t), ""), -1))
              for t in threads.tolist()]
    task_group = np.array([p[0] for p in planes], dtype=object)[thread_of]
    task_start = ev.ts_ns[task_rows]
    tasks = frame(COMM_TASKS, {
        "name": ev.name[task_rows],
        "group": task_group,
        "plane": np.array([p[1] for p in planes], dtype=object)[thread_of],
        "plane_order": np.array([p[2] for p in planes], dtype="int64")[thread_of],
        "start_ns": task_start,
        "dur_ns": ev.dur_ns[task_rows],
        "op_row": _assign_tasks(ops, task_group, task_start),
    }, n=len(task_rows), owned=True)
    return Comm(ops, tasks, ev.pid[op_rows], ev.tid[op_rows],
                numbers(ev.arg_values(op_rows, "connection_id")),
                numbers(ev.arg_values(task_rows, "stream id")))


def overlap(ev: Events, layout: Layout, notes: list[Note]) -> pd.DataFrame:
    """Overlap Analysis events; the kind is the thread name (Computing, Free …), falling back to
    the event name on an unnamed thread."""
    if layout.overlap_pid is None:
        notes.append(Note("no Overlap Analysis process in trace_view.json: Computing, uncovered "
                          "communication and E2E time are 0"))
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


def collective_tasks(hw: Hardware, comm: Comm) -> np.ndarray:
    """Which Ascend Hardware tasks belong to a collective (bool per task).

    The exporter lists every HCCL task twice: on its plane thread of the ``HCCL`` process and, as
    the device executed it, on an ``Ascend Hardware`` stream (Notify Wait, Write Value, SDMA …).
    The hardware copy shares the HCCL op's ``connection_id``; older exports without it are
    recognised by a plane task with the same start on the same stream. These tasks carry no
    ``async_npu`` flow: the collective is linked to its host op through the HCCL op row.
    """
    t = hw.tasks
    member = (hw.conn >= 0) & np.isin(hw.conn, comm.op_conn[comm.op_conn >= 0])
    if len(comm.tasks):
        plane = pd.MultiIndex.from_arrays([comm.tasks["start_ns"].to_numpy(), comm.task_stream])
        keys = pd.MultiIndex.from_arrays([t["start_ns"].to_numpy(), t["stream"].to_numpy()])
        member |= keys.isin(plane) & (t["stream"].to_numpy() >= 0)
    return member


def share_launches(link: np.ndarray, op_row: np.ndarray, conn: np.ndarray,
                   collective: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tasks' ``link`` and ``op_row`` where a task without a flow takes those of a task of its
    launch (the arrays given, unchanged, where no task needs it).

    torch_npu draws one ``async_npu`` flow per launch, to one of its tasks; a launch that runs two
    tasks leaves the second without a flow (real export: ``aclopCompileAndExecute`` issuing two
    ``PCIE_DMA_SQE`` copies, one of them flowed). Every task of a launch carries the launch's
    ``connection_id`` (the CANN call), so the flowless one is linked through a flowed task with
    the same id. Collective tasks share their HCCL op's id and stay off host ops.
    """
    known = (conn >= 0) & ~collective
    flowed = known & (link >= 0)
    need = np.flatnonzero(known & (link < 0))
    if not flowed.any() or not len(need):
        return link, op_row
    link, op_row = link.copy(), op_row.copy()
    first = pd.DataFrame({"conn": conn[flowed], "link": link[flowed], "op_row": op_row[flowed]})
    first = first.drop_duplicates("conn", keep="first")
    pos = pd.Index(first["conn"].to_numpy()).get_indexer(conn[need])
    hit = pos >= 0
    link[need[hit]] = first["link"].to_numpy()[pos[hit]]
    op_row[need[hit]] = first["op_row"].to_numpy()[pos[hit]]
    return link, op_row


#: kernel_details columns copied onto the trace row a csv row describes.
_DETAIL_COLUMNS = ("op_type", "core", "input_shapes", "input_dtypes", "step", "has_details",
                   "aicore_us", "mac_us", "mte2_us", "aiv_us", "aiv_vec_us")

#: An HCCL kernel_details row and its HCCL op are the same collective; their starts differ by
#: rounding only (real torch_npu export: csv ``…241.563`` for the op at ``…241.564``). Op names
#: are unique per call (``hcom_allReduce__586_0_1``), so a wide window cannot pick a wrong one.
COLLECTIVE_START_TOLERANCE_NS = 1_000


def _pair_tasks(hw: pd.DataFrame, candidates: np.ndarray, details: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(task row, csv row) pairs of compute rows: same start ns and same name, the k-th csv row
    of a (start, name) with the k-th task of it.

    The start alone is not a key: a collective's first HCCL task on its own stream starts at the
    same ns as the kernel_details row of the collective (and as kernels of other streams), so a
    start-only join gave an ``hcom_allReduce_`` row a 0.6 µs SDMA task (issue 12, defect 3)."""
    start = hw["start_ns"].to_numpy()
    # Only tasks starting when some csv row starts can pair: every task of a (start, name) is
    # kept or none, so each keeps its k (≈ 0.5M tasks hashed by name for 0.15M csv rows before).
    rows = np.flatnonzero(candidates & np.isin(start, details["start_ns"].to_numpy()))
    left = pd.DataFrame({"start_ns": start[rows], "name": hw["name"].to_numpy()[rows],
                         "h": rows})
    right = pd.DataFrame({"start_ns": details["start_ns"].to_numpy(), "name": details["name"].to_numpy(),
                          "d": np.arange(len(details))})
    for side in (left, right):
        side["k"] = side.groupby(["start_ns", "name"], sort=False).cumcount()
    pairs = left.merge(right, on=["start_ns", "name", "k"])
    return pairs["h"].to_numpy(), pairs["d"].to_numpy()


def _pair_collectives(ops: pd.DataFrame, details: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(HCCL op row, csv row) pairs: same name, nearest start within the tolerance."""
    if ops.empty or details.empty:
        empty = np.zeros(0, dtype="int64")
        return empty, empty
    left = pd.DataFrame({"start_ns": details["start_ns"].to_numpy(), "name": details["name"].to_numpy(),
                         "d": np.arange(len(details))}).sort_values("start_ns", kind="stable")
    right = pd.DataFrame({"start_ns": ops["start_ns"].to_numpy(), "name": ops["name"].to_numpy(),
                          "h": np.arange(len(ops))}).sort_values("start_ns", kind="stable")
    pairs = pd.merge_asof(left, right, on="start_ns", by="name", direction="nearest",
                          tolerance=COLLECTIVE_START_TOLERANCE_NS).dropna(subset=["h"])
    pairs = pairs.drop_duplicates("h", keep="first")
    return pairs["h"].to_numpy(dtype="int64"), pairs["d"].to_numpy(dtype="int64")


@dataclass
class _Fill:
    """kernel_details rows ``d`` of ``details`` describing rows ``t`` of a part of KERNELS."""

    t: np.ndarray
    details: pd.DataFrame
    d: np.ndarray

    def column(self, values: np.ndarray, col: str) -> np.ndarray:
        """``values`` (the part's column ``col``) with the csv rows' values copied in."""
        if col not in _DETAIL_COLUMNS:
            return values
        values = values.copy()
        values[self.t] = self.details[col].to_numpy()[self.d]
        return values


def _merge_details(hw: pd.DataFrame, is_collective: np.ndarray, collectives: pd.DataFrame,
                   details: pd.DataFrame, notes: list[Note]) -> tuple[_Fill, _Fill, pd.DataFrame]:
    """Which trace rows the kernel_details rows describe.

    Compute rows describe an Ascend Hardware task with the same start and name (collective tasks
    excluded); HCCL rows (``Accelerator Core`` HCCL) describe the HCCL op of the same name. Returns
    the fills of the tasks and of the collectives, and the csv rows that matched nothing (kept as
    ``in_trace`` False kernels, with a note).
    """
    is_hccl = details["is_comm"].to_numpy()
    compute, hccl = details[~is_hccl].reset_index(drop=True), details[is_hccl].reset_index(drop=True)
    h, d = _pair_tasks(hw, ~is_collective, compute)
    c, e = _pair_collectives(collectives, hccl)
    lost_compute = np.ones(len(compute), dtype=bool)
    lost_compute[d] = False
    lost_hccl = np.ones(len(hccl), dtype=bool)
    lost_hccl[e] = False
    if lost_compute.any() and not hw.empty:
        notes.append(Note(f"kernel_details.csv: {int(lost_compute.sum())} of {len(details)} row(s) match no "
                          "Ascend Hardware task in trace_view.json (same start and name)"))
    if lost_hccl.any() and not collectives.empty:
        notes.append(Note(f"kernel_details.csv: {int(lost_hccl.sum())} HCCL row(s) match no HCCL op in "
                          f"trace_view.json (same name, start within {COLLECTIVE_START_TOLERANCE_NS // 1000} µs)"))
    return (_Fill(h, compute, d), _Fill(c, hccl, e),
            pd.concat([compute[lost_compute], hccl[lost_hccl]], ignore_index=True))


def _part_column(part: dict[str, np.ndarray] | pd.DataFrame, col: str, n: int) -> np.ndarray:
    """Column ``col`` of a part of KERNELS (``n`` rows), absent values where it has none."""
    if col in part:
        return np.asarray(part[col])
    return frame({col: KERNELS[col]}, n=n)[col].to_numpy()


def kernels(hw: Hardware, comm: Comm, details: pd.DataFrame | None, ops: pd.DataFrame,
            steps: pd.DataFrame, notes: list[Note]) -> pd.DataFrame:
    """KERNELS (``hw.tasks`` is taken, left empty): device tasks (merged with kernel_details, flowless tasks of a launch linked like
    its flowed one), HCCL ops as ``is_comm`` kernels of their host op, and kernel_details rows
    absent from the trace; sorted by start.

    A collective is one HCCL op row (``is_comm``, no task type, linked to its host op); its tasks
    on the HCCL stream are ``is_comm`` rows too, never linked to a host op, so an op's device
    time counts the collective once (the Db loader does the same).

    Step: the csv ``Step Id`` when given, else the launching op's step, else the step window
    holding the start (a kernel runs after its host op, possibly past the host step's end).
    """
    collective = collective_tasks(hw, comm)
    # hw's tasks are taken: each of their columns goes as soon as KERNELS' own is made.
    t, hw.tasks = hw.tasks, hw.tasks.iloc[:0]
    link, op_row = share_launches(t["link"].to_numpy(), t["op_row"].to_numpy(), hw.conn, collective)
    tasks = {**{c: t[c].to_numpy() for c in TASK_COLUMNS}, "link": link, "op_row": op_row,
             "is_comm": collective}
    collectives = frame(KERNELS, {
        "name": comm.ops["name"],
        "start_ns": comm.ops["start_ns"],
        "dur_ns": comm.ops["dur_ns"],
        "link": comm.ops["link"],
        "op_row": comm.op_launch,
        "is_comm": np.ones(len(comm.ops), dtype=bool),
        "in_trace": np.ones(len(comm.ops), dtype=bool),
    }, n=len(comm.ops))
    parts: list[dict[str, np.ndarray] | pd.DataFrame] = [tasks, collectives, frame(KERNELS, n=0)]
    fills: list[_Fill | None] = [None, None, None]
    if details is not None and len(details):
        fills[0], fills[1], parts[2] = _merge_details(t, collective, collectives, details, notes)
    del t
    # Column by column (the parts joined, filled from the csv and sorted by start), never a whole
    # table copied: on the 32×92 side each copy of the ≈ 0.5M rows was ≈ 75 MB at the load's peak.
    sizes = [len(p["start_ns"]) for p in parts]
    order = np.argsort(np.concatenate([np.asarray(p["start_ns"]) for p in parts]), kind="stable")
    return_free_memory()  # the pairing's and the collective test's hash tables, before the columns
    columns: dict[str, np.ndarray] = {}
    for col in KERNELS:
        values = [_part_column(p, col, n) for p, n in zip(parts, sizes)]
        values = [v if f is None else f.column(v, col) for v, f in zip(values, fills)]
        columns[col] = np.concatenate(values)[order]
        del values
        tasks.pop(col, None)
    step, op_row = columns["step"], columns["op_row"]
    need = (step < 0) & (op_row >= 0)
    step[need] = ops["step"].to_numpy()[op_row[need]]
    need = step < 0
    step[need] = assign_step(columns["start_ns"][need], steps)
    return frame(KERNELS, columns, n=len(order), owned=True)
