"""What the host was doing, as labelled layers of intervals: the evidence behind idle causes.

When the device has nothing to run, the reason is on the host: it was blocked in a device
synchronisation, copying from pageable memory, dispatching ops more slowly than the device runs
them, or running Python that launches nothing (a data loader, ``time.sleep``). The outermost ops
of the threads that feed the device (below the step marker and user annotations) each get one
**role**, from what happened inside them:

* ``sync`` — a runtime call inside blocked the host until the device drained
  (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``hipStreamSynchronize``,
  ``aclrtSynchronizeStream`` …): ``aten::item``, ``aten::nonzero``, a ``.cpu()`` — the host needed a
  result back;
* ``copy`` — it copied host memory to the device (an H2D memcpy task was launched from it:
  ``aten::to`` of a batch; from pageable memory that copy blocks the host, and the sync it needs
  belongs to the copy, not to a read-back);
* ``dispatch`` — it launched device work (``aten::addmm``): while the host is inside it, it is
  feeding the device;
* ``cpu`` — it launched nothing (``aten::randint`` on a CPU tensor).

Outside ops, the host runs Python: the innermost frame of the user's code labels it when the
profile has stacks (``train.py(19): load_next_batch``), a ``record_function`` range when there is
one (``Optimizer.step#AdamW.step``, ``enumerate(DataLoader)#…``), else its position in the step. Only threads that launch
device work or synchronise with it count: a DataLoader worker thread busy with its own ops does
not starve the device, the main thread does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare.kernel_families import LAUNCH_CATEGORIES
from ..compat import one_text
from ..model import SYNC_CALL, Profile
from ..timeline import Spans, first_come, innermost, overlaps, thread_key

#: How a copy's label names the op it happened in (``H2D copy (pinned) in aten::to``): one owner
#: for the labels made here and in :mod:`.explanation`, read back by :func:`.idle.label_op`.
IN_OP = " in "

#: Python frames that are not the user's code: the profiler's and torch's own frames, built-ins.
_INTERNAL_FRAME = re.compile(r"^(?:<built-in|<frozen |torch/|typing\.py|enum\.py|contextlib\.py|functools\.py)")
#: ``record_function`` range names: ``Module.method``, ``Optimizer.step#SGD.step`` (never an ``aten::`` op).
_RANGE_NAME = re.compile(r"^(?!.*::)[^(]*[.#]|^enumerate\(DataLoader\)")
#: Op roles (``HostLayers.role``).
CPU, DISPATCH, COPY, SYNC = 0, 1, 2, 3


@dataclass(frozen=True)
class Layer:
    """Disjoint host intervals in time order, each with a label (what to tell the user)."""

    start: np.ndarray
    end: np.ndarray
    label: np.ndarray  # object array of str

    @classmethod
    def empty(cls) -> Layer:
        z = np.empty(0, dtype="int64")
        return cls(z, z, np.empty(0, dtype=object))

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, label: np.ndarray) -> Layer:
        """Overlapping intervals (several threads) made disjoint: the one that began first keeps
        the overlap."""
        rows, s, e = first_come(start, end)
        return cls(s, e, np.asarray(label, dtype=object)[rows])


@dataclass(frozen=True)
class SyncCalls:
    """Every synchronisation call with the cause and label its cost goes to (``sync`` and the
    asking op, or ``copy`` and the copy it served)."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray
    label: np.ndarray


@dataclass(frozen=True)
class HostLayers:
    """The host's state over time, one layer per op role plus Python frames and annotations."""

    sync: Layer
    copy: Layer
    dispatch: Layer
    cpu_ops: Layer
    frames: Layer
    annotations: Layer
    #: the role and label of every ``ops`` row's outermost op (-1 / "" for rows outside one)
    role: np.ndarray
    label: np.ndarray
    #: the start and end of the outermost ops on the feeding threads, for telling a gap before a
    #: step's first op from one between ops
    op_start: np.ndarray
    op_end: np.ndarray
    calls: SyncCalls
    has_host: bool


def ranges(profile: Profile) -> np.ndarray:
    """Which ``ops`` rows are ranges around ops rather than ops: step markers, user annotations
    and ``record_function`` ranges, which torch_npu records as ops (``DistributedDataParallel.forward``,
    ``Optimizer.step#SGD.step``, ``enumerate(DataLoader)#…``: a dotted or ``#`` name without ``::``)."""
    ops = profile.ops
    named = _matches(profile, "ops", "name", _RANGE_NAME)
    return ops["is_step"].to_numpy(dtype=bool) | profile.among("ops", "cat", ("user_annotation",)) | named


