"""Read a torch.profiler (Kineto) trace into compact columns of the events the loader uses.

Why in pieces: one ``orjson.loads`` of a whole trace keeps every event dict alive at once —
about eight bytes of Python objects per byte of JSON, 1.8 GB for a 225 MB trace — and the
allocator's page faults then make a large trace slower *per event* than a small one. So the
``traceEvents`` array is cut at event boundaries into pieces of about :data:`PIECE_BYTES`; each
piece is parsed, reduced to the columns the tables need (numbers as numpy arrays, repeated texts
stored once), and its dicts are dropped before the next piece is parsed.

A cut is only made at ``}`` ``,`` ``{``. Because every piece starts at a true event boundary, a
cut that falls inside a string or a nested object leaves the piece unbalanced, which orjson
rejects *at its very end*; the cut then moves to the next candidate. Anything else — a second
``traceEvents`` key after the events, a parse error inside a piece (NaN tokens, a broken file) —
falls back to parsing the whole file at once, which also yields the precise error message.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
from ..options import JSON_CAP, LoadOptions
from .common import first_seen_codes, float_us_to_ns, us_to_ns

#: Host-side launch calls: they carry the ``correlation`` id shared with the device work they
#: launch. Kineto writes the CUDA runtime (``cudaLaunchKernel``) and the driver API
#: (``cuLaunchKernel``/``cuLaunchKernelEx``: cuBLASLt, nvjet and CUTLASS GEMMs of recent PyTorch)
#: as separate categories; ROCm traces file every HIP call (``hipLaunchKernel``,
#: ``hipExtModuleLaunchKernel`` …) under the same two; ``runtime`` is the legacy spelling, and
#: Intel / PrivateUse1 (out-of-tree) backends have their own pair. All are launches alike.
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "runtime", "xpu_runtime", "xpu_driver",
               "privateuse1_runtime", "privateuse1_driver")
OP_CATS = ("cpu_op", "user_annotation", "operator") + LAUNCH_CATS
KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
PYFUNC_CAT = "python_function"
FWDBWD_CAT = "fwdbwd"
MEMORY_NAME = "[memory]"

# Event roles (one per event, like the reference's single-picker dispatch).
NONE, OP, KERNEL, PYFUNC, FLOW, FWDBWD, MEMORY = range(7)

#: Target size of one parsed piece of the ``traceEvents`` array. The extraction makes about
#: twenty passes over a piece's dicts (≈ 8 bytes of objects per byte of JSON): at 1 MB they stay
#: in the CPU caches, and loading is ~20 % faster than with 8 MB pieces (0.59 → 0.45 s for the
#: real 34 MB trace, 4.3 → 3.5 s for an 8× one); below ~256 kB per-piece overhead shows.
PIECE_BYTES = 1 << 20
#: Cuts tried per piece before giving up on splitting (each retry re-parses the piece).
_CUT_TRIES = 32
#: Closing brackets tried, from the end of the file, to find the end of ``traceEvents``.
_TAIL_TRIES = 16

# How each field kept for a role is stored: text (names: shared str objects), rendered text
# (str() of lists, as the reference shows them), int64 (-1 when absent), or the raw values.
_NAME, _TEXT, _INT, _RAW = range(4)
#: Fields kept per role; ``id`` is a top-level key of flow events, every other one is in ``args``.
FIELDS: dict[int, dict[str, int]] = {
    OP: {"name": _NAME, "correlation": _INT, "Input Dims": _TEXT, "Input type": _TEXT,
         "Call stack": _TEXT},
    KERNEL: {"name": _NAME, "correlation": _INT, "stream": _INT, "device": _INT},
    PYFUNC: {"name": _NAME},
    FLOW: {"id": _RAW},
    FWDBWD: {"id": _RAW},
    MEMORY: {"Device Id": _INT, "Total Reserved": _INT, "Total Allocated": _INT, "Bytes": _INT,
             "Addr": _RAW},
}
_TOP_LEVEL = frozenset({"name", "id"})
_NO_ARGS: dict[str, Any] = {}  # read only: stands for a missing or non-object ``args``

#: Above 2**43 µs a float64 step exceeds 1 ns, so a fractional ``ts`` parsed as a float no longer
#: converts to the exact ns the file holds (epoch-based "ns resolution" traces: step 0.25 µs).
_FLOAT_EXACT_LIMIT = 2.0**43
#: Largest |µs| whose ns still fits int64.
_MAX_US = 9.2e15
_TS_RE = re.compile(rb'"ts"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')
_NON_JSON_TOKENS = (b"NaN", b"Infinity")
_UTF8_BOM = b"\xef\xbb\xbf"
_GZ_CHUNK = 16 * 1024 * 1024
_KEY = b'"traceEvents"'
_ARRAY_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


class Events:
    """Columns of every event that has a role, in file order (positions = ``order``), plus the
    :data:`FIELDS` of each role, aligned with :meth:`rows` of that role."""

    def __init__(self, role: np.ndarray, ph: np.ndarray, cat: np.ndarray, pid: np.ndarray,
                 tid: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                 fields: dict[int, dict[str, np.ndarray]]) -> None:
        self.role = role
        self.ph = ph
        self.cat = cat
        self.pid = pid
        self.tid = tid
        self.ts = ts
        self.dur = dur
        self.fields = fields
        self.order = np.arange(len(role), dtype="int64")
        self._rows: dict[int, np.ndarray] = {}

    def rows(self, role: int) -> np.ndarray:
        if role not in self._rows:
            self._rows[role] = np.flatnonzero(self.role == role)
        return self._rows[role]

    def field(self, role: int, key: str) -> np.ndarray:
        """``key`` of every event of ``role``, in file order."""
        return self.fields[role][key]

    def at(self, role: int, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Every field of ``role`` for the events at ``rows`` (rows of that role, any order)."""
        pos = np.searchsorted(self.rows(role), rows)
        return {key: values[pos] for key, values in self.fields[role].items()}


