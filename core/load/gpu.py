"""Load a torch.profiler (Kineto) GPU trace into the profile model.

The trace is parsed once with orjson; only ``traceEvents`` is used (plus ``distributedInfo.rank``
for ``info``). Events are classified by ``ph``/``cat`` in a vectorised pass, the fields every role
needs are pulled out with one list comprehension each, and everything after that (linking,
nesting, steps, memory pairing) is done on columns.

Kernels are linked to the host op that launched them by ``args.correlation`` (exact, and it also
reaches kernels replayed by ``cudaGraphLaunch`` that have no flow). The reference links by flow
events keyed on a bare timestamp instead (spec §3.2); flows remain our fallback for kernels
without a correlation match, honouring ``--gpu-flow-cat``.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
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
from ..options import JSON_CAP, LoadOptions
from .common import assign_step, float_us_to_ns, is_step_name, nest, steps_from_ops, us_to_ns
from .detect import Source

OP_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "operator", "runtime")
#: Host ops that carry the ``correlation`` id shared with the kernels they launch.
RUNTIME_CATS = ("cuda_runtime", "runtime")
KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
PYFUNC_CAT = "python_function"
FWDBWD_CAT = "fwdbwd"
MEMORY_NAME = "[memory]"

# Event roles (one per event, like the reference's single-picker dispatch).
_NONE, _OP, _KERNEL, _PYFUNC, _FLOW, _FWDBWD, _MEMORY = range(7)

#: Above 2**43 µs a float64 step exceeds 1 ns, so a fractional ``ts`` parsed as a float no longer
#: converts to the exact ns the file holds (epoch-based "ns resolution" traces: step 0.25 µs).
_FLOAT_EXACT_LIMIT = 2.0**43
#: Largest |µs| whose ns still fits int64.
_MAX_US = 9.2e15
_TS_RE = re.compile(rb'"ts"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')
_NON_JSON_TOKENS = (b"NaN", b"Infinity")
_UTF8_BOM = b"\xef\xbb\xbf"
_GZ_CHUNK = 16 * 1024 * 1024


def load_gpu(src: Source, opts: LoadOptions) -> Profile:
    """Read the GPU trace of ``src`` into a :class:`Profile` (InputError on bad input)."""
    assert src.trace is not None
    path = src.trace
    notes = list(src.notes)
    raw = _read_bytes(path, None if opts.force else JSON_CAP)
    doc = _parse(path, raw, notes)
    events = _trace_events(path, doc, notes)
    ev = _columns(events, raw, opts, notes)

    ops = _ops(ev)
    markers = ops[ops["is_step"].to_numpy()]  # the only rows steps_from_ops would keep
    steps = steps_from_ops(markers["name"], markers["start_ns"], markers["end_ns"])
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    kernels = _kernels(ev, ops, steps)
    comm = kernels[kernels["is_comm"].to_numpy()]
    comm_ops = frame(COMM_OPS, {"name": comm["name"], "op_type": comm["name"],
                                "start_ns": comm["start_ns"], "dur_ns": comm["dur_ns"],
                                "link": comm["link"], "step": comm["step"]})
    memory, op_memory = (_memory(ev, notes) if opts.load_memory
                         else (empty(MEMORY), empty(OP_MEMORY)))
    if kernels.empty:
        notes.append("the trace has no kernel, gpu_memcpy or gpu_memset events "
                     "(was the profiler run with ProfilerActivity.CUDA?)")

    meta = ProfileMeta(
        kind="gpu", source=src.given, framework="pytorch", export="json", level="file",
        rank=_rank(doc), device=_device(ev), files_used=[str(path)], notes=notes,
        with_stack=bool((ev.role == _PYFUNC).any() or (ops["call_stack"] != "").any()),
        profile_memory=bool((ev.role == _MEMORY).any()),
        record_shapes=bool((ops["input_dims"] != "").any()),
        backward_tid=_backward_tid(ev),
    )
    return Profile(meta=meta, kernels=kernels, ops=ops, pyfuncs=_pyfuncs(ev), fwdbwd=_fwdbwd(ev),
                   comm_ops=comm_ops, memory=memory, op_memory=op_memory, steps=steps)


# ---------------------------------------------------------------------------------------------
# Reading and parsing
# ---------------------------------------------------------------------------------------------


def _read_bytes(path: Path, limit: int | None) -> bytes:
    """The decompressed file content; gzip and I/O failures become InputError.

    The size cap checked before reading applies to the *compressed* size of a ``.gz``; so that a
    small file cannot expand without bound (a gzip bomb), the decompressed content is held to
    the same ``limit`` as a plain trace (``None``: ``--force``, no limit).
    """
    try:
        if path.name.lower().endswith(".gz"):
            data = _gunzip(path, limit)
        else:
            data = path.read_bytes()
    except gzip.BadGzipFile:
        raise InputError(path, "is not a valid gzip file") from None
    except EOFError:
        raise InputError(path, "is truncated (the gzip stream ends early)") from None
    except zlib.error as exc:
        raise InputError(path, f"is a corrupt gzip file ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    return data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data


def _gunzip(path: Path, limit: int | None) -> bytes:
    """Decompress in chunks (``read(limit + 1)`` would reserve ``limit`` bytes up front)."""
    chunks: list[bytes] = []
    total = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(_GZ_CHUNK):
            total += len(chunk)
            if limit is not None and total > limit:
                raise InputError(path, f"decompresses to more than {limit:,} bytes, the limit for "
                                       ".json traces; pass --force to read it anyway")
            chunks.append(chunk)
    return b"".join(chunks)


def _parse(path: Path, raw: bytes, notes: list[str]) -> Any:
    """orjson parse. Python's ``json`` writes NaN/Infinity, which orjson rejects; a trace re-saved
    by such a script is retried with the stdlib parser (only on that failure path)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        error = exc
    if any(token in raw for token in _NON_JSON_TOKENS):
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            pass
        else:
            notes.append("the trace contains NaN/Infinity values (not standard JSON); read anyway")
            return doc
    # orjson reports a character offset; users inspect files with byte-oriented tools.
    byte = len(raw.decode("utf-8", "replace")[: error.pos].encode("utf-8"))
    raise InputError(path, f"is not valid JSON ({error.msg} at byte {byte})")