def outermost_ops(profile: Profile, frame: np.ndarray) -> np.ndarray:
    """For every ``ops`` row, its outermost ancestor that is not inside a range (``frame``: the
    :func:`ranges` of the profile): the row itself when it is outermost; -1 for the ranges."""
    ops = profile.ops
    n = len(ops)
    if n == 0:
        return np.empty(0, dtype="int64")
    parent = ops["parent"].to_numpy()
    top = np.where(frame, -1, np.arange(n, dtype="int64"))
    live = np.flatnonzero(~frame)
    while len(live):
        up = parent[top[live]]
        ok = up >= 0
        ok[ok] = ~frame[up[ok]]
        top[live[ok]] = up[ok]
        live = live[ok]
    return top


def launch_rows(profile: Profile) -> np.ndarray:
    """The host op row each kernel was launched from (-1 unknown): the launch call on GPU, the
    launching op (an ``aclnn*`` launcher, an HCCL op) on NPU."""
    op_row = profile.kernels["op_row"].to_numpy()
    return np.where((op_row >= 0) & (op_row < len(profile.ops)), op_row, -1)


def host_layers(profile: Profile, frame: np.ndarray, top: np.ndarray, launched_from: np.ndarray,
                h2d_from: np.ndarray, h2d_label: np.ndarray) -> HostLayers:
    """The layers of ``profile``'s host side. ``frame`` and ``top`` are its :func:`ranges` and
    :func:`outermost_ops`; ``launched_from`` the op rows device tasks were launched from;
    ``h2d_from`` those of host-to-device copies, described by ``h2d_label``."""
    ops = profile.ops
    n = len(ops)
    start = ops["start_ns"].to_numpy()
    end = ops["end_ns"].to_numpy()
    names = ops["name"].to_numpy(dtype=object)
    key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    rows = np.arange(n, dtype="int64")

    is_runtime = profile.among("ops", "cat", LAUNCH_CATEGORIES)
    calls = _sync_calls(profile, key, is_runtime & _matches(profile, "ops", "name", SYNC_CALL))
    threads = np.unique(np.concatenate([key[launched_from], calls.key]))
    outer = np.isin(key, threads) & (top == rows) & ~is_runtime

    role = np.full(n, CPU, dtype="int8")
    label = names.copy()
    role[_tops(top, launched_from)] = DISPATCH
    inside = calls.op >= 0
    call_top = np.where(inside, top[np.maximum(calls.op, 0)], -1) if n else calls.op
    role[_tops(call_top, np.flatnonzero(inside))] = SYNC
    copy_tops = top[h2d_from]
    has_copy = copy_tops >= 0
    role[copy_tops[has_copy]] = COPY
    label[copy_tops[has_copy]] = (h2d_label[has_copy] + IN_OP + names[copy_tops[has_copy]]).astype(object)
    # Every row carries its outermost op's role and label (calls outside any op: their own).
    own = top < 0
    row_role = np.where(own, CPU, role[np.maximum(top, 0)]).astype("int8")
    row_label = np.where(own, names, label[np.maximum(top, 0)]).astype(object)

    def layer(which: np.ndarray) -> Layer:
        return Layer.of(start[which], end[which], row_label[which])

    # A sync call made outside every op (``torch.cuda.synchronize()`` in the training loop) is
    # its own sync interval, named by the call.
    has_top = call_top >= 0
    safe_top = np.maximum(call_top, 0)
    call_role = np.where(has_top, role[safe_top] if n else SYNC, SYNC)
    call_label = np.where(has_top, label[safe_top] if n else "", calls.name).astype(object)
    bare = ~has_top | (is_runtime[safe_top] if n else True)
    sync = Layer.of(np.concatenate([start[outer & (role == SYNC)], calls.start[bare]]),
                    np.concatenate([end[outer & (role == SYNC)], calls.end[bare]]),
                    np.concatenate([row_label[outer & (role == SYNC)], calls.name[bare]]))
    notes = np.isin(key, threads) & frame & ~ops["is_step"].to_numpy(dtype=bool)
    sync_cause = np.where(call_role == COPY, one_text("copy"), one_text("sync"))
    return HostLayers(
        sync=sync,
        copy=layer(np.flatnonzero(outer & (role == COPY))),
        dispatch=layer(np.flatnonzero(outer & (role == DISPATCH))),
        cpu_ops=layer(np.flatnonzero(outer & (role == CPU))),
        frames=_frames(profile, threads),
        annotations=Layer.of(start[notes], end[notes], names[notes]),
        role=row_role, label=row_label,
        op_start=start[outer], op_end=end[outer],
        calls=SyncCalls(calls.start, calls.end, sync_cause, call_label),
        has_host=bool(n),
    )


