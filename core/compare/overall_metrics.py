"""Per-side OverallMetrics: where one profile's device time went.

This is the arithmetic behind the ``OverallMetrics`` sheet and the terminal "Model Profiling Time
Distribution" table (spec ``inputs-and-overall.md`` §6). One :func:`overall_metrics` call turns a
:class:`~perfcmp_core.model.Profile` of any kind into a :class:`SideMetrics`; presentation lives in
:mod:`.overall`.

The busy sets behind Computing, Uncovered Communication and E2E Time (and so Free Time) are
defined once per input kind in :mod:`.device_sets`, which the step explanation splits further;
this module adds what only the sheet shows: the kernel classes of the Computing breakdown, MC2
times, SDMA and LCCL buckets, communication groups and memory.

All times are int64 ns end to end, so sums and unions carry no floating residue.

Deliberate differences from the reference (see docs/differences.md):

* GPU compute and uncovered time are true interval lengths, not counts of 1-µs ticks touched by
  a kernel (the reference counts a 0.5 µs kernel as 0 and depends on how timestamps were parsed).
  On integer-µs traces both give the same number.
* GPU stream 0 is a stream (ROCm runs every HIP kernel there); the reference ignores it.
* Kernel classes: see :mod:`.kernel_classes`; communication groups: :mod:`.comm_groups`.
* Text profiles without PMU data hide the per-class breakdown whether or not kernel_details.csv
  exists (the reference shows zero Cube/Vector times at trace level).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model import Kind, Profile
from ..text_codes import among
from .comm_groups import GroupTime, db_groups, text_groups
from .device_sets import DeviceSets, device_sets, gpu_copy_rows
from .kernel_classes import (CLASS_BUCKETS, KERNEL_BACKWARD, MC2, PAGED, classify, family_codes,
                             launch_classes, launch_time)
from .masks import BACKWARD_WORDS, Masks, TextIndexes
from .names import strip_instance

GIB = 1024**3

_NPU_COMPUTE_TASKS = frozenset({"AI_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "AI_VECTOR_CORE", "FFTS_PLUS"})
#: Copy and event-wait task types: the trace's ``Task Type`` and, for real Db exports, the runtime
#: ``TASK.taskType`` (``MEMCPY_ASYNC`` for both kinds of copy, ``EVENT_WAIT``), so that the Text
#: and Db exports of one run find the same copies on the same compute streams.
_SDMA_TASKS = frozenset({"SDMA_SQE", "PCIE_DMA_SQE", "MEMCPY_ASYNC"})
_EVENT_WAITS = frozenset({"EVENT_WAIT_SQE", "EVENT_WAIT"})
_C_CORE_SQE = "C_CORE_SQE"
_DB_CUBE_TASKS = frozenset({"KERNEL_AICORE", "KERNEL_MIX_AIC"})
_LCCL = "kernel_aivec"


@dataclass(frozen=True)
class Bucket:
    """Total duration and number of kernels in one class."""

    ns: int = 0
    count: int = 0

    def __add__(self, other: Bucket) -> Bucket:
        return Bucket(self.ns + other.ns, self.count + other.count)


@dataclass(frozen=True)
class Mc2Time:
    """One MC2 (fused matmul + collective) kernel name: total, PMU computing part, and the
    communication part measured between paired ``C_CORE_SQE`` task ends."""

    total_ns: int = 0
    computing_ns: int = 0
    communication_ns: int = 0
    count: int = 0


@dataclass
class SideMetrics:
    """Everything OverallMetrics shows for one side, in ns / counts."""

    kind: Kind
    compute_ns: int = 0
    uncovered_ns: int = 0
    e2e_ns: int = 0
    fa_fwd_cube: Bucket = Bucket()
    fa_fwd_vector: Bucket = Bucket()
    fa_bwd_cube: Bucket = Bucket()
    fa_bwd_vector: Bucket = Bucket()
    conv_fwd_cube: Bucket = Bucket()
    conv_fwd_vector: Bucket = Bucket()
    conv_bwd_cube: Bucket = Bucket()
    conv_bwd_vector: Bucket = Bucket()
    matmul_cube: Bucket = Bucket()
    matmul_vector: Bucket = Bucket()
    page_attention: Bucket = Bucket()
    vector_trans: Bucket = Bucket()
    vector_notrans: Bucket = Bucket()
    cube: Bucket = Bucket()
    sdma_tensor_move: Bucket = Bucket()
    sdma_stream: Bucket = Bucket()  # SDMA / PCIe-DMA tasks (GPU: memcpy) on compute streams
    lccl: Bucket = Bucket()
    mc2: dict[str, Mc2Time] = field(default_factory=dict)  # kernel name → times, first-seen order
    memory_gb: float = 0.0
    rdma_bandwidth_gbps: float | None = None  # None: the profile holds no such figure
    sdma_bandwidth_gbps: float | None = None
    groups: dict[str, GroupTime] = field(default_factory=dict)  # group key → times, display order
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)  # overlap of uncovered comm
    pg_names: dict[str, str] = field(default_factory=dict)  # group key → process-group name
    hide_op_details: bool = False  # NPU Text without PMU data: no per-class breakdown
    notes: list[str] = field(default_factory=list)

    @property
    def is_npu(self) -> bool:
        return self.kind != "gpu"

    @property
    def wait_ns(self) -> int:
        return sum(g.wait_ns for g in self.groups.values())

    @property
    def fa_fwd(self) -> Bucket:
        return self.fa_fwd_cube + self.fa_fwd_vector

    @property
    def fa_bwd(self) -> Bucket:
        return self.fa_bwd_cube + self.fa_bwd_vector

    @property
    def conv_fwd(self) -> Bucket:
        return self.conv_fwd_cube + self.conv_fwd_vector

    @property
    def conv_bwd(self) -> Bucket:
        return self.conv_bwd_cube + self.conv_bwd_vector

    @property
    def matmul(self) -> Bucket:
        return self.matmul_cube + self.matmul_vector

    @property
    def vector(self) -> Bucket:
        return self.vector_trans + self.vector_notrans

    @property
    def mc2_ns(self) -> int:
        return sum(m.total_ns for m in self.mc2.values())

    @property
    def computing_count(self) -> int:
        """The Computing Time row's Number: every classified kernel except MC2 (and LCCL)."""
        return sum(getattr(self, b).count for b in CLASS_BUCKETS)

    @property
    def other_ns(self) -> int:
        """Compute time not explained by any class (clamped at 0: classes are sums over kernels
        while compute is a union, so parallel streams can make the classes exceed it)."""
        classified = sum(getattr(self, b).ns for b in CLASS_BUCKETS) + self.mc2_ns
        return max(0, self.compute_ns - classified)

    @property
    def free_time_ns(self) -> int:
        """E2E minus compute, LCCL and uncovered communication (may be negative)."""
        return self.e2e_ns - self.compute_ns - self.lccl.ns - self.uncovered_ns

    @property
    def free_ns(self) -> int:
        """Free time that is not SDMA either (may be negative)."""
        return self.free_time_ns - self.sdma_stream.ns

    @property
    def cube_time(self) -> Bucket:
        """The terminal's "Cube Time": Matmul (cube *and* vector) + other cube + MC2; the count
        leaves MC2 out (the reference's definition, kept for comparability)."""
        return Bucket(self.matmul.ns + self.cube.ns + self.mc2_ns, self.matmul.count + self.cube.count)

    @property
    def sdma(self) -> Bucket:
        return self.sdma_tensor_move + self.sdma_stream

    def group_label(self, group: str) -> str:
        """``<pg>: <group>`` when the process-group name is known, else the group key."""
        pg = self.pg_names.get(group, "")
        return f"{pg}: {group}" if pg else group


