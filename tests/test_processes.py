"""The one process policy: fork only while no other thread runs; one worker for every child."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.processes import Claims, Producer, Worker, in_background, start_method


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value * 2


def _fails(path: str) -> None:
    raise InputError(path, "not a profiling result")


def test_worker_returns_the_value_from_another_process() -> None:
    pid, value = Worker(_pid_and, 21, name="t").result()
    assert value == 42 and pid != os.getpid()


def test_worker_re_raises_the_childs_error() -> None:
    with pytest.raises(InputError, match="x.json: not a profiling result"):
        Worker(_fails, "x.json", name="t").result()


def _big_then_mark(mark: str) -> Iterator[object]:
    yield b"x" * (8 << 20)  # far more than a pipe holds: sent only as the parent reads it
    with open(mark, "w") as fh:  # made while the first part still waits in the pipe
        fh.write("second part made")
    yield "done"


def _two_then_fail(path: str) -> Iterator[object]:
    yield "first"
    raise InputError(path, "broken after its first part")


def test_worker_parts_come_in_order_and_the_next_is_made_before_the_first_is_read(tmp_path: Path) -> None:
    """A part waits in the pipe until the parent reads it; the child makes the next part
    meanwhile (the comparison side's analysis while this process still analyses its own side)."""
    mark = tmp_path / "mark"
    worker = Worker(_big_then_mark, str(mark), name="t", parts=2)
    try:
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mark.exists()  # without the sending thread the child is stuck on its first put
        assert worker.result() == b"x" * (8 << 20)
        assert worker.result() == "done"
    finally:
        worker.stop()


def _one_part() -> Iterator[object]:
    yield "only"


def test_worker_parts_missing_is_an_error_not_a_wait() -> None:
    worker = Worker(_one_part, name="t", parts=2)
    assert worker.result() == "only"
    with pytest.raises(RuntimeError, match="made 1 parts, not 2"):
        worker.result()


def test_worker_parts_then_the_childs_error() -> None:
    worker = Worker(_two_then_fail, "x.json", name="t", parts=2)
    assert worker.result() == "first"
    with pytest.raises(InputError, match="x.json: broken after its first part"):
        worker.result()


@pytest.mark.skipif(sys.platform != "linux", reason="fork policy on Linux")
def test_fork_only_while_single_threaded_and_background_work_then_runs_inline() -> None:
    assert start_method() == "fork" or threading.active_count() > 1
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert start_method() == "spawn"
        pid, value = in_background(_pid_and, 5)()  # inline: nothing to share with a spawn
        assert (pid, value) == (os.getpid(), 10)
    finally:
        release.set()
        other.join()


def _niceness() -> int:
    return os.nice(0)


@pytest.mark.skipif(sys.platform != "linux", reason="fork policy on Linux")
def test_background_work_runs_at_a_lower_priority_than_its_parent() -> None:
    from perfcmp_core.processes import BACKGROUND_NICE

    if start_method() != "fork":
        pytest.skip("another thread runs: background work runs inline")
    assert in_background(_niceness)() == min(os.nice(0) + BACKGROUND_NICE, 19)
    assert Worker(_niceness, name="t").result() == os.nice(0)  # a side's loader: same priority


def _counting(n: int, gate: str) -> object:
    """Yields 0..n-1 (a large item: more than a pipe holds), waiting for ``gate`` to exist
    before the last one."""
    for i in range(n):
        if i == n - 1:
            while not os.path.exists(gate):
                time.sleep(0.01)
        yield i, "x" * 200_000


@pytest.mark.skipif(sys.platform != "linux", reason="forked")
def test_producer_items_are_taken_as_they_are_made_and_stop_ends_it(tmp_path: Path) -> None:
    """Items come back one by one without waiting for the rest (each larger than a pipe's
    buffer: the producer writes the next once the parent took the one before); stopped, the
    child is gone, and a daemon: its parent ending does not wait for it."""
    gate = tmp_path / "gate"
    producer: Producer[tuple[int, str]] = Producer(_counting, 4, str(gate), name="t", method="fork")
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        got += [i for i, _ in producer.made()]
        time.sleep(0.01)
    assert got == [0, 1, 2]  # the last one waits for the gate
    time.sleep(0.1)
    assert producer.made() == []
    assert producer.child.daemon
    pid = producer.child.pid
    producer.stop()
    assert producer.child.exitcode is not None  # ended and reaped
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# ------------------------------------------------- the one child abstraction's guarantees

linux = pytest.mark.skipif(sys.platform != "linux", reason="process groups, /proc")


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (an ended process whose reaper is not this test)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _group_running(pgid: int) -> bool:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _starts_a_grandchild(conn: object, ignore_sigterm: bool) -> None:
    """A child that starts a process of its own (in its group), tells its pid, and waits."""
    import signal
    import subprocess

    code = "import signal, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code += "print('ready', flush=True)\ntime.sleep(60)\n"
    grandchild = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert grandchild.stdout is not None and grandchild.stdout.readline().strip() == b"ready"
    conn.send(grandchild.pid)  # type: ignore[attr-defined]
    time.sleep(60)


@linux
@pytest.mark.parametrize("ignore_sigterm", [False, True])
def test_a_stopped_child_and_its_group_are_gone(ignore_sigterm: bool) -> None:
    """stop() ends the child and what it started (its process group): on SIGTERM at once, or,
    where they ignore it, by SIGKILL after the grace period; the child is reaped, the handle
    leaves the live set, and a second stop does nothing."""
    from perfcmp_core.processes import GRACE_S, Child, _live

    child = Child(_starts_a_grandchild, ignore_sigterm, name="t", method="fork", group=True)
    assert child in _live
    assert child.conn.poll(30)
    grandchild = child.conn.recv()
    pid = child.pid
    assert pid is not None and os.getpgid(grandchild) == pid and _running(grandchild)
    t0 = time.monotonic()
    child.stop()
    took = time.monotonic() - t0
    assert not _running(grandchild) and not _group_running(pid)
    assert child.exitcode is not None and child not in _live and child.stopped
    assert (took >= GRACE_S) == ignore_sigterm and took < GRACE_S + 1.5
    child.stop()  # idempotent


def _exits(conn: object, code: int) -> None:
    os._exit(code)


def test_a_child_that_dies_without_its_result_is_an_error_not_a_wait() -> None:
    """The parent holds no writing end of the pipe: a child gone without a word (killed for
    memory, a crash in a native library) is an end of file at once, never a wait for ever."""
    from perfcmp_core.processes import _live

    worker = Worker(os._exit, 3, name="perfcmp-t")
    with pytest.raises(RuntimeError, match=r"perfcmp-t process ended before sending its result \(exit code 3\)"):
        worker.result()
    assert worker.child not in _live


def _numbers(n: int) -> Iterator[int]:
    for i in range(n):
        yield i * i


def test_worker_parts_come_in_the_order_they_were_made() -> None:
    worker = Worker(_numbers, 6, name="t", parts=6)
    assert [worker.result() for _ in range(6)] == [i * i for i in range(6)]
    assert worker.child.exitcode == 0  # reaped after its last part


def test_producer_that_made_everything_and_ended_gives_its_items() -> None:
    """A producer that ended after its last item: its items are taken, then none (an end of
    file, not an error)."""
    producer: Producer[int] = Producer(_numbers, 3, name="t")
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        got += producer.made()
        time.sleep(0.01)
    assert got == [0, 1, 4]
    producer.child._proc.join(10)
    assert producer.made() == []
    producer.stop()


def _sleeps(conn: object) -> None:
    time.sleep(60)


@linux
def test_a_closed_or_reaped_child_is_never_signalled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once reaped — by its own stop, or by multiprocessing's clean-up when this process started
    another child — its pid may be another process's: neither stop(), nor terminate_all(), nor
    a direct send_signal() sends anything to it."""
    import multiprocessing as mp
    import signal

    from perfcmp_core import processes

    sent: list[tuple[str, int, int]] = []
    real_kill, real_killpg = os.kill, os.killpg

    def kill(pid: int, sig: int) -> None:
        sent.append(("kill", pid, sig))
        real_kill(pid, sig)

    def killpg(pgid: int, sig: int) -> None:
        sent.append(("killpg", pgid, sig))
        real_killpg(pgid, sig)

    stopped = processes.Child(_sleeps, name="t", method="fork", group=True)
    ended = processes.Child(_exits, 0, name="t", method="fork", group=True)
    deadline = time.monotonic() + 30
    # multiprocessing reaps a finished child whenever active_children() (or a start) runs
    while ended.exitcode is None and time.monotonic() < deadline:
        mp.active_children()
        time.sleep(0.01)
    assert ended.exitcode == 0
    stopped.stop()
    assert stopped.exitcode is not None

    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "killpg", killpg)
    assert ended.send_signal(signal.SIGTERM) is False
    processes._live.add(ended)  # as if its owner had not stopped it yet
    try:
        processes.terminate_all(signal.SIGKILL)
        ended.stop()
        stopped.stop()
        assert not stopped.send_signal(signal.SIGKILL)
    finally:
        processes._live.discard(ended)
    assert sent == []
    live = processes.Child(_sleeps, name="t", method="fork", group=True)
    live.stop()  # not reaped yet: its group is signalled (the spy sees what a stop sends)
    assert sent[0] == ("killpg", live.pid, signal.SIGTERM)


def _run_dies(**kwargs: object) -> Iterator[object]:
    os._exit(7)
    yield


@linux
def test_a_comparison_child_that_dies_is_a_failed_run_and_leaves_nothing() -> None:
    from perfcmp_core import processes, runner
    from perfcmp_core.events import Failed

    run = runner.ChildRun(_run_dies)
    (event,) = list(run.events())
    assert isinstance(event, Failed) and "exit code 7" in event.message
    assert run.child.stopped and run.child not in processes._live
    assert run.pid is not None and not _group_running(run.pid)


@linux
def test_terminate_all_reaches_every_live_child_and_stop_still_reaps_them() -> None:
    """What a signal handler does (the app's Guard): every child not stopped gets the signal at
    once, without waiting; each ends through its own handler (exit 128 + SIGTERM), and its
    owner's stop reaps it."""
    import signal

    from perfcmp_core import processes

    children = [processes.Child(_sleeps, name="t", method="fork", group=group) for group in (False, True)]
    # no wait: a signal that comes before a child's own handlers waits for them (lifetime.start)
    processes.terminate_all(signal.SIGTERM)
    for child in children:
        child._proc.join(10)
        assert child.exitcode == 128 + signal.SIGTERM
        child.stop()
        assert child not in processes._live


def test_a_spawned_worker_sends_its_result_and_its_error_the_same_way() -> None:
    """Spawned (the app's own process, where threads run), the pipe's end travels to the new
    interpreter: the same result and the same re-raised error."""
    pid, value = Worker(_pid_and, 4, name="t", method="spawn").result()
    assert value == 8 and pid != os.getpid()
    with pytest.raises(InputError, match="y.json: not a profiling result"):
        Worker(_fails, "y.json", name="t", method="spawn").result()


# ------------------------------------------- results sent without a whole copy (transfer)


def _frames(rows: int) -> dict[str, object]:
    """Numpy and pandas blocks (out of band, one larger than a record of in-band bytes), text
    (in band) and a Fortran-ordered array."""
    import numpy as np
    import pandas as pd

    from perfcmp_core.transfer import CHUNK

    frame = pd.DataFrame({"i": np.arange(rows, dtype=np.int64), "f": np.linspace(0, 1, rows),
                          "name": [f"op{i % 97}" for i in range(rows)]})
    return {"frame": frame, "big": np.arange(CHUNK // 4 + 3, dtype=np.int32),
            "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
            "text": "é" * (CHUNK + 5), "empty": np.empty(0, dtype=np.float64)}


def test_a_result_with_numpy_and_pandas_blocks_arrives_equal_and_writeable() -> None:
    """Blocks travel out of band into buffers of the parent's own: equal, and writeable (pandas
    may write in place), like the in-band rest (text larger than one record)."""
    import numpy as np
    import pandas as pd

    sent = _frames(200_000)
    got = Worker(_frames, 200_000, name="t").result()
    pd.testing.assert_frame_equal(got["frame"], sent["frame"])
    assert all(block.values.flags.writeable for block in got["frame"]._mgr.blocks
               if isinstance(block.values, np.ndarray))
    for key in ("big", "fortran", "empty"):
        np.testing.assert_array_equal(got[key], sent[key])
        assert got[key].flags.writeable and got[key].dtype == sent[key].dtype
    assert got["fortran"].flags.f_contiguous
    got["big"][0] = -1  # written in place
    got["frame"].iloc[0, 0] = -1
    assert got["big"][0] == -1 and got["frame"].iloc[0, 0] == -1
    assert got["text"] == sent["text"]
    # Its memory is this process's own, as heap memory is: a child forked later writes a copy.
    assert Worker(_written, got["big"], name="t", method="fork").result() == 7
    assert got["big"][1] == 1


def _object_columns(rows: int) -> dict[str, object]:
    """Object arrays as profiles hold them: few distinct texts repeated (one object each, and
    two equal texts held by different objects), in a frame's object block too; one of distinct
    texts; a 2-d one; a strided view."""
    import numpy as np
    import pandas as pd

    names = [f"op{i}" for i in range(97)] + ["".join(["op", "1"])]  # the last: names[1]'s text
    repeated = np.empty(rows, dtype=object)
    repeated[:] = [names[i % len(names)] for i in range(rows)]
    frame = pd.DataFrame({"name": pd.Series(repeated, dtype=object), "i": np.arange(rows)})
    distinct = np.array([f"k{i}" for i in range(rows)], dtype=object)
    return {"repeated": repeated, "frame": frame, "distinct": distinct,
            "grid": repeated.reshape(2, -1), "strided": repeated[::2]}


def test_object_arrays_arrive_equal_with_their_objects_shared_as_sent() -> None:
    """Large object arrays travel as codes and their distinct objects (transfer._Pickler):
    what arrives is equal, writeable, C-contiguous, and its cells share an object exactly
    where the sent cells did (two equal texts held apart stay apart, as pickle's memo gives)."""
    import numpy as np
    import pandas as pd

    rows = 20_000
    sent = _object_columns(rows)
    got = Worker(_object_columns, rows, name="t").result()
    for key in ("repeated", "distinct", "grid", "strided"):
        assert got[key].dtype == object and got[key].shape == sent[key].shape
        np.testing.assert_array_equal(got[key], sent[key])
        assert got[key].flags.writeable
    assert got["repeated"].flags.c_contiguous
    pd.testing.assert_frame_equal(got["frame"], sent["frame"])
    cells = got["repeated"]
    assert cells[0] is cells[98] and cells[1] is cells[99]  # one object, as sent
    assert cells[1] == cells[97] and cells[1] is not cells[97]  # equal texts, two objects
    assert len({id(c) for c in cells}) == 98
    column = got["frame"]["name"].to_numpy()
    assert column[3] is column[3 + 98]
    cells[0] = "changed"  # written in place
    assert cells[0] == "changed"


def test_only_the_distinct_objects_of_a_repeating_object_array_are_pickled_in_band() -> None:
    import io
    import pickle

    from perfcmp_core import transfer

    sent = _object_columns(20_000)
    sizes = {}
    for key in ("repeated", "distinct"):
        band, buffers = io.BytesIO(), []
        transfer._Pickler(band, protocol=5, buffer_callback=buffers.append).dump(sent[key])
        sizes[key] = len(band.getvalue()), len(pickle.dumps(sent[key], protocol=5))
        assert (pickle.loads(band.getvalue(), buffers=buffers) == sent[key]).all()
    assert sizes["repeated"][0] < 2_000 < sizes["repeated"][1]  # 98 texts in band, codes out of band
    assert sizes["distinct"][0] == sizes["distinct"][1]  # as pickle writes it


def _written(array: object) -> int:
    array[1] = 7  # type: ignore[index]
    return int(array[1])  # type: ignore[index]


class _Unpicklable:
    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("cannot be sent")


def _half_picklable() -> list[object]:
    return [b"x" * (8 << 20), "y" * 1000, _Unpicklable()]


def test_a_result_that_fails_half_way_through_its_pickling_is_the_childs_error() -> None:
    """What was sent of it before is dropped: the error comes back, not a broken value."""
    with pytest.raises(TypeError, match="cannot be sent"):
        Worker(_half_picklable, name="t").result()


def _large(size: int) -> bytes:
    return b"r" * size


@linux
def test_a_finished_child_is_reaped_before_its_result_is_asked_for() -> None:
    """A result far larger than the channel holds is read as soon as it is sent: the child ends
    and is reaped without waiting for result() (a step beside ends long before its parent asks);
    the result is then given as sent."""
    before = {t.ident for t in threading.enumerate()}
    for later in (Worker(_large, 16 << 20, name="t"), in_background(_large, 16 << 20)):
        worker = later if isinstance(later, Worker) else later._worker
        if worker is None:
            pytest.skip("another thread runs: background work runs inline")
        deadline = time.monotonic() + 30
        while worker.child.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.child.exitcode == 0 and worker.child.stopped  # reaped, result not asked yet
        assert not _running(worker.child.pid)  # type: ignore[arg-type]
        assert (later.result() if isinstance(later, Worker) else later()) == b"r" * (16 << 20)
    assert {t.ident for t in threading.enumerate()} == before


def _waits() -> None:
    time.sleep(60)


def _items_then_waits() -> Iterator[bytes]:
    yield b"a" * (4 << 20)
    yield b"b" * (4 << 20)
    time.sleep(60)


@linux
def test_no_thread_or_child_is_left_after_stop_and_fork_stays_allowed_meanwhile() -> None:
    """A worker's reader thread does not turn forking off (it holds no lock a forked child could
    need), and stop() leaves neither the child nor the thread behind — whether the child was
    still making its result or a producer had sent items nobody took."""
    from perfcmp_core.processes import _live

    before = {t.ident for t in threading.enumerate()}
    if len(before) > 1:
        pytest.skip("another thread runs")
    waiting = Worker(_waits, name="t")
    producer: Producer[bytes] = Producer(_items_then_waits, name="t", method="fork")
    assert len(threading.enumerate()) == 3 and start_method() == "fork"
    deadline = time.monotonic() + 30
    got: list[bytes] = []
    while not got and time.monotonic() < deadline:
        got += producer.made()
        time.sleep(0.01)
    assert got[0] == b"a" * (4 << 20)
    for worker in (waiting, producer):
        pid = worker.child.pid
        worker.stop()
        assert worker.child.exitcode is not None and worker.child not in _live
        assert not _running(pid)  # type: ignore[arg-type]
        worker.stop()  # idempotent
    assert producer.made() == []
    assert {t.ident for t in threading.enumerate()} == before


def _take_all(claims: Claims, items: list[int]) -> list[int]:
    return [i for i in items if claims.take(i)]


def test_each_claim_is_taken_once_by_one_of_two_processes() -> None:
    """A child forked after the claims and this process both try to take every item: each is
    taken exactly once, whichever process asks first."""
    if start_method() != "fork":
        pytest.skip("this process cannot fork")
    claims = Claims(200)
    try:
        worker = Worker(_take_all, claims, list(range(200)), name="claims", method="fork")
        here = _take_all(claims, list(range(199, -1, -1)))
        there = worker.result()
    finally:
        claims.close()
    assert sorted(here + there) == list(range(200))
    assert not claims._fds  # closed, and closing again is harmless
    claims.close()


def test_the_command_line_asks_blas_for_one_thread_before_numpy_is_imported() -> None:
    """OpenBLAS's threads spin at numpy's import (0.12 s of CPU per run on two cores): the
    command line sets ``OPENBLAS_NUM_THREADS=1`` first, which works only because importing it
    imports no numpy; a number the user set is kept."""
    import subprocess

    code = (
        "import os, sys\n"
        "from perfcmp_tui import cli\n"
        "before = 'numpy' in sys.modules\n"
        "try:\n"
        "    cli.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(before, os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split()[-2:] == ["False", "1"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "OPENBLAS_NUM_THREADS": "4"})
    assert out.stdout.split()[-2:] == ["False", "4"]
