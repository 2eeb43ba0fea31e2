"""Load a torch.profiler (Kineto) GPU trace into the profile model.

:mod:`.gpu_read` parses the trace (in pieces) into the :mod:`.gpu_events` columns of the events that have a role;
only ``traceEvents`` is used (plus ``distributedInfo.rank`` for ``info``). Everything here
(linking, nesting, steps, memory pairing) works on those columns.

Kernels are linked to the host op that launched them by ``args.correlation`` of the launch call
(any of :data:`.gpu_events.LAUNCH_CATS`: CUDA runtime or driver API, HIP; exact, and it also
reaches kernels replayed by ``cudaGraphLaunch`` that have no flow). The reference links by flow
events keyed on a bare timestamp instead (spec §3.2); flows remain our fallback for kernels
without a correlation match, honouring ``--gpu-flow-cat``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..model import (
    COMM_OPS,
    FWDBWD,
    KERNELS,
    MEMORY,
    OP_MEMORY,
    OPS,
    PYFUNCS,
    Profile,
    ProfileMeta,
    empty,
    frame,
)
from ..notes import Note
from ..options import LoadOptions
from ..text_codes import among
from ..timeline import interval_order, nest, thread_ids
from .common import assign_step, is_module_name, is_step_name, per_name, steps_of_ops
from .detect import Source
from .gpu_events import FLOW, FWDBWD as _FWDBWD, KERNEL, LAUNCH_CATS, MEMORY as _MEMORY, OP, PYFUNC, Events
from .gpu_events import factorize, ints
from .gpu_read import read_trace

_LAUNCH_CATS = frozenset(LAUNCH_CATS)


def load_gpu(src: Source, opts: LoadOptions) -> Profile:
    """Read the GPU trace of ``src`` into a :class:`Profile` (InputError on bad input)."""
    assert src.trace is not None
    path = src.trace
    notes = list(src.notes)
    doc, ev = read_trace(path, opts, notes)

    ops = _ops(ev)
    steps = steps_of_ops(ops)
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    kernels = _kernels(ev, ops, steps)
    comm = kernels[kernels["is_comm"].to_numpy()]
    comm_ops = frame(COMM_OPS, {"name": comm["name"], "op_type": comm["name"],
                                "start_ns": comm["start_ns"], "dur_ns": comm["dur_ns"],
                                "link": comm["link"], "step": comm["step"]})
    memory, op_memory = (_memory(ev, notes) if opts.load_memory
                         else (empty(MEMORY), empty(OP_MEMORY)))
    if kernels.empty:
        notes.append(Note("the trace has no kernel, gpu_memcpy or gpu_memset events "
                          "(was the profiler run with ProfilerActivity.CUDA?)"))

    meta = ProfileMeta(
        kind="gpu", source=src.given, framework="pytorch", export="json", level="file",
        rank=_rank(doc), device=_device(ev), files_used=[str(path)], notes=notes,
        with_stack=bool(len(ev.rows(PYFUNC))) or _any_text(ops["call_stack"]),
        profile_memory=bool(len(ev.rows(_MEMORY))),
        record_shapes=_any_text(ops["input_dims"]),
        backward_tid=_backward_tid(ev),
    )
    return Profile(meta=meta, kernels=kernels, ops=ops, pyfuncs=_pyfuncs(ev), fwdbwd=_fwdbwd(ev),
                   comm_ops=comm_ops, memory=memory, op_memory=op_memory, steps=steps)


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def _nested(ev: Events, role: int) -> tuple[np.ndarray, ...]:
    """Rows of ``role`` in interval order (the model's row order for nested tables: start,
    longer first, file order), their positions among the role's rows (for :meth:`Events.at`),
    start, end, pid, tid and per-thread nesting."""
    rows = ev.rows(role)
    start = ev.ts[rows]
    end = start + ev.dur[rows]
    pos = interval_order(start, end)  # ties in position order: file order
    rows, start, end = rows[pos], start[pos], end[pos]
    pid, tid = ev.pid[rows], ev.tid[rows]
    parent, depth = nest(thread_ids(pid, tid), start, end)
    return rows, pos, start, end, pid, tid, parent, depth


def _ops(ev: Events) -> pd.DataFrame:
    rows, pos, start, end, pid, tid, parent, depth = _nested(ev, OP)
    f = ev.at(OP, pos)
    names = pd.Series(f["name"], dtype=object)
    runtime = among(ev.cat[rows], _LAUNCH_CATS)
    link = np.where(runtime, f["correlation"], -1)
    is_step = is_step_name(names)
    return frame(OPS, {
        "name": names,
        "cat": ev.cat[rows],
        "pid": pid,
        "tid": tid,
        "start_ns": start,
        "end_ns": end,
        "input_dims": f["Input Dims"],
        "input_types": f["Input type"],
        "call_stack": f["Call stack"],
        "link": link,
        "parent": parent,
        "depth": depth,
        "is_step": is_step,
    }, owned=True)


def _kernels(ev: Events, ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    rows = ev.rows(KERNEL)
    pos = np.argsort(ev.ts[rows], kind="stable")  # by time, then file order
    rows = rows[pos]
    f = ev.at(KERNEL, pos)
    names = pd.Series(f["name"], dtype=object)
    start = ev.ts[rows]
    link = f["correlation"]
    op_row = _by_correlation(link, ops)
    missing = op_row < 0
    if missing.any():
        op_row[missing] = _by_flow(ev, ops, ev.pid[rows][missing], ev.tid[rows][missing],
                                   start[missing])
    return frame(KERNELS, {
        "name": names,
        "task_type": ev.cat[rows],
        "stream": f["stream"],
        "start_ns": start,
        "dur_ns": ev.dur[rows],
        "step": assign_step(start, steps),
        "link": link,
        "op_row": op_row,
        "is_comm": per_name(names, lambda s: s.str.lower().str.startswith("nccl")),
        "in_trace": np.ones(len(rows), dtype=bool),
        "has_details": np.zeros(len(rows), dtype=bool),
    }, owned=True)


def _by_correlation(link: np.ndarray, ops: pd.DataFrame) -> np.ndarray:
    """Row of the host op carrying the same correlation id (first one), -1 if none."""
    op_link = ops["link"].to_numpy()
    has = np.flatnonzero(op_link >= 0)
    index = pd.Index(op_link[has])
    keep = ~index.duplicated()
    index, has = index[keep], has[keep]
    pos = index.get_indexer(link)
    out = np.full(len(link), -1, dtype="int64")
    hit = (pos >= 0) & (link >= 0)
    out[hit] = has[pos[hit]]
    return out


def _by_flow(ev: Events, ops: pd.DataFrame, pid: np.ndarray, tid: np.ndarray,
             ts: np.ndarray) -> np.ndarray:
    """Launching op of kernels via flow pairs: the ``f`` end sits at the kernel's (pid, tid, ts),
    the ``s`` end at the launching op's (pid, tid, ts); the innermost op starting there wins
    (the first in row order among equally deep ones).

    Only the pairs, then the ops, at one of the times looked for take part (a key's rows share
    its time, so each key keeps all its rows, in order): the few kernels without a correlation
    match (614 of 15.6k on the real A100 trace) no longer cost a sort and a copy of every op
    (18 → 6 ms)."""
    out = np.full(len(ts), -1, dtype="int64")
    pairs = _flow_pairs(ev, FLOW)
    if pairs.empty or ops.empty:
        return out
    pairs = pairs[np.isin(pairs["f_ts"].to_numpy(), ts)]
    pairs = pairs.drop_duplicates(["f_pid", "f_tid", "f_ts"], keep="first")
    want = pd.DataFrame({"kernel": np.arange(len(ts)), "f_pid": pid, "f_tid": tid, "f_ts": ts})
    # Inner joins only: a left join would turn the int64 ns keys into float64 (NaN fill).
    hit = want.merge(pairs, on=["f_pid", "f_tid", "f_ts"])
    start = ops["start_ns"].to_numpy()
    near = np.flatnonzero(np.isin(start, hit["s_ts"].to_numpy()))
    launch = (pd.DataFrame({"pid": ops["pid"].to_numpy()[near], "tid": ops["tid"].to_numpy()[near],
                            "start_ns": start[near], "depth": ops["depth"].to_numpy()[near], "row": near})
              .sort_values("depth", ascending=False, kind="stable")
              .drop_duplicates(["pid", "tid", "start_ns"], keep="first"))
    hit = hit.merge(launch[["pid", "tid", "start_ns", "row"]],
                    left_on=["s_pid", "s_tid", "s_ts"], right_on=["pid", "tid", "start_ns"])
    out[hit["kernel"].to_numpy()] = hit["row"].to_numpy()
    return out


def _flow_pairs(ev: Events, role: int) -> pd.DataFrame:
    """Complete s/f pairs by ``id`` (a repeated end overrides the earlier one, as in the
    reference), ordered by the position of the ``s`` event.

    Columnar: the ids as int64 keys (:func:`_flow_keys`), the last ``s`` and the last ``f`` of
    each key found by a stable sort, the two matched by key (a DataFrame of the ends and two
    ``drop_duplicates`` and a merge cost 7 ms for the 33k fwdbwd ends of a 12-step trace)."""
    rows = ev.rows(role)
    keys, ids = _flow_keys(ev.field(role, "id"))
    ph = ev.ph[rows]
    s_at = _last_per_key(keys, np.flatnonzero((ph == "s") & (keys >= 0)))
    f_at = _last_per_key(keys, np.flatnonzero((ph == "f") & (keys >= 0)))
    _, s_hit, f_hit = np.intersect1d(keys[s_at], keys[f_at], assume_unique=True, return_indices=True)
    by_s = np.argsort(s_at[s_hit])  # positions are unique: the s ends in file order
    s_rows, f_rows = rows[s_at[s_hit][by_s]], rows[f_at[f_hit][by_s]]
    return pd.DataFrame({
        "id": ids[keys[s_at[s_hit][by_s]]] if ids is not None else keys[s_at[s_hit][by_s]],
        "s_pid": ev.pid[s_rows], "s_tid": ev.tid[s_rows], "s_ts": ev.ts[s_rows],
        "f_pid": ev.pid[f_rows], "f_tid": ev.tid[f_rows], "f_ts": ev.ts[f_rows],
    })


def _last_per_key(keys: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Of the positions ``at`` (ascending), the last one of each key, in key order."""
    by_key = at[np.argsort(keys[at], kind="stable")]  # per key, in position order
    k = keys[by_key]
    return by_key[np.append(k[1:] != k[:-1], True)] if len(k) else by_key


