"""The 4-rank cluster fixtures (fixtures/README.md, "Clusters"), recomputed from the raw files with
the standard library only: ranks are where real profilers put them, and the per-rank figures are
the designed ones. The cluster comparison's tests compare the tool against these numbers."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from test_fixtures import FIX, dur_ns, load_trace, ns, processes

CLUSTER = FIX / "cluster"
MS = 1_000_000


def rank_folders(side: str) -> dict[int, Path]:
    """rank → run folder, the rank read from profiler_info_<rank>.json (name and content)."""
    out = {}
    for run in sorted((CLUSTER / side).iterdir()):
        (info,) = run.glob("profiler_info_*.json")
        rank = int(re.fullmatch(r"profiler_info_(\d+)\.json", info.name).group(1))
        assert json.loads(info.read_text())["rank_id"] == rank
        out[rank] = run
    return out


def text_figures(run: Path) -> dict[str, int]:
    """E2E / Computing / Uncovered Communication / Wait / Free (ns) of one Text run folder.

    Overlap Analysis lanes give computing and uncovered communication, their span the E2E; the
    wait is every plane-0 Notify_Wait that does not complete an RDMA transfer (the reference's
    rule: not right after ``RDMASend, RDMASend``), all of it uncovered in this job.
    """
    events = load_trace(run)
    pids = processes(events)
    lanes: dict[int, str] = {}
    spans: list[tuple[int, int, str]] = []
    for e in events:
        if e.get("pid") == pids["Overlap Analysis"]:
            if e["ph"] == "M" and e["name"] == "thread_name":
                lanes[e["tid"]] = e["args"]["name"]
            elif e["ph"] == "X":
                spans.append((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"]), e["name"]))
    compute = sum(b - a for a, b, name in spans if name == "Computing")
    uncovered = sum(b - a for a, b, name in spans if name == "Communication(Not Overlapped)")
    e2e = max(b for _, b, _ in spans) - min(a for a, _, _ in spans)
    planes = {e["tid"]: e["args"]["name"] for e in events
              if e.get("pid") == pids["HCCL"] and e["ph"] == "M" and e["name"] == "thread_name"}
    plane0 = sorted((ns(e["ts"]), e["name"], dur_ns(e["dur"])) for e in events
                    if e.get("pid") == pids["HCCL"] and e["ph"] == "X" and planes[e["tid"]] == "Plane 0")
    wait, history = 0, ""
    for _, name, d in plane0:
        if name == "Notify_Wait" and not history.endswith("RR"):
            wait += d
        history += {"RDMASend": "R", "Notify_Wait": "N"}.get(name, "O")
    return {"e2e": e2e, "compute": compute, "uncovered": uncovered, "wait": wait,
            "free": e2e - compute - uncovered}


#: fixtures/README.md "Clusters": comparison − base over 3 steps, in ms.
DESIGNED_DIFF_MS = {
    0: {"e2e": 0.570, "compute": -0.030, "uncovered": 0.600, "wait": 0.600, "free": 0.0},
    1: {"e2e": 0.570, "compute": 0.570, "uncovered": 0.0, "wait": 0.0, "free": 0.0},
    2: {"e2e": 0.570, "compute": -0.030, "uncovered": 0.600, "wait": 0.600, "free": 0.0},
    3: {"e2e": 0.570, "compute": -0.030, "uncovered": 0.600, "wait": 0.300, "free": 0.0},
}


def test_rank_folders_are_named_like_real_exports() -> None:
    for side in ("npu_base", "npu_comp", "npu_comp_db"):
        for run in (CLUSTER / side).iterdir():
            assert re.fullmatch(r"node-a_\d+_\d{17}_ascend_pt", run.name), run.name
    assert sorted(rank_folders("npu_base")) == sorted(rank_folders("npu_comp")) == [0, 1, 2, 3]
    assert sorted(rank_folders("npu_comp_db")) == [1, 3]


def test_base_ranks_are_identical_and_match_the_readme() -> None:
    figures = [text_figures(run) for run in rank_folders("npu_base").values()]
    assert all(f == figures[0] for f in figures)
    f = figures[0]
    # README: E2E 6.781, Computing 6.036 (3 × 2010 µs designed + fractions), Uncovered 0.607, Wait 0.006.
    assert round(f["e2e"] / MS, 3) == 6.781
    assert round(f["compute"] / MS, 3) == 6.036 and 3 * 2010_000 <= f["compute"] < 3 * 2010_000 + 33 * 500
    assert round(f["uncovered"] / MS, 3) == 0.607
    assert 3 * 2_000 <= f["wait"] < 3 * 2_300  # three handshakes, no wait for peers


def test_comparison_differences_are_exactly_the_designed_ones() -> None:
    base, comp = rank_folders("npu_base"), rank_folders("npu_comp")
    for rank, expected in DESIGNED_DIFF_MS.items():
        b, c = text_figures(base[rank]), text_figures(comp[rank])
        got = {k: (c[k] - b[k]) / MS for k in expected}
        assert got == pytest.approx(expected, abs=1e-9), rank


def test_db_ranks_hold_the_same_run() -> None:
    for rank, run in rank_folders("npu_comp_db").items():
        db = run / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            assert conn.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall() == [(rank,)]
            start, end = conn.execute("SELECT MIN(startNs), MAX(endNs) FROM TASK").fetchone()
            ops = conn.execute("SELECT SUM(endNs - startNs) FROM COMMUNICATION_OP").fetchone()[0]
        text = load_trace(rank_folders("npu_comp")[rank])
        hccl = processes(text)["HCCL"]
        text_ops = sum(dur_ns(e["dur"]) for e in text if e.get("pid") == hccl and e["ph"] == "X"
                       and e["name"].startswith("hcom_"))
        assert ops == text_ops
        assert end > start


def test_gpu_traces_carry_the_rank_in_distributed_info_only() -> None:
    ranks = []
    for trace in sorted((CLUSTER / "gpu_base").iterdir()):
        assert re.fullmatch(r"node-a_\d+\.\d+\.pt\.trace\.json", trace.name)
        doc = json.loads(trace.read_text())
        assert doc["distributedInfo"]["world_size"] == 4
        ranks.append(doc["distributedInfo"]["rank"])
    assert sorted(ranks) == [0, 1, 2, 3]
