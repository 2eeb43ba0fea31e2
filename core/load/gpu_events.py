"""Columns of the torch.profiler (Kineto) trace events the loader uses.

Each event gets one role (host op, kernel, python frame, flow end, fwdbwd end, memory instant),
decided once per distinct category; :class:`Builder` turns each parsed piece of ``traceEvents``
(:mod:`.gpu_read`) into numpy columns — numbers as int64 ns, repeated texts stored once — and
:class:`Events` holds the columns of the whole file, plus the :data:`FIELDS` each role keeps. A
trace read in two processes (:mod:`.halves`) has two builders, the second merged into the first
(:meth:`Builder.merge`) before :meth:`Builder.finish`.
"""

from __future__ import annotations

import re
from functools import cached_property
from itertools import chain
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..notes import Note
from ..options import LoadOptions
from ..text_codes import first_seen_codes
from .common import float_us_to_ns, us_to_ns
from .pieces import Dicts, orjson_ints

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
#: Per role, whether its events are intervals (``ph`` X) / flow ends (``ph`` s or f): looked up
#: by role code, as ``np.isin`` costs a sort per call (three calls in every piece).
_IS_INTERVAL = np.isin(np.arange(7), (OP, KERNEL, PYFUNC))
_IS_FLOW = np.isin(np.arange(7), (FLOW, FWDBWD))

# How each field kept for a role is stored: text (names: shared str objects), rendered text
# (str() of lists, as the reference shows them; ``_LINE``: a field written as text, such as the
# call stack, rendered alike), int64 (-1 when absent), or the raw values.
_NAME, _TEXT, _LINE, _INT, _RAW = range(5)
#: Fields kept per role; ``id`` is a top-level key of flow events, every other one is in ``args``.
FIELDS: dict[int, dict[str, int]] = {
    OP: {"name": _NAME, "correlation": _INT, "Input Dims": _TEXT, "Input type": _TEXT,
         "Call stack": _LINE},
    KERNEL: {"name": _NAME, "correlation": _INT, "stream": _INT, "device": _INT},
    PYFUNC: {"name": _NAME},
    FLOW: {"id": _RAW},
    FWDBWD: {"id": _RAW},
    MEMORY: {"Device Id": _INT, "Total Reserved": _INT, "Total Allocated": _INT, "Bytes": _INT,
             "Addr": _RAW},
}
_TOP_LEVEL = frozenset({"name", "id"})

#: Above 2**43 µs a float64 step exceeds 1 ns, so a fractional ``ts`` parsed as a float no longer
#: converts to the exact ns the file holds (epoch-based "ns resolution" traces: step 0.25 µs).
_FLOAT_EXACT_LIMIT = 2.0**43
#: Largest |µs| whose ns still fits int64.
_MAX_US = 9.2e15
_TS_RE = re.compile(rb'"ts"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')


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
        self._rows: dict[int, np.ndarray] = {}

    @cached_property
    def order(self) -> np.ndarray:
        """File order of each event (its position; made when asked: the loader's sorts are
        stable and need no such key)."""
        return np.arange(len(self.role), dtype="int64")

    def rows(self, role: int) -> np.ndarray:
        if role not in self._rows:
            self._rows[role] = np.flatnonzero(self.role == role)
        return self._rows[role]

    def field(self, role: int, key: str) -> np.ndarray:
        """``key`` of every event of ``role``, in file order."""
        return self.fields[role][key]

    def at(self, role: int, pos: np.ndarray) -> dict[str, np.ndarray]:
        """Every field of ``role`` for the events at positions ``pos`` of :meth:`rows` of that
        role (any order: the rows are ``rows(role)[pos]``)."""
        return {key: values[pos] for key, values in self.fields[role].items()}


# ---------------------------------------------------------------------------------------------
# Event columns
# ---------------------------------------------------------------------------------------------


#: Value of a top-level key that an event lacks, where it is not None (as ``dict.get`` gives).
DEFAULTS: dict[str, Any] = {"dur": 0}