def read_trace(path: Path, opts: LoadOptions, notes: list[str]) -> tuple[dict[str, Any], Events]:
    """The trace's top-level object without its events, and the events as :class:`Events`."""
    raw = _read_bytes(path, None if opts.force else JSON_CAP)
    builder = _Builder(opts)
    doc = _parse_in_pieces(raw, builder)
    if doc is None:
        doc = _parse(path, raw, notes)
        events = _trace_events(path, doc)
        builder = _Builder(opts)
        builder.add(events, raw)
        del events
        doc.pop("traceEvents")
    return doc, builder.finish(notes)


# ---------------------------------------------------------------------------------------------
# Reading and parsing
# ---------------------------------------------------------------------------------------------


def _read_bytes(path: Path, limit: int | None) -> bytes | bytearray:
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


def _gunzip(path: Path, limit: int | None) -> bytearray:
    """Decompress in chunks (``read(limit + 1)`` would reserve ``limit`` bytes up front), into
    one growing buffer (joining a list of chunks would hold the content twice)."""
    data = bytearray()
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(_GZ_CHUNK):
            data += chunk
            if limit is not None and len(data) > limit:
                raise InputError(path, f"decompresses to more than {limit:,} bytes, the limit for "
                                       ".json traces; pass --force to read it anyway")
    return data


def _parse_in_pieces(raw: bytes | bytearray, builder: _Builder) -> dict[str, Any] | None:
    """Feed the ``traceEvents`` array to ``builder`` piece by piece and return the top-level
    object without its events; None when the file cannot be cut safely (``builder`` then holds
    part of the events and must be discarded)."""
    first = raw.find(_KEY)
    if first < 0:
        return None
    opening = _ARRAY_OPEN.match(raw, first)
    if opening is None:
        return None
    start = opening.end()
    ends = _array_ends(raw, start)
    found = next(ends, None)
    if found is None:
        return None
    doc, end = found
    view = memoryview(raw)
    a = start
    while a < end:
        cut = a + PIECE_BYTES
        for _ in range(_CUT_TRIES):
            boundary = _BOUNDARY.search(raw, cut, end) if cut < end else None
            b = boundary.start() + 1 if boundary else end
            text = b"".join((b"[", view[a:b], b"]"))
            try:
                events = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                if boundary is not None and _cut_short(text, exc):
                    cut = boundary.start() + 1  # cut inside a string or nested object
                    continue
                if boundary is None and (found := next(ends, None)) is not None and found[1] > a:
                    doc, end = found  # the array closes earlier: a later key holds a "]"
                    continue
                return None
            builder.add(events, text)
            a = boundary.end() - 1 if boundary else end
            break
        else:
            return None
    return doc


