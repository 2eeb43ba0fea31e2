"""Parse one large events array in two processes: the first part here, the rest in a forked child.

Why: a comparison whose sides differ in size (one step against twelve) parses the smaller side in
one process and the larger one in the other (:mod:`..pair`); the first finishes long before the
second and its core then idles. Splitting the larger side's array lets that core work too.

How: the array's byte range is cut at an event boundary (``}`` ``,`` ``{``) near a fraction of it.
A forked child feeds the second part to its own builder and sends the builder's columns back;
this process feeds the first part, then merges the two. The merged columns are the ones a single
read gives, because a piece of the array is read alike wherever it starts (:mod:`.pieces`) — but
only when the cut is a true event boundary, which is proved by the first part parsing completely
up to it: parsed from the array's start, a cut inside a string or a nested object leaves the last
piece unbalanced. Anything else unusual — the first part does not end at the cut, the second part
does not end at the array's last candidate end, either part gives up (:func:`.pieces.feed`), the
child fails or dies — returns None, and the caller reads the file in one process as before (which
also gives its precise error).

Only where this process may fork (:func:`..processes.start_method`): the child shares the file's
content and the loaded modules, and only its columns (what the profile holds anyway) travel back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import orjson

from ..processes import Worker, start_method
from . import pieces

#: Boundaries tried for the cut, and ends tried for each when checking it (:func:`cut_near`).
_CUT_TRIES = 64
#: Bytes read past a candidate cut to check that events start there.
_PROBE_BYTES = 4096


class Fed(Protocol):
    """A builder that :func:`.pieces.feed` fills (the loader's columns of a trace)."""

    def add(self, events: list[Any], text: bytes) -> None: ...

    def add_typed(self, view: Any, text: bytes) -> None: ...


B = TypeVar("B", bound=Fed)


class Second(Generic[B]):
    """What the child sends back: its builder, the array's end it used and what the caller's
    ``ends`` gave with it (the GPU trace's top-level object)."""

    def __init__(self, builder: B, end: int, extra: Any) -> None:
        self.builder, self.end, self.extra = builder, end, extra


def cut_near(raw: pieces.Content, start: int, end: int, fraction: float) -> tuple[int, int] | None:
    """The first event boundary at or after ``fraction`` of ``raw[start:end]`` from which the
    bytes read as whole events (:func:`_starts_events`), as the end of the first part (just
    after its ``}``) and the start of the second (its ``{``); None when there is none near."""
    at = start + int((end - start) * fraction)
    for _ in range(_CUT_TRIES):
        found = pieces.search(raw, pieces.BOUNDARY, at, end)
        if found is None:
            return None
        if _starts_events(raw, found.end() - 1, end):
            return found.start() + 1, found.end() - 1
        at = found.end() - 1
    return None


def _starts_events(raw: pieces.Content, at: int, end: int) -> bool:
    """Whether the bytes from ``at`` read as whole events up to a later boundary: a ``}, {``
    inside a string or a nested object does not (its text runs into a closing quote or bracket
    out of place). Only a guess that spares a split bound to fail: what proves the cut is the
    first part parsing up to it."""
    cut = at + _PROBE_BYTES
    for _ in range(_CUT_TRIES):
        found = pieces.search(raw, pieces.BOUNDARY, cut, end) if cut < end else None
        stop = found.start() + 1 if found is not None else end
        try:
            orjson.loads(b"".join((b"[", raw[at:stop], b"]")))
            return True
        except orjson.JSONDecodeError:
            if found is None:
                return False
            cut = found.end() - 1
    return False


def feed_in_two(raw: pieces.Content, start: int, fraction: float,
                ends: Callable[[], Iterator[tuple[Any, int]]], make: Callable[[], B],
                decode: Callable[[bytes], Any], piece_bytes: int) -> tuple[B, Second[B]] | None:
    """Feed the array whose items start at ``raw[start]`` to two builders made by ``make``: the
    part before a cut near ``fraction`` of it here, the rest in a forked child. ``ends()`` yields
    ``(extra, end)``, the candidate ends of the array, last first, as :func:`.pieces.feed` takes
    them; only the first is accepted. None when this process cannot fork or the split fails (see
    the module docstring): the caller then reads in one process."""
    if start_method() != "fork":
        return None
    first_end = next(iter(ends()), None)
    if first_end is None:
        return None
    cut = cut_near(raw, start, first_end[1], fraction)
    if cut is None:
        return None
    worker: Worker[Second[B] | None] = Worker(_second, raw, cut[1], ends, make, decode, piece_bytes,
                                              name="perfcmp-half", method="fork")
    try:
        here = make()
        try:
            done = pieces.feed(raw, start, iter((cut[0],)), decode, here.add_typed, here.add, piece_bytes)
        except Exception:  # noqa: BLE001 - the single read meets it again and reports it
            return None
        if done != cut[0]:
            return None
        try:
            second = worker.result()
        except Exception:  # noqa: BLE001 - the child failed or died: the single read decides
            return None
        return None if second is None else (here, second)
    finally:
        worker.stop()


def _second(raw: pieces.Content, start: int, ends: Callable[[], Iterator[tuple[Any, int]]],
            make: Callable[[], B], decode: Callable[[bytes], Any], piece_bytes: int) -> Second[B] | None:
    """The child's part: the array from ``start`` to its end, fed to a new builder; None unless
    it ends at the first candidate end (a later one means a ``]`` in a later key of the file,
    which the single read handles)."""
    builder = make()
    given: list[tuple[Any, int]] = []

    def candidates() -> Iterator[int]:
        for extra, end in ends():
            given.append((extra, end))
            yield end

    end = pieces.feed(raw, start, candidates(), decode, builder.add_typed, builder.add, piece_bytes)
    if end is None or end != given[0][1]:
        return None
    return Second(builder, end, given[0][0])
