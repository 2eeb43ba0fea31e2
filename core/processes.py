"""Child processes of a run: when they fork, when they spawn, and the one worker that sends a
result back.

Four places start processes: the app's comparison child (:mod:`.runner`), the parse and
analysis of the comparison side beside the base side's (:mod:`.pair`), the steps the pipeline
runs on the second core (:func:`in_background`: those declared ``beside``) and the analyses of
every step that the app's comparison child makes ahead while it waits (:class:`Producer`,
:mod:`.held`). They follow one
policy, :func:`start_method`: fork where it is safe, because a forked child shares the modules
already imported (no second interpreter importing pandas, ≈ 0.5 s of CPU) and the loaded
profiles (nothing pickled on the way in); spawn elsewhere.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
from typing import Any, Callable, Generic, Iterator, TypeVar

from . import lifetime

T = TypeVar("T")


def start_method() -> str:
    """``fork`` while this process runs no other thread, else ``spawn``.

    A child forked while other threads run can deadlock on a lock one of them held: the running
    app (Textual's threads) therefore spawns, while the command line before the app starts, the
    headless commands and the comparison child itself (which talks over a Pipe: no feeder thread)
    fork. Never on macOS, where system libraries do not survive a fork.
    """
    if ("fork" in mp.get_all_start_methods() and sys.platform != "darwin"
            and threading.active_count() == 1):
        return "fork"
    return "spawn"


#: How much lower the priority of :func:`in_background` work is than its parent's (``nice``).
BACKGROUND_NICE = 5


def _run_into(q: Any, fn: Callable[..., Any], args: tuple[Any, ...], nice: int = 0) -> None:
    """Worker body: send back ``(True, fn(*args))``, or ``(False, the exception)``. It dies
    with its parent and ends at once on SIGTERM (:func:`perfcmp_core.lifetime.child_started`)."""
    lifetime.child_started()
    if nice:
        os.nice(nice)
    try:
        q.put((True, fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - re-raised by Worker.result in the parent
        q.put((False, exc))


def _produce_into(q: Any, fn: Callable[..., Iterator[Any]], args: tuple[Any, ...], nice: int = 0) -> None:
    """:class:`Producer` body: send each item of ``fn(*args)`` as it is made (an exception ends
    the items: what was made stays usable, and the parent wanted only those anyway)."""
    lifetime.child_started()
    if nice:
        os.nice(nice)
    try:
        for item in fn(*args):
            q.put(item)
    except Exception:  # noqa: BLE001 - the items are a speed-up: the parent makes what is missing
        pass


class Worker(Generic[T]):
    """``fn(*args)`` started at construction in a child process (see :func:`start_method`).

    Spawned, ``fn`` and ``args`` are pickled, so they must be cheap to send; forked, they are
    shared as they are.
    """

    _body: Callable[..., None] = staticmethod(_run_into)
    _daemon = False

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str,
                 method: str | None = None, nice: int = 0) -> None:
        ctx = mp.get_context(method or start_method())
        self._queue = ctx.SimpleQueue()
        self._proc = ctx.Process(target=self._body, args=(self._queue, fn, args, nice), name=name,
                                 daemon=self._daemon)
        lifetime.start(self._proc)

    def result(self) -> T:
        """Wait for the value (re-raising the child's exception); the child is then joined."""
        try:
            ok, value = self._queue.get()
        finally:
            self._proc.join()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """End the child now if it still runs (its result is no longer wanted)."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()


class Producer(Worker[T]):
    """A :class:`Worker` whose ``fn`` yields items, each sent back as soon as it is made: the
    parent takes those made so far (:meth:`made`) whenever it wants them, never waiting, then
    :meth:`stop`s it. For work made ahead of a request that may never come."""

    _body = staticmethod(_produce_into)
    #: Its parent, ending, ends it rather than waiting for items nobody will take (it starts
    #: no process of its own, which a daemon may not).
    _daemon = True

    def made(self) -> list[T]:
        """The items made since the last call (none waited for)."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get())
        return out


class Later(Generic[T]):
    """Work started by :func:`in_background`: call it for the result; :meth:`stop` it when the
    result is no longer wanted (the run failed or was abandoned), so that no child outlives the
    run in a process that goes on (a test session, the app's retry)."""

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], worker: Worker[T] | None) -> None:
        self._fn, self._args, self._worker = fn, args, worker

    def __call__(self) -> T:
        return self._worker.result() if self._worker is not None else self._fn(*self._args)

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.stop()


def in_background(fn: Callable[..., T], *args: Any, nice: int = BACKGROUND_NICE) -> Later[T]:
    """Start ``fn(*args)`` on the other core now; call the returned :class:`Later` for its result.

    For work on the loaded profiles, which only a forked child can share for free: where this
    process cannot fork, the work runs inline when its result is asked for, so callers see the
    same behaviour everywhere. The child runs at a lower priority (``nice``, by default
    :data:`BACKGROUND_NICE`): what this process computes first is what the user waits for (the
    app's Overall screen), and the CPU is shared alike once this process waits for the result.
    """
    if start_method() != "fork":
        return Later(fn, args, None)
    return Later(fn, args, Worker(fn, *args, name="perfcmp-background", method="fork", nice=nice))
