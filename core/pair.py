"""Load the two sides of a comparison, in parallel processes.

Parsing JSON holds the GIL, so two threads would take as long as one after the other and would
freeze a UI running in the same process. Each side is therefore parsed in its own worker process
and the finished :class:`Profile` (numpy-backed DataFrames, cheap to pickle) comes back.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Callable, Iterator

from .load import load_profile
from .model import Profile
from .options import LoadOptions


def _context() -> mp.context.BaseContext:
    # fork is fastest (no re-import of pandas) and safe from our single-threaded CLI; callers
    # that run threads (the TUI) pass "spawn" / "forkserver" explicitly.
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def load_pair(
    base: str,
    comp: str,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    *,
    parallel: bool | None = None,
    context: mp.context.BaseContext | None = None,
    on_done: Callable[[str, Profile], None] | None = None,
) -> tuple[Profile, Profile]:
    """Load BASE and COMP (in two processes when ``parallel``; default: when ≥ 2 CPUs).

    Errors surface exactly as in a serial load: the base side's error wins when both fail, so the
    message names the base file first, as the reference does.
    """
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= 2
    if not parallel:
        b = load_profile(base, base_opts)
        if on_done:
            on_done("base", b)
        c = load_profile(comp, comp_opts)
        if on_done:
            on_done("comparison", c)
        return b, c
    with ProcessPoolExecutor(max_workers=2, mp_context=context or _context()) as pool:
        fb: Future[Profile] = pool.submit(load_profile, base, base_opts)
        fc: Future[Profile] = pool.submit(load_profile, comp, comp_opts)
        b = fb.result()
        if on_done:
            on_done("base", b)
        c = fc.result()
        if on_done:
            on_done("comparison", c)
        return b, c


def iter_pair(
    base: str,
    comp: str,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    *,
    parallel: bool | None = None,
) -> Iterator[tuple[str, Profile, float]]:
    """Yield ``(side, profile, seconds)`` for "base" and "comparison" as each load finishes, so a
    progress view can tick each side off on its own. Errors: the base side's wins when both fail.
    """
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= 2
    if not parallel:
        for side, path, opts in (("base", base, base_opts), ("comparison", comp, comp_opts)):
            t0 = time.perf_counter()
            profile = load_profile(path, opts)
            yield side, profile, time.perf_counter() - t0
        return
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2, mp_context=_context()) as pool:
        futures: dict[Future[Profile], str] = {
            pool.submit(load_profile, base, base_opts): "base",
            pool.submit(load_profile, comp, comp_opts): "comparison",
        }
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                # Report the base side's error first, as a serial load would.
                base_future = next(f for f, s in futures.items() if s == "base")
                (base_future if base_future.done() and base_future.exception() else failed[0]).result()
            for f in sorted(done, key=lambda f: futures[f] != "base"):
                yield futures[f], f.result(), time.perf_counter() - t0
