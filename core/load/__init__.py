"""Load any supported profile into the one :class:`~perfcmp_core.model.Profile` model."""

from __future__ import annotations

import importlib
from typing import Protocol

from ..errors import InputError
from ..gcpause import gc_paused
from ..heap import return_free_memory
from ..model import SCHEMAS, Kind, Profile
from ..options import LoadOptions
from .detect import Source, detect
from .steps import no_such_step, select_step
from .validate import check_file


def check_source(src: Source, opts: LoadOptions) -> None:
    """The checks made before any file of ``src`` is read (exists, regular, readable, size cap,
    owner): :class:`InputError` naming the first file that fails."""
    for p in [src.trace, src.db, *src.files.values()]:
        if p is not None:
            check_file(p, opts.force)


def check_input(path: str, opts: LoadOptions) -> Source:
    """Everything about ``path`` that is known without loading it: it exists and its kind is
    detected, every file it will read passes :func:`check_source`, and a requested step exists
    where that takes one query (an NPU Db's ``STEP_TIME``). The app runs this before its screen
    opens, so such errors are one line and exit code 2, not an in-app dialog."""
    src = detect(path, opts.rank)
    check_source(src, opts)
    if opts.step is not None and src.kind == "npu_db" and src.db is not None:
        from .npu_db import step_ids

        known = step_ids(src.db)
        if known is not None and opts.step not in known:
            raise no_such_step(src.given, opts.step, known)
    return src


#: Inputs whose files come to at most this many bytes of content (a gzip counted at
#: :data:`GZIP_FACTOR` times its size) are read once before the app's screen opens
#: (:func:`check_content`): a fraction of a second, as ``info`` takes.
PRECHECK_BYTES = 4 * 1024 * 1024
GZIP_FACTOR = 10


def check_content(src: Source, opts: LoadOptions) -> bool:
    """Load a small input once (through the cache, so the comparison's own load of it is then
    a cache hit), so that what only reading reveals — a truncated gzip, a JSON that is not a
    trace, an export without events — is reported before the app's screen opens, as ``info``
    reports it, instead of as a failed load in the app. True when it was read; a larger input is
    left to the load the screen shows (reading it twice would delay the screen by as long)."""
    files = [p for p in (src.trace, src.db, *src.files.values()) if p is not None]
    size = sum(p.stat().st_size * (GZIP_FACTOR if p.name.lower().endswith(".gz") else 1)
               for p in files)
    if size > PRECHECK_BYTES:
        return False
    load_source(src, opts)
    return True


def load_source(src: Source, opts: LoadOptions) -> Profile:
    """Read an already detected source (validation included), through the profile cache unless
    ``opts.use_cache`` is off."""
    check_source(src, opts)
    profile = _cached(src, opts) if opts.use_cache else _read(src, opts)
    return profile if opts.step is None else select_step(profile, opts.step)


def _cached(src: Source, opts: LoadOptions) -> Profile:
    """The whole profile through the cache: one entry serves every step (a step is a view)."""
    from ..cache import cached_load

    return cached_load(src, opts, _read)


def _read(src: Source, opts: LoadOptions) -> Profile:
    """Run the kind's loader with the cyclic garbage collector paused (every loader allocates
    millions of objects and no cycles; an 8× trace's load went from 8.4 to 5.1 s), then give
    what it freed back to the system (:mod:`perfcmp_core.heap`)."""
    with gc_paused():
        profile = _read_kind(src, opts)
    return_free_memory()  # what parsing freed (about half the peak of a large side)
    return profile


class Loader(Protocol):
    """What reads one kind of input: the detected source in, the one profile model out (an
    ``InputError`` naming the file for bad input)."""

    def __call__(self, src: Source, opts: LoadOptions) -> Profile: ...


#: The loader of each input kind (:data:`~perfcmp_core.model.Kind`) as ``module:function``,
#: imported on first use (each pulls in its own parsers). A new kind is a rule in
#: :func:`~.detect.detect` and a line here.
LOADERS: dict[Kind, str] = {
    "gpu": "perfcmp_core.load.gpu:load_gpu",
    "npu_text": "perfcmp_core.load.npu_text:load_npu_text",
    "npu_db": "perfcmp_core.load.npu_db:load_npu_db",
}


def _loader(kind: Kind) -> Loader:
    module, _, name = LOADERS[kind].partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def preload(given: str | Source, opts: LoadOptions) -> bool:
    """Import the loader ``given`` (a path, or its source already detected) will need, unless its
    profile will come from the cache; True when it will (an entry is stored for it).

    Called before forking the process that loads the other side of a pair: the child then starts
    parsing at once instead of importing the same modules a second time (msgspec, the parsers:
    ≈ 0.05 s of CPU on each side). Anything wrong with the input is left to the load to report.
    """
    try:
        src = given if isinstance(given, Source) else detect(given, opts.rank)
        if opts.use_cache:
            from ..cache import has_entry

            if has_entry(src, opts):
                return True
    except Exception:  # noqa: BLE001 - the load itself reports every problem, in order
        return False
    _loader(src.kind)
    return False


def _read_kind(src: Source, opts: LoadOptions) -> Profile:
    profile = _loader(src.kind)(src, opts)
    _check_not_empty(src, opts, profile)
    return profile


def _check_not_empty(src: Source, opts: LoadOptions, profile: Profile) -> None:
    """A profile in which every table is empty is an input error, for every kind alike (an empty
    ``traceEvents``, a JSON list of numbers, a Db without profiler tables, an empty Text export):
    comparing it would silently produce an empty side with exit code 0. Memory records the run
    did not need to read (``load_memory`` off) still count when the profile says it holds them."""
    skipped_memory = not opts.load_memory and profile.meta.profile_memory
    if not skipped_memory and all(getattr(profile, name).empty for name in SCHEMAS):
        why = "; ".join(note.text for note in profile.meta.notes)
        raise InputError(src.db or src.trace or src.given,
                         "holds no profiler events" + (f" ({why})" if why else ""))


def load_profile(path: str, opts: LoadOptions | None = None) -> Profile:
    """Detect, validate and read ``path``; raise InputError with a one-line message on bad input."""
    opts = opts or LoadOptions()
    return load_source(detect(path, opts.rank), opts)


__all__ = ["Source", "check_content", "check_input", "check_source", "detect", "load_profile",
           "load_source", "preload"]