#: The tables :func:`step_times` reads: a step's cut for it needs no other (see
#: :func:`perfcmp_core.compare.steps.step_parts`).
STEP_TIME_TABLES = ("kernels", "comm_ops", "overlap")


def overall_metrics(profile: Profile, masks: Masks, texts: TextIndexes | None = None,
                    classes: pd.DataFrame | None = None) -> SideMetrics:
    """Compute one side's OverallMetrics (the profile is already step-filtered).

    ``texts`` are the profile's text-column indexes when the caller shares them with other
    steps; by default they are built here. ``classes``: the profile's
    :func:`~perfcmp_core.compare.kernel_families.kernel_classes` table when the caller has it
    (read on GPU only; by default computed here with the built-in equivalence table).
    """
    side = _side(profile, masks, TextIndexes(profile) if texts is None else texts, times_only=False,
                 classes=classes)
    side.memory_gb = _memory_gb(profile)
    if side.is_npu:
        side.rdma_bandwidth_gbps = profile.meta.rdma_bandwidth_gbps
        side.sdma_bandwidth_gbps = profile.meta.sdma_bandwidth_gbps
        side.pg_names = {g: n for g, n in profile.meta.group_names.items() if n and n != "unknown"}
    return side


def step_times(profile: Profile, masks: Masks, texts: TextIndexes | None = None) -> SideMetrics:
    """The E2E, computing, uncovered communication and LCCL times of :func:`overall_metrics`
    (hence its free time), computed by the same code, without the kernel classes, MC2 times,
    communication groups and memory that a per-step row does not show: on a run of a hundred
    steps those were most of the StepCompare's cost. Reads only :data:`STEP_TIME_TABLES`; of
    ``texts`` (the profile's text indexes), only masks of rows, never distinct values."""
    return _side(profile, masks, TextIndexes(profile) if texts is None else texts, times_only=True)


