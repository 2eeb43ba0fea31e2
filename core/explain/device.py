"""The device side of a step: every device task with its kind and launch, and the busy sets split
into labelled pieces (compute by kernel class, exposed communication by collective).

The busy sets themselves come from :mod:`perfcmp_core.compare.device_sets`, the definition
OverallMetrics uses, so the step explanation's Computing and uncovered communication are the
sheet's, nanosecond for nanosecond; this module only says which kernel or collective each
nanosecond of them belongs to. Where several run at once (streams overlapping), the one that began
first keeps the overlap (:func:`~perfcmp_core.timeline.first_come`), so nothing counts twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare.device_sets import DeviceSets
from ..compat import factorize_text, one_text
from ..device_time import SYNC_TASK, not_counted
from ..model import Profile
from ..timeline import Spans, first_come, overlaps
from .host import launch_rows

#: Device task kinds (``DeviceItems.kind``).
COMPUTE, COMMUNICATION, COPY, WAIT = 0, 1, 2, 3
#: NPU copy task types (Text spelling and the Db runtime's), and the HCCL-stream SDMA tasks.
_NPU_COPY = frozenset({"SDMA_SQE", "PCIE_DMA_SQE", "MEMCPY_ASYNC", "SDMA"})
_GPU_COPY = frozenset({"gpu_memcpy", "gpu_memset"})
_MEMCPY = re.compile(r"^Memcpy (HtoD|DtoH|DtoD|HtoH|PtoP)(?: \((\w+) -> (\w+)\))?", re.IGNORECASE)
_DIRECTION = {"htod": "H2D", "dtoh": "D2H", "dtod": "D2D", "htoh": "H2H", "ptop": "P2P"}
_NCCL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)|^ncclKernel_([A-Za-z]+)")
_HCCL_INSTANCE = re.compile(r"(?:_\d+)+$")
UNATTRIBUTED_COMPUTE = "compute without a kernel (profiler's overlap analysis)"
#: Ops that move tensors between host and device: an NPU copy task they launch is the host-device
#: transfer (the task itself names no direction).
TRANSFER_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
UNATTRIBUTED_COMM = "communication without a collective row"


@dataclass(frozen=True)
class DeviceItems:
    """Every device task on the timeline, in start order: what it is and where it was launched.

    ``launch_start`` / ``launch_end`` bound the host call that issued it (the launch call on GPU,
    the launching op on NPU); -1 where the trace records no launch.
    """

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # int8: COMPUTE, COMMUNICATION, COPY, WAIT
    row: np.ndarray  # row in Profile.kernels
    launch_row: np.ndarray  # row in Profile.ops, -1
    launch_start: np.ndarray
    launch_end: np.ndarray

    def take(self, rows: np.ndarray) -> DeviceItems:
        return DeviceItems(*(getattr(self, f)[rows] for f in
                             ("start", "end", "kind", "row", "launch_row", "launch_start", "launch_end")))


@dataclass(frozen=True)
class Pieces:
    """Disjoint labelled intervals: ``cause`` and ``label`` per piece (object arrays of str)."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray
    label: np.ndarray

    @classmethod
    def empty(cls) -> Pieces:
        z = np.empty(0, dtype="int64")
        o = np.empty(0, dtype=object)
        return cls(z, z, o, o)

    @classmethod
    def concat(cls, parts: list[Pieces]) -> Pieces:
        parts = [p for p in parts if len(p.start)]
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("start", "end", "cause", "label")))

    def spans(self) -> Spans:
        return Spans.of(self.start, self.end)

    def take(self, rows: np.ndarray) -> Pieces:
        return Pieces(self.start[rows], self.end[rows], self.cause[rows], self.label[rows])


def device_items(profile: Profile) -> DeviceItems:
    """Every task on the device timeline except the tasks inside a collective (the collective's
    row covers them), sorted by start."""
    k = profile.kernels
    keep = k["in_trace"].to_numpy(dtype=bool) & ~not_counted(profile)["collective_task"]
    rows = np.flatnonzero(keep)
    start = k["start_ns"].to_numpy()[rows]
    end = start + k["dur_ns"].to_numpy()[rows]
    task = k["task_type"].to_numpy(dtype=object)[rows]
    codes, uniq = factorize_text(task)
    u = pd.Series(uniq, dtype=object)
    copy_types = _GPU_COPY if profile.meta.kind == "gpu" else _NPU_COPY
    is_copy = u.isin(list(copy_types)).to_numpy(dtype=bool)
    is_wait = u.str.match(SYNC_TASK).fillna(False).to_numpy(dtype=bool)
    kind = np.full(len(rows), COMPUTE, dtype="int8")
    if len(rows):
        kind[is_copy[codes]] = COPY
        kind[is_wait[codes]] = WAIT
    kind[k["is_comm"].to_numpy(dtype=bool)[rows]] = COMMUNICATION
    lrow = launch_rows(profile)[rows]
    ops = profile.ops
    known = lrow >= 0
    l_start = np.full(len(rows), -1, dtype="int64")
    l_end = np.full(len(rows), -1, dtype="int64")
    l_start[known] = ops["start_ns"].to_numpy()[lrow[known]]
    l_end[known] = ops["end_ns"].to_numpy()[lrow[known]]
    order = np.lexsort((rows, start))
    return DeviceItems(start[order], end[order], kind[order], rows[order], lrow[order], l_start[order], l_end[order])


