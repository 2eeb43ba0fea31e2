"""Load an Ascend NPU Text export (torch_npu ``*_ascend_pt`` and MindSpore ``*_ascend_ms``).

``trace_view.json`` is the timeline: host ``cpu_op`` events, device tasks (``Ascend Hardware``
process), HCCL communication (``HCCL`` / ``Communication`` process), the profiler's own
``Overlap Analysis`` and the flows linking them. The CSV/JSON side files (read in
:mod:`.npu_files`) add PMU details, memory and bandwidth. Everything lands in the one
:class:`~perfcmp_core.model.Profile` model.

The trace is parsed once into columns (:mod:`.npu_trace`); this module builds the host side (ops,
python frames, flows, the task queue) and puts the profile together; :mod:`.npu_device` builds the
device side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compat import as_text, one_text
from ..heap import return_free_memory
from ..model import FWDBWD, OPS, PYFUNCS, QUEUE, SYNC_CALL, SYNCS, Profile, ProfileMeta, frame
from ..notes import Note
from ..options import LoadOptions
from ..timeline import interval_order, nest, thread_ids
from . import npu_decode, npu_device, npu_files
from .common import assign_step, is_module_name, is_step_name, steps_of_ops
from .detect import Source
from .npu_trace import Events, Layout, numbers, read_layout, read_trace
from .variants import text_variants

FLOW_CAT = "async_npu"


# ------------------------------------------------------------------------------------------------
# Host side: ops, steps, python functions, flows, queue
# ------------------------------------------------------------------------------------------------


def _ops(ev: Events) -> pd.DataFrame:
    """``cpu_op`` events → OPS (nested per thread), with ``ProfilerStep#N`` markers flagged."""
    rows = ev.complete(ev.is_cat("cpu_op"))
    start = ev.ts_ns[rows]
    rows = rows[interval_order(start, start + ev.dur_ns[rows])]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    parent, depth = nest(thread_ids(ev.pid[rows], ev.tid[rows]), start, end)
    return_free_memory()  # nesting's window tables (≈ 80 MB on the 32×92 side's 0.5M ops)
    names = pd.Series(ev.name[rows], dtype=object)
    return frame(OPS, {
        "name": names,
        "cat": np.full(len(rows), one_text("cpu_op")),
        "pid": ev.pid[rows],
        "tid": ev.tid[rows],
        "start_ns": start,
        "end_ns": end,
        "input_dims": ev.arg_texts(rows, "Input Dims"),
        "input_types": ev.arg_texts(rows, "Input type"),
        "call_stack": ev.arg_texts(rows, "Call stack"),
        "parent": parent,
        "depth": depth,
        "is_step": is_step_name(as_text(names)) if len(rows) else np.zeros(0, dtype=bool),
    }, n=len(rows), owned=True)


def _syncs(ev: Events, layout: Layout, ops: pd.DataFrame) -> pd.DataFrame:
    """The CANN process's synchronisation calls → SYNCS. The CANN process has a pid of its own
    and the calling thread's OS id as tid, so each call takes the pid of the ops on that thread
    (the explanation joins calls and ops by thread)."""
    if layout.cann_pid is None:
        return frame(SYNCS, n=0)
    rows = ev.complete(ev.pid == layout.cann_pid)
    codes, uniq = pd.factorize(ev.name[rows])
    keep = pd.Series(uniq, dtype=object).str.match(SYNC_CALL).to_numpy(dtype=bool)[codes]
    rows, codes = rows[keep], codes[keep]
    tid = ev.tid[rows]
    op_pid = ops.drop_duplicates("tid").set_index("tid")["pid"]
    pid = op_pid.reindex(tid).fillna(layout.cann_pid).to_numpy(dtype="int64")
    start = ev.ts_ns[rows]
    names = pd.Series(uniq, dtype=object).str.removeprefix("AscendCL@").to_numpy(dtype=object)[codes]
    return frame(SYNCS, {"name": names,
                         "pid": pid, "tid": tid, "start_ns": start, "end_ns": start + ev.dur_ns[rows]},
                 n=len(rows))


def _pyfuncs(ev: Events) -> pd.DataFrame:
    rows = ev.complete(ev.is_cat("python_function"))
    start = ev.ts_ns[rows]
    rows = rows[interval_order(start, start + ev.dur_ns[rows])]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    parent, depth = nest(thread_ids(ev.pid[rows], ev.tid[rows]), start, end)
    names = ev.name[rows]
    return frame(PYFUNCS, {
        "name": names,
        "pid": ev.pid[rows],
        "tid": ev.tid[rows],
        "start_ns": start,
        "end_ns": end,
        "is_module": is_module_name(names),
        "parent": parent,
        "depth": depth,
    }, n=len(rows), owned=True)


def _flow_pairs(ev: Events, cat: str) -> pd.DataFrame:
    """Complete ``s``→``f`` pairs of one flow category, ordered by the ``s`` event's file position.

    A repeated id keeps its last ``s`` and last ``f`` (the reference's dict overwrite).
    """
    def side(ph: str) -> pd.DataFrame:
        rows = np.flatnonzero(ev.is_cat(cat) & ev.is_ph(ph) & (ev.ts_ns >= 0))
        return pd.DataFrame({"id": ev.flow_ids(rows), "row": rows, "pid": ev.pid[rows],
                             "tid": ev.tid[rows], "ts": ev.ts_ns[rows]}).drop_duplicates("id", keep="last")

    pairs = side("s").merge(side("f"), on="id", suffixes=("_s", "_f"))
    return pairs.sort_values("row_s", kind="stable").reset_index(drop=True)


