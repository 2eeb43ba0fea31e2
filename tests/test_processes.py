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
from perfcmp_core.processes import Producer, Worker, in_background, start_method


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