class EventView(Protocol):
    """The events of one piece, whatever they were decoded into: the values of a key for
    every event, in order, exactly as ``orjson`` would give them."""

    def __len__(self) -> int: ...

    def top(self, key: str) -> list[Any]:
        """Values of a top-level key (``DEFAULTS`` or None where absent)."""

    def subset(self, rows: list[int]) -> EventView:
        """The events at ``rows``."""

    def args(self) -> EventView:
        """The ``args`` objects of these events (empty ones where absent or not objects)."""

    def render(self, values: list[Any], cache: dict[bytes, str]) -> list[str]:
        """Values of a list-valued key as text: ``str()`` of the value, "" for none."""

    def raw(self, values: list[Any]) -> list[Any]:
        """Values kept as they are (flow ids, addresses)."""


class DictView(Dicts):
    """Events parsed into dicts by ``orjson``."""

    defaults = DEFAULTS

    def render(self, values: list[Any], cache: dict[bytes, str]) -> list[str]:
        """``str()`` of each value ("" for None), as the reference shows list arguments. Lists
        cannot be hashed to find repeats before rendering, and ``str`` through ``map`` is the
        cheapest per-value step there is (a third of keying them by their JSON text)."""
        if None in values:
            values = ["" if v is None else v for v in values]
        if not set(map(type, values)) <= {str}:  # call stacks are text already
            values = list(map(str, values))
        return values

    def raw(self, values: list[Any]) -> list[Any]:
        return values


