"""Cross-export consistency (issue 12, deliver 3): the Text and Db exports of the real AlexNet run
(``../shared/data/npu-real-runs``, level 1, ranks 0 and 1) are two recordings of one workload.

What the device computes does not depend on the recording, so Computing Time and every row below
it, the kernel types (counts and totals), the compute time of every top-level operator and the
advisor's compute categories must agree within 3 % or 0.05 ms. What depends on the moment —
communication waits, host-to-device copies, free time, E2E — legitimately varies: those figures
are not forced, they are shown side by side in ``docs/model.md`` ("Two exports of one run"),
and :func:`test_varying_figures_are_documented` keeps that table true. Skips without ../shared.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare import STEPS, Context
from perfcmp_core.compare.comm_groups import wait_spans
from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import CompareOptions, LoadOptions

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "npu-real-runs"
MODEL_DOC = ROOT / "docs" / "model.md"
REL, ABS_MS = 0.03, 0.05


def agree(a_ms: float, b_ms: float) -> bool:
    return abs(a_ms - b_ms) <= max(REL * max(abs(a_ms), abs(b_ms)), ABS_MS)


def _load(rel: str) -> Profile:
    path = REAL / rel
    if not path.exists():
        pytest.skip(f"{path} not available")
    return load_profile(str(path), LoadOptions(use_cache=False, force=True))


@pytest.fixture(scope="module", params=[0, 1], ids=["rank0", "rank1"])
def pair(request: pytest.FixtureRequest) -> tuple[int, Profile, Profile]:
    rank = request.param
    return rank, _load(f"text/level1/rank{rank}_ascend_pt"), _load(f"db/level1/rank{rank}_ascend_pt")


def _overall(text: Profile, db: Profile) -> pd.DataFrame:
    step = next(s for s in STEPS if s.name == "OverallMetrics")
    outcome = step.run(Context(text, db, CompareOptions()))
    assert not isinstance(outcome, str), outcome
    df = outcome[0].data
    return df.assign(label=df["index"].astype(str).str.strip())


def test_computing_time_and_children_agree(pair: tuple[int, Profile, Profile]) -> None:
    _, text, db = pair
    df = _overall(text, db)
    labels = df["label"].tolist()
    rows = df.iloc[labels.index("Computing Time"):labels.index("Uncovered Communication Time")]
    assert len(rows) >= 12  # Computing, Conv fwd/bwd (+Cube/Vector), Matmul (+2), Vector (+2), SDMA, …
    for r in rows.itertuples():
        assert agree(r.base_ms, r.comp_ms), f"{r.label}: Text {r.base_ms:.6f} ms, Db {r.comp_ms:.6f} ms"
        if r.base_number != "/":  # the same kernels ran: counts are equal, not merely close
            assert r.base_number == r.comp_number, r.label


def test_kernel_types_agree(pair: tuple[int, Profile, Profile]) -> None:
    _, text, db = pair

    def types(p: Profile) -> pd.DataFrame:
        return p.op_statistic.groupby(["op_type", "core_type"])[["count", "total_us"]].sum()
    t, d = types(text), types(db)
    assert t.index.equals(d.index) and len(t) >= 30
    assert (t["count"] == d["count"]).all()
    assert sum(t["count"]) == 187  # every compute task of the step (185 classified + 2 DSA), both exports
    for key in t.index:
        assert agree(t.loc[key, "total_us"] / 1e3, d.loc[key, "total_us"] / 1e3), key


def top_level_times(p: Profile) -> pd.DataFrame:
    """Device ms per top-level operator name (a step marker's children and every other root op)
    and kind of device work — compute (kernels with compute details), comm (collectives), copy
    (copies and other tasks) — derived from op_row and the op nesting alone."""
    ops, k = p.ops, p.kernels
    parent, step = ops["parent"].to_numpy(), ops["is_step"].to_numpy()
    is_top = ((parent < 0) & ~step) | ((parent >= 0) & step[np.clip(parent, 0, None)])
    top = np.where(is_top, np.arange(len(ops)), -1)
    row = parent.copy()
    while ((top < 0) & (row >= 0)).any():
        up = (top < 0) & (row >= 0)
        top[up] = np.where(is_top[row[up]], row[up], -1)
        row[up] = parent[row[up]]
    k = k[(k["op_row"] >= 0) & k["in_trace"]]
    owner = top[k["op_row"].to_numpy()]
    kind = np.where(k["is_comm"], "comm", np.where(k["has_details"], "compute", "copy"))
    df = pd.DataFrame({"name": ops["name"].to_numpy()[np.clip(owner, 0, None)], "kind": kind,
                       "ms": k["dur_ns"].to_numpy() / 1e6})[owner >= 0]
    out = df.pivot_table(index="name", columns="kind", values="ms", aggfunc="sum", fill_value=0.0)
    return out.reindex(columns=["compute", "comm", "copy"], fill_value=0.0)


def test_top_level_operator_compute_agrees(pair: tuple[int, Profile, Profile]) -> None:
    _, text, db = pair
    t, d = top_level_times(text), top_level_times(db)
    assert t.index.equals(d.index) and len(t) >= 20
    for name in t.index:
        assert agree(t.loc[name, "compute"], d.loc[name, "compute"]), name
    # The tool's own operator sheet: every row's Text–Db difference is what the recordings may
    # vary by (communication waits, host copies), up to the compute tolerance.
    from perfcmp_core.compare.operators import compare_operators
    _, tables = compare_operators(text, db, CompareOptions(disable_module=True))
    sheet = tables[0].data.set_index("name")
    varying = (t[["comm", "copy"]] - d[["comm", "copy"]]).abs().sum(axis=1)
    for name, r in sheet.iterrows():
        slack = varying.get(name, 0.0) + max(REL * max(r["base_ms"], r["comp_ms"]), ABS_MS)
        assert abs(r["base_ms"] - r["comp_ms"]) <= slack, name


def _advisor_times(path: Path, tmp: Path) -> dict[str, float]:
    """Per-step ms of each advisor category (stage "All"), through the command line."""
    out = tmp / f"{path.parent.parent.name}_{path.name}.json"
    exe = Path(sys.executable).with_name("perfcmp-tui")
    subprocess.run([str(exe), "advise", str(path), "--json", str(out), "--no-cache", "--force"],
                   check=True, capture_output=True)
    rows = json.loads(out.read_text())["summary"]
    return {r["category"]: r["time_ns"] / 1e6 for r in rows if r["stage"] == "All" and not r["is_total"]}


def copy_ms(p: Profile) -> float:
    """Device ms of the copies (tasks without compute details that are neither collectives nor
    stream waits): the advisor files them under Other, and their time depends on the recording."""
    k = p.kernels
    sync = k["task_type"].str.match(r"EVENT_(WAIT|RECORD)|PLACE_HOLDER|PROFILING_")
    copies = k["in_trace"] & ~k["is_comm"] & ~k["has_details"] & ~sync
    return float(k.loc[copies, "dur_ns"].sum()) / 1e6


COMPUTE_CATEGORIES = ("FA", "MatMul", "Vector", "Other")


def test_advisor_compute_categories_agree(pair: tuple[int, Profile, Profile], tmp_path: Path) -> None:
    """FA, MatMul and Vector agree; Other agrees once the copy-time difference of the two recordings
    is taken out (rank 1: the input batch copy took 1.27 ms in the Text run, 0.75 ms in the Db
    run); so do the shares of the compute time, within 3 percentage points."""
    rank, text_p, db_p = pair
    text, db = (_advisor_times(REAL / f"{e}/level1/rank{rank}_ascend_pt", tmp_path) for e in ("text", "db"))
    for cat in ("FA", "MatMul", "Vector"):
        assert agree(text[cat], db[cat]), f"{cat}: Text {text[cat]:.3f} ms, Db {db[cat]:.3f} ms"
    db = {**db, "Other": db["Other"] + copy_ms(text_p) - copy_ms(db_p)}
    assert agree(text["Other"], db["Other"]), f"Other: Text {text['Other']:.3f} ms, Db {db['Other']:.3f} ms"
    t_total, d_total = (sum(x[c] for c in COMPUTE_CATEGORIES) for x in (text, db))
    for cat in COMPUTE_CATEGORIES:
        assert abs(text[cat] / t_total - db[cat] / d_total) <= REL, cat
    assert text["Comm"] > 0 and db["Comm"] > 0  # the collectives are seen in both exports


# ------------------------------------------------------------------------ what may vary, documented


def varying_figures(text: Profile, db: Profile) -> dict[str, tuple[float, float]]:
    """(Text, Db) ms of what legitimately differs between two recordings of the run."""
    df = _overall(text, db).drop_duplicates("label").set_index("label")
    out = {label: (float(df.loc[label, "base_ms"]), float(df.loc[label, "comp_ms"]))
           for label in ("Uncovered Communication Time", "Free Time", "E2E Time")}
    out["HCCL all-reduce (4 ops)"] = (text.comm_ops["dur_ns"].sum() / 1e6, db.comm_ops["dur_ns"].sum() / 1e6)
    # the profiler's communication plane, whole ops (tests/test_comm_wait_real.py: the profiler's own)
    out["communication wait (Notify_Wait)"] = (wait_spans(text).length / 1e6, wait_spans(db).length / 1e6)
    t, d = top_level_times(text), top_level_times(db)
    out["input batch copy (aten::to)"] = (t.loc["aten::to", "copy"], d.loc["aten::to", "copy"])
    return out


def _doc_table() -> dict[tuple[int, str], tuple[float, float]]:
    text = MODEL_DOC.read_text(encoding="utf-8")
    block = text.split("<!-- cross-export:begin -->")[1].split("<!-- cross-export:end -->")[0]
    rows = {}
    for line in block.splitlines():
        m = re.match(r"\|\s*(\d)\s*\|\s*(.+?)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|", line)
        if m:
            rows[(int(m[1]), m[2])] = (float(m[3]), float(m[4]))
    return rows


def test_varying_figures_are_documented(pair: tuple[int, Profile, Profile]) -> None:
    """docs/model.md shows these figures side by side; they are measured, not asserted equal."""
    rank, text, db = pair
    doc = _doc_table()
    for label, (t_ms, d_ms) in varying_figures(text, db).items():
        assert doc[(rank, label)] == pytest.approx((t_ms, d_ms), abs=0.006), (rank, label)
