"""Run one independent piece of a comparison on the second core.

After loading, the comparisons run in one process while the other core idles. A forked child
shares both loaded profiles copy-on-write (nothing is pickled on the way in), computes one
independent result and sends back only that small result. Where ``fork`` is unavailable the work
runs inline when its result is asked for, so callers see the same behaviour everywhere.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Callable, TypeVar

from . import lifetime

T = TypeVar("T")


def _run_into(q: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    lifetime.child_started()
    try:
        q.put((True, fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - re-raised by the caller of the result
        q.put((False, exc))


def start(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start ``fn(*args)`` now; the returned callable waits for and returns its result.

    Only call this from a single-threaded process (the CLI, or the TUI's comparison child):
    forking a process that runs threads can deadlock the child.
    """
    if "fork" not in mp.get_all_start_methods():
        return lambda: fn(*args)
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    proc = ctx.Process(target=_run_into, args=(q, fn, args), name="perfcmp-background")
    lifetime.start(proc)

    def result() -> T:
        try:
            ok, value = q.get()
        finally:
            proc.join()
        if not ok:
            raise value
        return value

    return result
