"""The per-rank map on this machine: a process pool, one rank at a time per process.

Parsing holds the GIL, so ranks load in separate processes; only each rank's small summary comes
back. The pool has as many processes as this process may use cores (``--jobs`` changes it), so
memory is bounded by that many loaded ranks at once, whatever the cluster's size.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol, TypeVar

from .. import lifetime
from ..errors import InputError
from ..processes import start_method
from .ranks import format_ranks, ranks_phrase
from .summary import import_workers_modules, summarize_rank


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and ``taskset`` narrow)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Ranked(Protocol):
    rank: int


T = TypeVar("T", bound=_Ranked)
R = TypeVar("R")


def map_in_pool(tasks: Sequence[T], jobs: int | None = None,
                work: Callable[[T], R] = summarize_rank) -> Iterator[R]:  # type: ignore[assignment]
    """Each task's outcome as soon as it is done (completion order).

    One process per core by default, never more than there are tasks; with one (or one task) the
    ranks load here, one after the other. A pool process that dies (killed for memory, a crash in
    a native library) fails the run with one line naming the ranks it may have held. ``work`` is
    what runs per task (a module-level function, so it pickles): by default a rank's summary;
    ``check`` gates rank pairs with it.
    """
    workers = min(jobs or available_cores(), len(tasks))
    if workers <= 1:
        for task in tasks:
            yield work(task)
        return
    # Forked (the CLI, the app's comparison child), the workers share this process's imports
    # instead of importing pandas and the loaders again.
    method = start_method()
    if method == "fork":
        import_workers_modules()
    # Each worker dies with this process and ends at once on SIGTERM (the one lifetime policy);
    # the signals stay held until it says so.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(method),
                               initializer=lifetime.child_started)
    completed = False
    try:
        with lifetime.signals_blocked():
            pending: dict[Future[R], T] = {pool.submit(work, t): t for t in tasks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    yield future.result()
                except BrokenProcessPool:
                    lost = format_ranks(t.rank for t in (task, *pending.values()))
                    raise InputError(None, f"a process loading the ranks died (out of memory? try "
                                           f"fewer with --jobs N); not finished: "
                                           f"{ranks_phrase(lost)}") from None
        completed = True
    finally:
        # Stopped early (an error, Ctrl+C, a cancelled app): do not wait for the ranks being
        # loaded; the workers end when this process does.
        pool.shutdown(wait=completed, cancel_futures=True)
