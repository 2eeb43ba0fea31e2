"""Read a torch.profiler (Kineto) trace file into the columns of :mod:`.gpu_events`, in pieces.

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
from pathlib import Path
from typing import Any, Iterator

import orjson

from ..errors import InputError
from ..options import JSON_CAP, LoadOptions
from .gpu_decode import decode
from .gpu_events import Builder, Events, NotLikeOrjson

#: Target size of one parsed piece of the ``traceEvents`` array. The extraction makes about
#: twenty passes over a piece's dicts (≈ 8 bytes of objects per byte of JSON): at 1 MB they stay
#: in the CPU caches, and loading is ~20 % faster than with 8 MB pieces (0.59 → 0.45 s for the
#: real 34 MB trace, 4.3 → 3.5 s for an 8× one); below ~256 kB per-piece overhead shows.
PIECE_BYTES = 1 << 20
#: Cuts tried per piece before giving up on splitting (each retry re-parses the piece).
_CUT_TRIES = 32
#: Closing brackets tried, from the end of the file, to find the end of ``traceEvents``.
_TAIL_TRIES = 16
_NON_JSON_TOKENS = (b"NaN", b"Infinity")
_UTF8_BOM = b"\xef\xbb\xbf"
_GZ_CHUNK = 16 * 1024 * 1024
_KEY = b'"traceEvents"'
_ARRAY_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def read_trace(path: Path, opts: LoadOptions, notes: list[str]) -> tuple[dict[str, Any], Events]:
    """The trace's top-level object without its events, and the events as :class:`Events`."""
    raw = _read_bytes(path, None if opts.force else JSON_CAP)
    builder = Builder(opts)
    doc = _parse_in_pieces(raw, builder)
    if doc is None:
        doc = _parse(path, raw, notes)
        events = _trace_events(path, doc)
        builder = Builder(opts)
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


def _parse_in_pieces(raw: bytes | bytearray, builder: Builder) -> dict[str, Any] | None:
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
            typed = decode(text)
            if typed is not None:
                try:
                    builder.add_typed(typed, text)
                except NotLikeOrjson:  # orjson reads a value otherwise: it reads the file
                    return None
            else:  # a cut, a broken file, or values msgspec does not take: orjson decides
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
