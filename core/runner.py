"""Run a comparison in a child process and stream its events back.

The TUI must never freeze: JSON parsing and the comparisons hold the GIL, so they run in a separate
process and the UI thread only receives finished, picklable events. Cancelling (Esc/q in the app)
closes the generator, which terminates the child at once.

The child leads its own process group, which holds its loader and background workers too, so one
signal reaches all of them; and each of them dies with its parent (:mod:`perfcmp_core.lifetime`).
Stopping a run (:meth:`ChildRun.close`) sends the group SIGTERM, lets it end for at most
:data:`GRACE_S` (each process removes its temporary files and leaves), then SIGKILLs what is left:
a run is gone within a second whatever it was doing.

A child started with ``serve=True`` outlives a finished run: it waits for the next run's
arguments over its pipe (:meth:`ChildRun.again`), keeping what its run function holds (the app's
comparison child keeps both loaded profiles, :mod:`perfcmp_core.held`, so a step change reads
nothing again). Everything else stays as above: a run stopped half way or failed ends the child,
an idle child is in :data:`_live` like a running one (a signal reaches it), dies with its parent,
and ends when its owner closes it or closes its end of the pipe.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from typing import Any, Callable, Iterator, Union

from . import lifetime
from .errors import InputError
from .gcpause import gc_paused
from .processes import start_method
from .events import Event, Failed, Finished
from .request import RunRequest

_POLL_S = 0.1
#: How long a stopped run may take to end on SIGTERM before the rest of its group is SIGKILLed.
GRACE_S = 0.4
PIPELINE = "perfcmp_core.pipeline:comparison_events"
#: The factory of a serving child's run function (see :class:`ChildRun`).
SERVER = "perfcmp_core.pipeline:HeldComparisons"
#: How often a serving child, waiting for its next run, lets its run function use the wait.
IDLE_S = 0.05


#: What a child runs: a generator function, or its ``"module:function"`` name. A name is
#: imported in the child only, so the parent starts it without importing pandas first.
Target = Union[Callable[..., Iterator[Event]], str]


def _resolve(target: Target) -> Callable[..., Iterator[Event]]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _child(conn: Any, target: Target, kwargs: dict[str, Any], serve: bool) -> None:
    if hasattr(os, "setpgid"):
        # Own process group: cancelling kills the loader processes this child starts, too, and
        # a Ctrl+C in the terminal reaches only the app (which then cancels us). The parent sets
        # it as well, so the group exists from the start whoever runs first.
        os.setpgid(0, 0)
    lifetime.child_started()
    # Serving, the target makes the function that runs each request: what that function keeps
    # between requests (the loaded profiles) lives as long as this process; its ``idle()``, if
    # it has one, is called every IDLE_S while no request waits.
    run = _resolve(target)() if serve else _resolve(target)
    while True:
        _send_events(conn, run, kwargs)
        if not serve:
            return
        idle = getattr(run, "idle", None)  # work made ahead, taken while waiting
        try:
            while idle is not None and not conn.poll(IDLE_S):
                idle()
            kwargs = conn.recv()  # the next run's arguments (ChildRun.again)
        except EOFError:  # the parent closed its end: nothing more will come
            return


def _send_events(conn: Any, run: Callable[..., Iterator[Event]], kwargs: dict[str, Any]) -> None:
    """Send every event of ``run(**kwargs)``, ending with its Finished or a Failed."""
    try:
        for event in run(**kwargs):
            conn.send(event)
    except InputError as exc:
        conn.send(Failed(exc.message, is_input=True))
    except Exception as exc:  # noqa: BLE001 - reported to the UI, which shows it
        conn.send(Failed(f"{type(exc).__name__}: {exc}", is_input=False, detail=traceback.format_exc()))


def _signal_group(proc: Any, sig: int) -> None:
    """Send ``sig`` to the child's whole process group (it and its workers), else to it alone
    (before its group exists, it has started nothing)."""
    if proc.pid is None:
        return
    try:
        if hasattr(os, "killpg") and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


#: Runs not closed yet, for :func:`terminate_all` (a signal handler stopping everything).
_live: set[ChildRun] = set()


def terminate_all(sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to every open run's process group, without waiting (safe in a signal
    handler); :meth:`ChildRun.close` still reaps them."""
    for run in list(_live):
        _signal_group(run._proc, sig)