def _side(profile: Profile, masks: Masks, texts: TextIndexes, *, times_only: bool,
          classes: pd.DataFrame | None = None) -> SideMetrics:
    kind = profile.meta.kind
    if kind == "gpu":
        return _gpu(profile, masks, texts, times_only, classes)
    if kind == "npu_text":
        return _npu_text(profile, masks, texts, times_only)
    return _npu_db(profile, masks, texts, times_only)


# ---------------------------------------------------------------------------------------------
# Per-kind pipelines
# ---------------------------------------------------------------------------------------------


def _gpu(profile: Profile, masks: Masks, texts: TextIndexes, times_only: bool,
         classes: pd.DataFrame | None = None) -> SideMetrics:
    k = profile.kernels
    side = SideMetrics(kind="gpu")
    sets = _times(side, device_sets(profile, texts))
    side.sdma_stream = _bucket(k["dur_ns"].to_numpy(), gpu_copy_rows(profile, texts, sets.compute_stream))
    if times_only:
        return side

    compute = sets.compute_rows
    _fill_buckets(side, k["dur_ns"].to_numpy()[compute], gpu_codes(profile, masks, texts, compute, classes))
    return side


def gpu_codes(profile: Profile, masks: Masks, texts: TextIndexes, compute: np.ndarray,
              classes: pd.DataFrame | None = None) -> np.ndarray:
    """Class code (:data:`~.kernel_classes.CLASS_BUCKETS` index) of each GPU compute kernel
    ``kernels[compute]``: its kernel family where that decides, else the reference's rules."""
    k = profile.kernels
    n = int(compute.sum())
    sub_names = texts("kernels", "name").subset(compute)
    launch_cls, launch_bwd = launch_classes(profile, k["op_row"].to_numpy()[compute], masks, texts,
                                             conv_tid=True)
    codes = classify(
        sub_names, texts("kernels", "op_type").subset(compute), masks, sub_names.contains_any(masks.cube),
        np.zeros(n, dtype=bool), launch_cls, launch_bwd, npu=False, fa_types=(),
    )
    return _gpu_family_codes(profile, texts, compute, launch_bwd, classes, codes)


