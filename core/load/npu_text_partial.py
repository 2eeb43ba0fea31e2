"""Load an NPU Text export that arrived without ``trace_view.json`` (issue 28: a colleague's
export with its largest file left out; the inference guide in ``../shared/seeds`` works from
``kernel_details.csv``, ``step_trace_time.csv`` and ``communication.json`` alone).

What the side files allow is compared; what needs the timeline is absent, with one note per
missing file saying what it disables:

* kernels and collectives: the ``kernel_details.csv`` rows, standing in for the timeline
  (``in_trace`` True: device time, kernel classes and KernelCompare count them; no ``op_row``:
  no host op launched them as far as the files tell). HCCL rows are the communication ops,
  without a group (the trace's group threads are gone);
* steps: the kernel_details ``Step Id`` windows; Computing / uncovered communication / E2E are
  then the unions of the kernel_details rows (:mod:`..compare.device_sets`), and
  ``step_trace_time.csv`` — the profiler's own per-step figures — is a cross-check (a note when
  they disagree by more than 1 % of the step; on the real AlexNet rank 0 they agree to the ns);
* without kernel_details.csv, the per-step Computing / Communication (Not Overlapped) / Free of
  ``step_trace_time.csv``. The file holds durations, not intervals, so each step becomes an
  ``overlap`` window laid end to end — Computing, then Communication (Not Overlapped), then Free,
  the overlapped communication at the end of Computing — each step right after the previous
  one. The lengths are the profiler's; positions inside a step mean nothing, and nothing reads
  them but the interval sets whose lengths OverallMetrics and StepCompare report;
* operator_memory.csv: every record keeps its own operator name (no host op to attribute it
  to, no dequeue to re-time ``cann::`` rows by), and MemoryCompare groups the records by that
  name (:mod:`..compare.memory_by_name`);
* memory_record.csv, bandwidth, profiler info and group names as from a complete export.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import COMM_OPS, KERNELS, OVERLAP, STEPS, Profile, ProfileMeta, empty, frame
from ..notes import Note
from ..options import LoadOptions
from . import npu_files
from .common import assign_step
from .detect import ENABLES, TEXT_FILES, Source
from .npu_text import _side_files
from .variants import text_variants

_NOT_OVERLAPPED = "Communication(Not Overlapped)"


def missing_file_notes(src: Source) -> list[Note]:
    """One note per missing file of a trace-less export: the file and what it disables."""
    names = {**TEXT_FILES, "trace_view": "trace_view.json", "profiler_info": "profiler_info*.json",
             "profiler_metadata": "profiler_metadata.json"}
    return [Note(f"{names.get(role, role)} missing: no {ENABLES[role]}") for role in src.missing if role in ENABLES]


def _step_windows(times: pd.DataFrame, kernels: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """STEPS and OVERLAP rows of the step_trace_time rows (see the module docstring)."""
    ns = {c: times[c].to_numpy() for c in npu_files.STEP_TIME_COLUMNS}
    comp, not_ov, ov, free = (ns[c] for c in npu_files.STEP_TIME_COLUMNS)
    length = comp + not_ov + free
    step = times["step"].to_numpy()
    first = kernels.groupby("step")["start_ns"].min() if len(kernels) else pd.Series(dtype="int64")
    start = np.zeros(len(times), dtype="int64")
    cursor = int(kernels["start_ns"].min()) if len(kernels) else 0
    for i in range(len(times)):  # one row per step: a handful, never per event
        at = int(first.get(step[i], cursor)) if step[i] >= 0 else cursor
        start[i] = max(at, cursor)
        cursor = start[i] + int(length[i])
    ov = np.minimum(ov, comp)
    kinds = ["Computing", _NOT_OVERLAPPED, "Free", "Communication"]
    starts = [start, start + comp, start + comp + not_ov, start + comp - ov]
    durs = [comp, not_ov, free, ov + not_ov]
    overlap = frame(OVERLAP, {
        "kind": np.repeat(np.array(kinds, dtype=object), len(times)),
        "start_ns": np.concatenate(starts), "dur_ns": np.concatenate(durs),
    })
    overlap = overlap[overlap["dur_ns"].to_numpy() > 0]
    overlap = overlap.iloc[np.argsort(overlap["start_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    known = step >= 0
    steps = frame(STEPS, {"step": step[known], "start_ns": start[known], "end_ns": (start + length)[known]})
    return steps, overlap


def _kernel_steps(kernels: pd.DataFrame) -> pd.DataFrame:
    """STEPS from the kernel_details ``Step Id``: each step from its first kernel's start to its
    last kernel's end."""
    known = kernels[kernels["step"].to_numpy() >= 0]
    if known.empty:
        return empty(STEPS)
    g = known.assign(end_ns=known["start_ns"] + known["dur_ns"]).groupby("step")
    window = pd.DataFrame({"start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()}).reset_index()
    return frame(STEPS, {c: window[c] for c in STEPS}).sort_values("start_ns", kind="stable").reset_index(drop=True)


def _cross_check(times: pd.DataFrame, kernels: pd.DataFrame) -> list[Note]:
    """A note when the profiler's step_trace_time.csv and the kernel_details unions disagree (by
    more than 1 % of the step) on a step's Computing / Communication (Not Overlapped) / Free."""
    from ..timeline import Spans

    start = kernels["start_ns"].to_numpy()
    end = start + kernels["dur_ns"].to_numpy()
    comm = kernels["is_comm"].to_numpy()
    step = kernels["step"].to_numpy()
    out = []
    for row in times.itertuples(index=False):  # one row per step
        mine = (step == row.step) if row.step >= 0 and (step == row.step).any() else np.ones(len(step), dtype=bool)
        busy = Spans.of(start[mine & ~comm], end[mine & ~comm])
        uncovered = Spans.of(start[mine & comm], end[mine & comm]) - busy
        e2e = int(end[mine].max() - start[mine].min())
        ours = (busy.length, uncovered.length, e2e - busy.length - uncovered.length)
        theirs = (row[1], row[2], row[4])  # Computing, Communication(Not Overlapped), Free
        if any(abs(a - b) > 0.01 * max(e2e, 1) for a, b in zip(ours, theirs)):
            label = f"step {row.step}" if row.step >= 0 else "the step"
            out.append(Note(f"step_trace_time.csv: {label} reads Computing / Communication(Not Overlapped) / Free "
                            f"{theirs[0] / 1e6:.3f} / {theirs[1] / 1e6:.3f} / {theirs[2] / 1e6:.3f} ms; the "
                            f"kernel_details.csv rows give {ours[0] / 1e6:.3f} / {ours[1] / 1e6:.3f} / "
                            f"{ours[2] / 1e6:.3f} ms (the figures shown)"))
    return out


def load_npu_text_without_trace(src: Source, opts: LoadOptions) -> Profile:
    """Read a Text export whose ``trace_view.json`` is missing (detect made sure that
    kernel_details.csv or step_trace_time.csv is there)."""
    notes = [*src.notes, *missing_file_notes(src)]
    side = _side_files(src, opts, None, notes)
    kernels = side.details.kernels if side.details else empty(KERNELS)
    kernels = kernels.iloc[np.argsort(kernels["start_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    # With no timeline the csv rows (device start and duration of every task it lists) are the
    # device record: device time, kernel classes and KernelCompare count them.
    kernels["in_trace"] = True
    steps, overlap = _kernel_steps(kernels), empty(OVERLAP)
    times_path = src.files.get("step_trace_time")
    if times_path is not None:
        times = npu_files.read_step_trace_time(times_path, notes)
        if len(kernels):
            notes.extend(_cross_check(times, kernels))
        else:
            steps, overlap = _step_windows(times, kernels)
    comm = kernels[kernels["is_comm"].to_numpy()]
    comm_ops = frame(COMM_OPS, {"name": comm["name"], "op_type": comm["op_type"], "start_ns": comm["start_ns"],
                                "dur_ns": comm["dur_ns"], "step": comm["step"]}, n=len(comm))
    info = side.info
    meta = ProfileMeta(
        kind="npu_text", source=src.given, framework=src.framework, export="text", level=src.level,
        rank=info.rank if info.rank is not None else src.rank, device=info.device,
        files_used=side.used, files_missing=list(src.missing), notes=notes,
        with_stack=info.with_stack, profile_memory=info.profile_memory, record_shapes=info.record_shapes,
        profiler_level=info.level, has_pmu=bool(side.details and side.details.has_pmu),
        group_names=side.group_names, rdma_bandwidth_gbps=side.bandwidth[0],
        sdma_bandwidth_gbps=side.bandwidth[1], variants=text_variants(src),
    )
    profile = Profile(meta=meta, kernels=kernels, comm_ops=comm_ops, overlap=overlap, steps=steps)
    for name, table in (("memory", side.memory), ("op_memory", side.op_memory),
                        ("op_statistic", side.op_statistic)):
        if table is not None:
            setattr(profile, name, table)
    return profile
