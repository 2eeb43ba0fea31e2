"""Load an Ascend NPU Text export (torch_npu ``*_ascend_pt`` and MindSpore ``*_ascend_ms``).

``trace_view.json`` is the timeline: host ``cpu_op`` events, device tasks (``Ascend Hardware``
process), HCCL communication (``HCCL`` / ``Communication`` process), the profiler's own
``Overlap Analysis`` and the flows linking them. The CSV/JSON side files (read in
:mod:`.npu_files`) add PMU details, memory and bandwidth. Everything lands in the one
:class:`~perfcmp_core.model.Profile` model.

The trace is parsed once with orjson into per-field columns; every later step (process mapping,
nesting, flow joins, task→op assignment, kernel_details merge) works on those columns. Times stay
exact integer ns: the exporter writes ``ts`` as a µs *string* with ns digits, and the flow and
kernel_details joins are exact matches on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
from ..model import (
    COMM_OPS,
    COMM_TASKS,
    FWDBWD,
    KERNELS,
    OPS,
    OVERLAP,
    PYFUNCS,
    QUEUE,
    Profile,
    ProfileMeta,
    frame,
)
from ..options import LoadOptions
from ..timeline import innermost, nest, thread_groups, thread_key
from . import npu_files
from .common import assign_step, float_us_to_ns, is_step_name, steps_from_ops
from .detect import Source

HARDWARE = "Ascend Hardware"
HCCL_PROCESSES = ("HCCL", "Communication")
OVERLAP_PROCESS = "Overlap Analysis"
FLOW_CAT = "async_npu"


# ------------------------------------------------------------------------------------------------
# Raw events → columns
# ------------------------------------------------------------------------------------------------


def _read_events(path: Path) -> list[dict]:
    """The trace's event objects; anything that is not a JSON array of objects is an InputError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc}); is the file truncated?") from None
    if not isinstance(data, list):
        raise InputError(path, "is not an NPU trace_view.json (expected a JSON array of events)")
    return [e for e in data if isinstance(e, dict)]


def _str(value: object) -> str:
    """Text form of an event field or arg: "" for absent, raw strings, ``str()`` otherwise."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _values(args: list[dict], key: str) -> list:
    return [a.get(key) for a in args]


def _texts(args: list[dict], key: str) -> list[str]:
    return [_str(a.get(key)) for a in args]


def _fast_array(values: list, dtype: str) -> np.ndarray | None:
    """``np.array(values, dtype)`` when every value is a plain scalar of that kind, else None."""
    try:
        arr = np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    return arr if arr.shape == (len(values),) else None  # nested lists would add dimensions


def _numbers(values: list) -> np.ndarray:
    """int64 of JSON numbers / numeric strings; anything else → -1."""
    arr = _fast_array(values, "int64")
    if arr is not None:
        return arr
    s = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    return s.where(s.abs() < 2**63, np.nan).fillna(-1).to_numpy().astype("int64")


def _floats(values: list) -> np.ndarray:
    """float64 of JSON numbers / numeric strings; anything else → NaN."""
    arr = _fast_array(values, "float64")
    if arr is not None:
        return arr
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype="float64")


@dataclass
class _Events:
    """Columnar view of the trace (one row per event, file order) plus the raw dicts for args."""

    raw: list[dict]
    ph: np.ndarray
    cat: np.ndarray  # lower-cased
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    is_complete: np.ndarray  # an X event with a valid ts
    bad_dur: int  # complete events whose dur is missing, not a number or negative (read as 0)

    @classmethod
    def parse(cls, events: list[dict]) -> _Events:
        def col(key: str) -> list:
            return [e.get(key) for e in events]

        def text(key: str) -> np.ndarray:
            return np.array([v if type(v) is str else _str(v) for v in col(key)], dtype=object)

        ph = text("ph")
        ts_ns = npu_files.us_text_to_ns(col("ts"))
        dur_ns = float_us_to_ns(_floats(col("dur")))
        is_complete = (ph == "X") & (ts_ns >= 0)
        return cls(
            raw=events,
            ph=ph,
            cat=np.array([v.lower() if type(v) is str else _str(v).lower() for v in col("cat")], dtype=object),
            name=text("name"),
            pid=_numbers(col("pid")),
            tid=_numbers(col("tid")),
            ts_ns=ts_ns,
            dur_ns=np.maximum(dur_ns, 0),
            is_complete=is_complete,
            bad_dur=int((is_complete & (dur_ns < 0)).sum()),
        )

    def flow_ids(self, rows: np.ndarray) -> np.ndarray:
        """``id`` of the given rows as text (flow ends pair on it; ints and strings both occur)."""
        raw = self.raw
        return np.array([_str(raw[i].get("id")) for i in rows.tolist()], dtype=object)

    def args(self, rows: np.ndarray) -> list[dict]:
        """The ``args`` objects of the given rows ({} where absent or not an object)."""
        raw = self.raw
        return [a if isinstance(a, dict) else {} for a in (raw[i].get("args") for i in rows.tolist())]

    def complete(self, mask: np.ndarray) -> np.ndarray:
        """Rows of ``X`` events with a valid start that also satisfy ``mask``."""
        return np.flatnonzero(mask & self.is_complete)


# ------------------------------------------------------------------------------------------------
# Process / thread metadata
# ------------------------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Which pid plays which role, and the HCCL thread layout (spec inputs §4.1, §4.3)."""

    hardware_pid: int | None = None
    hccl_pid: int | None = None
    overlap_pid: int | None = None
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    group_threads: dict[int, tuple[str, int]] = field(default_factory=dict)  # tid → (name, order)
    plane_threads: dict[int, tuple[str, str, int]] = field(default_factory=dict)  # tid → (group, plane, sort)