def _array_ends(raw: bytes | bytearray, start: int) -> Iterator[tuple[dict[str, Any], int]]:
    """Candidate ends of the events array that opens at ``start``, last first: ``(doc, end)``
    where ``raw[end]`` is a ``]`` and ``doc`` the file parsed with the array emptied.

    ``start`` follows the first ``"traceEvents"`` of the file; another one after the candidate
    end could be a second top-level key (JSON readers keep the last), so none is accepted.
    """
    end = len(raw)
    for _ in range(_TAIL_TRIES):
        end = raw.rfind(b"]", start, end)
        if end < 0 or raw.find(_KEY, end) >= 0:
            return
        try:
            doc = orjson.loads(raw[:start] + raw[end:])  # "traceEvents": [] in place of the events
        except orjson.JSONDecodeError:
            continue
        if not isinstance(doc, dict) or doc.get("traceEvents") != []:
            return  # the key found is not the top-level one
        yield doc, end


def _cut_short(text: bytes, exc: orjson.JSONDecodeError) -> bool:
    """Whether the parse failed at the very end, as a piece cut inside a string or nested object
    does (orjson reports a character offset)."""
    return exc.pos >= len(text.decode("utf-8", "replace")) - 1


def _parse(path: Path, raw: bytes | bytearray, notes: list[str]) -> Any:
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


def _trace_events(path: Path, doc: Any) -> list[Any]:
    if not isinstance(doc, dict):
        kind = "an array" if isinstance(doc, list) else type(doc).__name__
        raise InputError(path, f"is not a torch.profiler trace (top level is {kind}, "
                               "expected an object with traceEvents)")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise InputError(path, "is not a torch.profiler trace (no traceEvents list)")
    return events


# ---------------------------------------------------------------------------------------------
# Event columns
# ---------------------------------------------------------------------------------------------