@dataclass(frozen=True)
class _Calls:
    """Synchronisation calls, wherever the profile keeps them, with their thread and the
    innermost op they were made in (-1: none)."""

    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    key: np.ndarray
    op: np.ndarray


def _sync_calls(profile: Profile, op_key: np.ndarray, in_ops: np.ndarray) -> _Calls:
    """The sync calls among the ``ops`` rows (``in_ops``: GPU runtime rows, inside the op that
    asked) and those of the SYNCS table (NPU CANN calls, placed in the innermost op running on
    their thread when they started)."""
    ops, syncs = profile.ops, profile.syncs
    rows = np.flatnonzero(in_ops)
    parent = ops["parent"].to_numpy()
    s_key = thread_key(syncs["pid"].to_numpy(), syncs["tid"].to_numpy())
    s_start = syncs["start_ns"].to_numpy()
    s_op = innermost(op_key, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy(), parent, s_key, s_start,
                     strict=False)
    return _Calls(
        start=np.concatenate([ops["start_ns"].to_numpy()[rows], s_start]),
        end=np.concatenate([ops["end_ns"].to_numpy()[rows], syncs["end_ns"].to_numpy()]),
        name=np.concatenate([ops["name"].to_numpy(dtype=object)[rows], syncs["name"].to_numpy(dtype=object)]),
        key=np.concatenate([op_key[rows], s_key]),
        op=np.concatenate([rows, s_op]),
    )


def _tops(top: np.ndarray, rows: np.ndarray) -> np.ndarray:
    t = top[rows]
    return t[t >= 0]


def _frames(profile: Profile, threads: np.ndarray) -> Layer:
    """Python frames of the feeding threads, each instant labelled with the innermost frame of
    the user's code around it (the outermost frames when every frame is internal)."""
    f = profile.pyfuncs
    if f.empty:
        return Layer.empty()
    key = thread_key(f["pid"].to_numpy(), f["tid"].to_numpy())
    keep = np.isin(key, threads)
    names = f["name"].to_numpy(dtype=object)
    internal = _matches(profile, "pyfuncs", "name", _INTERNAL_FRAME)
    rows = np.flatnonzero(keep & ~internal)
    if not len(rows):
        rows = np.flatnonzero(keep & (f["depth"].to_numpy() == 0))
    return _deepest(f["start_ns"].to_numpy()[rows], f["end_ns"].to_numpy()[rows], f["depth"].to_numpy()[rows],
                    names[rows])


def _deepest(start: np.ndarray, end: np.ndarray, depth: np.ndarray, label: np.ndarray) -> Layer:
    """Nested intervals made disjoint so that every instant carries its deepest interval's label:
    each depth level is laid over what the deeper levels left uncovered."""
    if not len(start):
        return Layer.empty()
    parts: list[Layer] = []
    covered = Spans.empty()
    for d in np.unique(depth)[::-1]:
        at = depth == d
        level = Layer.of(start[at], end[at], label[at])
        free = Spans.of(level.start, level.end) - covered
        idx, _, s, e = overlaps(level.start, level.end, free.start, free.end)
        parts.append(Layer(s, e, level.label[idx]))
        covered = covered | Spans.of(level.start, level.end)
    s = np.concatenate([p.start for p in parts])
    order = np.argsort(s, kind="stable")
    return Layer(s[order], np.concatenate([p.end for p in parts])[order],
                 np.concatenate([p.label for p in parts])[order])


def _matches(profile: Profile, table: str, column: str, pattern: re.Pattern[str]) -> np.ndarray:
    """``pattern`` searched in each distinct text of ``profile.<table>[column]`` once."""
    codes, distinct = profile.codes(table, column)
    if not len(codes):
        return np.zeros(0, dtype=bool)
    hit = pd.Series(distinct, dtype=object).str.contains(pattern).to_numpy(dtype=bool)
    return hit[codes]