def compute_pieces(profile: Profile, sets: DeviceSets, items: DeviceItems, classes: pd.DataFrame) -> Pieces:
    """Computing time (``sets.compute``) split by kernel class (``cause``) and kernel (``label``):
    each compute kernel's first-come share of it; time the set holds without any kernel (the Text
    export's overlap analysis) is said to be so. ``classes`` holds ``cls`` and ``kernel`` (short
    name) per ``kernels`` row in its index."""
    rows = items.row[items.kind == COMPUTE]
    k = profile.kernels
    s = k["start_ns"].to_numpy()[rows]
    e = s + k["dur_ns"].to_numpy()[rows]
    known = classes.reindex(rows)
    cls = known["cls"].fillna("other").to_numpy(dtype=object)
    name = known["kernel"].fillna("").to_numpy(dtype=object)
    pieces = _labelled(s, e, cls, name, sets.compute)
    rest = sets.compute - pieces.spans()
    return Pieces.concat([pieces, Pieces(rest.start, rest.end, _fill("other", len(rest)),
                                         _fill(UNATTRIBUTED_COMPUTE, len(rest)))])


def communication_pieces(profile: Profile, sets: DeviceSets, waits: Spans | None) -> Pieces:
    """Uncovered communication split by collective (``group · collective``), and each piece into
    waiting and transmitting where the profile tells them apart (``waits``: the counted
    ``Notify_Wait`` time of the communication groups); GPU traces do not (``not split``)."""
    ops = profile.comm_ops
    s = ops["start_ns"].to_numpy()
    e = s + ops["dur_ns"].to_numpy()
    label = collective_labels(ops, profile.meta.kind)
    pieces = _labelled(s, e, _fill("", len(s)), label, sets.uncovered)
    rest = sets.uncovered - pieces.spans()
    whole = Pieces.concat([pieces, Pieces(rest.start, rest.end, _fill("", len(rest)),
                                          _fill(UNATTRIBUTED_COMM, len(rest)))])
    if waits is None:
        return Pieces(whole.start, whole.end, _fill("not split", len(whole.start)), whole.label)
    idx, _, ws, we = overlaps(whole.start, whole.end, waits.start, waits.end)
    wait = Pieces(ws, we, _fill("wait", len(ws)), whole.label[idx])
    other = Spans.of(whole.start, whole.end) - Spans.of(ws, we)
    idx, _, ts, te = overlaps(whole.start, whole.end, other.start, other.end)
    return Pieces.concat([wait, Pieces(ts, te, _fill("transmit", len(ts)), whole.label[idx])])


def collective_labels(comm_ops: pd.DataFrame, kind: str) -> np.ndarray:
    """``group · collective`` of each communication op: the NCCL primitive of a GPU kernel name
    (``AllReduce``), the HCCL op type without its instance numbers (``hcom_allReduce_``)."""
    name = comm_ops["op_type"].astype(object).where(comm_ops["op_type"].astype(object) != "",
                                                    comm_ops["name"].astype(object))
    codes, uniq = factorize_text(name.to_numpy(dtype=object))
    u = pd.Series(uniq, dtype=object)
    if kind == "gpu":
        m = u.str.extract(_NCCL)
        short = m[0].fillna(m[1]).fillna(u)
    else:
        short = u.str.replace(_HCCL_INSTANCE, "", regex=True)
    coll = short.to_numpy(dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)
    group = comm_ops["group"].to_numpy(dtype=object)
    return np.where(group != "", group + " · " + coll, coll).astype(object)


def copy_kinds(profile: Profile, rows: np.ndarray, op_names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What each copy task (``kernels`` rows) moved, and whether it copied host memory to the
    device; ``op_names`` are the outermost ops that launched them ("" unknown).

    GPU memcpy names say it: ``H2D copy (pageable)``, ``D2H copy (pinned)``, ``memset``. An NPU
    copy task names no direction: a PCIe DMA task or a Db ``MEMCPY_ASYNC`` launched by an op that
    moves tensors between host and device (:data:`TRANSFER_OPS`) is a ``host-device copy`` (the
    batch copy of a training loop), one launched elsewhere a ``PCIe DMA copy`` / ``device copy``.
    """
    k = profile.kernels
    names = k["name"].to_numpy(dtype=object)[rows]
    task = k["task_type"].to_numpy(dtype=object)[rows]
    if profile.meta.kind == "gpu":
        text = np.where(task == "gpu_memset", "memset", names)
        codes, uniq = factorize_text(text)
        labels = np.asarray([_gpu_copy(str(u)) for u in uniq] + [""], dtype=object)[codes]
        return labels, np.array([str(x).startswith("H2D") for x in labels], dtype=bool)
    transfer = np.isin(op_names, list(TRANSFER_OPS)) & np.isin(task, ["PCIE_DMA_SQE", "MEMCPY_ASYNC"])
    labels = np.where(transfer, "host-device copy",
                      np.where(task == "PCIE_DMA_SQE", "PCIe DMA copy", "device copy (" + task.astype(object) + ")"))
    return labels.astype(object), transfer


def _gpu_copy(name: str) -> str:
    if name.lower().startswith("memset"):
        return "memset"
    m = _MEMCPY.match(name)
    if m:
        direction = _DIRECTION.get(m.group(1).lower(), m.group(1))
        memory = next((w for w in (m.group(2), m.group(3)) if w and w.lower() in ("pageable", "pinned")), "")
        return f"{direction} copy" + (f" ({memory.lower()})" if memory else "")
    return f"copy: {name}"


def _labelled(start: np.ndarray, end: np.ndarray, cause: np.ndarray, label: np.ndarray, within: Spans) -> Pieces:
    """First-come shares of the intervals, cut to ``within``, each with its interval's cause and
    label."""
    rows, s, e = first_come(start, end)
    idx, _, cs, ce = overlaps(s, e, within.start, within.end)
    pick = rows[idx]
    return Pieces(cs, ce, np.asarray(cause, dtype=object)[pick], np.asarray(label, dtype=object)[pick])


def _fill(text: str, n: int) -> np.ndarray:
    return np.full(n, one_text(text), dtype=object)
