"""Cluster comparisons (core): rank discovery and pairing, the per-rank summaries, the
ClusterCompare / ClusterCommGroups tables against the designed job of fixtures/README.md
("Clusters", recomputed from the raw files in test_cluster_fixtures.py), missing and failing
ranks, mixed kinds, the local process pool, and the two real 2-rank clusters."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.cluster import (ClusterOptions, RankFailure, cluster_inputs, compare_cluster,
                                  format_ranks, parse_ranks, rank_tasks)
from perfcmp_core.cluster.pool_map import map_in_pool
from perfcmp_core.cluster.summary import RankTask, summarize_rank
from perfcmp_core.cluster.tables import LARGEST_REGRESSION, SLOWEST, WAITED_FOR
from perfcmp_core.errors import InputError, UsageError
from perfcmp_core.load import detect
from perfcmp_core.load.detect import member_rank
from perfcmp_core.notes import lines
from perfcmp_core.options import LoadOptions

from test_cluster_fixtures import CLUSTER, DESIGNED_DIFF_MS, rank_folders, text_figures
from test_fixtures import dur_ns, load_trace, ns

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "npu-real-runs"
NPU_BASE, NPU_COMP = CLUSTER / "npu_base", CLUSTER / "npu_comp"
OPTS = LoadOptions(use_cache=False)
MS = 1_000_000


def compare(base: Path | str, comp: Path | str, **kw: object):
    inputs = cluster_inputs(str(base), str(comp), kw.pop("selection", None))  # type: ignore[arg-type]
    assert inputs is not None
    tables, _ = compare_cluster(inputs, OPTS, OPTS, ClusterOptions(scheduler="local", **kw))
    return tables


def by_rank(df: pd.DataFrame) -> dict[int, dict]:
    return {int(r["rank"]): r for r in df.to_dict("records")}


def copy_cluster(src: Path, dst: Path, ranks: list[int] | None = None) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for rank, run in rank_folders(src.name).items():
        if ranks is None or rank in ranks:
            shutil.copytree(run, dst / run.name)
    return dst


# ---------------------------------------------------------------------------------------------
# --ranks
# ---------------------------------------------------------------------------------------------


def test_rank_selection_parses_ranges_and_lists() -> None:
    sel = parse_ranks("0-7,12")
    assert [r for r in range(16) if r in sel] == [0, 1, 2, 3, 4, 5, 6, 7, 12]
    assert parse_ranks("3, 1-2,2").ranges == ((1, 3),)
    assert format_ranks([5, 0, 1, 2, 3, 3, 9, 10]) == "0-3,5,9-10"
    assert parse_ranks("0-1000000000").missing_from(range(4)) == "4-1000000000"  # never expanded
    for bad in ("", "1-", "a", "3-1", "1,,2", "-2"):
        with pytest.raises(UsageError, match="--ranks"):
            parse_ranks(bad)


# ---------------------------------------------------------------------------------------------
# ranks of members, pairing
# ---------------------------------------------------------------------------------------------


def test_member_ranks_come_from_where_the_profilers_record_them(tmp_path: Path) -> None:
    for rank, run in rank_folders("npu_comp").items():
        assert member_rank(run) == (rank, f"profiler_info_{rank}.json")
    for trace in (CLUSTER / "gpu_base").iterdir():
        rank = json.loads(trace.read_text())["distributedInfo"]["rank"]
        assert member_rank(trace) == (rank, "distributedInfo")
    # gzipped trace, distributedInfo after a long header; a name that spells the rank; pids do not
    gz = tmp_path / "host_9999.123.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(b'{"x": "' + b"a" * 5000 + b'", "distributedInfo": {"pg_config": '
                                 b'[{"ranks": [0, 1]}], "rank": 5}, "traceEvents": []}'))
    assert member_rank(gz) == (5, "distributedInfo")
    named = tmp_path / "worker_rank-12.pt.trace.json"
    named.write_text('{"distributedInfo": {"rank": -1}, "traceEvents": []}')
    assert member_rank(named) == (12, "its name")
    pid_only = tmp_path / "host_4242.1712.pt.trace.json"
    pid_only.write_text('{"traceEvents": []}')
    assert member_rank(pid_only) == (None, "")
    db_only = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    db_only.mkdir(parents=True)
    (db_only / "ascend_pytorch_profiler_6.db").write_bytes(b"")
    assert member_rank(db_only.parent) == (6, "ascend_pytorch_profiler_6.db")


def test_rank_option_picks_by_recorded_rank_not_by_folder_name() -> None:
    """--rank N in a folder of real-style names (host_pid_time) picks profiler_info_N.json."""
    src = detect(str(NPU_COMP), rank=2)
    assert src.run_dir == rank_folders("npu_comp")[2]
    trace = detect(str(CLUSTER / "gpu_base"), rank=3).trace
    assert json.loads(trace.read_text())["distributedInfo"]["rank"] == 3


def test_two_cluster_folders_pair_by_rank_whatever_their_names() -> None:
    inputs = cluster_inputs(str(NPU_BASE), str(NPU_COMP))
    assert inputs is not None and inputs.paired == (0, 1, 2, 3) and inputs.notes == ()
    # base names carry pid 40213 + 97·rank, comparison ones 45213 + 97·rank: paired by rank only
    assert inputs.base.path(1) == str(rank_folders("npu_base")[1])
    assert inputs.comp.path(1) == str(rank_folders("npu_comp")[1])


def test_single_profiles_are_not_clusters() -> None:
    """Two profiles, or one profile against a folder of ranks (which then needs --rank N, as
    before): compared as one pair."""
    single = rank_folders("npu_base")[0]
    assert cluster_inputs(str(single), str(rank_folders("npu_comp")[0])) is None
    assert cluster_inputs(str(single), str(NPU_COMP)) is None
    with pytest.raises(InputError, match=r"holds 4 rank folders \(node-a_45213_.*\); pass --rank N"):
        detect(str(NPU_COMP))
    with pytest.raises(UsageError, match="--ranks needs two folders of ranks"):
        cluster_inputs(str(single), str(NPU_COMP), parse_ranks("0"))
    with pytest.raises(InputError, match="no such file or directory"):
        cluster_inputs("/nonexistent/runs", str(NPU_COMP))


def test_duplicate_and_unknown_ranks_are_errors_naming_the_members(tmp_path: Path) -> None:
    dup = copy_cluster(NPU_BASE, tmp_path / "dup", [0, 1])
    shutil.copytree(rank_folders("npu_base")[1], dup / "copy_of_rank1_ascend_pt")
    with pytest.raises(InputError, match=r"holds two profiles of rank 1: .* and "):
        cluster_inputs(str(dup), str(NPU_COMP))
    anon = copy_cluster(NPU_BASE, tmp_path / "anon", [0, 1])
    (info,) = next(anon.glob("*40213*")).glob("profiler_info_*.json")
    info.rename(info.with_name("profiler_info.json"))  # keeps rank_id 0 in its content
    assert cluster_inputs(str(anon), str(NPU_COMP)) is not None
    info.with_name("profiler_info.json").write_text("{}")
    with pytest.raises(InputError, match=r"40213.*cannot tell which rank this is"):
        cluster_inputs(str(anon), str(NPU_COMP))


def test_rank_selection_and_ranks_in_neither_cluster() -> None:
    inputs = cluster_inputs(str(NPU_BASE), str(NPU_COMP), parse_ranks("1-2,9-11"))
    assert inputs is not None and inputs.paired == (1, 2)
    assert lines(inputs.notes) == ["--ranks 1-2,9-11: in neither cluster: ranks 9-11"]
    with pytest.raises(InputError, match=r"--ranks 7: no such rank in .*npu_base \(ranks 0-3\)"):
        cluster_inputs(str(NPU_BASE), str(NPU_COMP), parse_ranks("7"))


# ---------------------------------------------------------------------------------------------
# the Ranks table against the designed job
# ---------------------------------------------------------------------------------------------


def test_ranks_table_matches_the_hand_derived_values() -> None:
    tables = compare(NPU_BASE, NPU_COMP)
    rows = by_rank(tables.ranks.data)
    assert sorted(rows) == [0, 1, 2, 3]
    base, comp = rank_folders("npu_base"), rank_folders("npu_comp")
    for rank, designed in DESIGNED_DIFF_MS.items():
        row, fb, fc = rows[rank], text_figures(base[rank]), text_figures(comp[rank])
        for key in ("e2e", "compute", "uncovered", "wait", "free"):
            assert row[f"base_{key}"] == pytest.approx(fb[key] / MS, abs=1e-9)
            assert row[f"comp_{key}"] == pytest.approx(fc[key] / MS, abs=1e-9)
            assert row[f"diff_{key}"] == pytest.approx(designed[key], abs=1e-9), (rank, key)
    # fixtures/README.md: rank 1 is the rank the others wait for (busy +0.570 ms, the largest);
    # rank 3's busy grew +0.270 (its transfer), ranks 0/2 −0.030 — only rank 1 stands out.
    assert {r: row["flag"] for r, row in rows.items()} == {
        0: "", 1: f"{SLOWEST}; {LARGEST_REGRESSION}", 2: "", 3: ""}
    assert tables.focus_rank() == 1
    headers = [c.header for c in tables.ranks.columns]
    assert headers == ["Rank", *(["E2E Time(ms)", "Computing Time(ms)",
                                  "Uncovered Communication Time(ms)", "Wait Time(ms)",
                                  "Free Time(ms)", "Step E2E Spread(ms)"] * 2),
                       "Diff E2E Time(ms)", "Diff Computing Time(ms)",
                       "Diff Uncovered Communication Time(ms)", "Diff Wait Time(ms)",
                       "Diff Free Time(ms)", "Flag"]


def _step_e2e(run: Path) -> list[int]:
    """Per-step E2E from the raw trace: the Overlap Analysis spans starting inside each
    ``ProfilerStep#N`` host window (what ``--base-step N`` keeps)."""
    events = load_trace(run)
    steps = [(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    lanes = {"Computing", "Communication", "Communication(Not Overlapped)", "Free"}
    spans = [(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in events
             if e.get("ph") == "X" and e.get("name") in lanes and "cat" not in e]
    out = []
    for lo, hi in steps:
        inside = [(a, b) for a, b in spans if lo <= a <= hi]
        out.append(max(b for _, b in inside) - min(a for a, _ in inside))
    return out


def test_step_spread_is_the_spread_of_the_per_step_e2e() -> None:
    rows = by_rank(compare(NPU_BASE, NPU_COMP).ranks.data)
    for side, key in (("npu_base", "base_spread"), ("npu_comp", "comp_spread")):
        for rank, run in rank_folders(side).items():
            per_step = _step_e2e(run)
            assert len(per_step) == 3
            assert rows[rank][key] == pytest.approx((max(per_step) - min(per_step)) / MS, abs=1e-9)


def test_group_view_names_the_rank_the_others_wait_for() -> None:
    groups = compare(NPU_BASE, NPU_COMP).groups
    rows = by_rank(groups.data)
    assert {r["group"] for r in rows.values()} == {"dp (10.20.0.11%enp189s0f0_60000_0_1736413970118842)"}
    # README: waits +0.600 (ranks 0, 2), 0 (rank 1), +0.300 (rank 3); only rank 3's transfer grew
    assert {r: round(row["diff_wait"], 9) for r, row in rows.items()} == {0: 0.6, 1: 0.0, 2: 0.6, 3: 0.3}
    assert {r: round(row["diff_transmit"], 9) for r, row in rows.items()} == {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.3}
    assert {r: row["flag"] for r, row in rows.items()} == {0: "", 1: WAITED_FOR, 2: "", 3: ""}


def test_gpu_base_cluster_against_npu_comparison_cluster() -> None:
    """Ranks from distributedInfo pair with ranks from profiler_info; GPU has no wait data."""
    tables = compare(CLUSTER / "gpu_base", NPU_COMP)
    rows = by_rank(tables.ranks.data)
    assert sorted(rows) == [0, 1, 2, 3] and {r["_base_label"] for r in rows.values()} == {"GPU"}
    for rank, row in rows.items():
        assert row["base_compute"] == pytest.approx(6.035999) and row["base_wait"] == 0
        assert row["diff_compute"] == pytest.approx(DESIGNED_DIFF_MS[rank]["compute"], abs=1e-9)
    assert tables.groups.data["base_wait"].isna().all()
    assert by_rank(tables.groups.data)[1]["flag"] == WAITED_FOR


# ---------------------------------------------------------------------------------------------
# missing, failing and mixed ranks
# ---------------------------------------------------------------------------------------------


def test_a_rank_missing_on_one_side_is_reported_not_fatal(tmp_path: Path) -> None:
    comp = copy_cluster(NPU_COMP, tmp_path / "comp", [0, 1, 3])
    tables = compare(NPU_BASE, comp)
    rows = by_rank(tables.ranks.data)
    assert rows[2]["flag"] == "only in base" and np.isnan(rows[2]["comp_e2e"])
    assert rows[2]["base_e2e"] == pytest.approx(6.781181)
    assert rows[1]["diff_wait"] == pytest.approx(0.0)  # the others are compared as before
    assert any("only in base" in n.text and "rank 2" in n.text for n in tables.notes)


def test_a_rank_that_fails_to_load_is_reported_by_name(tmp_path: Path) -> None:
    comp = copy_cluster(NPU_COMP, tmp_path / "comp")
    broken = rank_folders("npu_comp")[3].name
    (comp / broken / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("[{\"ph\": ")
    tables = compare(NPU_BASE, comp)
    rows = by_rank(tables.ranks.data)
    assert rows[3]["flag"] == "comparison failed to load" and np.isnan(rows[3]["diff_e2e"])
    assert rows[1]["flag"] == f"{SLOWEST}; {LARGEST_REGRESSION}"
    (note,) = [n.text for n in tables.notes if n.text.startswith("comparison rank 3 not compared")]
    assert broken in note and "trace_view.json" in note


def test_mixed_kinds_in_one_cluster(tmp_path: Path) -> None:
    """Ranks 1 and 3 as Db exports, 0 and 2 as Text: the same figures as the all-Text cluster."""
    mixed = copy_cluster(NPU_COMP, tmp_path / "mixed", [0, 2])
    for run in (CLUSTER / "npu_comp_db").iterdir():
        shutil.copytree(run, mixed / run.name)
    text, both = compare(NPU_BASE, NPU_COMP), compare(NPU_BASE, mixed)
    labels = by_rank(both.ranks.data)
    assert [labels[r]["_comp_label"] for r in range(4)] == ["NPU Text", "NPU Db", "NPU Text", "NPU Db"]
    figures = [c.key for c in text.ranks.columns if c.key != "comp_spread"]
    pd.testing.assert_frame_equal(text.ranks.data[figures], both.ranks.data[figures])
    cols = ["rank", "comp_wait", "comp_transmit", "flag"]
    pd.testing.assert_frame_equal(text.groups.data[cols], both.groups.data[cols])
    # The per-step E2E is what --comparison-step N reports, which differs by kind: a Text step
    # keeps the Overlap Analysis Free span that starts in it and runs to the next step's first
    # task; a Db step ends with its last task (sqlite below: 2.409053, 2.408266, 2.407665 ms).
    for rank in (1, 3):
        assert labels[rank]["comp_spread"] == pytest.approx(_db_step_spread(rank), abs=1e-12)
        assert text.ranks.data["comp_spread"][rank] == pytest.approx(
            (max(_step_e2e(rank_folders("npu_comp")[rank])) - min(_step_e2e(rank_folders("npu_comp")[rank]))) / MS)


def _db_step_spread(rank: int) -> float:
    """Spread (ms) of the per-step device span of a Db rank: TASK and COMMUNICATION_OP rows that
    start in each STEP_TIME window."""
    import sqlite3

    run = rank_folders("npu_comp_db")[rank]
    db = run / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        spans = []
        for lo, hi in conn.execute("SELECT startNs, endNs FROM STEP_TIME ORDER BY id").fetchall():
            a, b = conn.execute(
                "SELECT MIN(s), MAX(e) FROM (SELECT startNs s, endNs e FROM TASK WHERE startNs BETWEEN ?1 AND ?2"
                " UNION ALL SELECT startNs, endNs FROM COMMUNICATION_OP WHERE startNs BETWEEN ?1 AND ?2)",
                (lo, hi)).fetchone()
            spans.append(b - a)
    return (max(spans) - min(spans)) / MS


# ---------------------------------------------------------------------------------------------
# the map
# ---------------------------------------------------------------------------------------------


def test_process_pool_gives_the_same_summaries_as_loading_in_process() -> None:
    inputs = cluster_inputs(str(NPU_BASE), str(NPU_COMP))
    tasks = rank_tasks(inputs, OPTS, OPTS)
    assert [(t.side, t.rank) for t in tasks][:4] == [("base", 0), ("comparison", 0), ("base", 1),
                                                    ("comparison", 1)]
    pooled = {(s.side, s.rank): s for s in map_in_pool(tasks, jobs=2)}
    inline = {(s.side, s.rank): s for s in map_in_pool(tasks, jobs=1)}
    assert pooled.keys() == inline.keys() and len(pooled) == 8
    for key in pooled:
        assert pooled[key].__dict__ | {"seconds": 0} == inline[key].__dict__ | {"seconds": 0}
        # what travels back from a worker and stays: a few hundred bytes, not the profile
        assert len(pickle.dumps(pooled[key])) < 1024


def test_rank_summaries_use_the_profile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second open reads every rank from the cache (the loader is not called again)."""
    run = tmp_path / "r"
    shutil.copytree(rank_folders("npu_base")[0], run)
    for p in run.rglob("*"):  # older than the cache's 2 s "racy" window
        os.utime(p, (1_700_000_000, 1_700_000_000))
    task = RankTask("base", 0, str(run), LoadOptions())
    first = summarize_rank(task)
    import perfcmp_core.load as load

    def refuse(*_: object) -> None:
        raise AssertionError("loaded again instead of from the cache")

    monkeypatch.setattr(load, "_read", refuse)
    again = summarize_rank(task)
    assert not isinstance(again, RankFailure)
    assert again.__dict__ | {"seconds": 0} == first.__dict__ | {"seconds": 0}


def test_environment_scheduler_and_local_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")
    assert ClusterOptions().address == "tcp://10.0.0.1:8786"
    assert ClusterOptions(scheduler="local").address is None
    assert ClusterOptions(scheduler="tcp://h:1").address == "tcp://h:1"
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    assert ClusterOptions().address is None


# ---------------------------------------------------------------------------------------------
# real data: two 2-rank DDP jobs (Text and Db exports of separate runs)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not (DATA / "text" / "level1").is_dir(), reason="../shared/data absent")
def test_real_clusters_agree_with_the_single_rank_comparison() -> None:
    """Every cluster figure is the OverallMetrics figure of that rank pair (--rank N)."""
    from perfcmp_core.compare import STEPS, Context
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import CompareOptions

    text, db = DATA / "text" / "level1", DATA / "db" / "level1"
    tables = compare(text, db)
    rows = by_rank(tables.ranks.data)
    assert sorted(rows) == [0, 1]
    overall = next(s for s in STEPS if s.name == "OverallMetrics")
    for rank, row in rows.items():
        b = load_profile(str(text), LoadOptions(rank=rank, use_cache=False))
        c = load_profile(str(db), LoadOptions(rank=rank, use_cache=False))
        assert (b.meta.rank, c.meta.rank) == (rank, rank)
        (om,) = overall.run(Context(b, c, CompareOptions()))
        sheet = {str(i).strip(): r for i, r in zip(om.data["index"], om.data.to_dict("records"))}
        for label, key in (("E2E Time", "e2e"), ("Computing Time", "compute"),
                           ("Uncovered Communication Time", "uncovered"), ("Free Time", "free")):
            assert row[f"base_{key}"] == pytest.approx(sheet[label]["base_ms"], abs=1e-9)
            assert row[f"comp_{key}"] == pytest.approx(sheet[label]["comp_ms"], abs=1e-9)
        assert row["base_spread"] == 0.0  # one step (50) each
    # The Text recording (base): rank 0 waits 4.64 ms of its uncovered communication, rank 1
    # 0.17 ms, so rank 1 is the rank the others waited for; in the Db recording (comparison) both
    # ranks waited ≈ 2.7 ms (the profiler's own analysis.db: 3.69 / 3.84 ms over the whole ops):
    # nobody set the pace (tests/test_comm_wait_real.py derives each wait from the raw tasks)
    groups = by_rank(tables.groups.data)
    assert [round(groups[r]["base_wait"], 3) for r in (0, 1)] == [4.636, 0.171]
    assert [round(groups[r]["comp_wait"], 3) for r in (0, 1)] == [2.676, 2.765]
    assert (groups[0]["flag"], groups[1]["flag"]) == ("", "others waited for it in base")


@pytest.mark.skipif(not (DATA / "db" / "level1").is_dir(), reason="../shared/data absent")
def test_real_cluster_of_mixed_kinds(tmp_path: Path) -> None:
    """A real 2-rank cluster whose rank 0 is the Db export and rank 1 the Text export: each rank
    compares as in the cluster of its own kind, and Text rank 1 against itself differs nowhere."""
    text, db = DATA / "text" / "level1", DATA / "db" / "level1"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "rank0_ascend_pt").symlink_to(db / "rank0_ascend_pt", target_is_directory=True)
    (mixed / "rank1_ascend_pt").symlink_to(text / "rank1_ascend_pt", target_is_directory=True)
    got = by_rank(compare(text, mixed).ranks.data)
    assert [got[r]["_comp_label"] for r in (0, 1)] == ["NPU Db", "NPU Text"]
    against_db = by_rank(compare(text, db).ranks.data)
    for key in ("e2e", "compute", "uncovered", "wait", "free", "spread"):
        assert got[0][f"comp_{key}"] == pytest.approx(against_db[0][f"comp_{key}"], abs=1e-9), key
        assert got[1][f"comp_{key}"] == pytest.approx(got[1][f"base_{key}"], abs=1e-9), key
    assert got[1]["diff_e2e"] == 0.0 and got[0]["comp_e2e"] == pytest.approx(137.919, abs=5e-4)


GPU_REAL = DATA.parent / "gpu-real"


@pytest.mark.skipif(not (GPU_REAL / "trace_diff_control.pt.trace.json.gz").is_file(),
                    reason="../shared/data absent")
def test_real_gpu_traces_pair_by_their_distributed_info(tmp_path: Path) -> None:
    """Two real A100 traces named as tensorboard_trace_handler names them (no rank in the name):
    their ranks, 3 and 1, come from distributedInfo.rank (checked in the raw files here)."""
    real = {"trace_diff_control.pt.trace.json.gz": 3, "trace_diff_test.pt.trace.json.gz": 1}
    folder = tmp_path / "job"
    folder.mkdir()
    for i, (name, rank) in enumerate(real.items()):
        with gzip.open(GPU_REAL / name, "rt") as fh:
            head = fh.read(1 << 20)
        start = head.index('"distributedInfo"')
        info = json.JSONDecoder().raw_decode(head, head.index("{", start))[0]
        assert info["rank"] == rank
        (folder / f"gpu-node_{4200 + i}.1700000000{i}.pt.trace.json.gz").symlink_to(GPU_REAL / name)
    members = sorted(folder.iterdir())
    assert [member_rank(m)[0] for m in members] == [3, 1]
    inputs = cluster_inputs(str(folder), str(folder))
    assert inputs is not None and inputs.paired == (1, 3)
    assert inputs.base.path(3) == str(members[0]) and inputs.comp.path(1) == str(members[1])


def test_the_pool_has_one_process_per_core_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default size: the cores this process may use, never more than there are rank loads;
    --jobs overrides it."""
    import perfcmp_core.cluster.pool_map as pool_map

    sizes: list[int] = []

    class Recorded(pool_map.ProcessPoolExecutor):  # type: ignore[misc]
        def __init__(self, max_workers: int, **kw: object) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers, **kw)  # type: ignore[arg-type]

    assert pool_map.available_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(pool_map, "ProcessPoolExecutor", Recorded)
    monkeypatch.setattr(pool_map, "available_cores", lambda: 3)
    tasks = rank_tasks(cluster_inputs(str(NPU_BASE), str(NPU_COMP)), OPTS, OPTS)
    assert len(list(map_in_pool(tasks))) == 8 and len(list(map_in_pool(tasks[:2]))) == 2
    assert len(list(map_in_pool(tasks, jobs=2))) == 8
    assert sizes == [3, 2, 2]
