"""``trace_view.json`` of an NPU Text export as columns: the parsed events and the process layout.

The trace is parsed piece by piece (:mod:`.pieces`; typed by :mod:`.npu_decode`, orjson dicts for
pieces msgspec refuses) into per-field columns (:class:`Events`), so a 0.9 GB trace never holds
its event objects at once; every later step of :mod:`.npu_text` and :mod:`.npu_device` works on
those columns. Times stay exact integer ns: the
exporter writes ``ts`` as a µs *string* with ns digits, and the flow and kernel_details joins are
exact matches on it. :class:`Layout` says which process plays which role (Ascend Hardware, HCCL,
Overlap Analysis) and how the HCCL threads form groups and planes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..compat import as_text
from ..errors import InputError
from ..heap import return_free_memory
from . import npu_decode, pieces
from .halves import feed_in_two
from ..notes import Note
from ..text_codes import first_seen_codes
from .common import float_us_to_ns, us_text_to_ns

#: Size of one parsed piece of the events (:data:`.pieces.PIECE_BYTES`; tests shrink it).
PIECE_BYTES = pieces.PIECE_BYTES
_ARRAY_OPEN = re.compile(rb"\s*\[")
_CONTENT = re.compile(rb"\S")
_INTEGER = re.compile(r"\s*[-+]?\d+\s*")

HARDWARE = "Ascend Hardware"
HCCL_PROCESSES = ("HCCL", "Communication")
OVERLAP_PROCESS = "Overlap Analysis"
#: the process of the host's CANN API calls (``AscendCL@aclrtSynchronizeStream`` …)
CANN_PROCESS = "CANN"


# ------------------------------------------------------------------------------------------------
# Raw events → columns
# ------------------------------------------------------------------------------------------------


def read_trace(path: Path, split: float = 0.0) -> Events:
    """The trace's events as columns, parsed piece by piece (:mod:`.pieces`); anything that is
    not a JSON array of objects is an InputError. A file the pieces cannot cover (a parse error,
    a value msgspec reads unlike orjson) is parsed whole, which also gives the precise error.
    ``split`` (``LoadOptions.split``): the events after a cut near that fraction are parsed by a
    forked child (:mod:`.halves`), with the same columns; when that cannot be done, the file is
    read in this process alone."""
    try:
        raw = pieces.read_file(path)
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    halves = _in_two(raw, split) if split else None
    if halves is not None:
        return halves.finish()
    builder = _Builder()
    if _in_pieces(raw, builder):
        return builder.finish()
    builder = _Builder()
    builder.add(_parse_whole(path, pieces.whole(raw)), b"")
    return builder.finish()


def _array_span(raw: pieces.Content) -> tuple[int, int] | None:
    """Where the top-level array's items start, and its closing ``]``; None when the file is
    not one array."""
    opening = pieces.match(raw, _ARRAY_OPEN)
    if opening is None:
        return None
    tail = raw[max(len(raw) - 64, 0):len(raw)]
    end = len(raw) - (len(tail) - len(tail.rstrip())) - 1  # the last byte that is not whitespace
    if end < opening.end() - 1 or raw[end:end + 1] != b"]":
        return None
    return opening.end(), end


def _in_pieces(raw: pieces.Content, builder: _Builder) -> bool:
    """Feed the top-level array to ``builder`` in pieces; False when that cannot be done."""
    span = _array_span(raw)
    if span is None:
        return False
    start, end = span
    if pieces.search(raw, _CONTENT, start, end) is None:
        return True  # an empty array
    return pieces.feed(raw, start, iter((end,)), npu_decode.decode, builder.add_typed,
                       builder.add, PIECE_BYTES) is not None


def _in_two(raw: pieces.Content, fraction: float) -> _Builder | None:
    """As :func:`_in_pieces`, the events after a cut near ``fraction`` of them fed to a builder
    in a forked child (:mod:`.halves`): the merged builder, or None (read in one process)."""
    span = _array_span(raw)
    if span is None:
        return None
    start, end = span
    halves = feed_in_two(raw, start, fraction, partial(iter, ((None, end),)), _Builder,
                         npu_decode.decode, PIECE_BYTES)
    if halves is None:
        return None
    builder, second = halves
    builder.merge(second.builder)
    return builder


def _parse_whole(path: Path, raw: bytes | bytearray) -> list[dict]:
    """The trace's event objects (one orjson parse of the whole file)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc}); is the file truncated?") from None
    if not isinstance(data, list):
        raise InputError(path, "is not an NPU trace_view.json (expected a JSON array of events)")
    return data


