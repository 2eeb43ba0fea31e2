"""The Step column of the matched-pair tables (OperatorCompare, ModuleCompare, MemoryCompare):
each row's step,
derived here from the loaded profiles' ProfilerStep windows; a screen (and --json) column only,
so the workbook keeps the reference's columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions

from tui_support import PAIRS, ROOT, tables


def profiles(pair: str) -> tuple[Profile, Profile]:
    base, comp, _ = PAIRS[pair]
    opts = LoadOptions(use_cache=False)
    return load_profile(str(ROOT / base), opts), load_profile(str(ROOT / comp), opts)


def step_by_hand(profile: Profile, start_ns: int) -> int:
    """The N of the ``ProfilerStep#N`` op whose span holds ``start_ns`` (-1: none)."""
    ops = profile.ops
    marks = ops[ops["name"].astype(str).str.startswith("ProfilerStep#")]
    for name, lo, hi in zip(marks["name"], marks["start_ns"], marks["end_ns"]):
        if lo <= start_ns <= hi:
            return int(str(name).split("#")[1])
    return -1


def label(b: int, c: int) -> str:
    sides = [str(s) for s in (b, c) if s >= 0]
    return " / ".join(dict.fromkeys(sides)) if len(set(sides)) > 1 else (sides[0] if sides else "")


def test_operator_pairs_name_their_step() -> None:
    base, comp = profiles("npu_ops")
    detail = tables("npu_ops")["OperatorCompare"].data
    want = []
    for b, c in zip(detail["_base_row"], detail["_comp_row"]):
        bs = step_by_hand(base, int(base.ops["start_ns"].iloc[b])) if b >= 0 else -1
        cs = step_by_hand(comp, int(comp.ops["start_ns"].iloc[c])) if c >= 0 else -1
        want.append(label(bs, cs))
    assert detail["step"].tolist() == want
    # Three steps, each repeating the model's ops: every step has rows, none is outside.
    assert sorted(set(want)) == ["1", "2", "3"]
    counts = pd.Series(want).value_counts()
    assert counts.min() > 0 and len(counts) == 3


def test_memory_pairs_name_their_step() -> None:
    base, comp = profiles("npu_ops")
    found = tables("npu_ops")
    assert "MemoryCompare" in found  # the pair holds memory records
    detail = found["MemoryCompare"].data
    want = [label(step_by_hand(base, int(base.ops["start_ns"].iloc[b])) if b >= 0 else -1,
                  step_by_hand(comp, int(comp.ops["start_ns"].iloc[c])) if c >= 0 else -1)
            for b, c in zip(detail["_base_row"], detail["_comp_row"])]
    assert detail["step"].tolist() == want and sorted(set(want)) == ["1", "2", "3"]
    column = next(c for c in found["MemoryCompare"].columns if c.key == "step")
    assert not column.export  # the workbook keeps the reference's MemoryCompare columns


def test_module_pairs_name_their_module_step() -> None:
    """Every row of a module pair (its TOTAL row and its ops) carries the step of the module;
    the first TOTAL row of each step repeats the module tree's roots per step."""
    base, comp = profiles("npu")
    detail = tables("npu")["ModuleCompare"].data
    assert set(detail["step"]) <= {"1", "2", "3"} and set(detail["step"]) == {"1", "2", "3"}
    # Rows of one pair (TOTAL, then its ops) share one step.
    pair = np.cumsum(detail["_is_total"].to_numpy())
    assert (detail.groupby(pair)["step"].nunique() == 1).all()
    # By hand: each step's forward module pairs are the nn.Module frames whose start lies in
    # that step's ProfilerStep span (both sides run the same model: 27 a step; the optimizer's
    # pseudo-modules come from ops, not from nn.Module frames).
    modules = base.pyfuncs[base.pyfuncs["is_module"]]
    per_step = pd.Series([step_by_hand(base, int(s)) for s in modules["start_ns"]]).value_counts()
    totals = detail[detail["_is_total"]]
    forward = totals[~totals["module_name"].astype(str).str.contains("[ BACKWARD ]", regex=False)
                     & totals["module_class"].astype(str).str.startswith("nn.Module")]
    assert forward["step"].value_counts().sort_index().tolist() == per_step.sort_index().tolist()
    assert per_step.sort_index().tolist() == [27, 27, 27]
    first = totals.groupby("step", sort=False)["module_name"].first()
    assert list(first.index) == ["1", "2", "3"]  # in execution order
    assert set(first) == {"/ TransformerLM_0"}  # each step opens with the model's root


def test_step_column_is_not_in_the_workbook() -> None:
    for name in ("OperatorCompare", "ModuleCompare"):
        t = tables("npu" if name == "ModuleCompare" else "npu_ops")[name]
        assert "Step" in [c.header for c in t.columns]
        assert "Step" not in [c.header for c in t.sheet_columns()]