def _fwdbwd(ev: Events) -> tuple[pd.DataFrame, int]:
    """FWDBWD pairs and the backward thread id (tid of the first ``fwdbwd`` flow end)."""
    pairs = _flow_pairs(ev, "fwdbwd")
    ends = np.flatnonzero(ev.is_cat("fwdbwd") & ev.is_ph("f"))
    backward_tid = int(ev.tid[ends[0]]) if len(ends) else -1
    table = frame(FWDBWD, {
        "id": numbers(pairs["id"].tolist()),
        "start_ts_ns": pairs["ts_s"],
        "start_tid": pairs["tid_s"],
        "end_ts_ns": pairs["ts_f"],
        "end_pid": pairs["pid_f"],
        "end_tid": pairs["tid_f"],
    }, n=len(pairs))
    return table, backward_tid


def _queue(ev: Events) -> pd.DataFrame:
    rows = ev.complete(ev.is_cat("enqueue", "dequeue"))
    return frame(QUEUE, {
        "kind": ev.cat_of(rows),
        "correlation": numbers(ev.arg_values(rows, "correlation_id")),
        "start_ns": ev.ts_ns[rows],
        "end_ns": ev.ts_ns[rows] + ev.dur_ns[rows],
    }, n=len(rows))


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
    bandwidth: tuple[float | None, float | None] = (None, None)  # (None: no communication.json)
    info: npu_files.ProfilerInfo = field(default_factory=npu_files.ProfilerInfo)
    group_names: dict[str, str] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)


def _side_files(src: Source, opts: LoadOptions, queue: pd.DataFrame | None, notes: list[Note]) -> _SideFiles:
    """Read the side files detect found. At trace level only profiler_metadata.json is read (the
    user asked for the bare trace; group names are harmless labels). ``queue`` None: the export
    has no timeline (operator_memory.csv records keep their own names, see
    :func:`.npu_files.read_operator_memory`)."""
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
    if src.trace is None:
        from .npu_text_partial import load_npu_text_without_trace

        return load_npu_text_without_trace(src, opts)
    notes = list(src.notes)
    ev = read_trace(src.trace, opts.split)  # the collector is paused by the caller
    return_free_memory()  # the heap pages of the parsed pieces and the columns' parts
    if ev.bad_dur:
        notes.append(Note(f"{src.trace.name}: {ev.bad_dur} event(s) with a missing, non-numeric or "
                          "negative dur are counted as 0 µs"))
    layout = read_layout(ev, notes)
    if layout.hardware_pid is None:
        notes.append(Note("no Ascend Hardware process in trace_view.json: no device tasks"))

    # Each group of the trace's args is dropped once read (Events.drop_args), and the heap pages
    # that building the ops freed (nesting's window tables) go back before the device side.
    ops = _ops(ev)
    ev.drop_args(*npu_decode.META_ARGS, *npu_decode.OP_ARGS)
    return_free_memory()
    steps = steps_of_ops(ops)
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    queue = _queue(ev)
    ev.drop_args(*npu_decode.QUEUE_ARGS)
    fwdbwd, backward_tid = _fwdbwd(ev)
    overlap = npu_device.overlap(ev, layout, notes)

    hw = npu_device.hardware_tasks(ev, layout)
    ev.drop_args(*npu_device.TASK_ONLY_ARGS)
    comm = npu_device.communication(ev, layout)
    ev.drop_args(*(set(npu_decode.DEVICE_ARGS) - set(npu_device.TASK_ONLY_ARGS)))
    targets = pd.DataFrame({
        "pid": np.concatenate([hw.pid, comm.op_pid]),
        "tid": np.concatenate([hw.tid, comm.op_tid]),
        "start_ns": np.concatenate([hw.tasks["start_ns"].to_numpy(), comm.ops["start_ns"].to_numpy()]),
    })
    link, op_row = npu_device.link(targets, _flow_pairs(ev, FLOW_CAT), ops)
    n_hw = len(hw.tasks)
    hw.tasks["link"], hw.tasks["op_row"] = link[:n_hw], op_row[:n_hw]
    comm.ops["link"], comm.op_launch = link[n_hw:], op_row[n_hw:]
    comm.ops["step"] = assign_step(comm.ops["start_ns"].to_numpy(), steps)
    comm.tasks["step"] = assign_step(comm.tasks["start_ns"].to_numpy(), steps)
    pyfuncs, syncs = _pyfuncs(ev), _syncs(ev, layout, ops)
    # The trace's columns are done with: on the 32×92 side they (and the heap pages their pieces
    # freed) were half of the load's peak, held through the side files and the kernels' merge.
    del ev, targets
    return_free_memory()

    side = _side_files(src, opts, queue, notes)
    return_free_memory()  # what parsing the side files (kernel_details.csv's cells) freed
    kernels = npu_device.kernels(hw, comm, side.details.kernels if side.details else None, ops, steps, notes)
    del hw
    has_pmu, side.details = bool(side.details and side.details.has_pmu), None  # merged into kernels

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
        has_pmu=has_pmu,
        group_names=side.group_names,
        rdma_bandwidth_gbps=side.bandwidth[0],
        sdma_bandwidth_gbps=side.bandwidth[1],
        variants=text_variants(src),
    )
    profile = Profile(meta=meta, kernels=kernels, ops=ops, pyfuncs=pyfuncs, fwdbwd=fwdbwd,
                      comm_ops=comm.ops, comm_tasks=comm.tasks, overlap=overlap, queue=queue,
                      steps=steps, syncs=syncs)
    for name, table in (("memory", side.memory), ("op_memory", side.op_memory),
                        ("op_statistic", side.op_statistic)):
        if table is not None:
            setattr(profile, name, table)
    return profile
