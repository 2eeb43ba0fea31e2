"""The app and its terminal: it needs one to start, and it never outlives it.

Over SSH the terminal goes away without notice: a dropped connection hangs the pty up (SIGHUP),
a supervisor sends SIGTERM, and a pty whose other side closed without making us its controlling
terminal only reports POLLHUP. Each of these ends the app the same way (:class:`Guard`):

1. at once, every comparison process group gets SIGTERM (:func:`perfcmp_core.processes.terminate_all`);
2. the app is asked to exit, which restores the terminal when it is still there;
3. a watchdog makes sure of the rest: SIGKILL for process groups still alive after
   :data:`KILL_AFTER_S`, and the process ends after :data:`EXIT_AFTER_S` even if shutting down
   hangs (writes to a terminal that is gone), removing its temporary files first.

The exit code is 128 + the signal (129 after a hang-up, 143 after SIGTERM), as a shell reports it.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from perfcmp_core import lifetime, processes
from perfcmp_core.errors import UsageError

#: After a signal: comparison groups still alive then get SIGKILL …
KILL_AFTER_S = 0.45
#: … and the process ends then, whatever the app's shutdown is doing.
EXIT_AFTER_S = 0.85
#: Signals that end the app; SIGINT too (``kill -INT``; Ctrl+C in the app is a key, not this).
SIGNALS = (*lifetime.TERMINATION_SIGNALS, signal.SIGINT)

_STREAMS = ((0, "standard input"), (1, "standard output"), (2, "standard error"))


def require_terminal() -> None:
    """Refuse to start the full-screen app without a terminal on stdin, stdout and stderr.

    Without this, ``perfcmp-tui A B </dev/null >out`` (cron, nohup, ``ssh host cmd`` without
    ``-t``) starts the app anyway: it spins on end-of-input and writes escape codes into the file.
    """
    for fd, name in _STREAMS:
        try:
            ok = os.isatty(fd)
        except OSError:
            ok = False
        if not ok:
            raise UsageError(
                f"{name} is not a terminal, and the app needs one; in scripts use "
                "`perfcmp-tui summary BASE COMP` or `perfcmp-tui export BASE COMP -o DIR`")


class Guard:
    """While the app runs: end it, its comparison processes and its temporary files on SIGHUP,
    SIGTERM, SIGINT or a hung-up terminal (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.signum: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    def __enter__(self) -> Guard:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        self._watch = threading.Thread(target=self._watch_hangup, name="perfcmp-hangup",
                                       daemon=True)
        self._watch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @property
    def exit_code(self) -> int | None:
        """128 + the signal that ended the app, or None."""
        return None if self.signum is None else 128 + self.signum

    def _on_signal(self, signum: int, frame: Any) -> None:
        processes.terminate_all()
        if self.signum is not None:
            return  # already ending
        self.signum = signum
        threading.Thread(target=self._watchdog, args=(signum,), name="perfcmp-watchdog",
                         daemon=True).start()
        try:
            loop = asyncio.get_running_loop()  # the app's: this handler runs on its thread
        except RuntimeError:  # not running yet or any more: unwind (the watchdog backs it up)
            raise lifetime.Terminated(signum) from None
        loop.call_soon_threadsafe(self._exit_app, 128 + signum)

    def _exit_app(self, code: int) -> None:
        try:
            self.app.exit(None, return_code=code)
        except Exception:  # noqa: BLE001 - the app is going away anyway; the watchdog ends it
            pass

    @staticmethod
    def _watchdog(signum: int) -> None:
        time.sleep(KILL_AFTER_S)
        processes.terminate_all(signal.SIGKILL)
        time.sleep(EXIT_AFTER_S - KILL_AFTER_S)
        lifetime.remove_temp_files()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a terminal that is gone
                pass
        os._exit(128 + signum)

    def _watch_hangup(self) -> None:
        """Turn a hung-up terminal into a SIGHUP to ourselves (it normally sends one, but not
        to a process whose controlling terminal it is not)."""
        poller = select.poll()
        try:
            poller.register(sys.__stdin__.fileno(), 0)  # POLLHUP / POLLERR are always reported
        except (AttributeError, ValueError, OSError):
            return
        while not self._stop.is_set():
            for _fd, mask in poller.poll(250):
                if mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    os.kill(os.getpid(), signal.SIGHUP)
                    return