def text_of(value: object) -> str:
    """Text form of an event field or arg: "" for absent, raw strings, ``str()`` otherwise."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def texts_of(values: np.ndarray) -> np.ndarray:
    """:func:`text_of` of every value of an object or int64 array, as an object array: the strings
    stay the objects they are, only the other values (None, numbers, lists) are converted."""
    if values.dtype != object:
        return as_text(values).to_numpy()
    other = np.flatnonzero(~np.fromiter(map(isinstance, values, repeat(str)), dtype=bool,
                                        count=len(values)))
    if not len(other):
        return values
    out = values.copy()
    rest = values[other].tolist()
    if set(map(type, rest)) <= {int, type(None)}:  # ids: each distinct one converted once
        codes, distinct = first_seen_codes(rest)
        texts = list(map(str, distinct))  # text_of's str(), without a Python call per value
        if None in distinct:
            texts[distinct.index(None)] = ""
        out[other] = np.array(texts, dtype=object)[codes]
    else:  # no hashing: 1, 1.0 and True are one key and three texts
        out[other] = [text_of(v) for v in rest]
    return out


def numbers(values: list) -> np.ndarray:
    """int64 of JSON numbers / numeric strings (integer text exactly, other numbers truncated
    toward zero; true/false count 1/0); anything else → -1. Each value is converted alike
    whatever the others are, so a piece of a file and the whole file read it the same."""
    kinds = set(map(type, values))
    if kinds <= {int, str}:
        try:  # ints, and integer text parsed exactly (ns flow ids exceed float precision)
            return np.fromiter(values, dtype=np.int64, count=len(values)) if kinds <= {int} \
                else np.array(values, dtype="int64")
        except (OverflowError, ValueError):
            pass
    s = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64")
    out = s.where(s.abs() < 2**63, np.nan).fillna(-1).to_numpy().astype("int64")
    if str in kinds:  # integer text exactly, as above
        for i, v in enumerate(values):
            if type(v) is str and _INTEGER.fullmatch(v) and -2**63 <= (n := int(v)) < 2**63:
                out[i] = n
    return out


def floats(values: list) -> np.ndarray:
    """float64 of JSON numbers / numeric strings; anything else → NaN (each value alike)."""
    kinds = set(map(type, values))
    if kinds <= {int, float, type(None)}:
        try:  # None → NaN, as below
            return np.array(values, dtype=np.float64)
        except OverflowError:
            pass
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype="float64")


class _Dicts(pieces.Dicts):
    """Events parsed into dicts by orjson (the pieces msgspec refuses, and the whole-file parse)."""


#: cpu_op-side categories: their events carry host ``args``, never device ones.
_HOST_CATS = ("cpu_op", "python_function", "enqueue", "dequeue")
#: The ``args`` the loader reads, by the events that carry them (see :class:`_Builder`).
_ARG_GROUPS = {"meta": npu_decode.META_ARGS, "op": npu_decode.OP_ARGS, "queue": npu_decode.QUEUE_ARGS,
               "device": npu_decode.DEVICE_ARGS}
_GROUP_OF = {key: group for group, keys in _ARG_GROUPS.items() for key in keys}


class _Texts:
    """Codes for a few-valued text field (``ph``, ``cat``): one int16 per event, not a pointer."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        #: The code of each value met so far (a str, or None for ``""``): a piece whose values
        #: were all met before is coded in one lookup per event.
        self.known: dict[str | None, int] = {}

    def codes(self, values: list, lower: bool, plain: bool = False) -> np.ndarray:
        """``plain``: every value is a str or None (a typed piece), so none needs checking."""
        if plain or set(map(type, values)) <= {str, type(None)}:
            try:
                return np.fromiter(map(self.known.__getitem__, values), dtype=np.int16,
                                   count=len(values))
            except KeyError:
                pass
        else:  # lists cannot be hashed: texts
            values = [text_of(v) for v in values]
        local, uniq = first_seen_codes(values)
        texts = [text_of(u).lower() if lower else text_of(u) for u in uniq]
        table = np.array([self.code.setdefault(t, len(self.code)) for t in texts], dtype=np.int16)
        self.known.update(zip(uniq, table.tolist()))
        return table[local] if len(local) else np.empty(0, dtype=np.int16)

    def mask(self, codes: np.ndarray, *wanted: str) -> np.ndarray:
        """Rows whose code is one of the ``wanted`` texts (a table lookup, not a search)."""
        table = np.zeros(len(self.code) + 1, dtype=bool)
        table[[self.code[w] for w in wanted if w in self.code]] = True
        return table[codes]

    def values(self) -> list[str]:
        return list(self.code)


