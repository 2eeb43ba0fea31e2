"""Load the two sides of a comparison at the same time.

Parsing JSON holds the GIL, so two threads would take as long as one after the other. The
comparison side is therefore parsed in a :class:`~perfcmp_core.processes.Worker` while this
process parses the base side; the finished :class:`Profile` (numpy-backed DataFrames, cheap to
pickle) comes back.

An unbalanced pair (one step against twelve) would leave the core of the smaller side idle for
most of the load: the larger side's GPU trace or NPU ``trace_view.json`` is then parsed in two
processes
(:func:`split_larger`, :mod:`.load.halves`), a forked child taking the second half of its events.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from functools import partial
from typing import Callable, Generic, Iterator, Optional, TypeVar

from .errors import InputError, both_bad
from .load import Source, detect, load_profile, load_source, preload
from .model import Profile
from .options import LoadOptions
from .processes import BACKGROUND_NICE, Worker, start_method

A = TypeVar("A")
#: An unbalanced pair's larger trace is parsed in two processes (:func:`split_larger`) from
#: this size on (below it, the fork and the merge cost about what the second process saves) …
SPLIT_MIN_BYTES = 32 << 20
#: … when it is at least this many times the other side's.
SPLIT_RATIO = 2.0
#: The part of the larger trace's events that the forked child parses.
SPLIT_FRACTION = 0.5
#: The kinds whose trace reader can split (:mod:`.load.halves`).
_SPLIT_KINDS = ("gpu", "npu_text")
#: What to compute of each side as soon as it is loaded, where it was loaded (None: nothing).
Analyse = Optional[Callable[[Profile], A]]
#: A comparison profile this large (:meth:`Profile.nbytes`) is analysed in its load worker before
#: it is sent, profile and analysis together: sent first, it would be held twice — here, and in
#: the worker analysing it — for the whole analysis (the 32×92 NPU sides hold 177 MB: the Text
#: pair's summed PSS 0.97 → 0.83 GB). A smaller one is sent first, so that the steps needing only
#: the profiles start while it is analysed (the H200 pair's 12-step side holds 32 MB).
SEND_FIRST_MAX_BYTES = 64 << 20


class Analysis(Generic[A]):
    """A side's analysis, made (``ready``) or still being made: calling it gives the value,
    computing it here or waiting for the worker making it. When both sides come from the cache,
    the profiles are there long before their analyses, and the caller may use the profiles first
    (the Overall screen) before it asks."""

    def __init__(self, value: Callable[[], A | None], ready: bool, after_parse: bool = False) -> None:
        #: Being made right after its side's parse, in the worker that parsed it (not a cached
        #: or held profile's, which lags seconds behind it): the Overall figures wait for it.
        self.after_parse = after_parse
        self._value, self.ready = value, ready

    @classmethod
    def made(cls, value: A | None) -> Analysis[A]:
        return cls(lambda: value, ready=True)

    def __call__(self) -> A | None:
        return self._value()


def iter_pair(
    base: str | Source,
    comp: str | Source,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    *,
    parallel: bool | None = None,
    analyse: Analyse[A] = None,
) -> Iterator[tuple[str, Profile, Analysis[A], float]]:
    """Yield ``(side, profile, analysis, seconds)`` for "base" then "comparison", each as soon as
    it is loaded, with ``analyse(profile)`` made or being made (its value None without
    ``analyse``). Each side is a path, or its :class:`~perfcmp_core.load.Source` when the caller
    detected it already. The worker that makes an analysis still being made lives until this
    generator is closed: ask for the analyses before.

    In parallel mode the comparison side is parsed and analysed in a worker process while this
    process parses and analyses the base side itself: the base profile then needs no pickling
    round trip (≈ 0.1 s on the real pair), and the two analyses run at the same time. A
    comparison profile under :data:`SEND_FIRST_MAX_BYTES` is yielded as soon as it is loaded,
    its analysis still being made: a larger comparison side (12 steps against 1) would otherwise
    keep this process idle through both its parse and its analysis; a larger one comes with its
    analysis. When the base side fails, the comparison side's load is
    awaited: both bad inputs are reported in one message (a good comparison side leaves the
    base's error alone).
    """
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= 2
    base, comp = _detected(base, base_opts), _detected(comp, comp_opts)
    both_cached = False
    if parallel:
        # The worker inherits the loaders instead of importing them again. Two profiles in the
        # cache load here one after the other: reading an entry is quicker than a worker's
        # pickling round trip of the profile (≈ 0.2 s against 1.9 s for a 0.9 GB Text side).
        both_cached = all([preload(path, opts) for path, opts in ((base, base_opts), (comp, comp_opts))])
    if not parallel or both_cached:
        t0 = time.perf_counter()
        try:
            b = _load(base, base_opts)
        except InputError as exc:
            raise _with_other(exc, lambda: _load(comp, comp_opts)) from None
        if not both_cached or analyse is None or start_method() != "fork":
            yield "base", b, Analysis.made(analyse(b) if analyse else None), time.perf_counter() - t0
            t0 = time.perf_counter()
            c, analysis = _load_then_analyse(comp, comp_opts, analyse)
            yield "comparison", c, Analysis.made(analysis), time.perf_counter() - t0
            return
        # Both from the cache: both profiles are given at once, their analyses made when asked
        # for — the base side's here, the comparison side's meanwhile in a forked worker that
        # shares its loaded profile (only the analysis is pickled back).
        c = _load(comp, comp_opts)
        pending, worker = analysed_beside(c, analyse)
        try:
            yield "base", b, Analysis(partial(analyse, b), ready=False), time.perf_counter() - t0
            yield "comparison", c, pending, time.perf_counter() - t0
        finally:
            worker.stop()
        return
    base_opts, comp_opts = split_larger(base, comp, base_opts, comp_opts)
    t0 = time.perf_counter()
    # The comparison side's profile is sent as soon as it is loaded (unless it is large), its
    # analysis after it: the caller can start the work that needs only the profiles while the
    # analysis is being made.
    worker = Worker(_load_then_analyse, comp, comp_opts, analyse, name="perfcmp-load", parts=2)
    try:
        try:
            b = _load(base, base_opts)
        except InputError as exc:
            raise _with_other(exc, worker.result) from None
        yield "base", b, Analysis.made(analyse(b) if analyse else None), time.perf_counter() - t0
        c = worker.result()
        yield "comparison", c, Analysis(worker.result, ready=False, after_parse=True), time.perf_counter() - t0
    finally:
        worker.stop()


def split_larger(base: str | Source, comp: str | Source, base_opts: LoadOptions,
                 comp_opts: LoadOptions) -> tuple[LoadOptions, LoadOptions]:
    """The options of both sides, the larger side's asking for its trace to be parsed in two
    processes (:mod:`.load.halves`) when the pair is unbalanced: its trace at least
    :data:`SPLIT_MIN_BYTES` and :data:`SPLIT_RATIO` times the other's. Each side's parse has a
    core of its own, and the smaller one's ends first: its core then takes part of the larger
    one. GPU traces and NPU Text ``trace_view.json`` (the readers that can split)."""
    sizes = [_trace_bytes(given) for given in (base, comp)]
    if None in sizes:
        return base_opts, comp_opts
    small, large = sorted(sizes)  # type: ignore[type-var]
    if large < SPLIT_MIN_BYTES or large < SPLIT_RATIO * small:
        return base_opts, comp_opts
    if sizes[0] == large:
        return replace(base_opts, split=SPLIT_FRACTION), comp_opts
    return base_opts, replace(comp_opts, split=SPLIT_FRACTION)


def _trace_bytes(given: str | Source) -> int | None:
    """The size of a side's GPU trace or NPU ``trace_view.json`` as parsed (a ``.gz``'s content,
    from the size gzip records at its end, modulo 4 GiB); None for a Db export or a file that
    cannot be read."""
    if not isinstance(given, Source) or given.kind not in _SPLIT_KINDS or given.trace is None:
        return None
    try:
        if not given.trace.name.lower().endswith(".gz"):
            return given.trace.stat().st_size
        with given.trace.open("rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return int.from_bytes(fh.read(4), "little")
    except OSError:
        return None


def analysed_beside(profile: Profile, analyse: Callable[[Profile], A]) -> tuple[Analysis[A], Worker[A]]:
    """``analyse(profile)`` started in a forked worker that shares the loaded profile (only the
    analysis is pickled back), at the background's priority (what the caller makes meanwhile,
    the Overall figures, comes first): its pending :class:`Analysis`, and the worker to stop
    when it is no longer wanted."""
    worker = Worker(analyse, profile, name="perfcmp-analyse", method="fork", nice=BACKGROUND_NICE)
    return Analysis(worker.result, ready=False), worker


def _detected(given: str | Source, opts: LoadOptions) -> str | Source:
    """``given`` detected once for the cache lookup and the load alike; a path that cannot be
    detected stays a path, for its load to report in order (both inputs named when both are
    bad)."""
    if isinstance(given, Source):
        return given
    try:
        return detect(given, opts.rank)
    except InputError:
        return given


def _load(given: str | Source, opts: LoadOptions) -> Profile:
    return load_source(given, opts) if isinstance(given, Source) else load_profile(given, opts)


def _load_then_analyse(given: str | Source, opts: LoadOptions, analyse: Analyse[A]) -> Iterator[Profile | A | None]:
    """The profile, then its analysis (a worker's two parts): a profile of at least
    :data:`SEND_FIRST_MAX_BYTES` is analysed before it is given."""
    profile = _load(given, opts)
    if analyse is None or profile.nbytes() < SEND_FIRST_MAX_BYTES:
        yield profile
        yield analyse(profile) if analyse else None
        return
    analysis = analyse(profile)
    yield profile
    yield analysis


def _with_other(base_error: InputError, load_comparison: Callable[[], Profile]) -> InputError:
    """The base side could not be read: the error to report, naming the comparison side too when
    it cannot be read either (both bad inputs in one message, not one per attempt)."""
    try:
        load_comparison()
    except InputError as exc:
        return both_bad(base_error, exc)
    except Exception:  # noqa: BLE001 - the base's input error is the one to report
        return base_error
    return base_error
