"""Process lifetime: no process of ours outlives the one that started it, and a process ended by
a signal leaves no temporary file.

Users run the app over SSH on shared hosts, where connections drop. A dropped connection is a
SIGHUP (or, from a supervisor, a SIGTERM) to the app; the comparison child, its loader worker and
its background worker must end with it, even when the app itself dies by SIGKILL. Three rules:

* **Children die with their parent.** :func:`child_started`, the first call of every worker body,
  asks Linux to send the child SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), then checks
  that the parent is still the one that started it (it may have died before the request). Where
  that request does not exist, an interval timer checks the parent's pid every
  :data:`PARENT_CHECK_S` instead. No thread is started either way: the comparison child forks
  its own workers, which must not happen while another thread runs.
* **A child ends at once on SIGTERM or SIGHUP**, removing the temporary files it was writing
  (:func:`removed_on_signal`) and leaving with ``os._exit``: a child has nothing else to save,
  and unwinding could block (a full pipe to a parent that is gone).
* **The main process unwinds.** :func:`raise_on_termination` turns SIGTERM and SIGHUP into
  :class:`Terminated`, a ``BaseException`` like ``KeyboardInterrupt``: every ``finally`` runs
  (temporary files are removed, workers are stopped) and the CLI exits with 128 + the signal.

:func:`start` starts a ``multiprocessing`` child with these signals blocked, so that a signal
arriving between the fork and :func:`child_started` waits for the child's own handler instead of
running the parent's (inherited) one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

#: The signals that end a run: a closed terminal or SSH connection (SIGHUP), a supervisor or
#: ``kill`` (SIGTERM).
TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
#: How often a child checks that its parent still lives where PR_SET_PDEATHSIG is unavailable.
PARENT_CHECK_S = 0.25
_PR_SET_PDEATHSIG = 1

#: Temporary files this process is writing now (see :func:`removed_on_signal`).
_temp_files: set[str] = set()


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived in the main process (raised by :func:`raise_on_termination`)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal."""
        return 128 + self.signum


@contextmanager
def removed_on_signal(path: str | os.PathLike[str]) -> Iterator[None]:
    """While the block runs, a termination signal removes ``path`` before the process ends.

    For named temporary files only; the writers' own ``finally`` removes them on every other
    way out.
    """
    key = os.fspath(path)
    _temp_files.add(key)
    try:
        yield
    finally:
        _temp_files.discard(key)


def remove_temp_files() -> None:
    """Remove every temporary file registered with :func:`removed_on_signal` (best effort)."""
    for path in list(_temp_files):
        try:
            os.unlink(path)
        except OSError:
            pass


def raise_on_termination() -> None:
    """Main process: SIGTERM and SIGHUP raise :class:`Terminated` in the main thread."""

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    for sig in TERMINATION_SIGNALS:
        signal.signal(sig, handler)


#: How long a child ending on a signal waits for its own workers to end with it.
REAP_S = 0.2


def exit_now(signum: int, frame: Any = None) -> None:
    """End this process at once with the signal's exit code, removing its temporary files.

    Its own workers get the signal too and are reaped first: a worker left to end after its
    parent would linger as a zombie until init reaps it, and the process group that the app waits
    on would look alive until then.
    """
    remove_temp_files()
    children = mp.active_children()
    for child in children:
        try:
            os.kill(child.pid, signum)  # type: ignore[arg-type]
        except OSError:
            pass
    deadline = time.monotonic() + REAP_S
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
    os._exit(128 + signum)


@contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold the termination signals (in this thread) while the block runs."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATION_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def start(proc: mp.process.BaseProcess) -> None:
    """``proc.start()`` with the termination signals held until the child installed its own
    handlers (:func:`child_started`, which unblocks them there)."""
    with signals_blocked():
        proc.start()


def child_started() -> None:
    """The first call of every worker process body: die with the parent, end at once on
    SIGTERM / SIGHUP (removing temporary files), take the signals held by :func:`start`."""
    for sig in TERMINATION_SIGNALS:
        signal.signal(sig, exit_now)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's to handle
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINATION_SIGNALS)
    parent = mp.parent_process()
    die_with_parent(parent.pid if parent is not None and parent.pid else os.getppid())


def die_with_parent(parent_pid: int) -> None:
    """Get SIGTERM as soon as ``parent_pid`` (this process's parent) is gone."""
    if _request_parent_death_signal(signal.SIGTERM):
        if os.getppid() != parent_pid:  # it died before the request was made
            exit_now(signal.SIGTERM)
        return

    def check(signum: int, frame: Any) -> None:
        if os.getppid() != parent_pid:
            exit_now(signal.SIGTERM)

    check(0, None)
    signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, PARENT_CHECK_S, PARENT_CHECK_S)


def _request_parent_death_signal(sig: int) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)``; False where it does not exist."""
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


@cache
def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
