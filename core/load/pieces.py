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
BOUNDARY = re.compile(rb"\}\s*,\s*\{")
#: Files at least this large are read piece by piece from disk rather than into memory.
STREAM_BYTES = 16 << 20
#: Bytes read at a time when :class:`FileContent` searches for something: small, as the usual
#: search (the event boundary after a piece's cut) ends within a few hundred bytes.
_SCAN_BYTES = 1 << 16
#: The longest match :meth:`FileContent.search` is asked for (``}`` ``,`` ``{`` with the
#: whitespace of an indented file, a key and its ``[``): windows overlap by this much.
_MATCH_BYTES = 4096
_UTF8_BOM = b"\xef\xbb\xbf"

T = TypeVar("T")


class FileContent:
    """A large file read where it is needed (``os.pread``), never held whole: a 0.9 GB trace read
    at once made its bytes half of the loader's peak memory. Offers the few operations the
    readers use on file content — length, slices, ``find``/``rfind``, regex search and match —
    with the same results as on the file's bytes.

    Not a memory map: a file shortened while it is mapped kills the process with SIGBUS at the
    first page past its end; here a shortened file only yields short reads, which fail to parse
    like any damaged file and end in the whole-file parse's clean error.
    """

    def __init__(self, fd: int, size: int, skip: int) -> None:
        self.fd = fd
        self.size = size - skip
        self.skip = skip  # a UTF-8 BOM

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, part: slice) -> bytes:
        a, b, _ = part.indices(self.size)
        return os.pread(self.fd, max(b - a, 0), a + self.skip)

    def whole(self) -> bytes:
        return self[0:self.size]

    def search(self, pattern: re.Pattern[bytes], pos: int = 0, endpos: int | None = None) -> _Found | None:
        """``pattern.search`` over the file, a window at a time. A match counts once no earlier
        one can be cut off by the window's end: it starts more than ``_MATCH_BYTES`` (the longest
        match the readers look for) before that end and ends before it. Otherwise the window moves
        on past the starts already ruled out, or doubles where it cannot."""
        endpos = self.size if endpos is None else min(endpos, self.size)
        size = _SCAN_BYTES
        while pos < endpos:
            stop = min(pos + size, endpos)
            chunk = self[pos:stop]
            m = pattern.search(chunk)
            if stop == endpos:
                return None if m is None else _Found(pos + m.start(), pos + m.end())
            safe = len(chunk) - _MATCH_BYTES  # a match starting before this cannot be cut off
            if m is not None and m.start() < safe and m.end() < len(chunk):
                return _Found(pos + m.start(), pos + m.end())
            if (m is None or m.start() >= safe) and safe > 0:
                pos += safe  # nothing starts before pos + safe
            else:
                size *= 2
        return None

    def match(self, pattern: re.Pattern[bytes], pos: int = 0) -> _Found | None:
        m = pattern.match(self[pos:pos + _MATCH_BYTES])
        return None if m is None else _Found(pos + m.start(), pos + m.end())

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        found = self.search(re.compile(re.escape(sub)), start, end)
        return -1 if found is None else found.start()

    def rfind(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The last ``sub`` lying within ``[start, end)``, read backwards chunk by chunk."""
        hi = self.size if end is None else min(end, self.size)
        while hi > start:
            lo = max(start, hi - max(_SCAN_BYTES, 2 * len(sub)))  # each step moves on
            at = self[lo:hi].rfind(sub)
            if at >= 0:
                return lo + at
            if lo == start:
                break
            hi = lo + len(sub) - 1  # an occurrence across ``lo`` lies in the next chunk
        return -1


class _Found:
    """Where a :class:`FileContent` search matched (``start()``/``end()`` as on re.Match)."""

    def __init__(self, start: int, end: int) -> None:
        self._start, self._end = start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


#: A file's content: its bytes, or a large file read where needed.
Content = Union[bytes, bytearray, FileContent]


def read_file(path: Path) -> Content:
    """The file's content without a UTF-8 BOM: a small file's bytes, a large file as a
    :class:`FileContent`. OSError for an unreadable file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size >= STREAM_BYTES:
            skip = len(_UTF8_BOM) if os.pread(fd, len(_UTF8_BOM), 0) == _UTF8_BOM else 0
            content, fd = FileContent(fd, size, skip), -1
            return content
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read()
    finally:
        if fd >= 0:
            os.close(fd)
    return data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data


def search(content: Content, pattern: re.Pattern[bytes], pos: int = 0,
           endpos: int | None = None) -> re.Match[bytes] | _Found | None:
    """``pattern.search`` on any content."""
    if isinstance(content, FileContent):
        return content.search(pattern, pos, endpos)
    return pattern.search(content, pos, len(content) if endpos is None else endpos)


def match(content: Content, pattern: re.Pattern[bytes], pos: int = 0) -> re.Match[bytes] | _Found | None:
    """``pattern.match`` on any content."""
    return content.match(pattern, pos) if isinstance(content, FileContent) else pattern.match(content, pos)


def whole(content: Content) -> bytes | bytearray:
    """All the bytes (the whole-file fallback parses)."""
    return content.whole() if isinstance(content, FileContent) else content


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
    view = raw if isinstance(raw, FileContent) else memoryview(raw)
    a = start
    while a < end:
        cut = a + piece_bytes
        for _ in range(_CUT_TRIES):
            boundary = search(raw, BOUNDARY, cut, end) if cut < end else None
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
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # msgspec 0.18: UnicodeDecodeError on bad UTF-8
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
    #: Whether every value has its field's declared type (text fields str or None): no, any
    #: JSON value may stand anywhere.
    typed = False

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
    #: Every value has its field's declared type (the decoder validated it).
    typed = True

    def __init__(self, objs: list[Any]) -> None:
        self.objs = objs

    def __len__(self) -> int:
        return len(self.objs)

    def top(self, key: str) -> list[Any]:
        return list(map(self.getters[key], self.objs))

    def subset(self, rows: list[int]) -> Structs:
        return type(self)(list(map(self.objs.__getitem__, rows)))

    def args(self) -> Structs:
        args = list(map(self.getters["args"], self.objs))
        if None in args:  # "args": null
            args = [self.empty_args if a is None else a for a in args]
        return type(self)(args)