class Builder:
    """Accumulates the columns of successive pieces of the events array.

    A piece arrives as dicts (:meth:`add`, from ``orjson``) or as typed structs (:meth:`add_typed`,
    from :mod:`.gpu_decode`); both go through the same steps over an :class:`EventView`, so
    either way the columns are the same.
    """

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
        #: Raw JSON of list-valued args (``Input Dims`` …) → its rendered text, over all pieces.
        self.rendered: dict[bytes, str] = {}

    def add(self, events: list[Any], text: bytes | bytearray) -> None:
        """Classify the events of one piece parsed into dicts (``text``: its JSON) and keep
        their columns."""
        kept = [e for e in events if type(e) is dict]
        self.not_objects += len(events) - len(kept)
        self._add(DictView(kept), text)

    def add_typed(self, view: EventView, text: bytes | bytearray) -> None:
        """Classify the events of one piece decoded into structs (:mod:`.gpu_decode`)."""
        self._add(view, text)

    def _add(self, view: EventView, text: bytes | bytearray) -> None:
        ph_codes, ph_uniq = factorize(view.top("ph"))
        cat_codes, cat_uniq = factorize(view.top("cat"))
        ph_of = np.array(ph_uniq + [""], dtype=object)[ph_codes]
        cat_low = [c.lower() for c in cat_uniq]
        cat_role = np.array([_cat_role(c, self.opts) for c in cat_low] + [NONE], dtype="int64")
        role = cat_role[cat_codes]
        cat_of = np.array(cat_low + [""], dtype=object)[cat_codes]

        interval = np.array([p == "X" for p in ph_uniq] + [False])[ph_codes]
        flow_end = np.array([p in ("s", "f") for p in ph_uniq] + [False])[ph_codes]
        role[_IS_INTERVAL[role] & ~interval] = NONE
        role[_IS_FLOW[role] & ~flow_end] = NONE

        candidates = np.flatnonzero((role == NONE) & ~np.array([p == "M" for p in ph_uniq] + [False])[ph_codes])
        if len(candidates):
            # Only a JSON string can read "[memory]": str() of any other value has quotes or
            # is a number, so the test needs no str() of non-text names.
            names = view.subset(candidates.tolist()).top("name")
            is_mem = [type(n) is str and n.lower() == MEMORY_NAME for n in names]
            role[candidates[np.array(is_mem, dtype=bool)]] = MEMORY

        sel = np.flatnonzero(role != NONE)
        sub = view if len(sel) == len(view) else view.subset(sel.tolist())
        ts, ok, exact = _timestamps(view, sel, sub.top("ts"), text)
        self.inexact_ts |= not exact
        dur, _ = _us_values(sub.top("dur"))
        self.no_ts += int((~ok).sum())
        self.bad_dur += int(((dur < 0) & ok & _IS_INTERVAL[role[sel]]).sum())
        keep = np.flatnonzero(ok)
        if len(keep) != len(sub):
            sub = sub.subset(keep.tolist())
        role = role[sel][keep]
        for side, key in enumerate(("pid", "tid")):
            values = sub.top(key)
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
                self._add_fields(r, keys, sub if len(at) == len(sub) else sub.subset(at))

    def _add_fields(self, role: int, keys: dict[str, int], events: EventView) -> None:
        args = events.args()
        for key, kind in keys.items():
            values = (events if key in _TOP_LEVEL else args).top(key)
            if kind == _INT:
                self.fields[role][key].append(ints(values))
            elif kind == _NAME:
                self.fields[role][key].append(self._names(values))
            elif kind == _TEXT or kind == _LINE:
                self.fields[role][key].append(self._shared(events.render(values, self.rendered)))
            else:
                self.fields[role][key].append(events.raw(values))

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

    def merge(self, later: Builder) -> None:
        """Append the columns ``later`` built of the events that follow this builder's (the
        second part of a trace read in two processes, :mod:`.halves`): the columns as if one
        builder had read both parts. ``later``'s texts stay its own objects (equal texts, two
        objects at most: the cost of sharing them again would be a pass over every row)."""
        for key, parts in later.parts.items():
            self.parts[key].extend(parts)
        for role, keys in later.fields.items():
            for key, parts in keys.items():
                self.fields[role][key].extend(parts)
        for mine, theirs in zip(self.id_texts, later.id_texts):
            mine.extend((self.count + at, text) for at, text in theirs)
        self.count += later.count
        self.not_objects += later.not_objects
        self.no_ts += later.no_ts
        self.bad_dur += later.bad_dur
        self.inexact_ts |= later.inexact_ts

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (sent back by :mod:`.halves`' child) without its caches of texts, each column
        joined into one array: only the columns travel, and the child joins its own part (the
        parent would do it after the merge, while nothing else runs), and a text column goes as
        an array, which :mod:`..transfer` sends as codes of its distinct strings (a list of
        strings is pickled cell by cell and read back so: 16 ms of the parent's time for the
        second part of a 12-step H200 trace)."""
        parts = {k: [np.concatenate(v)] if v else [] for k, v in self.parts.items()}
        fields = {r: {k: [_joined(v, FIELDS[r][k])] if v else [] for k, v in keys.items()}
                  for r, keys in self.fields.items()}
        return {**self.__dict__, "parts": parts, "fields": fields, "strings": {}, "rendered": {}}

    def finish(self, notes: list[Note]) -> Events:
        """The columns of all pieces, with the notes on what was skipped or approximated."""
        if self.not_objects:
            notes.append(Note(f"{self.not_objects} traceEvents entries are not objects; ignored"))
        if self.inexact_ts:
            notes.append(Note("fractional epoch timestamps could not be re-read exactly; "
                              "times are rounded to float precision (0.25 µs)"))
        if self.no_ts:
            notes.append(Note(f"{self.no_ts} events without a numeric ts ignored"))
        if self.bad_dur:
            notes.append(Note(f"{self.bad_dur} events with a negative or non-numeric dur are counted "
                              "as 0 µs"))
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
    otherwise. A piece is a list of values, or an array already joined (the second part of a
    trace read in two processes: :meth:`Builder.__getstate__`)."""
    if kind == _INT:
        return np.concatenate(parts) if parts else np.empty(0, dtype="int64")
    arrays: list[np.ndarray] = []
    lists: list[list[Any]] = []
    for part in [*parts, None]:
        if isinstance(part, list):
            lists.append(part)
            continue
        if lists:  # consecutive lists: one pass over all their values
            n = sum(map(len, lists))
            arrays.append(np.fromiter(chain.from_iterable(lists), dtype=object, count=n))
            lists = []
        if part is not None:
            arrays.append(part)
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=object)


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


