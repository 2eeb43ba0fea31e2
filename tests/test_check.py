"""``perfcmp-tui check``: the performance gate on real pairs, the noise test, clusters, bad input.

Expected figures are derived here from the loaded profiles (step markers, kernels, memory samples)
or from the profiler's own ``step_trace_time.csv``, not from the gate's code; the rank-test
p-values are counted by hand from the fixtures' step lengths.
"""

from __future__ import annotations

import itertools
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.gate import mann_whitney_greater
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions
from perfcmp_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
PATTERNS = FIX / "gpu_patterns"
SHARED = ROOT.parent / "shared" / "data"
H200 = SHARED / "gpu-real" / "h200"
NPU = SHARED / "npu-real-runs"
needs_h200 = pytest.mark.skipif(not H200.is_dir(), reason="../shared/data absent")
needs_npu = pytest.mark.skipif(not NPU.is_dir(), reason="../shared/data absent")
#: The advisor's default warm-up (core/advisor/advisor.ini: warmup_steps = 2).
WARMUP = 2
#: Step lengths (µs) of the step-series fixtures, as fixtures/README.md lists them.
SERIES = {
    "steps_base": (1000, 1000, 500, 508, 495, 503, 497, 505, 499, 502),
    "steps_outlier": (1000, 1000, 501, 496, 1500, 504, 498, 503, 500, 497),
    "steps_slower": (1000, 1000, 551, 559, 545, 553, 547, 556, 549, 552),
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs without --no-cache keep their profile cache away from the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg_cache")))


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main(["check", *(str(a) for a in args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def gate_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: object) -> tuple[int, str, dict]:
    path = tmp_path / f"gate{len(list(tmp_path.glob('gate*.json')))}.json"  # reports never overwrite
    code, out, err = run(capsys, *args, "--json", path, "--no-cache")
    assert code in (0, 1), err
    return code, out, json.loads(path.read_text())


def checks(doc: dict) -> dict[str, dict]:
    return {c["metric"]: c for c in doc["checks"]}


def step_windows_ns(path: Path) -> pd.Series:
    """Each step's stretch, from the markers and the kernels: a step followed by the next runs to
    its start; the last runs to its own end or its last kernel's end (a kernel launched by one of
    its ops, or starting inside it), whichever is later."""
    p = load_profile(str(path), LoadOptions())
    steps = p.steps.sort_values("start_ns")
    k = p.kernels[p.kernels["in_trace"]]
    k_end = k["start_ns"] + k["dur_ns"]
    ops_step = p.ops["step"].to_numpy()
    launched = np.where(k["op_row"] >= 0, ops_step[k["op_row"].clip(lower=0)], -1)
    out = {}
    rows = list(steps.itertuples())
    for i, s in enumerate(rows):
        if i + 1 < len(rows) and rows[i + 1].step == s.step + 1:
            out[s.step] = rows[i + 1].start_ns - s.start_ns
        else:
            mine = (launched == s.step) | ((k["start_ns"] >= s.start_ns) & (k["start_ns"] <= s.end_ns))
            out[s.step] = max(s.end_ns, int(k_end[mine].max()) if mine.any() else 0) - s.start_ns
    return pd.Series(out)


def analysed_mean_ns(path: Path) -> float:
    w = step_windows_ns(path)
    return float(w.iloc[WARMUP:].mean() if len(w) > WARMUP else w.mean())


# ------------------------------------------------------------------------------ every input kind

KINDS = {
    "gpu": ("gpu/base.pt.trace.json", "gpu/comp.pt.trace.json"),
    "npu_text": ("npu_text/base_ascend_pt", "npu_text/comp_ascend_pt"),
    "npu_db": ("npu_db/base_ascend_pt", "npu_db/comp_ascend_pt"),
    "npu_ms": ("npu_ms/base_ascend_ms", "npu_ms/comp_ascend_ms"),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_input_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    base, comp = (FIX / p for p in KINDS[kind])
    code, out, doc = gate_json(capsys, tmp_path, base, comp, "--max", "E2E=+5%", "--max", "Mem Usage=+1GiB",
                               "--max", "communication.wait=+1ms", "--warmup-steps", "0")
    by = checks(doc)
    # Three steps a side (no warm-up left out): the E2E means from the step markers and kernels.
    assert doc["steps"]["base"]["analysed"] == [1, 2, 3] and doc["policy"]["warmup_steps"] == 0
    assert by["E2E"]["base"] == pytest.approx(step_windows_ns(base).mean(), abs=1)
    assert by["E2E"]["comparison"] == pytest.approx(step_windows_ns(comp).mean(), abs=1)
    assert code == 0 and by["E2E"]["verdict"] == by["Mem Usage"]["verdict"] == "pass"
    # No input kind splits exposed communication into wait and transmit yet (docs/explain.md).
    assert by["communication.wait"]["verdict"] == "skip"


# ------------------------------------------------------------------------------ real GPU pairs

@needs_h200
def test_hostbound_pair_fails_e2e_and_names_the_host_side_cause(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    base = H200 / "gpt2_train_bf16_base_minimal.pt.trace.json.gz"
    comp = H200 / "gpt2_train_bf16_hostbound_minimal.pt.trace.json.gz"
    code, out, doc = gate_json(capsys, tmp_path, base, comp, "--max", "E2E=+5%")
    assert code == 1
    e2e = checks(doc)["E2E"]
    # 5 steps each (2…6): steps 2 and 3 are warm-up, 4…6 analysed; too few for the rank test.
    assert doc["steps"]["base"] == {"analysed": [4, 5, 6], "warmup": [2, 3]}
    assert e2e["base"] == pytest.approx(analysed_mean_ns(base), abs=1)
    assert e2e["comparison"] == pytest.approx(analysed_mean_ns(comp), abs=1)
    assert e2e["comparison"] > 1.05 * e2e["base"]
    assert e2e["verdict"] == "fail" and e2e["noise"] is None
    assert "noise not assessed" in out and "FAIL" in out and "REGRESSION" in out
    # The host-side cause: the loss's .item() waiting for the device, named in the report.
    assert "device sync in aten::item" in out
    assert any("device sync in aten::item" in c for c in e2e["contributors"])


@needs_h200
def test_fp32_to_bf16_gpt2_passes_a_zero_growth_gate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = H200 / "gpt2_train_fp32_eager.pt.trace.json.gz"
    comp = H200 / "gpt2_train_bf16_sdpa_fusedadamw.pt.trace.json.gz"
    code, out, doc = gate_json(capsys, tmp_path, base, comp, "--max", "E2E=+0%")
    assert code == 0 and "PASS" in out
    e2e = checks(doc)["E2E"]
    # Two steps each: no more steps than the warm-up, so none is left out.
    assert doc["steps"]["base"] == {"analysed": [2, 3], "warmup": []}
    assert e2e["base"] == pytest.approx(step_windows_ns(base).mean(), abs=1)
    assert e2e["comparison"] == pytest.approx(step_windows_ns(comp).mean(), abs=1)
    assert e2e["comparison"] < e2e["base"] and e2e["verdict"] == "pass"


EVERY_METRIC = """
[gate]
alpha = 0.05
min_steps = 2
[max]
E2E = "+0%"
Computing = "+0%"
"Uncovered Communication" = "+0%"
Free = "+0%"
idle.sync = "+0%"
"idle.host" = "+0ms"
"idle.launch" = "+0%"
"idle.copy" = "+0%"
"idle.device" = "+0%"
"idle.unknown" = "+0%"
"Mem Usage" = "+0B"
"kernel:GEMM" = "+0%"
"kernel:element-wise" = "+0%"
"op:aten::*" = "+0%"
"op:aten::mm" = "+0%"
"module:*" = "+0%"
"""


@needs_h200
def test_a_profile_against_itself_passes_every_gate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text(EVERY_METRIC)
    trace = H200 / "gpt2_train_fp32_eager.pt.trace.json.gz"  # with memory samples and module frames
    code, out, doc = gate_json(capsys, tmp_path, trace, trace, "--gate", gate)
    assert code == 0, out
    assert len(doc["checks"]) == 16
    assert all(c["verdict"] == "pass" and c["change"] == 0 for c in doc["checks"])
    by = checks(doc)
    assert by["Mem Usage"]["base"] > 0 and by["module:*"]["base"] > 0 and by["op:aten::mm"]["base"] > 0
    # min_steps = 2 and 2 steps a side: the rank test ran, and found nothing (ties everywhere).
    assert all(c["noise"] is not None and c["noise"]["p"] >= 0.05 for c in doc["checks"])


# ------------------------------------------------------------------------------ real NPU pair

def _trace_time(rank: int) -> pd.Series:
    csv = NPU / "text" / "level1" / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    return pd.read_csv(csv).iloc[0]


def _peak_reserved(path: Path) -> float:
    """The peak reserved memory during the step: samples inside it, and the level the sample
    before it left."""
    p = load_profile(str(path), LoadOptions())
    s = p.steps.iloc[0]
    m = p.memory.sort_values("ts_ns")
    before = m[m["ts_ns"] < s.start_ns]["total_reserved_bytes"]
    inside = m[(m["ts_ns"] >= s.start_ns) & (m["ts_ns"] < s.end_ns)]["total_reserved_bytes"]
    return float(max(before.iloc[-1] if len(before) else 0, inside.max()))


@needs_npu
def test_npu_rank0_vs_rank1_verdicts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r0, r1 = (NPU / "text" / "level1" / f"rank{r}_ascend_pt" for r in (0, 1))
    limits = {"E2E": "+0%", "Computing": "+1%", "Uncovered Communication": "+0%", "Free": "+5%",
              "Mem Usage": "+0B", "idle.copy": "+10%"}
    args = [a for m, lim in limits.items() for a in ("--max", f"{m}={lim}")]
    code, out, doc = gate_json(capsys, tmp_path, r0, r1, *args)
    by = checks(doc)
    # Independently: the profiler's per-step figures (µs) and the step markers (one step, 50).
    t0, t1 = _trace_time(0), _trace_time(1)
    e2e = {r: float(step_windows_ns(p).iloc[0]) for r, p in ((0, r0), (1, r1))}
    expect = {
        "Computing": (t0["Computing"] * 1e3, t1["Computing"] * 1e3),
        "Uncovered Communication": (t0["Communication(Not Overlapped)"] * 1e3,
                                    t1["Communication(Not Overlapped)"] * 1e3),
        "E2E": (e2e[0], e2e[1]),
        # Free is the rest of the step: E2E − computing − uncovered communication.
        "Free": (e2e[0] - (t0["Computing"] + t0["Communication(Not Overlapped)"]) * 1e3,
                 e2e[1] - (t1["Computing"] + t1["Communication(Not Overlapped)"]) * 1e3),
        "Mem Usage": (_peak_reserved(r0), _peak_reserved(r1)),
    }
    for metric, (b, c) in expect.items():
        assert by[metric]["base"] == pytest.approx(b, rel=1e-9, abs=2), metric
        assert by[metric]["comparison"] == pytest.approx(c, rel=1e-9, abs=2), metric
        rel = float(limits[metric].strip("+%B")) / 100 if limits[metric].endswith("%") else None
        allowed = b * rel if rel is not None else 0.0
        assert by[metric]["verdict"] == ("fail" if c - b > allowed else "pass"), metric
    # The derived verdicts, spelt out: rank 1 idles more (+7.8 %) and holds 4 KiB more memory.
    assert [m for m in expect if by[m]["verdict"] == "fail"] == ["Free", "Mem Usage"]
    assert by["Mem Usage"]["change"] == 4096
    assert by["idle.copy"]["verdict"] == "fail"  # 7.18 → 8.36 ms of copies: +16 %
    assert code == 1 and all(c["noise"] is None for c in doc["checks"])  # one step a side


# ------------------------------------------------------------------------------ clusters

@needs_npu
def test_cluster_gate_reports_the_worst_rank(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base, comp = NPU / "text" / "level1", NPU / "db" / "level1"
    code, out, doc = gate_json(capsys, tmp_path, base, comp, "--max", "Computing=+0%", "--max", "E2E=+0%")
    # Per rank, the profiler's computing figures: the Text export from step_trace_time.csv, the Db
    # export's from the loaded tasks (a separate run of the same job).
    growth = {}
    for rank in (0, 1):
        text = _trace_time(rank)["Computing"] * 1e3
        growth[rank] = checks({"checks": doc["ranks"][str(rank)]})["Computing"]["comparison"] - text
    worst = max(growth, key=lambda r: growth[r] / (_trace_time(r)["Computing"] * 1e3))
    computing = checks(doc)["Computing"]
    assert computing["rank"] == worst
    assert f"Computing (rank {worst})" in out
    assert set(doc["ranks"]) == {"0", "1"}
    failing = [r for r in (0, 1) if growth[r] > 0]
    assert computing["verdict"] == ("fail" if failing else "pass")
    assert code == (1 if any(c["verdict"] == "fail" for c in doc["checks"]) else 0)


def test_cluster_fixture_gate_names_the_failing_rank(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, doc = gate_json(capsys, tmp_path, FIX / "cluster" / "npu_base", FIX / "cluster" / "npu_comp",
                               "--max", "E2E=+5%")
    per_rank = {int(r): checks({"checks": v})["E2E"] for r, v in doc["ranks"].items()}
    assert sorted(per_rank) == [0, 1, 2, 3]
    excess = {r: (v["change"] - 0.05 * v["base"]) / v["base"] for r, v in per_rank.items()}
    worst = max(excess, key=excess.get)
    assert checks(doc)["E2E"]["rank"] == worst
    assert (code == 1) == (excess[worst] > 0)
    assert f"E2E (rank {worst})" in out
    assert checks(doc)["E2E"]["failing_ranks"] == sorted(r for r, x in excess.items() if x > 0)
    # Gated here one pair after the other, or on two worker processes: the same verdicts.
    _, _, inline = gate_json(capsys, tmp_path, FIX / "cluster" / "npu_base", FIX / "cluster" / "npu_comp",
                             "--max", "E2E=+5%", "--jobs", "1")
    _, _, pooled = gate_json(capsys, tmp_path, FIX / "cluster" / "npu_base", FIX / "cluster" / "npu_comp",
                             "--max", "E2E=+5%", "--jobs", "2")
    assert inline["checks"] == pooled["checks"] == doc["checks"] and inline["ranks"] == pooled["ranks"]


# ------------------------------------------------------------------------------ noise

def _u_by_hand(base: tuple[int, ...], comp: tuple[int, ...]) -> float:
    return sum(1.0 if c > b else 0.5 if c == b else 0.0 for b in base for c in comp)


def test_rank_test_against_counting_every_arrangement() -> None:
    base, comp = (3.0, 1.0, 4.0, 1.5), (5.0, 9.0, 2.0, 6.0, 5.5)
    test = mann_whitney_greater(np.array(base), np.array(comp))
    assert test.u == _u_by_hand(base, comp) == 18
    values = base + comp
    hits = total = 0
    for chosen in itertools.combinations(range(len(values)), len(comp)):
        picked = [values[i] for i in chosen]
        rest = [values[i] for i in range(len(values)) if i not in chosen]
        total += 1
        hits += _u_by_hand(tuple(rest), tuple(picked)) >= test.u
    assert test.method == "exact" and test.p == pytest.approx(hits / total)


def test_one_slow_outlier_does_not_fail_a_noise_aware_gate(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    base, comp = SERIES["steps_base"][WARMUP:], SERIES["steps_outlier"][WARMUP:]
    code, out, doc = gate_json(capsys, tmp_path, PATTERNS / "steps_base.pt.trace.json",
                               PATTERNS / "steps_outlier.pt.trace.json", "--max", "E2E=+5%")
    e2e = checks(doc)["E2E"]
    assert e2e["base"] == pytest.approx(np.mean(base) * 1e3) and e2e["comparison"] == pytest.approx(np.mean(comp) * 1e3)
    assert e2e["change"] > 0.05 * e2e["base"]  # the mean grew by a quarter …
    u = _u_by_hand(base, comp)
    assert e2e["noise"]["u"] == u == 31.5  # … but the ranks barely moved (ties: 500 / 503 / 497)
    # The normal approximation with the tie correction, by hand.
    m = n = 8
    counts = pd.Series(base + comp).value_counts().to_numpy()
    var = m * n / 12 * ((m + n + 1) - (counts ** 3 - counts).sum() / ((m + n) * (m + n - 1)))
    p = 0.5 * math.erfc((u - m * n / 2 - 0.5) / math.sqrt(var) / math.sqrt(2))
    assert e2e["noise"]["p"] == pytest.approx(p) and p > 0.05
    assert code == 0 and e2e["verdict"] == "pass" and "within step-to-step noise" in out
    # The same series without the noise test (too few steps required): the limit alone fails it.
    code, out, _ = run(capsys, PATTERNS / "steps_base.pt.trace.json", PATTERNS / "steps_outlier.pt.trace.json",
                       "--max", "E2E=+5%", "--min-steps", "9")
    assert code == 1 and "noise not assessed" in out


def test_every_step_slower_fails_beyond_noise(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base, comp = SERIES["steps_base"][WARMUP:], SERIES["steps_slower"][WARMUP:]
    code, out, doc = gate_json(capsys, tmp_path, PATTERNS / "steps_base.pt.trace.json",
                               PATTERNS / "steps_slower.pt.trace.json", "--max", "E2E=+5%",
                               "--max", "op:aten::mm=+5%", "--max", "kernel:GEMM=+5%")
    by = checks(doc)
    assert by["E2E"]["noise"]["u"] == 64 and by["E2E"]["noise"]["p"] == pytest.approx(1 / math.comb(16, 8))
    # the GEMM fills each step but 40 µs: launched by aten::mm, class GEMM
    gemm = (np.mean(base) - 40) * 1e3, (np.mean(comp) - 40) * 1e3
    for metric in ("op:aten::mm", "kernel:GEMM"):
        assert (by[metric]["base"], by[metric]["comparison"]) == pytest.approx(gemm)
    assert code == 1 and all(c["verdict"] == "fail" for c in doc["checks"])
    assert "GEMM kernels" in by["E2E"]["contributors"][0]


# ------------------------------------------------------------------------------ reports

def test_junit_and_markdown_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junit, md = tmp_path / "out" / "gate.xml", tmp_path / "out" / "gate.md"
    code, out, err = run(capsys, PATTERNS / "steps_base.pt.trace.json", PATTERNS / "steps_slower.pt.trace.json",
                         "--max", "E2E=+5%", "--max", "E2E=+20%", "--max", "Mem Usage=+1GiB",
                         "--junit", junit, "--markdown", md)
    assert code == 0, err  # the later --max E2E replaces the earlier one; +10 % is within +20 %
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names == ["E2E ≤ +20%", "Mem Usage ≤ +1GiB"]
    assert suite.get("skipped") == "1"  # no memory samples in these traces
    text = md.read_text()
    assert "| E2E |" in text and "PASS" in text and "SKIP" in text and "Mann-Whitney" in text
    assert f"JUnit report written: {junit}" in out
    # A failure carries the figures, the reason and the contributors.
    junit = tmp_path / "fail.xml"
    code, _, _ = run(capsys, PATTERNS / "steps_base.pt.trace.json", PATTERNS / "steps_slower.pt.trace.json",
                     "--max", "E2E=+5%", "--junit", junit)
    failure = ET.parse(junit).getroot().find("testsuite/testcase/failure")
    assert code == 1 and failure is not None
    assert "E2E: 0.501 ms → 0.551 ms per step" in failure.get("message", "")
    assert "beyond step-to-step noise" in failure.get("message", "")
    assert "contributor: +0.05 ms/step (0.50 → 0.55 ms): GEMM kernels +0.05" in (failure.text or "")


def test_patterns_matching_nothing_are_skipped_not_passed(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    steps = PATTERNS / "steps_base.pt.trace.json"
    hostbound = PATTERNS / "step_hostbound.pt.trace.json"
    code, out, doc = gate_json(capsys, tmp_path, steps, steps, "--max", "op:aten::mmm=+0%",
                               "--max", "module:*Llama*=+0%", "--max", "op:aten::m?=+0%")
    by = checks(doc)
    assert code == 0 and by["op:aten::mmm"]["verdict"] == "skip" and by["module:*Llama*"]["verdict"] == "skip"
    assert "no kernel launched under a matching op in the base and comparison" in out
    assert by["op:aten::m?"]["verdict"] == "pass" and by["op:aten::m?"]["base"] > 0
    # An op only the comparison runs is checked: aten::to's pageable copy (2 µs) is new work.
    code, out, doc = gate_json(capsys, tmp_path, PATTERNS / "step_base.pt.trace.json", hostbound,
                               "--max", "op:aten::to=+0%")
    to = checks(doc)["op:aten::to"]
    assert code == 1 and to["verdict"] == "fail" and (to["base"], to["comparison"]) == (0, 2_000)


def test_markdown_makes_profile_text_inert(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from perfcmp_core.gate.report import _md

    assert _md("a|b <img src=x> `c`\nd") == "a\\|b &lt;img src=x&gt; \\`c\\` d"


# ------------------------------------------------------------------------------ bad input

BAD_GATES = {
    "not toml": ("[max\nE2E = '+5%'", "invalid TOML"),
    "unknown metric": ("[max]\nE2F = '+5%'", "unknown metric 'E2F'"),
    "unknown cause": ("[max]\n'idle.nap' = '+5%'", "the causes of idle are"),
    "unknown class": ("[max]\n'kernel:warp' = '+5%'", "unknown kernel class"),
    "bad limit": ("[max]\nE2E = 'five percent'", "cannot read limit"),
    "number limit": ("[max]\nE2E = 5", "must be a string"),
    "size on time": ("[max]\nE2E = '+1GiB'", "is not a time"),
    "time on size": ("[max]\n'Mem Usage' = '+2ms'", "is not a size"),
    "unknown table": ("[limits]\nE2E = '+5%'", "unknown table or key 'limits'"),
    "unknown setting": ("[gate]\nsigma = 3\n[max]\nE2E = '+5%'", "unknown setting [gate] sigma"),
    "bad alpha": ("[gate]\nalpha = 2\n[max]\nE2E = '+5%'", "alpha must be"),
    "bad warmup": ("[gate]\nwarmup_steps = -1\n[max]\nE2E = '+5%'", "warmup_steps must be"),
    "no checks": ("[gate]\nalpha = 0.1\n", "nothing to check"),
}


@pytest.mark.parametrize("case", sorted(BAD_GATES))
def test_bad_gate_files_exit_2_before_loading(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    text, problem = BAD_GATES[case]
    gate = tmp_path / "gate.toml"
    gate.write_text(text)
    # The profiles do not exist: a gate problem must be found before they are looked at.
    code, out, err = run(capsys, tmp_path / "missing_base.json", tmp_path / "missing_comp.json", "--gate", gate)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and problem in err and "Traceback" not in err
    if case != "no checks":
        assert str(gate) in err


@pytest.mark.parametrize("args, problem", [
    (["--max", "E2E"], "expected METRIC=LIMIT"),
    (["--max", "Latency=+5%"], "unknown metric 'Latency'"),
    (["--max", "E2E=+5 parsecs"], "unit 'parsecs' is not a time"),
    (["--max", "E2E=-5%"], "cannot read limit"),
    (["--max", "op:=+5%"], "needs a name or pattern"),
    ([], "nothing to check"),
    (["--max", "E2E=+5%", "--alpha", "1.5"], "--alpha must be between 0 and 1"),
    (["--max", "E2E=+5%", "--gate", "/nonexistent/gate.toml"], "cannot read configuration"),
])
def test_bad_usage_exits_2_before_loading(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          args: list[str], problem: str) -> None:
    code, out, err = run(capsys, tmp_path / "missing_base.json", tmp_path / "missing_comp.json", *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and problem in err


def test_missing_profile_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, tmp_path / "missing.json", PATTERNS / "steps_base.pt.trace.json", "--max", "E2E=+5%")
    assert code == 2 and err.count("\n") == 1 and "missing.json" in err