def prepare() -> None:
    """Start multiprocessing's resource tracker now, while ``sys.stderr`` is a real file.

    The tracker is started lazily on the first spawn and hands it ``sys.stderr.fileno()``; inside a
    running Textual app stderr is a capture object without a usable descriptor, and the spawn
    fails with "bad value(s) in fds_to_keep". Call this before the app starts.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


class ChildRun:
    """A comparison started in a child process at construction (forked or spawned as
    :func:`perfcmp_core.processes.start_method` decides).

    Starting it before the UI is imported and built lets the child's parsing overlap with the
    app's own start-up (≈ 1 s on the real GPU pair).

    ``serve=True``: ``target`` names a factory of the run function, and the child outlives a
    finished run, waiting for the next one's arguments (:meth:`again`): the app's step change
    then reuses the profiles the child holds instead of starting a new child that reads them
    again. A run stopped before its end still kills the child (whatever it was doing, its state
    is not trusted again), and so does a failed one.
    """

    def __init__(self, target: Target, *, serve: bool = False, **kwargs: Any) -> None:
        ctx = mp.get_context(start_method())
        # A Pipe, not a Queue: Queue.put starts a feeder thread in the child, and the child forks
        # (loader and background workers), which must not happen while another thread runs.
        # Two-way only when serving: the next run's arguments come the other way.
        self._reader, writer = ctx.Pipe(duplex=serve)
        self._proc = ctx.Process(target=_child, args=(writer, target, kwargs, serve),
                                 name="perfcmp-compare")
        lifetime.start(self._proc)
        if hasattr(os, "setpgid"):
            try:
                os.setpgid(self._proc.pid, self._proc.pid)
            except OSError:  # it did so itself (and, spawned, may have started its interpreter)
                pass
        writer.close()  # the child holds the only other end: EOF means it is gone
        self._closed = False
        #: "running" while a run's events are still to come, "idle" when a serving child
        #: finished its run and waits for :meth:`again`; guarded by ``_lock`` (the app reads a
        #: run on one worker thread and asks for the next on another).
        self._state = "running"
        self._serve = serve
        self._lock = threading.Lock()
        _live.add(self)

    @property
    def pid(self) -> int | None:
        """The child's process id (its process group's too)."""
        return self._proc.pid

    def again(self, **kwargs: Any) -> bool:
        """Start the next run in this child, if it serves and waits, idle, for one: True when
        it was sent (read it with :meth:`events`); False otherwise (start a new child)."""
        with self._lock:
            if not self._serve or self._state != "idle" or self._closed:
                return False
            try:
                self._reader.send(kwargs)
                self._state = "running"
                return True
            except OSError:  # it died meanwhile
                pass
        self.close()
        return False

    def events(self, should_stop: Callable[[], bool] = lambda: False) -> Iterator[Event]:
        """The child's events as they arrive. ``should_stop`` is polled every 100 ms even while
        no event arrives, so a cancel takes effect during a long parse, not only between phases.
        Closing the iterator (or a stop) kills the child and everything it started, unless it
        serves and its run finished (then it waits for :meth:`again`)."""
        reader = self._reader
        try:
            while not should_stop():
                if not reader.poll(_POLL_S):
                    continue
                try:
                    event = reader.recv()
                except EOFError:
                    self._proc.join(timeout=_POLL_S)
                    yield Failed(f"the comparison process stopped (exit code {self._proc.exitcode})",
                                 is_input=False)
                    return
                if isinstance(event, Finished) and self._serve:
                    with self._lock:
                        self._state = "idle"
                yield event
                if isinstance(event, (Finished, Failed)):
                    return
        finally:
            with self._lock:
                idle = self._state == "idle"
            if not idle:
                self.close()

    def close(self) -> None:
        """Stop the child and everything it started: SIGTERM to its group, at most
        :data:`GRACE_S` to end, then SIGKILL (idempotent: once reaped, its pid may be another
        process's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _live.discard(self)
        proc = self._proc
        grouped = proc.pid is not None and hasattr(os, "killpg") and _pgid(proc.pid) == proc.pid
        _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            proc.join(timeout=0.02)
            if proc.exitcode is not None and not (grouped and _group_alive(proc.pid)):
                break
        else:
            if grouped:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if proc.exitcode is None:
                proc.kill()
        proc.join(timeout=1)
        self._reader.close()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def stream_in_process(
    target: Target,
    should_stop: Callable[[], bool] = lambda: False,
    **kwargs: Any,
) -> Iterator[Event]:
    """Yield the events of ``target(**kwargs)`` computed in a spawned child process."""
    return ChildRun(target, **kwargs).events(should_stop)


def start_comparison(request: RunRequest, *, serve: bool = False) -> ChildRun:
    """Start a whole comparison (:func:`perfcmp_core.pipeline.comparison_events`) in a child.

    ``serve``: the child then stays after its run, holding both loaded profiles, for the same
    comparison on other steps (:meth:`ChildRun.again`, :class:`perfcmp_core.pipeline.HeldComparisons`).

    Forked, the child inherits the pipeline (and pandas) imported here first; the app needs
    pandas anyway. Spawned, the pipeline is named, not imported: importing it here would only
    delay the start of the child, which imports it again.
    """
    if start_method() == "fork":
        with gc_paused():  # imports: hundreds of thousands of objects, no cycles
            importlib.import_module(PIPELINE.partition(":")[0])
    return ChildRun(SERVER if serve else PIPELINE, serve=serve, request=request)