def _sort_index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _layout(ev: _Events, notes: list[str]) -> _Layout:
    """Map pids by ``process_name`` (last match wins, as in the reference) and walk the HCCL
    threads in ``thread_sort_index`` order: a thread whose name contains ``Communication`` opens
    a group, every later named thread is a plane of it."""
    out = _Layout()
    sort_index: dict[tuple[int, int], int] = {}
    rows = np.flatnonzero(ev.ph == "M")
    args = ev.args(rows)
    names, indexes = _texts(args, "name"), _values(args, "sort_index")
    for i, arg_name, idx in zip(rows.tolist(), names, indexes):
        kind, pid, tid = ev.name[i], int(ev.pid[i]), int(ev.tid[i])
        if kind == "process_name":
            if arg_name == HARDWARE:
                out.hardware_pid = pid
            elif arg_name in HCCL_PROCESSES:
                out.hccl_pid = pid
            elif arg_name == OVERLAP_PROCESS:
                out.overlap_pid = pid
        elif kind == "thread_name":
            out.thread_names[(pid, tid)] = arg_name
        elif kind == "thread_sort_index" and _sort_index(idx) is not None:
            sort_index[(pid, tid)] = int(idx)
    if out.hccl_pid is None:
        return out
    hccl = out.hccl_pid
    threads = [(sort_index[k], k[1]) for k in sort_index if k[0] == hccl]
    group, order = "", 0
    for sort, tid in sorted(threads):
        name = out.thread_names.get((hccl, tid), "")
        if "Communication" in name:
            out.group_threads[tid] = (name, order)
            group, order = name, order + 1
        elif name:
            out.plane_threads[tid] = (group, name, sort)
    unsorted = sorted(t for (p, t), n in out.thread_names.items()
                      if p == hccl and "Communication" in n and t not in out.group_threads)
    for tid in unsorted:
        out.group_threads[tid] = (out.thread_names[(hccl, tid)], len(out.group_threads))
    if unsorted:
        notes.append(f"{len(unsorted)} HCCL group thread(s) have no thread_sort_index: their "
                     "planes are unknown, so their Wait time is 0")
    return out


# ------------------------------------------------------------------------------------------------
# Host side: ops, steps, python functions, flows, queue
# ------------------------------------------------------------------------------------------------


def _order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row order by start, longer first at equal starts (enclosing ops before their children)."""
    return np.lexsort((-end, start))


def _ops(ev: _Events) -> pd.DataFrame:
    """``cpu_op`` events → OPS (nested per thread), with ``ProfilerStep#N`` markers flagged."""
    rows = ev.complete(ev.cat == "cpu_op")
    start = ev.ts_ns[rows]
    rows = rows[_order(start, start + ev.dur_ns[rows])]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    parent, depth = nest(thread_groups(ev.pid[rows], ev.tid[rows]), start, end)
    names = pd.Series(ev.name[rows], dtype=object)
    args = ev.args(rows)
    return frame(OPS, {
        "name": names,
        "cat": np.full(len(rows), "cpu_op", dtype=object),
        "pid": ev.pid[rows],
        "tid": ev.tid[rows],
        "start_ns": start,
        "end_ns": end,
        "input_dims": _texts(args, "Input Dims"),
        "input_types": _texts(args, "Input type"),
        "call_stack": _texts(args, "Call stack"),
        "parent": parent,
        "depth": depth,
        "is_step": is_step_name(names.astype(str)) if len(rows) else np.zeros(0, dtype=bool),
    }, n=len(rows))