def _gpu_family_codes(profile: Profile, texts: TextIndexes, compute: np.ndarray, launch_bwd: np.ndarray,
                      classes: pd.DataFrame | None, reference: np.ndarray) -> np.ndarray:
    """The class codes of the GPU compute kernels ``kernels[compute]``: the reference's
    (``reference``) mapped over the kernel families (:func:`.kernel_classes.family_codes`).
    Backward: the reference's launch-op test (``launch_bwd``), the kernel's name, its launching
    op's name, or the launching op on the autograd thread."""
    if classes is None:
        from .equivalence import builtin_equivalence
        from .kernel_families import kernel_classes

        classes = kernel_classes(profile, builtin_equivalence())
    n_kernels = len(profile.kernels)
    family = np.full(n_kernels, "", dtype=object)
    by_name = np.zeros(n_kernels, dtype=bool)
    launch = np.full(n_kernels, -1, dtype="int64")
    rows = classes["row"].to_numpy()
    family[rows] = classes["family"].to_numpy(dtype=object)
    by_name[rows] = classes["by_name"].to_numpy(dtype=bool)
    launch[rows] = classes["launch"].to_numpy()
    names = texts("kernels", "name")
    backward = names.contains_any(KERNEL_BACKWARD)
    ops = profile.ops
    if len(ops):
        op_bwd = texts("ops", "name").leaf().contains_any(BACKWARD_WORDS)
        if profile.meta.backward_tid >= 0:
            op_bwd = op_bwd | (ops["tid"].to_numpy() == profile.meta.backward_tid)
        linked = launch >= 0
        backward[linked] |= op_bwd[launch[linked]]
    return family_codes(family[compute], by_name[compute], backward[compute] | launch_bwd,
                        names.contains_any(PAGED)[compute], reference)


def _npu_text(profile: Profile, masks: Masks, texts: TextIndexes, times_only: bool) -> SideMetrics:
    k = profile.kernels
    side = SideMetrics(kind="npu_text")
    # Ascend Hardware tasks (HCCL ops may also be listed as is_comm kernels; they are counted
    # from comm_ops below)
    hw = k["in_trace"].to_numpy() & ~k["is_comm"].to_numpy()
    names = texts("kernels", "name")
    dur = k["dur_ns"].to_numpy()

    side.lccl = _bucket(dur, hw & names.equals_any((_LCCL,))) + _bucket(
        profile.comm_ops["dur_ns"].to_numpy(), texts("comm_ops", "name").equals_any((_LCCL,))
    )
    stream = k["stream"].to_numpy()
    task = k["task_type"].to_numpy()
    on_stream = hw & (stream > 0)
    side.sdma_stream = _sdma_on_compute_streams(
        stream, dur, task, wait_rows=on_stream, compute_rows=on_stream & np.isin(task, list(_NPU_COMPUTE_TASKS)),
        sdma_rows=on_stream,
    )

    sets = _times(side, device_sets(profile, texts))
    if times_only:
        return side
    uncovered = sets.uncovered

    if not profile.meta.has_pmu:
        side.hide_op_details = True
    else:
        aiv_vec = k["aiv_vec_us"].to_numpy()
        mac = k["mac_us"].to_numpy()
        valid = k["has_details"].to_numpy() & ~(np.isnan(aiv_vec) & np.isnan(mac))
        cube = (np.nan_to_num(mac[valid]) > 0) | (np.nan_to_num(k["aicore_us"].to_numpy()[valid]) > 0)
        launch = launch_time(profile, k["op_row"].to_numpy()[valid])
        sqe = k[hw & (k["name"].to_numpy() == _C_CORE_SQE)]
        _classify_npu(side, profile, valid, masks, texts, cube, order=np.argsort(launch, kind="stable"),
                      sqe=sqe, conv_tid=True, fa_types=("flashattention", "fusedinferattention"))

    side.groups, side.pairs = text_groups(profile, uncovered)
    return side