class _Builder:
    """Accumulates the columns of successive pieces of the events array."""

    def __init__(self, opts: LoadOptions) -> None:
        self.opts = opts
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in
                                                   ("role", "ph", "cat", "pid", "tid", "ts", "dur")}
        self.fields: dict[int, dict[str, list[Any]]] = {
            r: {k: [] for k in keys} for r, keys in FIELDS.items()}
        #: Non-numeric pid/tid texts as (position, text); they get codes over the whole file.
        self.id_texts: tuple[list[tuple[int, str]], list[tuple[int, str]]] = ([], [])
        self.count = 0
        self.not_objects = 0
        self.no_ts = 0
        self.bad_dur = 0
        self.inexact_ts = False
        self.strings: dict[str, str] = {}

    def add(self, events: list[Any], text: bytes | bytearray) -> None:
        """Classify the events of one piece (``text``: its JSON) and keep their columns."""
        kept = [e for e in events if type(e) is dict]
        self.not_objects += len(events) - len(kept)
        ph_codes, ph_uniq = factorize(list(map(dict.get, kept, repeat("ph"))))
        cat_codes, cat_uniq = factorize(list(map(dict.get, kept, repeat("cat"))))
        ph_of = np.array(ph_uniq + [""], dtype=object)[ph_codes]
        cat_low = [c.lower() for c in cat_uniq]
        cat_role = np.array([_cat_role(c, self.opts) for c in cat_low] + [NONE], dtype="int64")
        role = cat_role[cat_codes]
        cat_of = np.array(cat_low + [""], dtype=object)[cat_codes]

        interval = ph_of == "X"
        flow_end = np.isin(ph_of, ("s", "f"))
        role[np.isin(role, (OP, KERNEL, PYFUNC)) & ~interval] = NONE
        role[np.isin(role, (FLOW, FWDBWD)) & ~flow_end] = NONE

        candidates = np.flatnonzero((role == NONE) & (ph_of != "M"))
        is_mem = [str(kept[i].get("name", "")).lower() == MEMORY_NAME for i in candidates.tolist()]
        role[candidates[np.array(is_mem, dtype=bool)]] = MEMORY

        sel = np.flatnonzero(role != NONE)
        sub = [kept[i] for i in sel.tolist()]
        ts, ok, exact = _timestamps(kept, sel, sub, text)
        self.inexact_ts |= not exact
        dur, _ = _us_values(list(map(dict.get, sub, repeat("dur"), repeat(0))))
        self.no_ts += int((~ok).sum())
        self.bad_dur += int(((dur < 0) & ok & np.isin(role[sel], (OP, KERNEL, PYFUNC))).sum())
        keep = np.flatnonzero(ok)
        if len(keep) != len(sub):
            sub = [sub[i] for i in keep.tolist()]
        role = role[sel][keep]
        for side, key in enumerate(("pid", "tid")):
            values = list(map(dict.get, sub, repeat(key)))
            ints_ = ints(values)
            unset = np.flatnonzero(ints_ == -1).tolist()
            self.id_texts[side].extend((self.count + i, values[i]) for i in unset
                                       if type(values[i]) is str)
            self.parts[key].append(ints_)
        for key, col in (("role", role), ("ph", ph_of[sel][keep]), ("cat", cat_of[sel][keep]),
                         ("ts", ts[keep]), ("dur", np.maximum(dur[keep], 0))):
            self.parts[key].append(col)
        self.count += len(sub)
        for r, keys in FIELDS.items():
            at = np.flatnonzero(role == r).tolist()
            if at:
                self._add_fields(r, keys, [sub[i] for i in at])

    def _add_fields(self, role: int, keys: dict[str, int], events: list[dict[str, Any]]) -> None:
        args = list(map(dict.get, events, repeat("args"), repeat(_NO_ARGS)))
        if not set(map(type, args)) <= {dict}:
            args = [a if type(a) is dict else _NO_ARGS for a in args]
        for key, kind in keys.items():
            values = list(map(dict.get, events if key in _TOP_LEVEL else args, repeat(key)))
            if kind == _INT:
                self.fields[role][key].append(ints(values))
            elif kind == _NAME:
                self.fields[role][key].append(self._names(values))
            elif kind == _TEXT:
                self.fields[role][key].append(self._render(values))
            else:
                self.fields[role][key].append(values)

    def _names(self, values: list[Any]) -> list[str]:
        """Names as text ("" for none), each distinct name stored once for the whole file."""
        if not set(map(type, values)) <= {str}:
            values = [n if type(n) is str else "" if n is None else str(n) for n in values]
        return self._shared(values)

    def _shared(self, texts: list[str]) -> list[str]:
        """``texts`` with equal strings replaced by one object (names repeat every step: this
        keeps the profile, and its pickle to the parent process, small)."""
        share = self.strings.setdefault
        return list(map(share, texts, texts))

    def _render(self, values: list[Any]) -> list[str]:
        """``str()`` of each value ("" for None), as the reference shows list arguments; equal
        texts are stored once (shapes and call stacks repeat every step). Lists cannot be
        hashed to find repeats before rendering, and ``str`` through ``map`` is the cheapest
        per-value step there is (a third of keying them by their JSON text)."""
        if None in values:
            values = ["" if v is None else v for v in values]
        if not set(map(type, values)) <= {str}:  # call stacks are text already
            values = list(map(str, values))
        return self._shared(values)

    def finish(self, notes: list[str]) -> Events:
        """The columns of all pieces, with the notes on what was skipped or approximated."""
        if self.not_objects:
            notes.append(f"{self.not_objects} traceEvents entries are not objects; ignored")
        if self.inexact_ts:
            notes.append("fractional epoch timestamps could not be re-read exactly; "
                         "times are rounded to float precision (0.25 µs)")
        if self.no_ts:
            notes.append(f"{self.no_ts} events without a numeric ts ignored")
        if self.bad_dur:
            notes.append(f"{self.bad_dur} events with a negative or non-numeric dur are counted "
                         "as 0 µs")
        empty = {"role": "int64", "ph": object, "cat": object, "pid": "int64", "tid": "int64",
                 "ts": "int64", "dur": "int64"}
        col = {k: np.concatenate(v) if v else np.empty(0, dtype=empty[k])
               for k, v in self.parts.items()}
        pid_texts, tid_texts = self.id_texts
        if pid_texts or tid_texts:
            codes, _ = factorize([t for _, t in chain(pid_texts, tid_texts)])
            col["pid"][[p for p, _ in pid_texts]] = -2 - codes[:len(pid_texts)]
            col["tid"][[p for p, _ in tid_texts]] = -2 - codes[len(pid_texts):]
        fields = {r: {k: _joined(parts, FIELDS[r][k]) for k, parts in keys.items()}
                  for r, keys in self.fields.items()}
        return Events(col["role"], col["ph"], col["cat"], col["pid"], col["tid"], col["ts"],
                      col["dur"], fields)