def _packed(values: list) -> np.ndarray | list:
    """A column part as int64 when every value is a plain int of that range (ids, streams: a
    Python int object would cost 28 bytes more each), else the values as they are."""
    if values and set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    return values


class _Builder:
    """Columns of successive pieces of the trace (dicts or structs alike, see :mod:`.pieces`).

    Every event gets a row; the ``args`` the loader reads are kept per group of events that can
    carry them — metadata (``name``, ``sort_index``), cpu_ops (shapes, types, call stack),
    enqueue/dequeue (``correlation_id``) and every other complete event (device task keys) — as
    int64 where they are plain integers, and texts once per distinct value (call stacks and names
    repeat every step).
    """

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur")}
        self.groups: dict[str, tuple[list[np.ndarray], dict[str, list]]] = {
            g: ([], {k: [] for k in keys}) for g, keys in _ARG_GROUPS.items()}
        self.ids: tuple[list[np.ndarray], list] = ([], [])
        self.count = 0
        #: One object per distinct text of the ``args`` (None, an absent arg, stays None) and of
        #: the names (where None, an absent name, is the text "").
        self.strings: dict[str | None, str | None] = {}
        self.names: dict[str | None, str] = {None: ""}
        self.ph, self.cat = _Texts(), _Texts()

    def add(self, events: list, text: bytes) -> None:
        self._add(_Dicts([e for e in events if isinstance(e, dict)]))

    def add_typed(self, view: npu_decode.StructView, text: bytes) -> None:
        self._add(view)

    def _texts(self, values: list, plain: bool) -> np.ndarray:
        """Text of each value, equal texts one object (``plain``: each is a str or None)."""
        if not plain and not set(map(type, values)) <= {str, type(None)}:
            values = [text_of(v) for v in values]
        share = self.names.setdefault
        return np.array(list(map(share, values, values)), dtype=object)

    def _add(self, view: pieces.Dicts | pieces.Structs) -> None:
        n = len(view)
        if n == 0:
            return
        plain = view.typed  # text fields hold str or None only
        ph = self.ph.codes(view.top("ph"), lower=False, plain=plain)
        cat = self.cat.codes(view.top("cat"), lower=True, plain=plain)
        self.parts["ph"].append(ph)
        self.parts["cat"].append(cat)
        self.parts["name"].append(self._texts(view.top("name"), plain))
        self.parts["pid"].append(numbers(view.top("pid")))
        self.parts["tid"].append(numbers(view.top("tid")))
        self.parts["ts"].append(us_text_to_ns(view.top("ts")))
        self.parts["dur"].append(float_us_to_ns(floats(view.top("dur"))))

        is_x = self.ph.mask(ph, "X")
        masks = {"meta": self.ph.mask(ph, "M"), "op": self.cat.mask(cat, "cpu_op"),
                 "queue": self.cat.mask(cat, "enqueue", "dequeue"),
                 "device": is_x & ~self.cat.mask(cat, *_HOST_CATS)}
        share = self.strings.setdefault
        for group, mask in masks.items():
            at = np.flatnonzero(mask)
            if not len(at):
                continue
            rows, columns = self.groups[group]
            rows.append(at + self.count)
            args = (view if len(at) == n else view.subset(at.tolist())).args()
            for key in _ARG_GROUPS[group]:
                values = args.top(key)
                if key in npu_decode.TEXT_ARGS and (plain or set(map(type, values)) <= {str, type(None)}):
                    values = list(map(share, values, values))
                columns[key].append(_packed(values))
        at = np.flatnonzero(self.ph.mask(ph, "s", "f"))
        if len(at):
            self.ids[0].append(at + self.count)
            self.ids[1].append(_packed((view if len(at) == n else view.subset(at.tolist())).top("id")))
        self.count += n

    def merge(self, later: _Builder) -> None:
        """Append the columns ``later`` built of the events that follow this builder's (the
        second part of a trace read in two processes, :mod:`.halves`): ``later``'s ``ph`` and
        ``cat`` codes are renumbered into this builder's tables, texts first met in ``later``
        numbered after this builder's in the order ``later`` met them — the codes one builder
        reading both parts gives."""
        for key, mine, theirs in (("ph", self.ph, later.ph), ("cat", self.cat, later.cat)):
            table = np.array([mine.code.setdefault(t, len(mine.code)) for t in theirs.code],
                             dtype=np.int16)
            self.parts[key].extend(table[codes] for codes in later.parts[key])
        for key in ("name", "pid", "tid", "ts", "dur"):
            self.parts[key].extend(later.parts[key])
        for group, (rows, columns) in later.groups.items():
            my_rows, my_columns = self.groups[group]
            my_rows.extend(r + self.count for r in rows)
            for key, parts in columns.items():
                my_columns[key].extend(parts)
        self.ids[0].extend(r + self.count for r in later.ids[0])
        self.ids[1].extend(later.ids[1])
        self.count += later.count

    def __getstate__(self) -> dict[str, object]:
        """Pickled (sent back by :mod:`.halves`' child) without its caches of texts."""
        return {**self.__dict__, "strings": {}, "names": {None: ""}}

    def finish(self) -> Events:
        """The columns, each joined from its parts; the builder is spent (each column's parts
        are dropped once joined, so the parts and the joined columns are not all alive at once)."""
        def col(key: str, dtype: object) -> np.ndarray:
            parts = self.parts.pop(key)
            return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)

        def joined(parts: list) -> np.ndarray:
            out = _joined(parts)
            parts.clear()
            return out

        # The parts are small heap blocks and the joined columns large mappings of their own, so
        # the parts' pages are handed back (a few ms) after each batch of columns, not at the end:
        # on the 32×92 side, parts and columns at once were ≈ 0.4 GB.
        top = {key: col(key, dtype) for key, dtype in (("ph", np.int16), ("cat", np.int16), ("name", object),
                                                       ("pid", "int64"), ("tid", "int64"), ("ts", "int64"),
                                                       ("dur", "int64"))}
        return_free_memory()
        groups = {}
        for g, (rows, columns) in self.groups.items():
            groups[g] = (np.concatenate(rows) if rows else np.empty(0, dtype="int64"),
                         {k: joined(parts) for k, parts in columns.items()})
            rows.clear()
            return_free_memory()
        ids = (np.concatenate(self.ids[0]) if self.ids[0] else np.empty(0, dtype="int64"), joined(self.ids[1]))
        ph, ts_ns, dur_ns = top["ph"], top["ts"], top["dur"]
        is_complete = (ph == self.ph.code.get("X", -1)) & (ts_ns >= 0)
        return Events(
            ph_codes=ph, ph_values=self.ph.values(), cat_codes=top["cat"],
            cat_values=self.cat.values(), name=top["name"], pid=top["pid"],
            tid=top["tid"], ts_ns=ts_ns, dur_ns=np.maximum(dur_ns, 0), is_complete=is_complete,
            bad_dur=int((is_complete & (dur_ns < 0)).sum()), arg_groups=groups, id_column=ids)


