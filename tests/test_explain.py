"""The step explanation: every nanosecond of every step in exactly one part, with the right cause.

Hand-computed on the host-bound pattern pair (``fixtures/gpu_patterns/step_*.pt.trace.json``,
written by ``fixtures/gen/gpu_patterns.py``; times in µs from the step's start):

Base (one 800 µs step): ``aten::linear`` [20, 120) launches at 100 → GEMM [115, 415); relu
launched at 160 → [415, 515); add at 210 → [520, 620) (queued: 5 µs device-side gap); mul at 370 →
[620, 720); the host's last op ends at 390. Idle 200 = before the first op [0, 20) 20 + dispatch of
``aten::linear`` [20, 115) 95 + queued gap 5 + after the last op [720, 800) 80.

Comparison (one 1500 µs step): frame ``load_batch`` [2, 298); ``aten::to`` [300, 360) with
``cudaMemcpyAsync`` [310, 330) → H2D pageable copy [332, 334) and ``cudaStreamSynchronize``
[335, 345); ``aten::linear`` [380, 480) → GEMM [475, 775); relu → [775, 875); ``aten::item``
[560, 900) with a D2H copy [875, 877) and ``cudaStreamSynchronize`` [580, 880); add [905, 945)
launched at 930 → [945, 1045); mul [1050, 1200) launched at 1180 → [1195, 1295). Nothing runs in
[0, 332), [334, 475), [877, 945), [1045, 1195), [1295, 1500):

* [0, 310) the host was loading: frame 296, gap before the first op 4 (0–2, 298–300), then in the
  copy op until its launch and the launch itself: copy 10 + 22; the device copy 2;
* [334, 475): the rest of ``aten::to`` 26 (copy), a gap between ops 20, ``aten::linear`` 80 + its
  launch 15 (launch-bound 95);
* [877, 945): still in ``aten::item`` 23 (sync), gap 5, ``aten::add`` 25 + launch 15;
* [1045, 1195): gap 5, ``aten::mul`` 130 + launch 15; [1295, 1500): after the last op 205;
* the sync in ``aten::item`` blocked [580, 880) while the device ran for 297 of it: the next 297 µs
  of waiting-for-host time (5 + 25 + 15 + 5 + 130 + 15 = 195, then [1295, 1397)) are its cost.

So sync 320, load_batch 296, before the first op 4, between ops 20, after the last op 103,
``aten::linear`` 95, H2D copy 60, D2H copy 2: 900 µs idle + 600 compute = 1500.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

from perfcmp_core.compare.device_sets import device_sets
from perfcmp_core.compare.overall_metrics import overall_metrics
from perfcmp_core.compare.masks import DEFAULT_MASKS
from perfcmp_core.explain import COMMUNICATION, COMPUTE, IDLE, explain_profile
from perfcmp_core.explain.explanation import feeding
from perfcmp_core.explain.table import step_time_table, steps_table, why
from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions
from perfcmp_core.timeline import Spans

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
US = 1_000


def load(path: Path) -> Profile:
    return load_profile(str(path), LoadOptions(use_cache=False))


def by_label(path: Path) -> dict[tuple[str, str, str], int]:
    """(part, cause, label) → µs over the whole profile (the pattern traces have one step)."""
    parts = explain_profile(load(path)).parts()
    return {(r.part, r.cause, r.label): int(r.ns) // US for r in parts.itertuples()}


def test_base_step_by_hand() -> None:
    assert by_label(FIX / "gpu_patterns" / "step_base.pt.trace.json") == {
        (COMPUTE, "GEMM", "gemm_kernel"): 300,
        (COMPUTE, "element-wise", "relu_kernel"): 100,
        (COMPUTE, "element-wise", "add_kernel"): 100,
        (COMPUTE, "element-wise", "mul_kernel"): 100,
        (IDLE, "host", "host gap before the step's first op"): 20,
        (IDLE, "launch", "aten::linear"): 95,
        (IDLE, "device", "gap between queued kernels (device-side)"): 5,
        (IDLE, "host", "host gap after the step's last op"): 80,
    }


def test_hostbound_step_by_hand() -> None:
    got = by_label(FIX / "gpu_patterns" / "step_hostbound.pt.trace.json")
    idle = {k[1:]: v for k, v in got.items() if k[0] == IDLE}
    assert idle == {
        ("sync", "aten::item"): 320,
        ("host", "train.py(12): load_batch"): 296,
        ("host", "host gap before the step's first op"): 4,
        ("host", "host gap between ops"): 20,
        ("host", "host gap after the step's last op"): 103,
        ("launch", "aten::linear"): 95,
        ("copy", "H2D copy (pageable) in aten::to"): 60,
        ("copy", "D2H copy (pinned) in aten::item"): 2,
    }
    assert sum(v for k, v in got.items() if k[0] == COMPUTE) == 600


def test_pattern_pair_table_and_sentence() -> None:
    base = explain_profile(load(FIX / "gpu_patterns" / "step_base.pt.trace.json"))
    comp = explain_profile(load(FIX / "gpu_patterns" / "step_hostbound.pt.trace.json"))
    assert why(base, comp) == ("+0.70 ms/step (0.80 → 1.50 ms): device sync in aten::item +0.32 · idle while "
                               "the host ran train.py(12): load_batch +0.30 · H2D copy (pageable) in aten::to "
                               "+0.06 · host gap after the step's last op +0.02")  # two labels a cause at most
    table = step_time_table(base, comp)
    rows = table.data.set_index("index")
    assert rows.loc["Step time", ["base_ms", "comp_ms"]].tolist() == [0.8, 1.5]
    assert rows.loc["Idle (free)", "diff_ms"] == pytest.approx(0.7)
    assert rows.loc["synchronisation (host waited for the device)", "comp_ms"] == pytest.approx(0.32)
    assert steps_table(base, comp) is None  # one step a side: the waterfall is that step


# -- exactness on every fixture and every real profile ---------------------------------------------

def _profiles() -> list[Path]:
    fixtures = [p for d in ("gpu", "gpu_patterns", "gpu_infer") for p in sorted((FIX / d).glob("*.json"))
                if p.name != "empty.pt.trace.json"]
    fixtures += [p for d in ("npu_text", "npu_db", "npu_ms", "npu_infer", "npu_db_patterns")
                 for p in sorted((FIX / d).iterdir()) if p.is_dir()]
    real = sorted(DATA.glob("gpu-real/**/*.json.gz")) + sorted(DATA.glob("npu-real-runs/*/*/rank*_ascend_pt"))
    return fixtures + real


@pytest.mark.parametrize("path", _profiles(), ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_nanosecond_in_exactly_one_part(path: Path) -> None:
    """Per window the pieces are disjoint, lie inside it and add up to its length; compute and
    communication are exactly the OverallMetrics busy sets inside the windows; a profile without
    steps is one window equal to its E2E span, so its parts are OverallMetrics' own figures."""
    profile = load(path)
    ex = explain_profile(profile)
    w = ex.windows
    assert (w["end_ns"].to_numpy()[:-1] <= w["start_ns"].to_numpy()[1:]).all()
    iv = ex.intervals.sort_values("start_ns", kind="stable")
    s, e = iv["start_ns"].to_numpy(), iv["end_ns"].to_numpy()
    assert (e > s).all() and (s[1:] >= e[:-1]).all(), "pieces overlap"
    lo = w.set_index("step")["start_ns"].reindex(iv["step"]).to_numpy()
    hi = w.set_index("step")["end_ns"].reindex(iv["step"]).to_numpy()
    assert (s >= lo).all() and (e <= hi).all(), "a piece lies outside its step"
    per_step = ex.parts().groupby("step")["ns"].sum()
    assert per_step.reindex(w["step"]).fillna(0).astype("int64").tolist() == (w["end_ns"] - w["start_ns"]).tolist()

    sets = device_sets(profile)
    windows = Spans.of(w["start_ns"], w["end_ns"])
    part = ex.parts().groupby("part")["ns"].sum()
    assert int(part.get(COMPUTE, 0)) == (sets.compute & windows).length
    assert int(part.get(COMMUNICATION, 0)) == (sets.uncovered & windows).length
    if not ex.has_steps and ex.step_count:
        m = overall_metrics(profile, DEFAULT_MASKS)
        assert int(w["end_ns"].iloc[0] - w["start_ns"].iloc[0]) == m.e2e_ns
        assert (int(part.get(COMPUTE, 0)), int(part.get(COMMUNICATION, 0)), int(part.get(IDLE, 0))) == \
               (m.compute_ns, m.uncovered_ns, m.e2e_ns - m.compute_ns - m.uncovered_ns)


