"""Read a torch.profiler (Kineto) trace file into the columns of :mod:`.gpu_events`, in pieces.

The ``traceEvents`` array is parsed piece by piece (:mod:`.pieces`: why, and how a cut is made
safely), each piece typed-decoded into structs (:mod:`.gpu_decode`) or, where msgspec cannot read
it exactly like orjson, into dicts; :class:`.gpu_events.Builder` keeps the columns either way.
Anything unusual — a second ``traceEvents`` key after the events, a parse error inside a piece
(NaN tokens, a broken file) — falls back to parsing the whole file at once, which also yields the
precise error message.

With ``LoadOptions.split`` (the larger side of an unbalanced pair, :func:`..pair.split_larger`)
the events after a cut near that fraction are parsed by a forked child (:mod:`.halves`) and its
columns merged (:meth:`.gpu_events.Builder.merge`); when that fails in any way, the file is read
as above, in this process, with the same result.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import orjson

from ..errors import InputError
from ..notes import Note
from ..options import JSON_CAP, LoadOptions
from . import pieces
from .gpu_decode import decode
from .gpu_events import Builder, Events
from .halves import feed_in_two

#: Size of one parsed piece of ``traceEvents`` (:data:`.pieces.PIECE_BYTES`; tests shrink it).
PIECE_BYTES = pieces.PIECE_BYTES
#: Closing brackets tried, from the end of the file, to find the end of ``traceEvents``.
_TAIL_TRIES = 16
_NON_JSON_TOKENS = (b"NaN", b"Infinity")
_UTF8_BOM = b"\xef\xbb\xbf"
_GZ_CHUNK = 16 * 1024 * 1024
_KEY = b'"traceEvents"'
_ARRAY_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')


def read_trace(path: Path, opts: LoadOptions, notes: list[Note]) -> tuple[dict[str, Any], Events]:
    """The trace's top-level object without its events, and the events as :class:`Events`."""
    raw = _read_bytes(path, None if opts.force else JSON_CAP)
    split = _parse_in_two(raw, opts) if opts.split else None
    if split is not None:
        doc, builder = split
    else:
        builder = Builder(opts)
        doc = _parse_in_pieces(raw, builder)
    if doc is None:
        raw = pieces.whole(raw)
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


def _read_bytes(path: Path, limit: int | None) -> pieces.Content:
    """The decompressed file content (a large plain trace is read where needed:
    :func:`.pieces.read_file`); gzip and I/O failures become InputError.

    The size cap checked before reading applies to the *compressed* size of a ``.gz``; so that a
    small file cannot expand without bound (a gzip bomb), the decompressed content is held to
    the same ``limit`` as a plain trace (``None``: ``--force``, no limit).
    """
    try:
        if not path.name.lower().endswith(".gz"):
            return pieces.read_file(path)
        data = _gunzip(path, limit)
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


def _parse_in_pieces(raw: pieces.Content, builder: Builder) -> dict[str, Any] | None:
    """Feed the ``traceEvents`` array to ``builder`` piece by piece (:mod:`.pieces`) and return
    the top-level object without its events; None when the file cannot be cut safely
    (``builder`` then holds part of the events and must be discarded)."""
    first = raw.find(_KEY)
    if first < 0:
        return None
    opening = pieces.match(raw, _ARRAY_OPEN, first)
    if opening is None:
        return None
    docs: dict[int, dict[str, Any]] = {}

    def ends() -> Iterator[int]:
        for doc, end in _array_ends(raw, opening.end()):
            docs[end] = doc
            yield end

    end = pieces.feed(raw, opening.end(), ends(), decode, builder.add_typed, builder.add, PIECE_BYTES)
    return None if end is None else docs[end]


def _parse_in_two(raw: pieces.Content, opts: LoadOptions) -> tuple[dict[str, Any], Builder] | None:
    """As :func:`_parse_in_pieces`, the events after a cut near ``opts.split`` of them parsed in
    a forked child (:mod:`.halves`): the top-level object and the merged builder; None when that
    cannot be done (the file is then read in one process)."""
    first = raw.find(_KEY)
    opening = pieces.match(raw, _ARRAY_OPEN, first) if first >= 0 else None
    if opening is None:
        return None
    halves = feed_in_two(raw, opening.end(), opts.split, partial(_array_ends, raw, opening.end()),
                         partial(Builder, opts), decode, PIECE_BYTES)
    if halves is None:
        return None
    builder, second = halves
    builder.merge(second.builder)
    return second.extra, builder


def _array_ends(raw: pieces.Content, start: int) -> Iterator[tuple[dict[str, Any], int]]:
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


def _parse(path: Path, raw: bytes | bytearray, notes: list[Note]) -> Any:
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
            notes.append(Note("the trace contains NaN/Infinity values (not standard JSON); read anyway"))
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