def _flow_keys(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Flow ids as int64 join keys (-1: no id) and, where the keys are codes, the id of each
    code. An id may be written 7 or "7": the ids are compared as text (missing → no id), or
    as themselves when every id is an int (the same pairs; no text made of a million ids)."""
    if set(map(type, ids)) <= {int}:
        try:
            values = ids.astype("int64")
        except OverflowError:  # beyond int64: compared as text below
            pass
        else:
            if not len(values) or values.min() >= 0:
                return values, None
            codes, uniq = pd.factorize(values)  # negative ids: numbered (-1 means "no id")
            return codes.astype("int64"), np.asarray(uniq)
    text = pd.Series(ids, dtype=object)
    codes, uniq = pd.factorize(text.map(str).where(text.notna(), None))
    return codes.astype("int64"), np.asarray(uniq, dtype=object)


def _pyfuncs(ev: Events) -> pd.DataFrame:
    _, pos, start, end, pid, tid, parent, depth = _nested(ev, PYFUNC)
    names = pd.Series(ev.at(PYFUNC, pos)["name"], dtype=object)
    return frame(PYFUNCS, {
        "name": names, "pid": pid, "tid": tid, "start_ns": start, "end_ns": end,
        "is_module": is_module_name(names),
        "parent": parent, "depth": depth,
    }, owned=True)


def _fwdbwd(ev: Events) -> pd.DataFrame:
    pairs = _flow_pairs(ev, _FWDBWD)
    ids = pairs["id"].to_numpy()
    return frame(FWDBWD, {
        "id": ids if ids.dtype == np.int64 else ints(ids.tolist()),
        "start_ts_ns": pairs["s_ts"], "start_tid": pairs["s_tid"],
        "end_ts_ns": pairs["f_ts"], "end_pid": pairs["f_pid"], "end_tid": pairs["f_tid"],
    })


def _memory(ev: Events, notes: list[Note]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MEMORY samples and OP_MEMORY alloc/free records from the device ``[memory]`` instants."""
    device = ev.field(_MEMORY, "Device Id")
    pos = np.flatnonzero(device >= 0)
    pos = pos[np.argsort(ev.ts[ev.rows(_MEMORY)[pos]], kind="stable")]  # by time, then file order
    rows, device = ev.rows(_MEMORY)[pos], device[pos]
    ts = ev.ts[rows]
    f = ev.at(_MEMORY, pos)
    memory = frame(MEMORY, {
        "ts_ns": ts, "device": device,
        "total_reserved_bytes": f["Total Reserved"],
        "total_allocated_bytes": f["Total Allocated"],
    }, owned=True)
    return memory, _op_memory(ts, f["Bytes"], _address_keys(f["Addr"]), notes)


def _address_keys(addr: np.ndarray) -> np.ndarray:
    """One int64 per ``Addr`` value, equal exactly for equal addresses: the addresses themselves
    where all are ints that fit int64 (as Kineto writes them), else codes of the values
    (:func:`.gpu_events.factorize`: numbering 58k int objects costs 8 ms, twice a dict pass)."""
    if set(map(type, addr)) <= {int}:
        try:
            return addr.astype("int64")
        except OverflowError:  # beyond int64: numbered below
            pass
    return factorize(addr.tolist())[0]


def _op_memory(ts: np.ndarray, size: np.ndarray, addr: np.ndarray, notes: list[Note]) -> pd.DataFrame:
    """Pair allocations with frees per address (spec comparisons §5.1).

    Inputs are in time order. Per address, each allocation is closed by the event right after it: a free
    sets its release time; another allocation (or nothing) leaves it unreleased. A free that
    follows no allocation is ignored. Unlike the reference, a free whose size differs from the
    allocation still releases it instead of silently dropping the allocation. ``addr``: one
    int64 key per address (:func:`_address_keys`).
    """
    live = np.flatnonzero(size != 0)
    live = live[np.argsort(addr[live], kind="stable")]  # per address, still in time order
    key, t, z = addr[live], ts[live], size[live]
    same_next = np.append(key[1:] == key[:-1], False)
    next_size = np.append(z[1:], 0)
    alloc = z > 0
    freed = alloc & same_next & (next_size < 0)
    release = np.where(freed, np.append(t[1:], -1), -1)
    mismatch = int((freed & (-next_size != z)).sum())
    if mismatch:
        notes.append(Note(f"{mismatch} memory frees differ in size from their allocation; "
                          "paired anyway (the reference drops those allocations)"))
    order = np.argsort(live[alloc], kind="stable")  # back to time (then file) order
    out = {"size": z[alloc][order], "ts": t[alloc][order], "release": release[alloc][order]}
    return frame(OP_MEMORY, {"size_bytes": out["size"], "place_ns": out["ts"], "alloc_ns": out["ts"],
                             "release_ns": out["release"]}, n=len(out["ts"]))


# ---------------------------------------------------------------------------------------------
# Meta
# ---------------------------------------------------------------------------------------------


def _any_text(col: pd.Series) -> bool:
    """Whether a text column (all ``str``, as :func:`..model.frame` makes it) has a non-empty
    cell: ``any`` stops at the first one (comparing every cell with "" cost 8 ms on the 0.2M
    ops of a 12-step trace)."""
    return any(col.to_numpy())


def _rank(doc: dict[str, Any]) -> int | None:
    info = doc.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if type(rank) is int else None


def _backward_tid(ev: Events) -> int:
    """tid of the first ``fwdbwd`` flow end in file order (the autograd thread), -1 if none."""
    rows = ev.rows(_FWDBWD)
    ends = rows[ev.ph[rows] == "f"]
    return int(ev.tid[ends[0]]) if len(ends) else -1


def _device(ev: Events) -> int | None:
    """The device the kernels ran on (the most frequent ``args.device``)."""
    devices = ev.field(KERNEL, "device")
    devices = devices[devices >= 0]
    if not len(devices):
        return None
    values, counts = np.unique(devices, return_counts=True)
    return int(values[counts.argmax()])
