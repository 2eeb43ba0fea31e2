"""Run a comparison in a child process and stream its events back.

The TUI must never freeze: JSON parsing and the comparisons hold the GIL, so they run in a separate
process and the UI thread only receives finished, picklable events. Cancelling (Esc/q in the app)
closes the generator, which terminates the child at once.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import traceback
from typing import Any, Callable, Iterator, Union

from .errors import InputError
from .gcpause import gc_paused
from .processes import start_method
from .events import Event, Failed, Finished
from .request import RunRequest

_POLL_S = 0.1
PIPELINE = "perfcmp_core.pipeline:comparison_events"


#: What a child runs: a generator function, or its ``"module:function"`` name. A name is
#: imported in the child only, so the parent starts it without importing pandas first.
Target = Union[Callable[..., Iterator[Event]], str]


def _resolve(target: Target) -> Callable[..., Iterator[Event]]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _child(conn: Any, target: Target, kwargs: dict[str, Any]) -> None:
    if hasattr(os, "setpgid"):
        # Own process group: cancelling kills the loader processes this child starts, too, and
        # a Ctrl+C in the terminal reaches only the app (which then cancels us).
        os.setpgid(0, 0)
    try:
        for event in _resolve(target)(**kwargs):
            conn.send(event)
    except InputError as exc:
        conn.send(Failed(exc.message, is_input=True))
    except Exception as exc:  # noqa: BLE001 - reported to the UI, which shows it
        conn.send(Failed(f"{type(exc).__name__}: {exc}", is_input=False, detail=traceback.format_exc()))


def _kill_group(proc: Any) -> None:
    """Terminate the child's whole process group (it and its loader workers)."""
    if proc.pid is None or not hasattr(os, "killpg"):
        return
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


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
    """

    def __init__(self, target: Target, **kwargs: Any) -> None:
        ctx = mp.get_context(start_method())
        # A Pipe, not a Queue: Queue.put starts a feeder thread in the child, and the child forks
        # (loader and background workers), which must not happen while another thread runs.
        self._reader, writer = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(writer, target, kwargs),
                                 name="perfcmp-compare")
        self._proc.start()
        writer.close()  # the child holds the only write end: EOF means it is gone
        self._closed = False

    def events(self, should_stop: Callable[[], bool] = lambda: False) -> Iterator[Event]:
        """The child's events as they arrive. ``should_stop`` is polled every 100 ms even while
        no event arrives, so a cancel takes effect during a long parse, not only between phases.
        Closing the iterator (or a stop) kills the child and everything it started."""
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
                yield event
                if isinstance(event, (Finished, Failed)):
                    return
        finally:
            self.close()

    def close(self) -> None:
        """Kill the child and everything it started (idempotent: once reaped, its pid may be
        another process's)."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        _kill_group(proc)
        if proc.is_alive():
            proc.terminate()
        proc.join(timeout=2)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=1)
        self._reader.close()


def stream_in_process(
    target: Target,
    should_stop: Callable[[], bool] = lambda: False,
    **kwargs: Any,
) -> Iterator[Event]:
    """Yield the events of ``target(**kwargs)`` computed in a spawned child process."""
    return ChildRun(target, **kwargs).events(should_stop)


def start_comparison(request: RunRequest) -> ChildRun:
    """Start a whole comparison (:func:`perfcmp_core.pipeline.comparison_events`) in a child.

    Forked, the child inherits the pipeline (and pandas) imported here first; the app needs
    pandas anyway. Spawned, the pipeline is named, not imported: importing it here would only
    delay the start of the child, which imports it again.
    """
    if start_method() == "fork":
        with gc_paused():  # imports: hundreds of thousands of objects, no cycles
            importlib.import_module(PIPELINE.partition(":")[0])
    return ChildRun(PIPELINE, request=request)
