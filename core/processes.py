"""Child processes of ours: one abstraction, :class:`Child`, for how each starts, how it sends
values back and how it is stopped.

Six places start processes: the app's comparison child (:class:`perfcmp_core.runner.ChildRun`),
the parse and analysis of the comparison side beside the base side's (:mod:`.pair`), the second
half of an unbalanced pair's larger trace (:mod:`.load.halves`, fork only), the steps
the pipeline runs on the second core (:func:`in_background`: those declared ``beside``), the
analyses of every step that the app's comparison child makes ahead while it waits
(:class:`Producer`, :mod:`.held`) and the workbook's largest sheets, made and compressed beside
the others (:mod:`.export.xlsx`, fork only). Each is a :class:`Child`, and each use is a thin layer on it:
:class:`Worker` (one result, or a generator's parts, each ``(ok, value)``), :class:`Producer`
(items taken without waiting), ``ChildRun`` (a stream of events, served again and again).

**Starting.** One policy, :func:`start_method`: fork where it is safe, because a forked child
shares the modules already imported (no second interpreter importing pandas, ≈ 0.5 s of CPU) and
the loaded profiles (nothing pickled on the way in); spawn elsewhere. A child is started with the
termination signals held (:func:`perfcmp_core.lifetime.start`), and its first act is
:func:`perfcmp_core.lifetime.child_started`: it dies with its parent and ends at once on SIGTERM
or SIGHUP. It may run at a lower priority (``nice``) and lead its own process group (``group``:
one signal then reaches everything it starts).

**Sending back.** One channel: a :func:`multiprocessing.Pipe` connection, whose other end the
parent closes once the child runs, so a child that dies without a word is an end of file at once
(never a wait for ever). Not a ``Queue``: ``Queue.put`` starts a feeder thread in the child, and a
child that forks (the comparison child forks its loader and background workers) must not have
another thread running when it does. A :class:`Worker`'s values travel by
:mod:`perfcmp_core.transfer`: pickled into the channel as they are made, their numpy / pandas
blocks out of band, with no whole pickled copy on either side, and read by a thread of the
parent's as soon as they are written, so a child whose result is larger than the channel ends
(and is reaped) as soon as it sent it, not when the parent asks for it. That reader only waits in
a socket read or fills buffers of its own: :func:`start_method` still forks while such readers
run. The one thread a child may start is :class:`Worker`'s part sender (each part is sent by a
thread while the next is made): only in a child that starts no process after its first part,
and :func:`start_method` refuses to fork while it runs anyway.

**Stopping.** :meth:`Child.stop`: SIGTERM (to its group when it leads one), at most
:data:`GRACE_S` to end — each process removes its temporary files and leaves — then SIGKILL of
what is left, and the child reaped; idempotent. A child that ended on its own is reaped with
:meth:`Child.join`. A child is signalled only while it is not reaped: until then its process id
(and its group's) cannot be another process's, even when it has ended (a zombie holds both).
Once reaped, by us or by ``multiprocessing`` (which reaps finished children whenever it starts a
new one), no signal goes to it again — neither from :meth:`Child.stop` nor from
:func:`terminate_all`. The one interval this cannot close is a reap by another thread's
``multiprocessing`` call between the check and the signal: a few microseconds, in which the
process id would also have to be handed to a new process, which Linux does only after cycling
through every other free one. Every child not stopped yet is in :data:`_live`, so that a signal
handler can reach them all (:func:`terminate_all`).

Beside them, :class:`Claims`: items of work a parent and a child forked after it may both
take, each taken once (the pipeline's steps beside, which the parent takes back from the back
when its own are done first).

What stays separate, and why: the cluster's per-rank pool (:mod:`perfcmp_core.cluster.pool_map`,
a ``ProcessPoolExecutor``). Its processes are started, fed tasks and replaced by the pool, which
also turns one that died into the ``BrokenProcessPool`` the map reports by rank; a
:class:`Child` per pool process would mean writing that pool again. It follows the same lifetime
rules through its initializer (:func:`perfcmp_core.lifetime.child_started`), and its processes
are children of whichever process runs the map (the comparison child, in the app), so they end
with its group. Dask's workers (``--scheduler``) belong to the user's cluster, not to us.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import wait as wait_for
from typing import Any, Callable, Generic, Iterator, TypeVar

from . import lifetime
from .transfer import Receiver, reader_threads_only, send_value

T = TypeVar("T")

#: How long a stopped child (and its group) may take to end on SIGTERM before SIGKILL.
GRACE_S = 0.4
#: How long :meth:`Child.stop` waits for what SIGKILL ends before it leaves it to the system
#: (a process in uninterruptible sleep): the app never waits longer.
KILL_WAIT_S = 1.0
_POLL_S = 0.02
#: How often a stop looks at the group of a child that ended before it (a /proc scan ≈ 1 ms).
_GROUP_POLL_S = 0.002


def start_method() -> str:
    """``fork`` while this process runs no other thread, else ``spawn``.

    A child forked while other threads run can deadlock on a lock one of them held: the running
    app (Textual's threads) therefore spawns, while the command line before the app starts, the
    headless commands and the comparison child itself (which talks over a Pipe: no feeder thread)
    fork. The one kind of thread that does not count is a :class:`Worker`'s reader
    (:class:`perfcmp_core.transfer.Receiver`): it only waits in a socket read or fills a buffer
    of its own, holding no lock a forked child could need. Never on macOS, where system
    libraries do not survive a fork.
    """
    if ("fork" in mp.get_all_start_methods() and sys.platform != "darwin"
            and reader_threads_only()):
        return "fork"
    return "spawn"


def one_blas_thread() -> None:
    """Ask numpy's BLAS (OpenBLAS in numpy's wheels) for one thread, unless the user chose a
    number: call it before numpy is first imported (the command line does, first thing).

    Why: OpenBLAS starts a thread per core when numpy is imported, and they spin a while: on
    two cores ``import pandas`` used 0.31 s of CPU instead of 0.19 s, in the same wall time —
    CPU the run's other processes want. Nothing here asks BLAS for work (no products of float
    matrices); every process of a run inherits the setting.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