def _pyfuncs(ev: _Events) -> pd.DataFrame:
    rows = ev.complete(ev.cat == "python_function")
    start = ev.ts_ns[rows]
    rows = rows[_order(start, start + ev.dur_ns[rows])]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    parent, depth = nest(thread_groups(ev.pid[rows], ev.tid[rows]), start, end)
    names = ev.name[rows]
    return frame(PYFUNCS, {
        "name": names,
        "pid": ev.pid[rows],
        "tid": ev.tid[rows],
        "start_ns": start,
        "end_ns": end,
        "is_module": np.array([n.lower().startswith("nn.module:") for n in names], dtype=bool),
        "parent": parent,
        "depth": depth,
    }, n=len(rows))


def _flow_pairs(ev: _Events, cat: str) -> pd.DataFrame:
    """Complete ``s``→``f`` pairs of one flow category, ordered by the ``s`` event's file position.

    A repeated id keeps its last ``s`` and last ``f`` (the reference's dict overwrite).
    """
    def side(ph: str) -> pd.DataFrame:
        rows = np.flatnonzero((ev.cat == cat) & (ev.ph == ph) & (ev.ts_ns >= 0))
        return pd.DataFrame({"id": ev.flow_ids(rows), "row": rows, "pid": ev.pid[rows],
                             "tid": ev.tid[rows], "ts": ev.ts_ns[rows]}).drop_duplicates("id", keep="last")

    pairs = side("s").merge(side("f"), on="id", suffixes=("_s", "_f"))
    return pairs.sort_values("row_s", kind="stable").reset_index(drop=True)


def _fwdbwd(ev: _Events) -> tuple[pd.DataFrame, int]:
    """FWDBWD pairs and the backward thread id (tid of the first ``fwdbwd`` flow end)."""
    pairs = _flow_pairs(ev, "fwdbwd")
    ends = np.flatnonzero((ev.cat == "fwdbwd") & (ev.ph == "f"))
    backward_tid = int(ev.tid[ends[0]]) if len(ends) else -1
    table = frame(FWDBWD, {
        "id": _numbers(pairs["id"].tolist()),
        "start_ts_ns": pairs["ts_s"],
        "start_tid": pairs["tid_s"],
        "end_ts_ns": pairs["ts_f"],
        "end_pid": pairs["pid_f"],
        "end_tid": pairs["tid_f"],
    }, n=len(pairs))
    return table, backward_tid


def _queue(ev: _Events) -> pd.DataFrame:
    rows = ev.complete(np.isin(ev.cat, ["enqueue", "dequeue"]))
    return frame(QUEUE, {
        "kind": ev.cat[rows],
        "correlation": _numbers(_values(ev.args(rows), "correlation_id")),
        "start_ns": ev.ts_ns[rows],
        "end_ns": ev.ts_ns[rows] + ev.dur_ns[rows],
    }, n=len(rows))


# ------------------------------------------------------------------------------------------------
# Device side: tasks, communication, overlap
# ------------------------------------------------------------------------------------------------