def _npu_db(profile: Profile, masks: Masks, texts: TextIndexes, times_only: bool) -> SideMetrics:
    k = profile.kernels
    side = SideMetrics(kind="npu_db")
    hw = k["in_trace"].to_numpy()
    det = k["has_details"].to_numpy()
    dur = k["dur_ns"].to_numpy()
    task = k["task_type"].to_numpy()
    stream = k["stream"].to_numpy()
    ops = profile.comm_ops

    side.lccl = _bucket(ops["dur_ns"].to_numpy(), texts("comm_ops", "name").equals_any((_LCCL,)))
    known = stream >= 0
    side.sdma_stream = _sdma_on_compute_streams(
        stream, dur, task, wait_rows=hw & known, compute_rows=det & known, sdma_rows=hw & known
    )

    sets = _times(side, device_sets(profile, texts))
    if times_only:
        return side

    classified = det
    if profile.meta.has_pmu:
        # As in Text, a compute task without PMU data (DSA_SQE, AI_CPU) is in no Cube/Vector class:
        # its time stays Other. The reference files it under Vector in Db only (spec: NonZero
        # AI_CPU is Vector in Db, Other in Text), so one run's breakdown depended on the export.
        aicore, mac, aiv = (k[c].to_numpy() for c in ("aicore_us", "mac_us", "aiv_us"))
        classified = det & ~(np.isnan(aicore) & np.isnan(mac) & np.isnan(aiv))
        cube = (np.nan_to_num(aicore[classified]) != 0) | (np.nan_to_num(mac[classified]) != 0)
    else:
        cube = np.isin(task[det], list(_DB_CUBE_TASKS))
    sqe = k[hw & (task == _C_CORE_SQE)]
    _classify_npu(side, profile, classified, masks, texts, cube,
                  order=np.argsort(k["link"].to_numpy()[classified], kind="stable"),
                  sqe=sqe, conv_tid=False, fa_types=("flashattention",))

    side.groups, side.pairs = db_groups(profile, sets.uncovered)
    return side


# ---------------------------------------------------------------------------------------------
# Class sums and MC2 times (the classes themselves: kernel_classes.py)
# ---------------------------------------------------------------------------------------------


def _fill_buckets(side: SideMetrics, dur: np.ndarray, codes: np.ndarray) -> None:
    """Sum durations and counts per class code (MC2 codes are measured separately)."""
    n = len(CLASS_BUCKETS)
    keep = (codes >= 0) & (codes < n)
    sums = np.zeros(n, dtype="int64")
    np.add.at(sums, codes[keep], dur[keep])
    counts = np.bincount(codes[keep], minlength=n)
    for i, name in enumerate(CLASS_BUCKETS):
        if counts[i]:
            setattr(side, name, Bucket(int(sums[i]), int(counts[i])))


def _classify_npu(
    side: SideMetrics,
    profile: Profile,
    rows: np.ndarray,
    masks: Masks,
    texts: TextIndexes,
    cube: np.ndarray,
    order: np.ndarray,
    sqe: pd.DataFrame,
    conv_tid: bool,
    fa_types: tuple[str, ...],
) -> None:
    """Classify the NPU compute kernels ``kernels[rows]`` (a bool mask) and measure MC2 kernels
    (``order`` = processing order, positions among those rows)."""
    k = profile.kernels
    launch_cls, launch_bwd = launch_classes(profile, k["op_row"].to_numpy()[rows], masks, texts, conv_tid=conv_tid)
    names = texts("kernels", "name").subset(rows)
    codes = classify(names, texts("kernels", "op_type").subset(rows), masks, cube, names.contains_any(masks.trans),
                      launch_cls, launch_bwd, npu=True, fa_types=fa_types)
    _fill_buckets(side, k["dur_ns"].to_numpy()[rows], codes)
    is_mc2 = codes[order] == MC2
    if is_mc2.any():
        side.mc2 = _mc2_times(k.iloc[np.flatnonzero(rows)[order[is_mc2]]], sqe)