def _trace_events(path: Path, doc: Any, notes: list[str]) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        kind = "an array" if isinstance(doc, list) else type(doc).__name__
        raise InputError(path, f"is not a torch.profiler trace (top level is {kind}, "
                               "expected an object with traceEvents)")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise InputError(path, "is not a torch.profiler trace (no traceEvents list)")
    kept = [e for e in events if type(e) is dict]
    if len(kept) != len(events):
        notes.append(f"{len(events) - len(kept)} traceEvents entries are not objects; ignored")
    return kept


# ---------------------------------------------------------------------------------------------
# Event columns
# ---------------------------------------------------------------------------------------------


class _Events:
    """Columns of every event that has a role, in file order (positions = ``order``).

    Names and args are pulled lazily per role: flows (a third of a Kineto trace) need neither.
    """

    def __init__(self, role: np.ndarray, ph: np.ndarray, cat: np.ndarray, sub: list[dict[str, Any]],
                 pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
        self.role = role
        self.ph = ph
        self.cat = cat
        self.sub = sub
        self.pid = pid
        self.tid = tid
        self.ts = ts
        self.dur = dur
        self.order = np.arange(len(sub), dtype="int64")

    def rows(self, role: int) -> np.ndarray:
        return np.flatnonzero(self.role == role)

    def names(self, rows: np.ndarray) -> pd.Series:
        sub = self.sub
        names = [sub[i].get("name", "") for i in rows.tolist()]
        if set(map(type, names)) <= {str}:
            return pd.Series(names, dtype=object)
        return pd.Series([n if type(n) is str else "" if n is None else str(n) for n in names],
                         dtype=object)

    def args(self, rows: np.ndarray) -> list[dict[str, Any]]:
        sub = self.sub
        return [a if type(a := sub[i].get("args")) is dict else {} for i in rows.tolist()]


def _pick(args: list[dict[str, Any]], key: str) -> list[Any]:
    return [a.get(key) for a in args]


def _columns(events: list[dict[str, Any]], raw: bytes, opts: LoadOptions,
             notes: list[str]) -> _Events:
    """Classify every event and extract the shared fields of those with a role."""
    ph_codes, ph_uniq = _factorize([e.get("ph") for e in events])
    cat_codes, cat_uniq = _factorize([e.get("cat") for e in events])
    ph_of = np.array(ph_uniq + [""], dtype=object)[ph_codes]
    cat_low = [c.lower() for c in cat_uniq]
    cat_role = np.array([_cat_role(c, opts) for c in cat_low] + [_NONE], dtype="int64")
    role = cat_role[cat_codes]
    cat_of = np.array(cat_low + [""], dtype=object)[cat_codes]

    interval = ph_of == "X"
    flow_end = np.isin(ph_of, ("s", "f"))
    role[np.isin(role, (_OP, _KERNEL, _PYFUNC)) & ~interval] = _NONE
    role[np.isin(role, (_FLOW, _FWDBWD)) & ~flow_end] = _NONE

    candidates = np.flatnonzero((role == _NONE) & (ph_of != "M"))
    is_mem = [str(events[i].get("name", "")).lower() == MEMORY_NAME for i in candidates.tolist()]
    role[candidates[np.array(is_mem, dtype=bool)]] = _MEMORY

    sel = np.flatnonzero(role != _NONE)
    sub = [events[i] for i in sel.tolist()]
    ts, ok = _timestamps(events, sel, sub, raw, notes)
    dur, _ = _us_values([e.get("dur", 0) for e in sub])
    if not ok.all():
        notes.append(f"{int((~ok).sum())} events without a numeric ts ignored")
    bad_dur = int(((dur < 0) & ok & np.isin(role[sel], (_OP, _KERNEL, _PYFUNC))).sum())
    if bad_dur:
        notes.append(f"{bad_dur} events with a negative or non-numeric dur are counted as 0 µs")
    ident = _idents([e.get("pid") for e in sub], [e.get("tid") for e in sub])
    keep = np.flatnonzero(ok)
    return _Events(role[sel][keep], ph_of[sel][keep], cat_of[sel][keep],
                   [sub[i] for i in keep.tolist()], ident[0][keep], ident[1][keep], ts[keep],
                   np.maximum(dur[keep], 0))


def _factorize(values: list[Any]) -> tuple[np.ndarray, list[str]]:
    """Codes (-1 for None) and unique values as text; unhashable values (lists, objects) are
    compared by their repr."""
    try:
        codes, uniq = pd.factorize(pd.Series(values, dtype=object))
    except TypeError:
        texts = [v if v is None or type(v) is str else repr(v) for v in values]
        codes, uniq = pd.factorize(pd.Series(texts, dtype=object))
    return codes, [str(u) for u in uniq]


def _scalars(values: list[Any]) -> pd.Series:
    """Numbers and strings as an object Series; anything else (lists, objects, bools) → None."""
    return pd.Series([v if type(v) in (int, float, str) else None for v in values], dtype=object)


def _numeric_array(values: list[Any]) -> np.ndarray | None:
    """A 1-D int64/float64 array when every value is a plain number (the fast, common case)."""
    try:
        arr = np.asarray(values)
    except (ValueError, OverflowError):  # ragged nested lists
        return None
    return arr if arr.ndim == 1 and arr.dtype.kind in "if" else None


def _cat_role(cat: str, opts: LoadOptions) -> int:
    if cat in OP_CATS:
        return _OP
    if cat in KERNEL_CATS:
        return _KERNEL
    if cat == PYFUNC_CAT:
        return _PYFUNC
    if cat == FWDBWD_CAT:
        return _FWDBWD
    if cat in opts.flow_cats:
        return _FLOW
    return _NONE


def _us_values(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """µs values as read by orjson (int, float, or anything else) → (int64 ns, valid mask)."""
    arr = _numeric_array(values)
    if arr is not None and arr.dtype.kind == "i":
        ok = np.abs(arr) < _MAX_US
        return np.where(ok, arr.astype("int64") * 1000, -1), ok
    if arr is not None:
        ok = np.abs(arr) < _MAX_US
        return float_us_to_ns(np.where(ok, arr, np.nan)), ok
    s = _scalars(values)
    ok = (np.abs(pd.to_numeric(s, errors="coerce").to_numpy(dtype="float64")) < _MAX_US)
    return np.where(ok, us_to_ns(s.where(ok, "")), -1), ok


def _timestamps(events: list[dict[str, Any]], sel: np.ndarray, sub: list[dict[str, Any]],
                raw: bytes, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``ts`` of the selected events in exact int64 ns.

    orjson yields binary floats; for epoch-based fractional µs (``1712195495519701.250``) a float
    cannot hold the ns digits, which shifts kernel ticks and start-time joins. Only then are the
    ``ts`` texts re-read from the raw bytes and converted digit by digit.
    """
    values = [e.get("ts") for e in sub]
    ns, ok = _us_values(values)
    floats = np.array([v for v in values if type(v) is float], dtype="float64")
    if not len(floats) or np.abs(floats).max() < _FLOAT_EXACT_LIMIT:
        return ns, ok
    texts = _ts_texts(events, raw)
    if texts is None:
        notes.append("fractional epoch timestamps could not be re-read exactly; "
                     "times are rounded to float precision (0.25 µs)")
        return ns, ok
    picked = pd.Series([texts[i] for i in sel.tolist()], dtype=object)
    digits = (picked.notna() & ~picked.fillna("").str.contains("[eE]")).to_numpy()
    return np.where(digits, us_to_ns(picked.fillna("")), ns), ok


def _ts_texts(events: list[dict[str, Any]], raw: bytes) -> list[str | None] | None:
    """The literal ``ts`` text of every event (None without ts), aligned by value with the
    ``"ts": <number>`` occurrences in the file; None when they cannot be aligned."""
    found = _TS_RE.findall(raw)
    with_ts = [i for i, e in enumerate(events) if isinstance(e.get("ts"), (int, float))]
    values = np.array([events[i]["ts"] for i in with_ts], dtype="float64")
    found_f = np.array(found, dtype=bytes).astype("float64") if found else np.empty(0)
    if len(found_f) == len(values) and np.array_equal(found_f, values):
        chosen = list(range(len(found)))
    else:
        chosen = []
        j = 0
        for v in values.tolist():  # rare: extra "ts" keys (inside args, outside traceEvents)
            while j < len(found_f) and found_f[j] != v:
                j += 1
            if j == len(found_f):
                return None
            chosen.append(j)
            j += 1
    out: list[str | None] = [None] * len(events)
    for i, j in zip(with_ts, chosen):
        out[i] = found[j].decode("ascii")
    return out


def _idents(pids: list[Any], tids: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """pid/tid as int64; non-numeric ids (``"Spans"``) get distinct codes -2, -3 … so threads stay
    apart, missing ones -1."""
    values = pids + tids
    ints = _ints(values)
    unset = np.flatnonzero(ints == -1)
    text = unset[[type(values[i]) is str for i in unset.tolist()]] if len(unset) else unset
    if len(text):
        codes, _ = _factorize([values[i] for i in text.tolist()])
        ints[text] = -2 - codes
    return ints[: len(pids)], ints[len(pids):]


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def _interval_order(start: np.ndarray, end: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Sort by start, longer first, then file order (the model's row order for nested tables)."""
    return np.lexsort((order, -end, start))


def _thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return pd.DataFrame({"p": pid, "t": tid}).groupby(["p", "t"], sort=False).ngroup().to_numpy()


def _render(values: list[Any]) -> list[str]:
    """``str()`` of each value ("" for None); equal lists are rendered once (shapes repeat)."""
    cache: dict[bytes, str] = {}
    out = []
    for v in values:
        if v is None:
            out.append("")
        elif type(v) is str:
            out.append(v)
        else:
            try:
                key = orjson.dumps(v)
            except orjson.JSONEncodeError:  # only after the stdlib fallback (ints beyond 64 bits)
                out.append(str(v))
                continue
            text = cache.get(key)
            if text is None:
                text = cache[key] = str(v)
            out.append(text)
    return out


def _nested(ev: _Events, role: int) -> tuple[np.ndarray, ...]:
    """Rows of ``role`` in interval order with start, end, pid, tid and per-thread nesting."""
    rows = ev.rows(role)
    start = ev.ts[rows]
    end = start + ev.dur[rows]
    idx = _interval_order(start, end, ev.order[rows])
    rows, start, end = rows[idx], start[idx], end[idx]
    pid, tid = ev.pid[rows], ev.tid[rows]
    parent, depth = nest(_thread_key(pid, tid), start, end)
    return rows, start, end, pid, tid, parent, depth


def _ops(ev: _Events) -> pd.DataFrame:
    rows, start, end, pid, tid, parent, depth = _nested(ev, _OP)
    names = ev.names(rows)
    args = ev.args(rows)
    runtime = np.flatnonzero(np.isin(ev.cat[rows], RUNTIME_CATS))
    link = np.full(len(rows), -1, dtype="int64")
    link[runtime] = _ints(_pick([args[i] for i in runtime.tolist()], "correlation"))
    # Only names mentioning the marker go through the (slower) regex test.
    maybe_step = np.flatnonzero(["ProfilerStep#" in n for n in names])
    is_step = np.zeros(len(rows), dtype=bool)
    is_step[maybe_step] = is_step_name(names.iloc[maybe_step])
    return frame(OPS, {
        "name": names,
        "cat": ev.cat[rows],
        "pid": pid,
        "tid": tid,
        "start_ns": start,
        "end_ns": end,
        "input_dims": _render(_pick(args, "Input Dims")),
        "input_types": _render(_pick(args, "Input type")),
        "call_stack": _render(_pick(args, "Call stack")),
        "link": link,
        "parent": parent,
        "depth": depth,
        "is_step": is_step,
    })


def _kernels(ev: _Events, ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    rows = ev.rows(_KERNEL)
    rows = rows[np.lexsort((ev.order[rows], ev.ts[rows]))]
    names = ev.names(rows)
    args = ev.args(rows)
    start = ev.ts[rows]
    link = _ints(_pick(args, "correlation"))
    op_row = _by_correlation(link, ops)
    missing = op_row < 0
    if missing.any():
        op_row[missing] = _by_flow(ev, ops, ev.pid[rows][missing], ev.tid[rows][missing],
                                   start[missing])
    return frame(KERNELS, {
        "name": names,
        "task_type": ev.cat[rows],
        "stream": _ints(_pick(args, "stream")),
        "start_ns": start,
        "dur_ns": ev.dur[rows],
        "step": assign_step(start, steps),
        "link": link,
        "op_row": op_row,
        "is_comm": names.str.lower().str.startswith("nccl").to_numpy(dtype=bool),
        "in_trace": np.ones(len(rows), dtype=bool),
        "has_details": np.zeros(len(rows), dtype=bool),
    })


def _ints(values: list[Any]) -> np.ndarray:
    """Integer values (-1 when missing or not a number)."""
    for candidate in (values, [-1 if v is None else v for v in values]):  # ints, ints with gaps
        arr = _numeric_array(candidate)
        if arr is not None and arr.dtype.kind == "i":
            return arr.astype("int64")
    num = pd.to_numeric(_scalars(values), errors="coerce").to_numpy(dtype="float64")
    return np.where(np.abs(num) < 2.0**63, num, -1).astype("int64")


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


def _by_flow(ev: _Events, ops: pd.DataFrame, pid: np.ndarray, tid: np.ndarray,
             ts: np.ndarray) -> np.ndarray:
    """Launching op of kernels via flow pairs: the ``f`` end sits at the kernel's (pid, tid, ts),
    the ``s`` end at the launching op's (pid, tid, ts); the innermost op starting there wins."""
    pairs = _flow_pairs(ev, _FLOW)
    if pairs.empty or ops.empty:
        return np.full(len(ts), -1, dtype="int64")
    pairs = pairs.drop_duplicates(["f_pid", "f_tid", "f_ts"], keep="first")
    launch = (ops.assign(row=np.arange(len(ops)))
              .sort_values("depth", ascending=False, kind="stable")
              .drop_duplicates(["pid", "tid", "start_ns"], keep="first"))
    want = pd.DataFrame({"kernel": np.arange(len(ts)), "f_pid": pid, "f_tid": tid, "f_ts": ts})
    # Inner joins only: a left join would turn the int64 ns keys into float64 (NaN fill).
    hit = want.merge(pairs, on=["f_pid", "f_tid", "f_ts"])
    hit = hit.merge(launch[["pid", "tid", "start_ns", "row"]],
                    left_on=["s_pid", "s_tid", "s_ts"], right_on=["pid", "tid", "start_ns"])
    out = np.full(len(ts), -1, dtype="int64")
    out[hit["kernel"].to_numpy()] = hit["row"].to_numpy()
    return out


def _flow_pairs(ev: _Events, role: int) -> pd.DataFrame:
    """Complete s/f pairs by ``id`` (a repeated end overrides the earlier one, as in the
    reference), ordered by the position of the ``s`` event."""
    rows = ev.rows(role)
    df = pd.DataFrame({
        "id": pd.Series([ev.sub[i].get("id") for i in rows.tolist()], dtype=object),
        "ph": ev.ph[rows], "pid": ev.pid[rows], "tid": ev.tid[rows], "ts": ev.ts[rows],
        "order": ev.order[rows],
    })
    df = df[df["id"].notna()]
    df["id"] = df["id"].map(str)
    s = df[df["ph"] == "s"].drop_duplicates("id", keep="last")
    f = df[df["ph"] == "f"].drop_duplicates("id", keep="last")
    pairs = s.merge(f, on="id", suffixes=("_s", "_f")).sort_values("order_s", kind="stable")
    return pd.DataFrame({
        "id": pairs["id"].to_numpy(),
        "s_pid": pairs["pid_s"].to_numpy(), "s_tid": pairs["tid_s"].to_numpy(),
        "s_ts": pairs["ts_s"].to_numpy(),
        "f_pid": pairs["pid_f"].to_numpy(), "f_tid": pairs["tid_f"].to_numpy(),
        "f_ts": pairs["ts_f"].to_numpy(),
    })


def _pyfuncs(ev: _Events) -> pd.DataFrame:
    rows, start, end, pid, tid, parent, depth = _nested(ev, _PYFUNC)
    names = ev.names(rows)
    return frame(PYFUNCS, {
        "name": names, "pid": pid, "tid": tid, "start_ns": start, "end_ns": end,
        "is_module": names.str.lower().str.startswith("nn.module:").to_numpy(dtype=bool),
        "parent": parent, "depth": depth,
    })


def _fwdbwd(ev: _Events) -> pd.DataFrame:
    pairs = _flow_pairs(ev, _FWDBWD)
    return frame(FWDBWD, {
        "id": _ints(pairs["id"].tolist()),
        "start_ts_ns": pairs["s_ts"], "start_tid": pairs["s_tid"],
        "end_ts_ns": pairs["f_ts"], "end_pid": pairs["f_pid"], "end_tid": pairs["f_tid"],
    })


def _memory(ev: _Events, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MEMORY samples and OP_MEMORY alloc/free records from the device ``[memory]`` instants."""
    rows = ev.rows(_MEMORY)
    device = _ints(_pick(ev.args(rows), "Device Id"))
    rows, device = rows[device >= 0], device[device >= 0]
    by_time = np.lexsort((ev.order[rows], ev.ts[rows]))
    rows, device = rows[by_time], device[by_time]
    ts = ev.ts[rows]
    args = ev.args(rows)
    memory = frame(MEMORY, {
        "ts_ns": ts, "device": device,
        "total_reserved_bytes": _ints(_pick(args, "Total Reserved")),
        "total_allocated_bytes": _ints(_pick(args, "Total Allocated")),
    })
    return memory, _op_memory(ts, _ints(_pick(args, "Bytes")), _pick(args, "Addr"), notes)


def _op_memory(ts: np.ndarray, size: np.ndarray, addr: list[Any], notes: list[str]) -> pd.DataFrame:
    """Pair allocations with frees per address (spec comparisons §5.1).

    Inputs are in time order. Per address, each allocation is closed by the event right after it: a free
    sets its release time; another allocation (or nothing) leaves it unreleased. A free that
    follows no allocation is ignored. Unlike the reference, a free whose size differs from the
    allocation still releases it instead of silently dropping the allocation.
    """
    codes, _ = _factorize(addr)
    live = np.flatnonzero(size != 0)
    live = live[np.argsort(codes[live], kind="stable")]  # per address, still in time order
    key, t, z = codes[live], ts[live], size[live]
    same_next = np.append(key[1:] == key[:-1], False)
    next_size = np.append(z[1:], 0)
    alloc = z > 0
    freed = alloc & same_next & (next_size < 0)
    release = np.where(freed, np.append(t[1:], -1), -1)
    mismatch = int((freed & (-next_size != z)).sum())
    if mismatch:
        notes.append(f"{mismatch} memory frees differ in size from their allocation; "
                     "paired anyway (the reference drops those allocations)")
    order = np.argsort(live[alloc], kind="stable")  # back to time (then file) order
    out = {"size": z[alloc][order], "ts": t[alloc][order], "release": release[alloc][order]}
    return frame(OP_MEMORY, {"size_bytes": out["size"], "place_ns": out["ts"], "alloc_ns": out["ts"],
                             "release_ns": out["release"]}, n=len(out["ts"]))


# ---------------------------------------------------------------------------------------------
# Meta
# ---------------------------------------------------------------------------------------------


def _rank(doc: dict[str, Any]) -> int | None:
    info = doc.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if type(rank) is int else None


def _backward_tid(ev: _Events) -> int:
    """tid of the first ``fwdbwd`` flow end in file order (the autograd thread), -1 if none."""
    ends = np.flatnonzero((ev.role == _FWDBWD) & (ev.ph == "f"))
    return int(ev.tid[ends[0]]) if len(ends) else -1


def _device(ev: _Events) -> int | None:
    """The device the kernels ran on (the most frequent ``args.device``)."""
    devices = _ints(_pick(ev.args(ev.rows(_KERNEL)), "device"))
    devices = devices[devices >= 0]
    if not len(devices):
        return None
    values, counts = np.unique(devices, return_counts=True)
    return int(values[counts.argmax()])