def _hardware_tasks(ev: _Events, layout: _Layout) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Ascend Hardware ``X`` events as KERNELS rows (file order) with their pid/tid."""
    if layout.hardware_pid is None:
        return frame(KERNELS, n=0), np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64")
    rows = ev.complete(ev.pid == layout.hardware_pid)
    args = ev.args(rows)
    table = frame(KERNELS, {
        "name": ev.name[rows],
        "task_type": _texts(args, "Task Type"),
        "stream": _numbers(_values(args, "Stream Id")),
        "task_id": _texts(args, "Task Id"),
        "start_ns": ev.ts_ns[rows],
        "dur_ns": ev.dur_ns[rows],
        "in_trace": np.ones(len(rows), dtype=bool),
    }, n=len(rows))
    return table, ev.pid[rows], ev.tid[rows]


@dataclass
class _Comm:
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


def _communication(ev: _Events, layout: _Layout) -> _Comm:
    """HCCL ``X`` events: group threads → COMM_OPS, plane threads → COMM_TASKS.

    COMM_OPS is ordered by group (thread sort order) then start, so the first appearance of each
    group name gives the group order the OverallMetrics pair rows use (as for Db).
    """
    if layout.hccl_pid is None:
        empty = np.zeros(0, dtype="int64")
        return _Comm(frame(COMM_OPS, n=0), frame(COMM_TASKS, n=0), empty, empty)
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
    return _Comm(ops, tasks, ev.pid[op_rows], ev.tid[op_rows])


def _overlap(ev: _Events, layout: _Layout, notes: list[str]) -> pd.DataFrame:
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


def _link(targets: pd.DataFrame, flows: pd.DataFrame, ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
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
    link[target] = _numbers(hits["id"].tolist())
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


def _kernels(hw: pd.DataFrame, comm: _Comm, details: pd.DataFrame | None, ops: pd.DataFrame,
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


# ------------------------------------------------------------------------------------------------
# Entry point
# ------------------------------------------------------------------------------------------------


@dataclass
class _SideFiles:
    """What the side files contributed (None: the file was not read)."""

    details: npu_files.KernelDetails | None = None
    op_statistic: pd.DataFrame | None = None
    memory: pd.DataFrame | None = None
    op_memory: pd.DataFrame | None = None
    bandwidth: tuple[float, float] = (0.0, 0.0)
    info: npu_files.ProfilerInfo = field(default_factory=npu_files.ProfilerInfo)
    group_names: dict[str, str] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)


def _side_files(src: Source, opts: LoadOptions, queue: pd.DataFrame, notes: list[str]) -> _SideFiles:
    """Read the side files detect found. At trace level only profiler_metadata.json is read (the
    user asked for the bare trace; group names are harmless labels)."""
    out = _SideFiles()
    files = src.files
    roles = ("profiler_metadata",) if src.level == "trace" else tuple(files)
    for role in roles:
        path = files.get(role)
        if path is None or (role == "operator_memory" and not opts.load_memory):
            continue
        out.used.append(str(path))
        if role == "kernel_details":
            out.details = npu_files.read_kernel_details(path, notes)
        elif role == "op_statistic":
            out.op_statistic = npu_files.read_op_statistic(path, notes)
        elif role == "memory_record":
            out.memory = npu_files.read_memory_record(path, notes)
        elif role == "operator_memory":
            out.op_memory = npu_files.read_operator_memory(path, queue, notes)
        elif role == "communication":
            out.bandwidth = npu_files.read_bandwidth(path, notes)
        elif role == "profiler_info":
            out.info = npu_files.read_profiler_info(path, notes)
        elif role == "profiler_metadata":
            out.group_names = npu_files.read_group_names(path, notes)
    return out


def load_npu_text(src: Source, opts: LoadOptions) -> Profile:
    """Read an NPU Text export found by :func:`~perfcmp_core.load.detect.detect`."""
    assert src.trace is not None
    notes = list(src.notes)
    ev = _Events.parse(_read_events(src.trace))  # the collector is paused by the caller
    if ev.bad_dur:
        notes.append(f"{src.trace.name}: {ev.bad_dur} event(s) with a missing, non-numeric or "
                     "negative dur are counted as 0 µs")
    layout = _layout(ev, notes)
    if layout.hardware_pid is None:
        notes.append("no Ascend Hardware process in trace_view.json: no device tasks")

    ops = _ops(ev)
    steps = steps_from_ops(ops["name"], ops["start_ns"], ops["end_ns"])
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    queue = _queue(ev)
    fwdbwd, backward_tid = _fwdbwd(ev)
    overlap = _overlap(ev, layout, notes)

    hw, hw_pid, hw_tid = _hardware_tasks(ev, layout)
    comm = _communication(ev, layout)
    targets = pd.DataFrame({
        "pid": np.concatenate([hw_pid, comm.op_pid]),
        "tid": np.concatenate([hw_tid, comm.op_tid]),
        "start_ns": np.concatenate([hw["start_ns"].to_numpy(), comm.ops["start_ns"].to_numpy()]),
    })
    link, op_row = _link(targets, _flow_pairs(ev, FLOW_CAT), ops)
    n_hw = len(hw)
    hw["link"], hw["op_row"] = link[:n_hw], op_row[:n_hw]
    comm.ops["link"], comm.op_launch = link[n_hw:], op_row[n_hw:]
    comm.ops["step"] = assign_step(comm.ops["start_ns"].to_numpy(), steps)
    comm.tasks["step"] = assign_step(comm.tasks["start_ns"].to_numpy(), steps)

    side = _side_files(src, opts, queue, notes)
    kernels = _kernels(hw, comm, side.details.kernels if side.details else None, ops, steps, notes)

    info = side.info
    meta = ProfileMeta(
        kind="npu_text",
        source=src.given,
        framework=src.framework,
        export="text",
        level=src.level,
        rank=info.rank if info.rank is not None else src.rank,
        device=info.device,
        files_used=[str(src.trace), *side.used],
        files_missing=list(src.missing),
        notes=notes,
        with_stack=info.with_stack,
        profile_memory=info.profile_memory,
        record_shapes=info.record_shapes,
        profiler_level=info.level,
        backward_tid=backward_tid,
        has_pmu=bool(side.details and side.details.has_pmu),
        group_names=side.group_names,
        rdma_bandwidth_gbps=side.bandwidth[0],
        sdma_bandwidth_gbps=side.bandwidth[1],
    )
    profile = Profile(meta=meta, kernels=kernels, ops=ops, pyfuncs=_pyfuncs(ev), fwdbwd=fwdbwd,
                      comm_ops=comm.ops, comm_tasks=comm.tasks, overlap=overlap, queue=queue,
                      steps=steps)
    for name, table in (("memory", side.memory), ("op_memory", side.op_memory),
                        ("op_statistic", side.op_statistic)):
        if table is not None:
            setattr(profile, name, table)
    return profile