def _joined(parts: list) -> np.ndarray:
    """One column of parts that are int64 arrays or lists of values: int64 if every part is,
    else an object array holding the same values."""
    if parts and all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    n = sum(map(len, parts))
    return np.fromiter(chain.from_iterable(p.tolist() if isinstance(p, np.ndarray) else p for p in parts),
                       dtype=object, count=n)


@dataclass
class Events:
    """Columnar view of the trace: one row per event object, in file order, plus the ``args``
    the loader reads, kept per group of events that can carry them."""

    ph_codes: np.ndarray  # int16 codes into ph_values
    ph_values: list[str]
    cat_codes: np.ndarray  # int16 codes into cat_values (lower-cased)
    cat_values: list[str]
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    is_complete: np.ndarray  # an X event with a valid ts
    bad_dur: int  # complete events whose dur is missing, not a number or negative (read as 0)
    arg_groups: dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]  # group → (rows, key → values)
    id_column: tuple[np.ndarray, np.ndarray]  # flow ends' ``id``: (rows, values)

    def is_ph(self, *values: str) -> np.ndarray:
        """Rows whose ``ph`` is one of ``values``."""
        return np.isin(self.ph_codes, [i for i, v in enumerate(self.ph_values) if v in values])

    def is_cat(self, *values: str) -> np.ndarray:
        """Rows whose (lower-cased) ``cat`` is one of ``values``."""
        return np.isin(self.cat_codes, [i for i, v in enumerate(self.cat_values) if v in values])

    def cat_of(self, rows: np.ndarray) -> np.ndarray:
        """The (lower-cased) ``cat`` of the given rows, as text."""
        return np.array(self.cat_values + [""], dtype=object)[self.cat_codes[rows]]

    @staticmethod
    def _lookup(at: np.ndarray, values: np.ndarray, rows: np.ndarray,
                texts: bool = False) -> np.ndarray:
        """Values of a sparse column at ``rows`` (None where the event has none), or with
        ``texts`` their :func:`text_of` ("" where none), converted only where present."""
        out = np.full(len(rows), "" if texts else None, dtype=object)
        if len(at) and len(rows):
            pos = np.searchsorted(at, rows)
            pos[pos == len(at)] = 0
            hit = at[pos] == rows
            found = values[pos[hit]]
            out[hit] = texts_of(found) if texts else found
        return out

    def drop_args(self, *keys: str) -> None:
        """Forget these ``args`` once their readers are done (a group with none left goes with
        its rows): on the 32×92 side the device tasks' six args alone are ≈ 70 MB, which the
        later steps of the load would otherwise hold through their own peaks. A read after the
        drop is a KeyError, never a silent "absent"."""
        for key in keys:
            group = _GROUP_OF[key]
            columns = self.arg_groups[group][1]
            del columns[key]
            if not columns:
                del self.arg_groups[group]

    def arg_values(self, rows: np.ndarray, key: str) -> list:
        """``args[key]`` of the given rows (None where absent)."""
        at, columns = self.arg_groups[_GROUP_OF[key]]
        return self._lookup(at, columns[key], rows).tolist()

    def arg_texts(self, rows: np.ndarray, key: str) -> np.ndarray:
        """``args[key]`` of the given rows as text ("" where absent), an object array."""
        at, columns = self.arg_groups[_GROUP_OF[key]]
        return self._lookup(at, columns[key], rows, texts=True)

    def flow_ids(self, rows: np.ndarray) -> np.ndarray:
        """``id`` of the given flow ends (rows of ``s``/``f`` events), the key they pair on: as
        text (ints and strings both occur, and pair when the text is equal), or — when every flow
        end's id is an int64, so that every row has one — the ints themselves, which pair exactly
        as their texts would (one text per int), several times faster."""
        at, values = self.id_column
        if values.dtype == np.int64 and len(at):
            pos = np.minimum(np.searchsorted(at, rows), len(at) - 1)
            if np.array_equal(at[pos], rows):
                return values[pos]
        return self._lookup(at, values, rows, texts=True)

    def complete(self, mask: np.ndarray) -> np.ndarray:
        """Rows of ``X`` events with a valid start that also satisfy ``mask``."""
        return np.flatnonzero(mask & self.is_complete)


