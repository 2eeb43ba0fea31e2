"""Where the device was busy, as interval sets: the one definition of Computing, uncovered
communication and E2E per input kind.

OverallMetrics reports the lengths of these sets (Computing Time, Uncovered Communication Time,
E2E Time; Free Time is what is left), and the step explanation (:mod:`perfcmp_core.explain`)
splits the very same sets into kernel classes, collectives and idle causes — so the two can never
disagree about what counts as busy. What differs per kind is only where the sets come from:

* **GPU** — compute is the union of the kernels that are neither NCCL kernels nor copies on the
  compute stream (memcpy on the compute stream is the reference's "SDMA"; memset events are not
  read at all); communication the union of NCCL kernels; E2E spans every kernel and memcpy with a
  stream (0 included: ROCm runs every HIP kernel there).
* **NPU Text** — the ``Overlap Analysis`` process the exporter computed: its ``Computing`` and
  ``Communication(Not Overlapped)`` events, E2E from its first to its last event (without
  ``trace_view.json``: the kernel_details rows as for a Db export, else the per-step times of
  ``step_trace_time.csv``).
* **NPU Db** — there is no overlap analysis: compute is the union of described compute tasks,
  communication the union of ``COMMUNICATION_OP`` rows, E2E widened by any other device task
  (SDMA, event waits, AI_CPU …).

All times are int64 ns, so lengths and differences carry no floating residue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import Profile
from ..text_codes import among
from ..timeline import Spans
from .masks import TextIndexes

#: GPU copies counted as SDMA when on the compute stream (memset events are never read, so the
#: reference's "memset (device)" entry could not match and is left out).
GPU_SDMA_WORDS = ("htod", "dtod", "dtoh")
#: Db task types that do not extend E2E (compute kernels are already in the compute union).
_DB_E2E_SKIP = frozenset({
    "KERNEL_AICORE", "KERNEL_AIVEC", "FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV",
    "PROFILING_ENABLE", "PROFILING_DISABLE",
})
_NOT_OVERLAPPED = "Communication(Not Overlapped)"


@dataclass(frozen=True)
class DeviceSets:
    """One profile's busy sets (see the module docstring for what each kind puts in them).

    ``compute_rows`` marks the ``kernels`` rows whose union is ``compute`` on GPU and Db (the rows
    the Computing breakdown classifies); on Text the overlap analysis is the source, and it marks
    the Ascend Hardware compute tasks (not communication) for reference.
    """

    compute: Spans
    communication: Spans
    uncovered: Spans
    lo: int = 0
    hi: int = 0
    compute_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: GPU: the stream most non-NCCL kernels ran on (-1 when none carries a stream)
    compute_stream: int = -1
    notes: tuple[str, ...] = ()

    @property
    def e2e_ns(self) -> int:
        return self.hi - self.lo


def device_sets(profile: Profile, texts: TextIndexes | None = None) -> DeviceSets:
    """The busy sets of ``profile`` (already step-filtered when a step was chosen)."""
    texts = TextIndexes(profile) if texts is None else texts
    kind = profile.meta.kind
    if kind == "gpu":
        return _gpu(profile, texts)
    if kind == "npu_text":
        return _npu_text(profile)
    return _npu_db(profile)


def gpu_copy_rows(profile: Profile, texts: TextIndexes, compute_stream: int) -> np.ndarray:
    """GPU kernels rows that are the reference's SDMA: memcpy (and kernels named like one) on the
    compute stream."""
    k = profile.kernels
    task = texts("kernels", "task_type")
    used = task.equals_any(("kernel", "gpu_memcpy"))
    if compute_stream < 0:
        return np.zeros(len(k), dtype=bool)
    return used & (k["stream"].to_numpy() == compute_stream) & texts("kernels", "name").contains_any(GPU_SDMA_WORDS)


def _gpu(profile: Profile, texts: TextIndexes) -> DeviceSets:
    k = profile.kernels
    task = texts("kernels", "task_type")
    is_kernel = task.equals_any(("kernel",))
    used = is_kernel | task.equals_any(("gpu_memcpy",))  # memset events are ignored entirely
    stream = k["stream"].to_numpy()
    start = k["start_ns"].to_numpy()
    end = start + k["dur_ns"].to_numpy()
    nccl = is_kernel & k["is_comm"].to_numpy()
    has_stream = stream >= 0  # stream 0 is a real stream (ROCm runs every HIP kernel there); -1: absent

    lo = hi = 0
    timed = used & has_stream
    if timed.any():
        lo, hi = int(start[timed].min()), int(end[timed].max())

    compute_stream = _most_common(stream[is_kernel & ~nccl & has_stream])
    notes: tuple[str, ...] = ()
    if compute_stream is None:
        notes = ("no non-NCCL kernel carries a stream id: SDMA time is 0",)
        compute_stream = -1
    sdma = gpu_copy_rows(profile, texts, compute_stream)
    compute = is_kernel & ~nccl & ~sdma
    comm = nccl & ~sdma
    busy = Spans.of(start[compute], end[compute])
    comm_spans = Spans.of(start[comm], end[comm])
    return DeviceSets(busy, comm_spans, comm_spans - busy, lo, hi, compute, compute_stream, notes)


def _npu_text(profile: Profile) -> DeviceSets:
    ov = profile.overlap
    kind = ov["kind"].to_numpy()
    o_start = ov["start_ns"].to_numpy()
    o_end = o_start + ov["dur_ns"].to_numpy()
    computing = kind == "Computing"
    not_overlapped = kind == _NOT_OVERLAPPED
    comm = kind == "Communication"
    lo = hi = 0
    notes: tuple[str, ...] = ()
    if len(ov):
        lo, hi = int(o_start.min()), int(o_end.max())
    elif "trace_view" in profile.meta.files_missing and profile.kernels["has_details"].any():
        return _npu_details_only(profile)
    else:
        notes = ("no Overlap Analysis data: compute, uncovered communication and E2E are 0",)
    k = profile.kernels
    rows = k["in_trace"].to_numpy() & ~k["is_comm"].to_numpy()
    return DeviceSets(Spans.of(o_start[computing], o_end[computing]), Spans.of(o_start[comm], o_end[comm]),
                      Spans.of(o_start[not_overlapped], o_end[not_overlapped]), lo, hi, rows, -1, notes)


def _npu_details_only(profile: Profile) -> DeviceSets:
    """A Text export without trace_view.json: the kernel_details rows are the device record, so
    the sets are built as for a Db export — compute the union of the non-HCCL rows,
    communication the union of the HCCL rows, E2E from the first to the last."""
    k = profile.kernels
    start = k["start_ns"].to_numpy()
    end = start + k["dur_ns"].to_numpy()
    is_comm = k["is_comm"].to_numpy()
    compute_rows = k["has_details"].to_numpy() & ~is_comm
    busy = Spans.of(start[compute_rows], end[compute_rows])
    comm = Spans.of(start[is_comm], end[is_comm])
    note = ("no trace_view.json: Computing, uncovered communication and E2E are unions of the "
            "kernel_details.csv rows",)
    return DeviceSets(busy, comm, comm - busy, int(start.min()), int(end.max()), compute_rows, -1, note)


def _npu_db(profile: Profile) -> DeviceSets:
    k = profile.kernels
    hw = k["in_trace"].to_numpy()
    det = k["has_details"].to_numpy()
    start = k["start_ns"].to_numpy()
    end = start + k["dur_ns"].to_numpy()
    task = k["task_type"].to_numpy()
    ops = profile.comm_ops
    op_start = ops["start_ns"].to_numpy()
    op_end = op_start + ops["dur_ns"].to_numpy()

    busy = Spans.of(start[det], end[det])
    comm = Spans.of(op_start, op_end)
    # E2E: compute and communication ops, widened by any other device task (SDMA, event waits,
    # AI_CPU …) — compute kernel task types are already covered by the compute union.
    extra = hw & ~among(task, _DB_E2E_SKIP | {""})
    lo_all = np.concatenate([start[det], op_start, start[extra]])
    hi_all = np.concatenate([end[det], op_end, end[extra]])
    lo = hi = 0
    notes: tuple[str, ...] = ()
    if len(lo_all):
        lo, hi = int(lo_all.min()), int(hi_all.max())
    else:
        notes = ("no compute task, communication op or device task: E2E is 0",)
    return DeviceSets(busy, comm, comm - busy, lo, hi, det, -1, notes)


def _most_common(values: np.ndarray) -> int | None:
    """Most frequent value; ties go to the value seen first."""
    if len(values) == 0:
        return None
    uniq, first, counts = np.unique(values, return_index=True, return_counts=True)
    best = np.lexsort((first, -counts))[0]
    return int(uniq[best])
