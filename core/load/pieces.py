"""Parse a large JSON array of event objects piece by piece (GPU ``traceEvents``, NPU
``trace_view.json``), so that no more than one piece of event objects is alive at once.

Why: one ``orjson.loads`` of a whole trace keeps every event dict alive at once — about eight
bytes of Python objects per byte of JSON, 1.8 GB for a 225 MB GPU trace, several GB for a
0.9 GB NPU trace — and the allocator's page faults then make a large trace slower *per event*
than a small one. So the array is cut at event boundaries into pieces of about ``piece_bytes``;
each piece is decoded, reduced to columns by the caller, and dropped before the next one.

A cut is only made at ``}`` ``,`` ``{``. Because every piece starts at a true event boundary, a
cut that falls inside a string or a nested object leaves the piece unbalanced, which orjson
rejects *at its very end*; the cut then moves to the next candidate. Anything else — a parse
error inside a piece (NaN tokens, a broken file), a value the typed decoder reads unlike orjson —
makes :func:`feed` give up (None), and the caller parses the whole file at once, which also
yields the precise error message.

Each piece is first offered to a typed decoder (msgspec structs of only the fields the loader
uses, :mod:`.gpu_decode` / :mod:`.npu_decode`); a piece it refuses is parsed by orjson into
dicts. The caller's two consumers must build the same columns from either.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar, Union

import msgspec
import orjson

#: Target size of one parsed piece. The column extraction makes a score of passes over a
#: piece's events: at 1 MB they stay in the CPU caches (0.5 to 4 MB measured alike; below
#: ~256 kB the per-piece overhead shows).
PIECE_BYTES = 1 << 20
#: Cuts tried per piece before giving up on splitting (each retry re-parses the piece).
_CUT_TRIES = 32
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
#: Files at least this large are memory-mapped rather than read into memory.
MAP_BYTES = 16 << 20
#: Parsed bytes behind the current piece are handed back to the kernel in steps of this size.
_RELEASE_BYTES = 32 << 20
_UTF8_BOM = b"\xef\xbb\xbf"

T = TypeVar("T")
#: A file's content: bytes, or a read-only memory map of a large file.
Content = Union[bytes, bytearray, mmap.mmap]


def read_file(path: Path) -> Content:
    """The file's content without a UTF-8 BOM. A large file is memory-mapped read-only: its
    pages are read as the pieces reach them and handed back behind them (:func:`feed`), so a
    0.9 GB trace is never held whole — reading it at once made the raw bytes half of the peak
    memory of a load. OSError for an unreadable file."""
    with path.open("rb") as fh:
        if os.fstat(fh.fileno()).st_size >= MAP_BYTES:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            if mapped[:len(_UTF8_BOM)] != _UTF8_BOM:
                return mapped
            mapped.close()  # a BOM: read it (rare; the slice below copies anyway)
        data = fh.read()
    return data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data


def _release(content: Content, upto: int) -> None:
    """Drop the mapped pages before ``upto`` from this process (the page cache keeps them)."""
    if isinstance(content, mmap.mmap):
        content.madvise(mmap.MADV_DONTNEED, 0, upto - upto % mmap.PAGESIZE)


class NotLikeOrjson(ValueError):
    """A value that msgspec accepted where orjson reads it otherwise or not at all (the file is
    then parsed whole, by orjson)."""


#: The integers orjson reads as integers (wider ones become floats).
_INT_MIN, _UINT_MAX = -2**63, 2**64 - 1


def orjson_ints(values: list[Any]) -> list[Any]:
    """``values`` with integers beyond 64 bits as floats, as ``orjson`` reads them (msgspec keeps
    them exact), so that both decoders give the same values; :class:`NotLikeOrjson` for one
    beyond float range, which orjson refuses."""
    kinds = set(map(type, values))
    if int not in kinds:  # text, floats: nothing to convert
        return values
    if kinds == {int}:  # the usual case: two C passes
        if min(values) >= _INT_MIN and max(values) <= _UINT_MAX:
            return values
    elif not [v for v in values if type(v) is int and not _INT_MIN <= v <= _UINT_MAX]:
        return values
    try:
        return [float(v) if type(v) is int and not _INT_MIN <= v <= _UINT_MAX else v
                for v in values]
    except OverflowError:
        raise NotLikeOrjson("an integer beyond float range") from None


def feed(raw: Content, start: int, ends: Iterator[int],
         decode: Callable[[bytes], T | None], on_typed: Callable[[T, bytes], None],
         on_dicts: Callable[[list[Any], bytes], None], piece_bytes: int = PIECE_BYTES) -> int | None:
    """Feed the array whose items start at ``raw[start]`` to the consumers, piece by piece.

    ``ends`` yields candidate positions of the array's closing ``]``, last first: when the last
    piece does not parse, the next candidate is tried (a later key of the file may hold a
    ``]``). Returns the end position used, or None when the array cannot be cut safely (the
    consumers then hold part of the events and must be discarded).
    """
    end = next(ends, None)
    if end is None:
        return None
    view = memoryview(raw)
    a = released = start
    while a < end:
        if a - released >= _RELEASE_BYTES:
            _release(raw, a)
            released = a
        cut = a + piece_bytes
        for _ in range(_CUT_TRIES):
            boundary = _BOUNDARY.search(raw, cut, end) if cut < end else None
            b = boundary.start() + 1 if boundary else end
            text = b"".join((b"[", view[a:b], b"]"))
            typed = decode(text)
            if typed is not None:
                try:
                    on_typed(typed, text)
                except NotLikeOrjson:
                    return None
            else:  # a cut, a broken file, or values msgspec does not take: orjson decides
                try:
                    events = orjson.loads(text)
                except orjson.JSONDecodeError as exc:
                    if boundary is not None and _cut_short(text, exc):
                        cut = boundary.start() + 1  # cut inside a string or nested object
                        continue
                    if boundary is None and (found := next(ends, None)) is not None and found > a:
                        end = found  # the array closes earlier: a later key holds a "]"
                        continue
                    return None
                on_dicts(events, text)
            a = boundary.end() - 1 if boundary else end
            break
        else:
            return None
    return end


def _cut_short(text: bytes, exc: orjson.JSONDecodeError) -> bool:
    """Whether the parse failed at the very end, as a piece cut inside a string or nested object
    does (orjson reports a character offset)."""
    return exc.pos >= len(text.decode("utf-8", "replace")) - 1


def decode_typed(decoder: msgspec.json.Decoder, text: bytes) -> list[Any] | None:
    """The structs ``decoder`` makes of ``text``, or None when it cannot read the piece exactly
    as orjson would: a wrong type, a broken or cut piece — or bytes that are not UTF-8, which
    msgspec does not check in values it skips and orjson refuses anywhere (a piece that is not
    pure ASCII is decoded once to check; real traces are ASCII)."""
    try:
        events = decoder.decode(text)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    if not text.isascii():
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return events


_NO_ARGS: dict[str, Any] = {}  # read only: stands for a missing or non-object ``args``


class Dicts:
    """The events of one piece parsed into dicts by orjson: the values of a key for every event,
    in order, as ``dict.get`` gives them (``defaults`` where a key is absent, else None)."""

    defaults: dict[str, Any] = {}

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs

    def __len__(self) -> int:
        return len(self.objs)

    def top(self, key: str) -> list[Any]:
        """Values of a top-level key."""
        return list(map(dict.get, self.objs, repeat(key), repeat(self.defaults.get(key))))

    def subset(self, rows: list[int]) -> Dicts:
        """The events at ``rows``."""
        objs = self.objs
        return type(self)([objs[i] for i in rows])

    def args(self) -> Dicts:
        """The ``args`` objects of these events (empty ones where absent or not objects)."""
        args = list(map(dict.get, self.objs, repeat("args"), repeat(_NO_ARGS)))
        if not set(map(type, args)) <= {dict}:
            args = [a if type(a) is dict else _NO_ARGS for a in args]
        return type(self)(args)


class Structs:
    """The events of one piece decoded into msgspec structs: the same values as :class:`Dicts`
    (the structs' defaults are the ones ``dict.get`` gives)."""

    #: JSON key → attribute getter, for the event and the args struct.
    getters: dict[str, attrgetter] = {}
    #: Stands for ``"args": null``.
    empty_args: Any = None

    def __init__(self, objs: list[Any]) -> None:
        self.objs = objs

    def __len__(self) -> int:
        return len(self.objs)

    def top(self, key: str) -> list[Any]:
        return list(map(self.getters[key], self.objs))

    def subset(self, rows: list[int]) -> Structs:
        objs = self.objs
        return type(self)([objs[i] for i in rows])

    def args(self) -> Structs:
        args = list(map(self.getters["args"], self.objs))
        if None in args:  # "args": null
            args = [self.empty_args if a is None else a for a in args]
        return type(self)(args)
