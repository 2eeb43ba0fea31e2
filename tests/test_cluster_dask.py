"""The per-rank map on Dask (``--scheduler``): a ``distributed.LocalCluster`` started here gives
the same tables as the local process pool, and every way the cluster can fail ends with one
InputError in bounded time. Skipped when the ``cluster`` extra is absent (``.ci/run`` installs
it), except the test of that message itself."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from perfcmp_core.cluster import ClusterOptions, cluster_inputs, compare_cluster
from perfcmp_core.cluster import dask_map
from perfcmp_core.errors import InputError, UsageError
from perfcmp_core.options import LoadOptions
from perfcmp_tui.cli import main

from test_cluster_fixtures import CLUSTER, rank_folders

NPU_BASE, NPU_COMP = CLUSTER / "npu_base", CLUSTER / "npu_comp"
OPTS = LoadOptions(use_cache=False)

try:
    import distributed
except ImportError:  # the message test below still runs
    distributed = None

needs_dask = pytest.mark.skipif(distributed is None, reason="the cluster extra (dask[distributed]) is not installed")


def run(base: Path, comp: Path, scheduler: str):
    inputs = cluster_inputs(str(base), str(comp))
    assert inputs is not None
    tables, _ = compare_cluster(inputs, OPTS, OPTS, ClusterOptions(scheduler=scheduler))
    return tables


def local_cluster(**kw: object):
    return distributed.LocalCluster(processes=True, threads_per_worker=1, dashboard_address=":0",
                                    silence_logs=50, **kw)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    if distributed is None:
        pytest.skip("the cluster extra (dask[distributed]) is not installed")
    with local_cluster(n_workers=2) as cluster:
        yield cluster.scheduler_address


def test_without_the_extra_the_option_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    inputs = cluster_inputs(str(NPU_BASE), str(NPU_COMP))
    with pytest.raises(UsageError, match=r"--scheduler needs Dask distributed.*pip install 'perfcmp-tui\[cluster\]'"):
        compare_cluster(inputs, OPTS, OPTS, ClusterOptions(scheduler="tcp://127.0.0.1:8786"))


@needs_dask
def test_dask_gives_the_process_pool_results(scheduler: str) -> None:
    on_dask, local = run(NPU_BASE, NPU_COMP, scheduler), run(NPU_BASE, NPU_COMP, "local")
    pd.testing.assert_frame_equal(on_dask.ranks.data, local.ranks.data)
    pd.testing.assert_frame_equal(on_dask.groups.data, local.groups.data)
    assert on_dask.notes == local.notes and on_dask.focus_rank() == 1


@needs_dask
def test_the_command_prints_the_same_on_dask(scheduler: str, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for where in (scheduler, "local"):
        assert main(["summary", str(NPU_BASE), str(NPU_COMP), "--no-cache", "--scheduler", where]) == 0
        out = capsys.readouterr().out.splitlines()
        assert f"on Dask {scheduler}" in out[0] if where == scheduler else "on local processes" in out[0]
        outputs.append(out[1:])  # the headline says where and how long
    assert outputs[0] == outputs[1]


@needs_dask
def test_a_rank_that_fails_on_a_worker_is_reported_while_the_others_compare(scheduler: str, tmp_path: Path) -> None:
    comp = tmp_path / "comp"
    shutil.copytree(NPU_COMP, comp)
    broken = rank_folders("npu_comp")[2].name
    (comp / broken / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("not json")
    rows = run(NPU_BASE, comp, scheduler).ranks.data.set_index("rank")
    assert rows.loc[2, "flag"] == "comparison failed to load"
    assert rows.loc[[0, 1, 3], "comp_e2e"].notna().all()


@needs_dask
def test_workers_that_cannot_read_the_rank_folders(scheduler: str, tmp_path: Path) -> None:
    """The client saw the folder; the workers do not (no shared path): one line, before any load."""
    comp = tmp_path / "comp"
    shutil.copytree(NPU_COMP, comp)
    inputs = cluster_inputs(str(NPU_BASE), str(comp))
    gone = inputs.comp.path(3)
    shutil.rmtree(gone)
    with pytest.raises(InputError, match=r"the Dask worker tcp://\S+ cannot read it: workers must see the rank "
                                         r"folders at the same path as this machine") as err:
        compare_cluster(inputs, OPTS, OPTS, ClusterOptions(scheduler=scheduler))
    assert err.value.path == gone


@needs_dask
def test_the_command_fails_in_one_line_when_workers_cannot_read(
        scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Detection sees the folders; the workers' probe does not (simulated by hiding them from
    the probe only, as a worker without the shared mount would)."""
    real = dask_map.probe

    def elsewhere(paths: list[str]) -> dict[str, object]:
        return real([p + "-not-mounted" for p in paths])

    monkeypatch.setattr(dask_map, "probe", elsewhere)
    code = main(["summary", str(NPU_BASE), str(NPU_COMP), "--scheduler", scheduler])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "cannot read it" in err and "same path as this machine" in err


@needs_dask
def test_an_unreachable_scheduler_fails_at_once() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(InputError, match=rf"Dask scheduler tcp://127.0.0.1:{port}: cannot connect \(.*refused"):
        run(NPU_BASE, NPU_COMP, f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - t0 < dask_map.CONNECT_TIMEOUT_S  # refused, not timed out
    with pytest.raises(InputError, match="not an address"):
        run(NPU_BASE, NPU_COMP, "tcp://[nonsense")


@needs_dask
def test_a_scheduler_without_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_map, "NO_WORKERS_S", 1.0)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        with pytest.raises(InputError, match=r"Dask scheduler \S+ has no workers \(waited 1 s\)"):
            run(NPU_BASE, NPU_COMP, cluster.scheduler_address)


class KillOnRank(distributed.WorkerPlugin if distributed else object):  # type: ignore[misc]
    """Test-side only: the worker process dies when it starts loading ``rank``."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def transition(self, key: object, start: str, finish: str, **kwargs: object) -> None:
        if finish == "executing" and f"-rank{self.rank}-" in str(key):
            os._exit(1)


@needs_dask
def test_a_worker_that_dies_while_loading_a_rank() -> None:
    """The nanny restarts the worker and Dask retries; once the rank has killed allowed-failures
    + 1 workers Dask gives up (KilledWorker), and so does the run — one line naming the rank."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with local_cluster(n_workers=1) as cluster, distributed.Client(cluster) as client:
            client.register_plugin(KillOnRank(2))
            # the worker held other ranks' tasks too (queued): any of them may be the one named
            with pytest.raises(InputError, match=r"(base|comparison) rank \d: the Dask workers loading it died"):
                run(NPU_BASE, NPU_COMP, cluster.scheduler_address)


@needs_dask
def test_every_worker_gone_ends_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing cluster whose only worker (no nanny: nothing restarts it) dies."""
    monkeypatch.setattr(dask_map, "NO_WORKERS_S", 2.0)
    with local_cluster(n_workers=0) as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                   cluster.scheduler_address, "--no-nanny", "--nthreads", "1",
                                   "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})  # KillOnRank
        try:
            with distributed.Client(cluster) as client:
                client.wait_for_workers(1, timeout=60)
                client.register_plugin(KillOnRank(0))
                with pytest.raises(InputError, match=r"every worker is gone \(died or stopped\) with \d+ rank loads"):
                    run(NPU_BASE, NPU_COMP, cluster.scheduler_address)
            assert worker.wait(timeout=30) == 1
        finally:
            worker.kill()
            worker.wait()