#: How much lower the priority of :func:`in_background` work is than its parent's (``nice``).
BACKGROUND_NICE = 5

#: Every :class:`Child` of this process not stopped or joined yet (see :func:`terminate_all`).
_live: set[Child] = set()


def terminate_all(sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to every child of ours not stopped yet (its group where it leads one),
    without waiting and without a lock (safe in a signal handler); :meth:`Child.stop` still
    reaps them."""
    for child in list(_live):
        child.send_signal(sig)


def _child_main(conn: Any, body: Callable[..., None], args: tuple[Any, ...], nice: int,
                group: bool) -> None:
    """What every child runs first: its own process group if asked, the lifetime rules, its
    priority; then ``body(conn, *args)``."""
    if group and hasattr(os, "setpgid"):
        # Own process group: stopping it ends the processes it starts, too, and a Ctrl+C in the
        # terminal reaches only the app (which then stops us). The parent sets it as well, so
        # the group exists from the start whoever runs first.
        os.setpgid(0, 0)
    _live.clear()  # forked: the parent's children are not this process's to stop
    lifetime.child_started()
    if nice:
        os.nice(nice)
    body(conn, *args)


class Child:
    """``body(conn, *args)`` started at construction in a child process of ours: ``conn`` is
    its end of the pipe, :attr:`conn` the parent's (see the module docstring).

    ``method``: ``fork`` or ``spawn`` (default :func:`start_method`); spawned, ``body`` and
    ``args`` are pickled, so they must be cheap to send. ``nice``: how much lower its priority
    is. ``group``: it leads its own process group, and signals reach the whole group.
    ``daemon``: its parent, ending, ends it rather than waiting for it (then it may start no
    process of its own). ``duplex``: the parent sends on :attr:`conn` too.
    """

    def __init__(self, body: Callable[..., None], *args: Any, name: str, method: str | None = None,
                 nice: int = 0, group: bool = False, daemon: bool = False,
                 duplex: bool = False) -> None:
        ctx = mp.get_context(method or start_method())
        self.conn, theirs = ctx.Pipe(duplex=duplex)
        self._group = group and hasattr(os, "setpgid")
        self._proc = ctx.Process(target=_child_main, args=(theirs, body, args, nice, self._group),
                                 name=name, daemon=daemon)
        self._lock = threading.Lock()
        self._done = False
        lifetime.start(self._proc)
        if self._group:
            try:
                os.setpgid(self._proc.pid, self._proc.pid)  # type: ignore[arg-type]
            except OSError:  # it did so itself (and, spawned, may have started its interpreter)
                pass
        theirs.close()  # the child holds the only other end: end of file means it is gone
        _live.add(self)

    @property
    def pid(self) -> int | None:
        """Its process id (its process group's too when it leads one)."""
        return self._proc.pid

    @property
    def name(self) -> str:
        return self._proc.name

    @property
    def daemon(self) -> bool:
        return self._proc.daemon

    @property
    def exitcode(self) -> int | None:
        """Its exit code once reaped (negative: the signal that ended it), else None."""
        popen = self._proc._popen
        return None if popen is None else popen.returncode

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` or :meth:`join` was called (it takes nothing more)."""
        return self._done

    def _reaped(self) -> bool:
        # Popen.returncode is set by whoever reaps it: us, or multiprocessing's own clean-up.
        popen = self._proc._popen
        return popen is None or popen.returncode is not None

    def send_signal(self, sig: int) -> bool:
        """Send ``sig`` to it (to its group when it leads one) unless it was reaped — its
        process id may then be another process's. True when it was not reaped."""
        if self._reaped():
            return False
        pid = self._proc.pid
        assert pid is not None
        try:
            # Before its group exists (spawned, it sets it itself once started) it started nothing.
            if self._group and os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        return True

    def _exited(self) -> bool:
        """It ended (reaped or not); a zombie stays unreaped, holding its pid and group."""
        if self._reaped():
            return True
        if not hasattr(os, "waitid"):
            return self._proc._popen.poll() is not None  # type: ignore[union-attr]
        try:
            return os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped meanwhile
            return True

    def _ended(self) -> bool:
        """It ended, and so did every other process of its group."""
        if not self._exited():
            return False
        return not (self._group and not self._reaped() and _others_in_group(self._proc.pid))  # type: ignore[arg-type]

    def stop(self) -> None:
        """End it now if it still runs (whatever it was doing is no longer wanted): SIGTERM,
        at most :data:`GRACE_S` for it and its group to end, then SIGKILL; reaped, and its pipe
        closed. Idempotent."""
        if not self._release():
            return
        try:
            if self.send_signal(signal.SIGTERM):
                t0 = time.monotonic()
                killed = False
                while not self._ended():
                    now = time.monotonic()
                    if not killed and now >= t0 + GRACE_S:
                        self.send_signal(signal.SIGKILL)
                        killed = True
                    elif killed and now >= t0 + GRACE_S + KILL_WAIT_S:
                        break
                    if self._exited():  # the rest of its group ends: nothing to wait on but time
                        time.sleep(_GROUP_POLL_S)
                    else:
                        wait_for([self._proc.sentinel], _POLL_S)
            # Reaped now (is_alive polls without waiting): not join, which waits on a sentinel
            # that the grandchildren forked with it hold open too. One in uninterruptible sleep
            # even after SIGKILL is left to multiprocessing's own clean-up.
            self._proc.is_alive()
        finally:
            self.conn.close()

    def join(self) -> None:
        """Wait for it to end on its own (it sent all it had to send), reap it and close its
        pipe; a child already stopped is left as it is."""
        if not self._release():
            return
        try:
            self._proc.join()
        finally:
            self.conn.close()

    def _release(self) -> bool:
        """Mark it stopped; False when it already was."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        _live.discard(self)
        return True


def _others_in_group(pgid: int) -> bool:
    """Whether a process other than ``pgid`` itself still runs in process group ``pgid`` (from
    ``/proc``; without it, the group is taken as ended with its leader, whose children then end
    on their own: :mod:`perfcmp_core.lifetime`)."""
    return any(pgrp == pgid and pid != pgid and state != "Z"  # a zombie has ended: its reaper is not us
               for pid, state, _ppid, pgrp in proc_stats())


def proc_stats() -> Iterator[tuple[int, str, int, int]]:
    """(pid, state, parent pid, process group) of each process ``/proc`` shows (none without
    ``/proc``; one that ends while it is read is skipped): what the group checks here and the
    benchmarks' process trees (``bench/compare.py``) read."""
    try:
        entries = os.scandir("/proc")
    except OSError:
        return
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            # pid (comm) state ppid pgrp …: comm may hold spaces and parentheses
            state, ppid, pgrp = stat.rsplit(b")", 1)[1].split()[:3]
            yield int(entry.name), state.decode(), int(ppid), int(pgrp)


def _send_results(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], parts: int | None) -> None:
    """A :class:`Worker`'s body: send back ``(True, fn(*args))`` — or, for ``parts`` other than
    1, ``(True, value)`` for each value ``fn(*args)`` yields (``parts`` of them, or any number
    for None) — or ``(False, the exception)``, each with :func:`perfcmp_core.transfer.send_value`."""
    fd = conn.fileno()
    sending: _Sending | None = None
    try:
        if parts == 1:
            send_value(fd, (True, fn(*args)))
        else:
            # The parent reads each part as it comes, but on a thread that waits for the GIL its
            # own work holds: each part is sent by a thread, so making the next one goes on
            # meanwhile (this child starts no process after its first part).
            sent = 0
            for value in fn(*args):
                if sending is not None:
                    sending.join()
                sending = _Sending(fd, (True, value))
                sent += 1
            if sending is not None:
                sending.join()
            if parts is not None and sent != parts:  # the parent would wait for a part that never comes
                raise RuntimeError(f"{getattr(fn, '__name__', fn)} made {sent} parts, not {parts}")
    except BaseException as exc:  # noqa: BLE001 - re-raised by Worker.result in the parent
        if sending is not None:
            sending.join(check=False)
        send_value(fd, (False, exc))


class _Sending:
    """One part sent by a thread of its own; :meth:`join` re-raises what failed (a part that
    cannot be pickled is the worker's error)."""

    def __init__(self, fd: int, value: object) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._send, args=(fd, value), daemon=True)
        self._thread.start()

    def _send(self, fd: int, value: object) -> None:
        try:
            send_value(fd, value)
        except BaseException as exc:  # noqa: BLE001 - raised in the sending child's main thread
            self._error = exc

    def join(self, check: bool = True) -> None:
        self._thread.join()
        if check and self._error is not None:
            raise self._error


class Worker(Generic[T]):
    """``fn(*args)`` started at construction in a :class:`Child` that sends its result back.

    Spawned, ``fn`` and ``args`` are pickled, so they must be cheap to send; forked, they are
    shared as they are. With ``parts`` > 1, ``fn`` is a generator of that many values, each sent
    as soon as it is made (a loaded profile before its analysis): :meth:`result` gives them in
    turn.

    What the child sends is read at once by a thread of this worker
    (:class:`perfcmp_core.transfer.Receiver`), without a whole pickled copy on either side, and
    unpickled when :meth:`result` asks for it: a child that sent everything ends and is reaped
    then, not when its result is asked for. That thread ends with the child's channel: after the
    last part, an error, or :meth:`stop`.
    """

    #: Its parent, ending, waits for it (a :class:`Producer` is ended instead).
    _daemon = False

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str,
                 method: str | None = None, nice: int = 0, parts: int | None = 1) -> None:
        self._left = parts
        self._stopped = False
        # A socket pair (duplex), which the reader receives from in whole records.
        self._child = Child(_send_results, fn, args, parts, name=name, method=method, nice=nice,
                            daemon=self._daemon, duplex=True)
        self._received = Receiver(self._child.conn.fileno(), name, self._child.join)

    @property
    def child(self) -> Child:
        return self._child

    def result(self) -> T:
        """Wait for the next value (re-raising the child's exception); after the last one, or
        an exception, the child is reaped. A child that ended without sending it is an error,
        not a wait."""
        received = self._received.next()
        if received is None:
            self._received.join()  # the child is reaped
            raise RuntimeError(f"the {self._child.name} process ended before sending its result "
                               f"(exit code {self._child.exitcode})")
        ok, value = received.load()
        if self._left is not None:
            self._left -= 1
        if not ok or self._left == 0:
            self._received.join()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """End the child now if it still runs (its result is no longer wanted), and the thread
        reading it."""
        self._stopped = True
        self._child.stop()
        self._received.close()


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
        out: list[T] = []
        if self._stopped:
            return out
        while (received := self._received.next(wait=False)) is not None:
            ok, value = received.load()
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

    @property
    def forked(self) -> bool:
        """Whether it runs in a child now (else it runs here when its result is asked for)."""
        return self._worker is not None

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


class Claims:
    """Items of work that this process and a child forked after it may each take, each item
    taken once, by whichever process asks first: a pipe per item holding one byte, which one
    read takes (a read of a pipe is atomic; the other process then reads its end). No lock and
    no shared memory to set up: the pipes' read ends are inherited by the fork.

    For the steps of a worker beside (:mod:`perfcmp_core.pipeline`): the worker takes them from
    the front, and this process, once its own steps are done, from the back.
    """

    def __init__(self, items: int) -> None:
        self._fds: list[int] = []
        try:
            for _ in range(items):
                read, write = os.pipe()
                self._fds.append(read)
                os.write(write, b"\x01")
                os.close(write)
        except BaseException:
            self.close()
            raise

    def take(self, item: int) -> bool:
        """Take ``item``: True for the one process that takes it first."""
        return os.read(self._fds[item], 1) == b"\x01"

    def close(self) -> None:
        """Close this process's ends (each process closes its own; idempotent)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