def _joined(parts: list[Any], kind: int) -> np.ndarray:
    """One field's pieces as one array: int64 for numbers, object (one reference per row)
    otherwise."""
    if kind == _INT:
        return np.concatenate(parts) if parts else np.empty(0, dtype="int64")
    n = sum(map(len, parts))
    return np.fromiter(chain.from_iterable(parts), dtype=object, count=n)


def factorize(values: list[Any]) -> tuple[np.ndarray, list[str]]:
    """Codes (-1 for None) and unique values as text; unhashable values (lists, objects) are
    compared by their repr.

    The common case — a few distinct strings (``ph``, ``cat``) over every event of a piece — is
    numbered by :func:`first_seen_codes` (C loops over a dict); anything else goes through pandas."""
    distinct: list[object] | None
    try:
        codes, distinct = first_seen_codes(values)
    except TypeError:  # unhashable values (lists, objects): by their repr, below
        distinct = None
    if distinct is not None and set(map(type, distinct)) <= {str, type(None)}:
        if None in distinct:
            gap = distinct.index(None)
            codes = np.where(codes == gap, -1, codes - (codes > gap))
            del distinct[gap]
        return codes, distinct  # type: ignore[return-value]
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
    """A 1-D int64/float64 array when every value is a plain int or float (the fast, common
    case), else None. Decided by the values' types, not by what numpy would coerce: ``true`` is
    not a number here whatever else the list holds, so a piece of a file and the whole file
    read every value alike."""
    kinds = set(map(type, values))
    try:
        if kinds <= {int}:
            return np.array(values, dtype="int64")
        if kinds <= {int, float}:
            return np.array(values, dtype="float64")
    except OverflowError:  # ints beyond int64: the caller's general path
        pass
    return None


def ints(values: list[Any]) -> np.ndarray:
    """Integer values (-1 when missing or not a number)."""
    for candidate in (values, [-1 if v is None else v for v in values]):  # ints, ints with gaps
        arr = _numeric_array(candidate)
        if arr is not None and arr.dtype.kind == "i":
            return arr.astype("int64")
    num = pd.to_numeric(_scalars(values), errors="coerce").to_numpy(dtype="float64")
    return np.where(np.abs(num) < 2.0**63, num, -1).astype("int64")


def _cat_role(cat: str, opts: LoadOptions) -> int:
    if cat in OP_CATS:
        return OP
    if cat in KERNEL_CATS:
        return KERNEL
    if cat == PYFUNC_CAT:
        return PYFUNC
    if cat == FWDBWD_CAT:
        return FWDBWD
    if cat in opts.flow_cats:
        return FLOW
    return NONE


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
                raw: bytes | bytearray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``ts`` of the selected events in exact int64 ns, the valid mask, and whether they are
    exact.

    orjson yields binary floats; for epoch-based fractional µs (``1712195495519701.250``) a float
    cannot hold the ns digits, which shifts kernel ticks and start-time joins. Only then are the
    ``ts`` texts re-read from the raw bytes (``raw``: the JSON the events were parsed from) and
    converted digit by digit.
    """
    values = list(map(dict.get, sub, repeat("ts")))
    ns, ok = _us_values(values)
    kinds = set(map(type, values))
    if float not in kinds:  # integer µs (the usual Kineto trace): exact already
        return ns, ok, True
    floats = np.array([v for v in values if type(v) is float] if kinds != {float} else values,
                      dtype="float64")
    if np.abs(floats).max() < _FLOAT_EXACT_LIMIT:
        return ns, ok, True
    texts = _ts_texts(events, raw)
    if texts is None:
        return ns, ok, False
    picked = pd.Series([texts[i] for i in sel.tolist()], dtype=object)
    digits = (picked.notna() & ~picked.fillna("").str.contains("[eE]")).to_numpy()
    return np.where(digits, us_to_ns(picked.fillna("")), ns), ok, True


def _ts_texts(events: list[dict[str, Any]], raw: bytes | bytearray) -> list[str | None] | None:
    """The literal ``ts`` text of every event (None without ts), aligned by value with the
    ``"ts": <number>`` occurrences in ``raw``; None when they cannot be aligned."""
    found = _TS_RE.findall(raw)
    # Numbers only: a ``true``/``false`` ts (bool is an int to isinstance) has no numeric text
    # to align with, and counting it would fail the alignment of every other event.
    with_ts = [i for i, e in enumerate(events) if type(e.get("ts")) in (int, float)]
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
