"""Run a comparison in a child process and stream its events back.

The TUI must never freeze: JSON parsing and the comparisons hold the GIL, so they run in a separate
process and the UI thread only receives finished, picklable events. Cancelling (Esc/q in the app)
closes the generator, which terminates the child at once.

The child is a :class:`perfcmp_core.processes.Child` that leads its own process group, which
holds its loader and background workers too, so one signal reaches all of them; and each of them
dies with its parent (:mod:`perfcmp_core.lifetime`). Stopping a run (:meth:`ChildRun.close`) is
stopping that child: SIGTERM to the group, at most :data:`~perfcmp_core.processes.GRACE_S` to end
(each process removes its temporary files and leaves), then SIGKILL of what is left: a run is
gone within a second whatever it was doing. Its events come over the child's pipe (not a
``Queue``: no feeder thread in a child that forks).

A child started with ``serve=True`` outlives a finished run: it waits for the next run's
arguments over its pipe (:meth:`ChildRun.again`), keeping what its run function holds (the app's
comparison child keeps both loaded profiles, :mod:`perfcmp_core.held`, so a step change reads
nothing again). Everything else stays as above: a run stopped half way or failed ends the child,
an idle child is a live child like a running one (:func:`perfcmp_core.processes.terminate_all`
reaches it), dies with its parent, and ends when its owner closes it or closes its end of the
pipe.
"""

from __future__ import annotations

import importlib
import threading
import traceback
from typing import Any, Callable, Iterator, Union

from .errors import InputError
from .gcpause import gc_paused
from .processes import Child, start_method
from .events import Event, Failed, Finished
from .request import RunRequest

_POLL_S = 0.1
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
    """The comparison child's body (its group and lifetime set up by
    :class:`~perfcmp_core.processes.Child`): each run's events, then, serving, the next run."""
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
        # Two-way only when serving: the next run's arguments come the other way.
        self._child = Child(_child, target, kwargs, serve, name="perfcmp-compare", group=True,
                            duplex=serve)
        self._closed = False
        #: "running" while a run's events are still to come, "idle" when a serving child
        #: finished its run and waits for :meth:`again`; guarded by ``_lock`` (the app reads a
        #: run on one worker thread and asks for the next on another).
        self._state = "running"
        self._serve = serve
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The child's process id (its process group's too)."""
        return self._child.pid

    @property
    def child(self) -> Child:
        """The process this run is (:class:`perfcmp_core.processes.Child`)."""
        return self._child

    def again(self, **kwargs: Any) -> bool:
        """Start the next run in this child, if it serves and waits, idle, for one: True when
        it was sent (read it with :meth:`events`); False otherwise (start a new child)."""
        with self._lock:
            if not self._serve or self._state != "idle" or self._closed:
                return False
            try:
                self._child.conn.send(kwargs)
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
        reader = self._child.conn
        try:
            while not should_stop():
                if not reader.poll(_POLL_S):
                    continue
                try:
                    event = reader.recv()
                except EOFError:
                    # Stopped (what it started with it) and reaped before its exit code is read.
                    self.close()
                    yield Failed(f"the comparison process stopped (exit code {self._child.exitcode})",
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
        """Stop the child and everything it started (:meth:`perfcmp_core.processes.Child.stop`:
        SIGTERM to its group, a grace period, SIGKILL, reaped; idempotent, and never a signal
        once it is reaped: its pid may be another process's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._child.stop()


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
