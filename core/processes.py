"""Child processes of a run: when they fork, when they spawn, and the one worker that sends a
result back.

Five places start processes: the app's comparison child (:mod:`.runner`), the parse and
analysis of the comparison side beside the base side's (:mod:`.pair`), the second half of an
unbalanced pair's larger GPU trace (:mod:`.load.halves`, fork only), the steps the pipeline
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
from multiprocessing.connection import wait
from typing import Any, Callable, Generic, TypeVar

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


def _run_into(q: Any, fn: Callable[..., Any], args: tuple[Any, ...], nice: int, parts: int | None) -> None:
    """Worker body: send back ``(True, fn(*args))`` — or, for ``parts`` other than 1, ``(True,
    value)`` for each value ``fn(*args)`` yields (``parts`` of them, or any number for None) —
    or ``(False, the exception)``. It dies with its parent and ends at once on SIGTERM
    (:func:`perfcmp_core.lifetime.child_started`)."""
    lifetime.child_started()
    if nice:
        os.nice(nice)
    sending: threading.Thread | None = None
    try:
        if parts == 1:
            q.put((True, fn(*args)))
        else:
            # A part waits in the pipe until the parent reads it, which may be long after (the
            # parent still analyses its own side): each part is sent by a thread, so making the
            # next one goes on meanwhile (this child starts no process after).
            sent = 0
            for value in fn(*args):
                if sending is not None:
                    sending.join()
                sending = threading.Thread(target=q.put, args=((True, value),), daemon=True)
                sending.start()
                sent += 1
            if sending is not None:
                sending.join()
            if parts is not None and sent != parts:  # the parent would wait for a part that never comes
                raise RuntimeError(f"{getattr(fn, '__name__', fn)} made {sent} parts, not {parts}")
    except BaseException as exc:  # noqa: BLE001 - re-raised by Worker.result in the parent
        if sending is not None:
            sending.join()
        q.put((False, exc))


class WorkerDied(RuntimeError):
    """A worker ended without sending its result."""


class Worker(Generic[T]):
    """``fn(*args)`` started at construction in a child process (see :func:`start_method`).

    Spawned, ``fn`` and ``args`` are pickled, so they must be cheap to send; forked, they are
    shared as they are. With ``parts`` > 1, ``fn`` is a generator of that many values, each sent
    as soon as it is made (a loaded profile before its analysis): :meth:`result` gives them in
    turn.
    """

    #: Its parent, ending, waits for it (a :class:`Producer` is ended instead).
    _daemon = False

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str,
                 method: str | None = None, nice: int = 0, parts: int | None = 1) -> None:
        ctx = mp.get_context(method or start_method())
        self._queue = ctx.SimpleQueue()
        self._left = parts
        self._proc = ctx.Process(target=_run_into, args=(self._queue, fn, args, nice, parts), name=name,
                                 daemon=self._daemon)
        lifetime.start(self._proc)

    def result(self) -> T:
        """Wait for the next value (re-raising the child's exception); after the last one, or
        an exception, the child is joined."""
        ok = False
        try:
            ok, value = self._next()
        finally:
            if self._left is not None:
                self._left -= 1
            if not ok or self._left == 0:
                self._proc.join()
        if not ok:
            raise value
        return value

    def _next(self) -> tuple[bool, Any]:
        """The child's next message; :class:`WorkerDied` when it ended without sending one
        (killed by a signal, the kernel's OOM killer): waiting on the queue alone would wait
        forever, as this process holds the queue's writing end too."""
        reader = self._queue._reader  # type: ignore[attr-defined]
        if not reader.poll():
            wait([reader, self._proc.sentinel])
            if not reader.poll():
                self._proc.join()
                raise WorkerDied(f"{self._proc.name} ended (exit code {self._proc.exitcode}) "
                                 "without a result")
        return self._queue.get()

    def stop(self) -> None:
        """End the child now if it still runs (its result is no longer wanted)."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()


class Producer(Worker[T]):
    """A :class:`Worker` whose ``fn`` yields any number of items, each sent back as soon as it
    is made: the parent takes those made so far (:meth:`made`) whenever it wants them, never
    waiting, then :meth:`stop`s it. For work made ahead of a request that may never come."""

    #: Its parent, ending, ends it rather than waiting for items nobody will take (it starts
    #: no process of its own, which a daemon may not).
    _daemon = True

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str,
                 method: str | None = None, nice: int = 0) -> None:
        super().__init__(fn, *args, name=name, method=method, nice=nice, parts=None)

    def made(self) -> list[T]:
        """The items made since the last call (none waited for). An error ends the items
        quietly: what was made stays usable, and the parent makes what is missing."""
        out = []
        while not self._queue.empty():
            ok, value = self._queue.get()
            if ok:
                out.append(value)
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
