"""The pairing name (compare/names.py): MindSpore ``-op<N>`` suffixes and ``--op-name-map``, the
same key for operators, memory, modules and API (issue 12, defect 9).

MindSpore numbers the nodes of a compiled graph, and the numbers change from run to run
(``…/AllReduce-op230`` vs ``…/AllReduce-op231``). The MindSpore fixture pair reproduces that: the
comparison run's graph holds four more nodes, so the same launch has another name in each run
(fixtures/README.md). The reference pairs by the full name (tests/golden/npu_ms.json); we pair on
the name without the suffix and show the full names wherever a row is one op.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from perfcmp_core.compare.api import compare_api
from perfcmp_core.compare.memory import compare_memory
from perfcmp_core.compare.modules import compare_modules
from perfcmp_core.compare.names import pairing_names, strip_instance
from perfcmp_core.compare.operators import compare_operators, match_operators
from perfcmp_core.compare.result import Table
from perfcmp_core.load import load_profile
from perfcmp_core.options import CompareOptions

from test_modules import SYNTH_BASE, SYNTH_COMP, build

ROOT = Path(__file__).resolve().parents[1]
MS = ROOT / "fixtures" / "npu_ms"
SUFFIX = re.compile(r"-op\d+$")


def test_suffix_is_dropped_only_at_the_end() -> None:
    names = pd.Series(["Default/net/AllReduce-op230", "Default/net/AllReduce-op231", "a-op1/b", "aten::mm",
                       "MatMul-op", "x-op12-op3"], index=[5, 6, 7, 8, 9, 10])
    key = pairing_names(names, CompareOptions())
    assert key.tolist() == ["Default/net/AllReduce", "Default/net/AllReduce", "a-op1/b", "aten::mm",
                            "MatMul-op", "x-op12"]
    assert key.index.tolist() == [5, 6, 7, 8, 9, 10]
    assert strip_instance(names).tolist() == key.tolist()
    assert pairing_names(pd.Series([], dtype=object), CompareOptions()).tolist() == []


def test_name_map_full_name_first_then_the_name_without_suffix() -> None:
    names = pd.Series(["SGD.step", "Net/AllReduce-op3", "Net/AllReduce-op4", "Net/Cast-op9", "aten::mm"])
    opts = CompareOptions(op_name_map=(("SGD.step", "FusedSGD.step"), ("Net/AllReduce", "Net/AR"),
                                       ("Net/AllReduce-op4", "Net/Other-op1"), ("aten::bmm", "aten::mm")))
    assert pairing_names(names, opts).tolist() == ["FusedSGD.step", "Net/AR", "Net/Other", "Net/Cast",
                                                   "aten::mm"]


@pytest.fixture(scope="module")
def mindspore() -> tuple:
    base, comp = load_profile(str(MS / "base_ascend_ms")), load_profile(str(MS / "comp_ascend_ms"))
    return base, comp


def test_mindspore_fixture_names_differ_between_the_runs(mindspore: tuple) -> None:
    base, comp = mindspore
    launches = [set(p.ops["name"][~p.ops["is_step"]]) for p in (base, comp)]
    assert all(SUFFIX.search(n) for side in launches for n in side)
    # Only 3 of 85 launch names recur in the other run (each naming a different op there); by
    # the name without the suffix, every launch of the base has a partner but the designed
    # differences (the comparison's extra Cast, the base's dropout).
    assert len(launches[0] & launches[1]) == 3 and len(launches[0]) == len(launches[1]) == 85
    keys = [set(strip_instance(pd.Series(sorted(s))).tolist()) for s in launches]
    assert sorted(k.rsplit("/", 1)[-1] for k in keys[0] - keys[1]) == ["DropOutDoMaskV3", "DropOutDoMaskV3"]
    assert sorted(k.rsplit("/", 1)[-1] for k in keys[1] - keys[0]) == ["Cast", "Cast"]


def test_mindspore_operators_pair_across_runs(mindspore: tuple) -> None:
    base, comp = mindspore
    opts = CompareOptions()
    pairs = match_operators(base, comp, opts).pairs
    one_sided = pairs[(pairs["base_row"] < 0) | (pairs["comp_row"] < 0)]
    # 3 steps × (2 dropout launches only in the base + 2 Cast launches only in the comparison).
    assert len(pairs) == 261 and len(one_sided) == 12
    lone = one_sided["base_name"].where(one_sided["base_row"] >= 0, one_sided["comp_name"])
    assert set(strip_instance(lone).str.rsplit("/", n=1).str[-1]) == {"DropOutDoMaskV3", "Cast"}
    both = pairs[(pairs["base_row"] >= 0) & (pairs["comp_row"] >= 0)]
    # Paired rows keep both full names; they differ, the keys agree.
    assert (both["base_name"] != both["comp_name"]).all()
    assert (strip_instance(both["base_name"]).to_numpy() == strip_instance(both["comp_name"]).to_numpy()).all()
    stat, detail = compare_operators(base, comp, opts)[1]
    assert len(stat.data) == 68 and not stat.data["name"].str.contains(SUFFIX).any()
    allreduce = stat.data[stat.data["name"].str.endswith("ddp-bucket1/AllReduce")].iloc[0]
    # The injected +90 µs on the first all-reduce bucket, per step (3 steps).
    assert (allreduce["base_num"], allreduce["comp_num"]) == (3, 3)
    assert allreduce["diff"] == pytest.approx(0.27, abs=1e-3)
    assert detail.data["base_name"].str.contains(SUFFIX).sum() == 249 + 6


def test_mindspore_reference_pairs_almost_nothing() -> None:
    """Evidence for docs/differences.md: on the same pair the reference pairs 9 of its 501
    OperatorCompare rows (the 3 recurring names × 3 steps, each joining two different ops)."""
    sheets = json.loads((ROOT / "tests" / "golden" / "npu_ms.json").read_text())["sheets"]
    rows = sheets["OperatorCompare"]["rows"]
    assert len(rows) == 501 and sum(1 for r in rows if r[1] and r[6]) == 9
    api = sheets["ApiCompare"]["rows"]
    assert len(api) == 167 and sum(1 for r in api if r[5] and r[9]) == 3


def test_mindspore_memory_and_api_use_the_same_key(mindspore: tuple) -> None:
    base, comp = mindspore
    opts = CompareOptions()
    mem_stat = compare_memory(base, comp, opts, match_operators(base, comp, opts))[0]
    assert not mem_stat.data["name"].str.contains(SUFFIX).any()
    paired = mem_stat.data[(mem_stat.data["base_num"] > 0) & (mem_stat.data["comp_num"] > 0)]
    assert len(mem_stat.data) == 68 and len(paired) == 64
    api = compare_api(base, comp, opts).data
    assert len(api) == 68 and not api["name"].str.contains(SUFFIX).any()
    both = api[(api["base_calls"] > 0) & (api["comp_calls"] > 0)]
    # Every paired name launches as often in both runs (once per step, or per scope-sharing op).
    assert len(both) == 64 and (both["base_calls"] == both["comp_calls"]).all()
    assert (both["base_calls"] % 3 == 0).all()


def _suffixed(spec: dict, n: int) -> dict:
    """``spec`` with MindSpore-style graph-node numbers on its aten ops (``aten::relu-op<n+i>``)."""
    ops = [(f"{r[0]}-op{n + i}" if r[0].startswith("aten::") else r[0], *r[1:]) for i, r in enumerate(spec["ops"])]
    return {**spec, "ops": ops}


def test_modules_pair_ops_by_the_same_key() -> None:
    plain, _ = compare_modules(build(SYNTH_BASE), build(SYNTH_COMP), CompareOptions())
    numbered, _ = compare_modules(build(_suffixed(SYNTH_BASE, 100)), build(_suffixed(SYNTH_COMP, 230)),
                                  CompareOptions())
    assert plain is not None and numbered is not None
    # The statistic is keyed by the name without the suffix: identical to the unnumbered run.
    def full(t: Table) -> pd.DataFrame:  # with the kernel lists, as the workbook writes them
        return t.data.assign(**{k: t.values(k) for k in t.children})

    pd.testing.assert_frame_equal(full(numbered.statistic), full(plain.statistic))
    # The detail rows pair the same ops, shown with their full, different names.
    a, b = full(plain.detail), full(numbered.detail)
    assert len(a) == len(b)
    for col in ("base_op", "comp_op"):
        assert (strip_instance(b[col]) == a[col]).all()
    ops = b[~b["_is_total"] & (b["base_op"] != "") & (b["comp_op"] != "")]
    assert len(ops) and (ops["base_op"] != ops["comp_op"]).all()
    cols = [c for c in a.columns if c not in ("base_op", "comp_op")]
    pd.testing.assert_frame_equal(b[cols], a[cols])


def test_name_map_reaches_every_comparison(mindspore: tuple) -> None:
    """One function, one behaviour: a map entry written without the suffix joins the base's layer-1
    dropout launches (gone in the comparison) to the comparison's extra Cast launches in the
    operator statistic and in API."""
    base, comp = mindspore
    scope = "Kernel::KernelLaunch::Default/network-WithLossCell/_backbone-TransformerLM/layers-CellList/"
    drop = scope + "1-TransformerLayer/attention-Attention/dropout/DropOutDoMaskV3"
    cast = scope + "0-TransformerLayer/mlp-MLP/Cast/Cast"
    opts = replace(CompareOptions(), op_name_map=((drop, cast),))
    for table, num in ((compare_operators(base, comp, opts)[1][0].data, "num"),
                       (compare_api(base, comp, opts).data, "calls")):
        assert (table["name"] == drop).sum() == 0
        row = table[table["name"] == cast].iloc[0]
        assert (row[f"base_{num}"], row[f"comp_{num}"]) == (3, 3)