def _numeric_array(values: list[Any], kinds: set[type] | None = None) -> np.ndarray | None:
    """A 1-D int64/float64 array when every value is a plain int or float (the fast, common
    case), else None. Decided by the values' types (``kinds``, when the caller has them
    already), not by what numpy would coerce: ``true`` is not a number here whatever else the
    list holds, so a piece of a file and the whole file read every value alike."""
    if kinds is None:
        kinds = set(map(type, values))
    try:
        if kinds <= {int}:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        if kinds <= {int, float}:
            return np.fromiter(values, dtype=np.float64, count=len(values))
    except OverflowError:  # ints beyond int64: the caller's general path
        pass
    return None


def ints(values: list[Any]) -> np.ndarray:
    """Integer values (-1 when missing or not a number)."""
    arr = _numeric_array(values)
    if arr is None:  # not all numbers: perhaps ints with gaps (the gaps made -1 only then)
        arr = _numeric_array([-1 if v is None else v for v in values])
    if arr is not None and arr.dtype.kind == "i":
        return arr
    values = orjson_ints(values)
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


def _us_values(values: list[Any], kinds: set[type] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """µs values as read by orjson (int, float, or anything else) → (int64 ns, valid mask);
    ``kinds``: their types, when the caller has them already."""
    arr = _numeric_array(values, kinds)
    if arr is not None and arr.dtype.kind == "i":
        ok = np.abs(arr) < _MAX_US
        return np.where(ok, arr * 1000, -1), ok
    if arr is not None:
        ok = np.abs(arr) < _MAX_US
        return float_us_to_ns(np.where(ok, arr, np.nan)), ok
    s = _scalars(orjson_ints(values))
    ok = (np.abs(pd.to_numeric(s, errors="coerce").to_numpy(dtype="float64")) < _MAX_US)
    return np.where(ok, us_to_ns(s.where(ok, "")), -1), ok


def _timestamps(events: EventView, sel: np.ndarray, values: list[Any],
                raw: bytes | bytearray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``ts`` of the selected events in exact int64 ns, the valid mask, and whether they are
    exact.

    orjson yields binary floats; for epoch-based fractional µs (``1712195495519701.250``) a float
    cannot hold the ns digits, which shifts kernel ticks and start-time joins. Only then are the
    ``ts`` texts re-read from the raw bytes (``raw``: the JSON the events were parsed from) and
    converted digit by digit. ``values``: the ``ts`` of the events at ``sel``.
    """
    kinds = set(map(type, values))
    ns, ok = _us_values(values, kinds)
    if float not in kinds:  # integer µs (the usual Kineto trace): exact already
        return ns, ok, True
    floats = np.array([v for v in values if type(v) is float] if kinds != {float} else values,
                      dtype="float64")
    if np.abs(floats).max() < _FLOAT_EXACT_LIMIT:
        return ns, ok, True
    texts = _ts_texts(orjson_ints(events.top("ts")), raw)
    if texts is None:
        return ns, ok, False
    picked = pd.Series([texts[i] for i in sel.tolist()], dtype=object)
    digits = (picked.notna() & ~picked.fillna("").str.contains("[eE]")).to_numpy()
    return np.where(digits, us_to_ns(picked.fillna("")), ns), ok, True


def _ts_texts(ts: list[Any], raw: bytes | bytearray) -> list[str | None] | None:
    """The literal ``ts`` text of every event (None without ts), aligned by value with the
    ``"ts": <number>`` occurrences in ``raw``; None when they cannot be aligned. ``ts``: the
    ``ts`` value of every event."""
    found = _TS_RE.findall(raw)
    # Numbers only: a ``true``/``false`` ts (bool is an int to isinstance) has no numeric text
    # to align with, and counting it would fail the alignment of every other event.
    with_ts = [i for i, v in enumerate(ts) if type(v) in (int, float)]
    values = np.array([ts[i] for i in with_ts], dtype="float64")
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
    out: list[str | None] = [None] * len(ts)
    for i, j in zip(with_ts, chosen):
        out[i] = found[j].decode("ascii")
    return out
