"""The one process policy: fork only while no other thread runs; one worker for every child."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.processes import Worker, in_background, start_method


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