# ------------------------------------------------------------------------------------------------
# Process / thread metadata
# ------------------------------------------------------------------------------------------------


@dataclass
class Layout:
    """Which pid plays which role, and the HCCL thread layout (spec inputs §4.1, §4.3)."""

    hardware_pid: int | None = None
    hccl_pid: int | None = None
    overlap_pid: int | None = None
    cann_pid: int | None = None
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    group_threads: dict[int, tuple[str, int]] = field(default_factory=dict)  # tid → (name, order)
    plane_threads: dict[int, tuple[str, str, int]] = field(default_factory=dict)  # tid → (group, plane, sort)


def _sort_index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_layout(ev: Events, notes: list[Note]) -> Layout:
    """Map pids by ``process_name`` (last match wins, as in the reference) and walk the HCCL
    threads in ``thread_sort_index`` order: a thread whose name contains ``Communication`` opens
    a group, every later named thread is a plane of it."""
    out = Layout()
    sort_index: dict[tuple[int, int], int] = {}
    rows = np.flatnonzero(ev.is_ph("M"))
    names, indexes = ev.arg_texts(rows, "name"), ev.arg_values(rows, "sort_index")
    for i, arg_name, idx in zip(rows.tolist(), names, indexes):
        kind, pid, tid = ev.name[i], int(ev.pid[i]), int(ev.tid[i])
        if kind == "process_name":
            if arg_name == HARDWARE:
                out.hardware_pid = pid
            elif arg_name in HCCL_PROCESSES:
                out.hccl_pid = pid
            elif arg_name == OVERLAP_PROCESS:
                out.overlap_pid = pid
            elif arg_name == CANN_PROCESS:
                out.cann_pid = pid
        elif kind == "thread_name":
            out.thread_names[(pid, tid)] = arg_name
        elif kind == "thread_sort_index" and _sort_index(idx) is not None:
            sort_index[(pid, tid)] = int(idx)
    if out.hccl_pid is None:
        return out
    hccl = out.hccl_pid
    threads = [(sort_index[k], k[1]) for k in sort_index if k[0] == hccl]
    group, order = "", 0
    for sort, tid in sorted(threads):
        name = out.thread_names.get((hccl, tid), "")
        if "Communication" in name:
            out.group_threads[tid] = (name, order)
            group, order = name, order + 1
        elif name:
            out.plane_threads[tid] = (group, name, sort)
    unsorted = sorted(t for (p, t), n in out.thread_names.items()
                      if p == hccl and "Communication" in n and t not in out.group_threads)
    for tid in unsorted:
        out.group_threads[tid] = (out.thread_names[(hccl, tid)], len(out.group_threads))
    if unsorted:
        notes.append(Note(f"{len(unsorted)} HCCL group thread(s) have no thread_sort_index: their "
                          "planes are unknown, so their Wait time is 0"))
    return out
