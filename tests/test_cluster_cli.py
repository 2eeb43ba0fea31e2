"""Cluster comparisons from the command line: export / summary / --json of two cluster folders,
--rank / --ranks / --jobs, bad input in one line (exit 2), and the real 2-rank clusters."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from perfcmp_core.cluster import ClusterOptions, cluster_inputs, compare_cluster
from perfcmp_core.options import LoadOptions
from perfcmp_tui.cli import main

from test_cluster_fixtures import CLUSTER, DESIGNED_DIFF_MS, rank_folders

NPU_BASE, NPU_COMP = CLUSTER / "npu_base", CLUSTER / "npu_comp"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "npu-real-runs"
#: Issue 18: Rank, base / comparison / diff of E2E, Computing, Uncovered Communication (with
#: wait), Free time (ms), per-step E2E spread, a flag.
FIGURES = ["E2E Time(ms)", "Computing Time(ms)", "Uncovered Communication Time(ms)", "Wait Time(ms)",
           "Free Time(ms)"]
HEADERS = ["Rank", *FIGURES, "Step E2E Spread(ms)", *FIGURES, "Step E2E Spread(ms)",
           *(f"Diff {h}" for h in FIGURES), "Flag"]


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_summary_of_two_clusters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "summary", NPU_BASE, NPU_COMP, "--no-cache")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Cluster: 4 rank pairs compared")
    rows = {int(line.split()[0]): line for line in lines[2:6]}
    for rank, designed in DESIGNED_DIFF_MS.items():
        assert f"{designed['e2e']:+.3f}" in rows[rank] and f"({designed['wait']:+.3f})" in rows[rank]
    assert rows[1].endswith("slowest; largest regression")
    assert "the others wait for rank 1 (its wait 0.006 ms, theirs 0.306–0.606 ms)" in out
    detail = next(line for line in lines if line.startswith("Rank 1 in detail (largest regression"))
    assert rank_folders("npu_base")[1].name in detail and rank_folders("npu_comp")[1].name in detail
    assert "Model Profiling Time Distribution" in out  # then the rank pair's usual summary


def test_export_writes_the_cluster_sheets_after_the_reference_sheets(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "export", NPU_BASE, NPU_COMP, "-o", tmp_path, "--json", tmp_path / "r.json",
                       "--no-cache")
    assert code == 0, err
    (book,) = tmp_path.glob("*.xlsx")
    names = openpyxl.load_workbook(book, read_only=True).sheetnames
    assert names[-4:] == ["ClusterCompare", "ClusterCommGroups", "Advisor", "README"]
    assert names[0] == "OverallMetrics"  # the detailed rank pair's sheets, in the reference's order
    sheet = pd.read_excel(book, sheet_name="ClusterCompare", header=2)
    assert [str(c).split(".")[0] for c in sheet.columns] == HEADERS
    assert sheet["Rank"].tolist() == [0, 1, 2, 3]
    assert sheet["Diff Wait Time(ms)"].round(9).tolist() == [0.6, 0.0, 0.6, 0.3]
    assert sheet["Flag"].fillna("").tolist() == ["", "slowest; largest regression", "", ""]

    doc = json.loads((tmp_path / "r.json").read_text())
    table = doc["tables"]["ClusterCompare"]
    assert [c["header"] for c in table["columns"]] == HEADERS
    inputs = cluster_inputs(str(NPU_BASE), str(NPU_COMP))
    core, _ = compare_cluster(inputs, LoadOptions(use_cache=False), LoadOptions(use_cache=False),
                              ClusterOptions(scheduler="local"))
    expected = core.ranks.data[[c.key for c in core.ranks.columns]].to_dict("records")
    got = [{k: row[k] for k in expected[0]} for row in table["rows"]]
    assert got == expected
    assert doc["tables"]["ClusterCommGroups"]["rows"][1]["flag"] == "others wait for it"
    assert doc["options"]["detail_rank"] == 1


def test_rank_keeps_the_one_rank_comparison(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "export", NPU_BASE, NPU_COMP, "--rank", 2, "-o", tmp_path, "--no-cache",
                       "--json", tmp_path / "r.json")
    assert code == 0 and not out.startswith("Cluster:")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert "ClusterCompare" not in doc["tables"]
    assert doc["base_label"] == str(NPU_BASE) and "OverallMetrics" in doc["tables"]
    e2e = next(r for r in doc["tables"]["OverallMetrics"]["rows"] if r["index"] == "E2E Time")
    assert e2e["diff_ms"] == pytest.approx(DESIGNED_DIFF_MS[2]["e2e"])


def test_ranks_selects_a_subset_and_a_missing_rank_is_reported(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "summary", NPU_BASE, NPU_COMP, "--ranks", "2-3,7", "--no-cache")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[2:4]] == ["2", "3"]
    assert "note: --ranks 2-3,7: in neither cluster: rank 7" in out
    comp = tmp_path / "comp"
    for rank, run_dir in rank_folders("npu_comp").items():
        if rank != 0:
            shutil.copytree(run_dir, comp / run_dir.name)
    code, out, _ = run(capsys, "summary", NPU_BASE, comp, "--no-cache", "--jobs", 1)
    assert code == 0
    assert out.splitlines()[2].split()[0] == "0" and out.splitlines()[2].endswith("only in base")
    assert f"note: only in base ({NPU_BASE}), not compared: rank 0" in out


@pytest.mark.parametrize("args, message", [
    (("--ranks", "0-1"), "--ranks needs two folders of ranks"),
    (("--jobs", "2"), "--jobs is for comparing two cluster folders"),
    (("--scheduler", "tcp://h:1"), "--scheduler is for comparing two cluster folders"),
])
def test_cluster_options_need_two_clusters(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                           message: str) -> None:
    base, comp = rank_folders("npu_base")[0], rank_folders("npu_comp")[0]
    code, out, err = run(capsys, "summary", base, comp, *args)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (("--rank", "1", "--ranks", "0-1"), "--rank compares one rank pair; --ranks is for comparing whole"),
    (("--jobs", "0"), "--jobs must be ≥ 1"),
    (("--ranks", "1-x"), "'1-x' is not a rank or a range like 0-7"),
])
def test_bad_cluster_options(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, "summary", NPU_BASE, NPU_COMP, *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_single_profile_against_a_cluster_asks_for_a_rank(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "export", rank_folders("npu_base")[0], NPU_COMP)
    assert code == 2 and f"{NPU_COMP}: holds 4 rank folders (" in err and "pass --rank N" in err
    code, out, _ = run(capsys, "summary", rank_folders("npu_base")[0], NPU_COMP, "--rank", 3, "--no-cache")
    assert code == 0 and "Model Profiling Time Distribution" in out


def test_unreachable_scheduler_from_the_installed_command(tmp_path: Path) -> None:
    """The real console script: one line, exit 2, no traceback, no output folder created."""
    pytest.importorskip("distributed")
    exe = Path(sys.executable).parent / "perfcmp-tui"
    out = tmp_path / "never"
    proc = subprocess.run([str(exe), "export", str(NPU_BASE), str(NPU_COMP), "-o", str(out),
                           "--scheduler", "tcp://127.0.0.1:9"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("perfcmp-tui: error: Dask scheduler tcp://127.0.0.1:9: cannot connect")
    assert proc.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.skipif(not (DATA / "text" / "level1").is_dir(), reason="../shared/data absent")
def test_real_two_rank_clusters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The Text and the Db export of two 2-rank DDP runs: both ranks compared, rank 1 (the one
    rank 0 waits for in the Text run) opened in detail."""
    code, out, err = run(capsys, "export", DATA / "text" / "level1", DATA / "db" / "level1", "-o", tmp_path,
                         "--no-cache")
    assert code == 0, err
    assert out.startswith("Cluster: 2 rank pairs compared")
    # the Db run (comparison): both ranks waited ≈ 2.7 ms, nobody set the pace
    assert "the others wait for rank" not in out
    # the Text run as the comparison: rank 0 waited 4.636 ms for rank 1 (docs/differences.md O15;
    # before, a Text export reported no wait at all and no group line)
    code, swapped, err = run(capsys, "summary", DATA / "db" / "level1", DATA / "text" / "level1", "--no-cache")
    assert code == 0, err
    assert "the others wait for rank 1 (its wait 0.171 ms, theirs 4.636 ms)" in swapped
    sheet = pd.read_excel(next(tmp_path.glob("*.xlsx")), sheet_name="ClusterCompare", header=2)
    assert sheet["Rank"].tolist() == [0, 1]
    assert sheet["E2E Time(ms)"].round(3).tolist() == [136.581, 131.913]  # OverallMetrics' E2E of each Text rank