# -- ground truth: the H200 host-bound pairs -------------------------------------------------------

H200 = DATA / "gpu-real" / "h200"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rb") as f:
        return orjson.loads(f.read())["traceEvents"]


def _trace_truth(path: Path, stacks: bool) -> dict[str, float]:
    """Per-step means (ms) read straight from the raw trace, not through the loader: the
    ``.item()`` syncs, the batch copy (``aten::to`` around a pageable H2D memcpy), the data
    loading (the ``load_next_batch`` frame; without stacks, the host time from the step's start
    to its first op)."""
    ev = [e for e in _events(path) if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    ops = [e for e in ev if e.get("cat") == "cpu_op"]

    def inside(e: dict, outer: dict) -> bool:
        return outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] and e["tid"] == outer["tid"]

    items = [o for o in ops if o["name"] == "aten::item"]
    syncs = [e for e in ev if e["name"] == "cudaStreamSynchronize"]
    sync = sum(s["dur"] for s in syncs if any(inside(s, o) for o in items))
    memcpy = [e for e in ev if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    copies = [o for o in ops if o["name"] == "aten::to"
              and any(o["ts"] <= m["ts"] <= o["ts"] + o["dur"] + 100 for m in memcpy)]
    copy = sum(o["dur"] for o in copies)
    if stacks:  # the base has no such function: 0
        loading = sum(e["dur"] for e in ev if e.get("cat") == "python_function" and e["name"].endswith("load_next_batch"))
    else:
        loading = 0.0
        for lo, hi in steps:
            first = min(o["ts"] for o in ops if lo <= o["ts"] < hi)
            loading += first - lo
    n = len(steps)
    return {"sync": sync / n / 1e3, "copy": copy / n / 1e3, "loading": loading / n / 1e3}


def _label_ms(path: Path, part: str, cause: str, label: str) -> float:
    ex = explain_profile(load(path))
    p = ex.parts()
    sel = (p["part"] == part) & (p["cause"] == cause) & p["label"].str.contains(label, regex=False)
    return float(p.loc[sel, "ns"].sum()) / ex.step_count / 1e6


@pytest.mark.skipif(not H200.is_dir(), reason="../shared/data absent")
@pytest.mark.parametrize("suffix", ["", "_minimal"])
def test_hostbound_pair_names_the_causes_within_20_percent(suffix: str) -> None:
    base = H200 / f"gpt2_train_bf16_base{suffix}.pt.trace.json.gz"
    comp = H200 / f"gpt2_train_bf16_hostbound{suffix}.pt.trace.json.gz"
    truth_b, truth_c = _trace_truth(base, suffix == ""), _trace_truth(comp, suffix == "")
    want = {k: truth_c[k] - truth_b[k] for k in truth_c}
    loading = "load_next_batch" if suffix == "" else "host gap before the step's first op"
    got = {
        "sync": _label_ms(comp, IDLE, "sync", "aten::item") - _label_ms(base, IDLE, "sync", "aten::item"),
        "copy": _label_ms(comp, IDLE, "copy", "H2D copy (pageable) in aten::to")
        - _label_ms(base, IDLE, "copy", "H2D copy (pageable) in aten::to"),
        "loading": _label_ms(comp, IDLE, "host", loading) - _label_ms(base, IDLE, "host", loading),
    }
    for cause, expected in want.items():
        assert expected > 0, cause
        assert got[cause] == pytest.approx(expected, rel=0.2), (cause, got, want)
    sentence = why(explain_profile(load(base)), explain_profile(load(comp)))
    for words in ("device sync in aten::item", "H2D copy (pageable) in aten::to",
                  "load_next_batch" if suffix == "" else "host gap before the step's first op"):
        assert words in sentence, sentence


# -- per-step normalisation -------------------------------------------------------------------------

def test_headline_figures_are_per_step_means_when_step_counts_differ() -> None:
    """3 steps against 1: every time of the summary is its total divided by the side's steps, the
    counts are dropped, the OverallMetrics sheet keeps its totals and says so, and the report's
    title names the step counts."""
    from perfcmp_core.compare import Context, STEPS, summary_step
    from perfcmp_core.options import CompareOptions
    from perfcmp_core.report import summary_table

    base, comp = load(FIX / "gpu" / "base.pt.trace.json"), load(FIX / "gpu_patterns" / "step_base.pt.trace.json")
    assert (len(base.steps), len(comp.steps)) == (3, 1)
    ctx = Context(base, comp, CompareOptions())
    figures, _ = summary_step(ctx)
    b, c = ctx.side_metrics()
    e2e = next(v for k, v in figures.items() if k.startswith("E2E Time"))
    assert e2e["base"] == pytest.approx(b.e2e_ns / 3 / 1e9) and e2e["comparison"] == pytest.approx(c.e2e_ns / 1e9)
    assert figures["Computing Time"]["base"] == pytest.approx(b.compute_ns / 3 / 1e9)
    assert figures["Cube Time(Num)"]["base_count"] is None
    assert figures[""]["per_step"] and (figures[""]["base_steps"], figures[""]["comparison_steps"]) == (3, 1)
    assert "per-step means: base 3 steps, comparison 1 step" in summary_table(figures, 200)
    overall = next(s for s in STEPS if s.name == "OverallMetrics").run(ctx)[0]
    assert overall.data["base_ms"].iloc[-1] == pytest.approx(b.e2e_ns / 1e6)  # the sheet: totals
    assert overall.notes[0].startswith("totals over different numbers of steps (base 3 steps, comparison 1 step)")


def test_same_step_counts_keep_totals() -> None:
    from perfcmp_core.compare import Context, summary_step
    from perfcmp_core.options import CompareOptions

    base, comp = load(FIX / "gpu" / "base.pt.trace.json"), load(FIX / "gpu" / "comp.pt.trace.json")
    ctx = Context(base, comp, CompareOptions())
    figures, _ = summary_step(ctx)
    assert not figures[""].get("per_step")
    assert figures["Computing Time"]["base"] == pytest.approx(ctx.side_metrics()[0].compute_ns / 1e9)


# -- where a cause happened ------------------------------------------------------------------------

def test_where_table_by_hand() -> None:
    """The pattern pair's sync: 320 µs in 8 pieces from 877 µs into the step (the end of the D2H
    copy); the data-loading frame from 2 µs on (module docstring)."""
    from perfcmp_core.explain.table import where_table

    base = explain_profile(load(FIX / "gpu_patterns" / "step_base.pt.trace.json"))
    comp = explain_profile(load(FIX / "gpu_patterns" / "step_hostbound.pt.trace.json"))
    t = where_table(base, comp).data.set_index(["_cause", "label"])
    sync = t.loc[("idle: sync", "aten::item")]
    # [877, 900) in aten::item, then the drained queue: [900, 905) [905, 930) [930, 945)
    # [1045, 1050) [1050, 1180) [1180, 1195) [1295, 1397)
    assert (sync["comp_ms"], sync["comp_n"], sync["comp_at"], sync["base_n"]) == (0.32, 8, 0.877, 0)
    load_frame = t.loc[("idle: host", "train.py(12): load_batch")]
    assert (load_frame["comp_ms"], load_frame["comp_at"]) == (0.296, 0.002)
    assert sync["step"] == "1" and t["diff_ms"].iloc[0] == pytest.approx(0.32)  # largest change first


def test_launchbound_stretch_by_hand() -> None:
    """Three 5 µs kernels 40 µs apart, each launched at the end of a 30 µs op: the device waits
    for the host's dispatch (fixtures/README.md)."""
    path = FIX / "gpu_patterns" / "step_launchbound.pt.trace.json"
    assert by_label(path) == {
        (COMPUTE, "element-wise", "add_kernel"): 5, (COMPUTE, "element-wise", "mul_kernel"): 5,
        (COMPUTE, "element-wise", "sub_kernel"): 5,
        (IDLE, "host", "host gap before the step's first op"): 10,
        (IDLE, "launch", "aten::add"): 30, (IDLE, "launch", "aten::mul"): 30, (IDLE, "launch", "aten::sub"): 30,
        (IDLE, "host", "host gap between ops"): 10,
        (IDLE, "host", "host gap after the step's last op"): 75,
    }
    ex = explain_profile(load(path))
    assert (ex.lag_ns, ex.queue_depth) == (0.0, 0.0)  # started at once, nothing else queued
    device_bound = explain_profile(load(FIX / "gpu_patterns" / "step_base.pt.trace.json"))
    # the base pattern: the GEMM starts 5 µs after its launch, relu, add and mul wait behind it
    # (lags 245, 300, 240 µs; 0, 0, 1 and 2 kernels queued ahead of them at launch)
    assert device_bound.lag_ns == 242_500 and device_bound.queue_depth == 0.5
    # the verdict the notes and `info` print: no lag, nothing queued → the device waits; a
    # quarter-millisecond lag → the host was ahead even with half a kernel queued on average
    assert feeding(ex.lag_ns, ex.queue_depth) == "the device waits for the host"
    assert feeding(device_bound.lag_ns, device_bound.queue_depth) == "the host runs ahead of the device"
    assert feeding(20_000, 1) == "the host just keeps up"


def test_npu_cann_sync_names_the_asking_op() -> None:
    """fixtures/gen/npu_db_patterns.py: the device runs out of work at 1530 µs; the main thread
    is inside aten::item 1540–1900 µs, blocked in the CANN call aclrtSynchronizeStreamWithTimeout
    (1550–1880), which the Db keeps in CANN_API, not among the ops; the step ends at 2000 µs."""
    parts = by_label(FIX / "npu_db_patterns" / "level1_ascend_pt")
    assert parts[(IDLE, "sync", "aten::item")] == 1900 - 1540
    assert parts[(IDLE, "host", "host gap after the step's last op")] == 2000 - 1900


@pytest.mark.skipif(not (DATA / "npu-real-runs").is_dir(), reason="../shared/data absent")
def test_npu_sync_text_and_db_agree() -> None:
    """One real job exported twice: both exports record the same eight CANN sync calls on the
    main thread (seven aclrtSynchronizeStreamWithTimeout, one aclrtSynchronizeDevice) and the
    idle time they explain is the device drained by aten::item on both, within recording
    variance (the Text export's run and the Db's are separate runs of the job)."""
    runs = DATA / "npu-real-runs"
    text, db = (load(runs / kind / "level1" / "rank0_ascend_pt") for kind in ("text", "db"))
    for p in (text, db):
        assert p.syncs["name"].value_counts().to_dict() == {"aclrtSynchronizeStreamWithTimeout": 7,
                                                           "aclrtSynchronizeDevice": 1}
        main = p.ops.loc[p.ops["is_step"], "tid"].iloc[0]
        assert (p.syncs["tid"] == main).all()
    sync = []
    for p in (text, db):
        parts = explain_profile(p).parts()
        idle_sync = parts[(parts["part"] == IDLE) & (parts["cause"] == "sync")]
        assert idle_sync["label"].tolist() == ["aten::item"]
        sync.append(int(idle_sync["ns"].sum()))
    assert sync[0] > 1_000_000 and abs(sync[0] - sync[1]) <= 0.2 * max(sync)