def _mc2_times(mc2: pd.DataFrame, sqe: pd.DataFrame) -> dict[str, Mc2Time]:
    """MC2 kernels (in processing order) → per-name totals.

    Communication time: the ``C_CORE_SQE`` tasks whose *end* lies inside the kernel, taken in
    pairs, each pair contributing end₂ − end₁. The tasks are consumed by one forward-only scan
    shared by all MC2 kernels, exactly as the reference does, so a task is never counted twice;
    this is a sequential scan by nature and only runs over C_CORE_SQE tasks when MC2 kernels
    exist.
    """
    by_start = np.argsort(sqe["start_ns"].to_numpy(), kind="stable")
    sqe_end = (sqe["start_ns"].to_numpy() + sqe["dur_ns"].to_numpy())[by_start].tolist()
    computing_us = np.maximum(np.nan_to_num(mc2["mac_us"].to_numpy()), np.nan_to_num(mc2["mte2_us"].to_numpy()))
    computing_us = computing_us + np.nan_to_num(mc2["aiv_us"].to_numpy())
    computing_ns = np.round(computing_us * 1000.0).astype("int64").tolist()
    starts = mc2["start_ns"].to_numpy()
    durs = mc2["dur_ns"].to_numpy()
    out: dict[str, Mc2Time] = {}
    p = 0
    # Rows are keyed by the kernel's own name: MindSpore names every instance by its full scope
    # path plus "-op<n>", which would otherwise give one row per launch.
    own = strip_instance(mc2["name"].str.rsplit("/", n=1).str[-1])
    for name, s, d, comp in zip(own.tolist(), starts.tolist(), durs.tolist(), computing_ns):
        e = s + d
        ends: list[int] = []
        while p < len(sqe_end):
            x = sqe_end[p]
            if x > e:
                break
            if x >= s:
                ends.append(x)
            p += 1
        comm = sum(ends[i + 1] - ends[i] for i in range(0, len(ends) - 1, 2))
        prev = out.get(name, Mc2Time())
        out[name] = Mc2Time(prev.total_ns + d, prev.computing_ns + comp, prev.communication_ns + comm, prev.count + 1)
    return out


# ---------------------------------------------------------------------------------------------
# Small shared helpers
# ---------------------------------------------------------------------------------------------


def _times(side: SideMetrics, sets: DeviceSets) -> DeviceSets:
    """Fill ``side``'s E2E, computing and uncovered communication times from the busy sets."""
    side.notes.extend(sets.notes)
    side.compute_ns = sets.compute.length
    side.uncovered_ns = sets.uncovered.length
    side.e2e_ns = sets.e2e_ns
    return sets


def _bucket(dur: np.ndarray, mask: np.ndarray) -> Bucket:
    return Bucket(int(dur[mask].sum()), int(mask.sum()))


def _sdma_on_compute_streams(
    stream: np.ndarray,
    dur: np.ndarray,
    task: np.ndarray,
    wait_rows: np.ndarray,
    compute_rows: np.ndarray,
    sdma_rows: np.ndarray,
) -> Bucket:
    """SDMA / PCIe-DMA tasks on compute streams. A stream that waits on events and runs compute
    is a compute stream; if no stream waits on events, every compute stream counts."""
    wait_streams = np.unique(stream[wait_rows & among(task, _EVENT_WAITS)])
    compute_streams = np.unique(stream[compute_rows])
    if len(wait_streams):
        compute_streams = np.intersect1d(compute_streams, wait_streams)
    mask = sdma_rows & among(task, _SDMA_TASKS) & np.isin(stream, compute_streams)
    return _bucket(dur, mask)


def _memory_gb(profile: Profile) -> float:
    reserved = profile.memory["total_reserved_bytes"].to_numpy()
    if len(reserved) == 0:
        return 0.0
    return max(0, int(reserved.max())) / GIB
