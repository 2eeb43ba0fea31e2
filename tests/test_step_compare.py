"""StepCompare: each step measured as the Overall screen measures a run cut to that step."""

from __future__ import annotations

import numpy as np
import pytest

from perfcmp_core.compare.masks import DEFAULT_MASKS
from perfcmp_core.compare.steps import compare_steps
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions
from tui_support import PAIRS, ROOT, tables


@pytest.mark.parametrize("pair", ["npu", "gpu", "ms"])
def test_each_step_carries_the_designed_difference(pair: str) -> None:
    """fixtures/README.md: +36 µs of device work per step (MatMul +30, Cast +30, dropout −24),
    the same in each of the three steps; nothing else moves."""
    data = tables(pair)["StepCompare"].data
    assert list(data["step"]) == ["1", "2", "3"]
    d_comp = data["comp_computing"] - data["base_computing"]
    assert np.allclose(d_comp, 0.036, atol=0.001)  # each kernel adds its 0–499 ns fraction
    assert np.allclose(data["diff_e2e"], d_comp, atol=1e-9)  # E2E moves by the compute alone
    assert np.allclose(data["comp_uncovered"], data["base_uncovered"])


@pytest.mark.parametrize("pair", ["npu", "mixed"])
def test_steps_add_up_to_the_run(pair: str) -> None:
    """The fixtures' device work lies inside the steps: the steps' computing and uncovered
    communication add up to the Overall screen's, and each step's parts to its E2E."""
    data = tables(pair)["StepCompare"].data
    overall = tables(pair)["OverallMetrics"].data.set_index("index")
    for side in ("base", "comp"):
        for key, row in (("computing", "Computing Time"), ("uncovered", "Uncovered Communication Time")):
            assert data[f"{side}_{key}"].sum() == pytest.approx(overall.loc[row, f"{side}_ms"], abs=1e-6)
        parts = data[f"{side}_computing"] + data[f"{side}_uncovered"] + data[f"{side}_free"]
        assert np.allclose(parts, data[f"{side}_e2e"], atol=1e-6)


def test_a_step_row_is_that_step_loaded_alone() -> None:
    """Row 2 equals the Overall figures of `--base-step 2 --comparison-step 2`."""
    base, comp, _ = PAIRS["npu"]
    data = tables("npu")["StepCompare"].data
    cut = tables_for_step(base, comp, 2)
    overall = cut.set_index("index")
    assert data["base_e2e"].iloc[1] == pytest.approx(overall.loc["E2E Time", "base_ms"], abs=1e-9)
    assert data["comp_computing"].iloc[1] == pytest.approx(overall.loc["Computing Time", "comp_ms"],
                                                           abs=1e-9)


def tables_for_step(base: str, comp: str, step: int):  # type: ignore[no-untyped-def]
    from perfcmp_core.compare.overall import overall_table
    from perfcmp_core.compare.overall_metrics import overall_metrics

    opts = LoadOptions(use_cache=False, step=step)
    b, c = (load_profile(str(ROOT / p), opts) for p in (base, comp))
    t = overall_table(overall_metrics(b, DEFAULT_MASKS), overall_metrics(c, DEFAULT_MASKS), "b", "c")
    assert t is not None
    return t.data


def test_without_steps_says_why() -> None:
    from perfcmp_core.model import Profile, ProfileMeta

    empty = Profile(meta=ProfileMeta(kind="gpu", source="x"))
    table, reason = compare_steps(empty, empty, DEFAULT_MASKS)
    assert table is None and reason == "per-step times need ProfilerStep markers: base has none"


def test_module_tree_roots_carry_their_step_and_backward_folds_per_step() -> None:
    """fixtures/README.md: three steps, each one forward of TransformerLM_0, the optimizer and a
    backward. The three forward roots read steps 1, 2, 3; each step's backward pseudo-modules
    fold under one ``[ BACKWARD ]`` root whose total is their own times summed."""
    from perfcmp_core.compare.result import LEVEL, NODE, PARENT

    tree = tables("npu")["ModuleTree"].data
    roots = tree[tree[LEVEL] == 0]
    lm = roots[roots["module"] == "TransformerLM_0"]
    assert lm["step"].tolist() == ["1", "2", "3"]
    back = roots[roots["module"] == "[ BACKWARD ]"]
    assert back["step"].tolist() == ["1", "2", "3"]
    pseudo = tree[tree["_path"].str.startswith("/[ BACKWARD ]")]
    assert (pseudo[LEVEL] >= 1).all()  # no backward row left flat at the top
    for node, step, total in zip(back[NODE], back["step"], back["base_total"]):
        own = pseudo.loc[pseudo["step"] == step, "base_self"].sum()
        assert total == pytest.approx(own, abs=1e-9)
        assert (tree.loc[tree[PARENT] == node, "_path"].str.startswith("/[ BACKWARD ]")).all()
    # A nested row is named by the rest of its path below its parent's.
    row = pseudo[pseudo["_path"].str.endswith("TransformerLayer_1/ MLP_1/ Linear_7")].iloc[0]
    parent = tree[tree[NODE] == row[PARENT]].iloc[0]
    assert parent["_path"].endswith("TransformerLayer_1") and row["module"] == "MLP_1/ Linear_7"


@pytest.mark.parametrize("pair", ["npu", "gpu", "ms", "db"])
def test_step_times_on_the_step_window_are_the_full_overall_figures(pair: str) -> None:
    """Each step's row comes from step_times on a cut of only the tables those times read:
    every part equals the full OverallMetrics of the same step's full cut (select_step), on
    both sides of each kind."""
    from dataclasses import replace

    from perfcmp_core.compare.overall_metrics import overall_metrics
    from perfcmp_core.compare.steps import step_parts
    from perfcmp_core.load.steps import select_step, step_ids

    paths = {**{k: v[:2] for k, v in PAIRS.items()},
             "db": ("fixtures/npu_db/base_ascend_pt", "fixtures/npu_db/comp_ascend_pt")}[pair]
    for path in paths:
        profile = load_profile(str(ROOT / path), LoadOptions(use_cache=False))
        for step in step_ids(profile):
            full = overall_metrics(select_step(replace(profile, meta=replace(profile.meta)), step),
                                   DEFAULT_MASKS)
            assert step_parts(profile, step, DEFAULT_MASKS) == {
                "e2e": full.e2e_ns / 1e6, "computing": full.compute_ns / 1e6,
                "uncovered": full.uncovered_ns / 1e6, "free": full.free_time_ns / 1e6}


@pytest.mark.parametrize("pair", ["npu", "gpu", "ms", "db"])
def test_a_window_of_a_table_sorted_by_start_is_the_slice_the_mask_keeps(pair: str) -> None:
    """The window of a table whose start column never decreases is one binary-searched
    slice (what compare_steps uses): the same rows, columns and index as the rows the step's
    mask keeps, for every table StepCompare cuts and every step — and a table out of order is
    known as such."""
    import pandas as pd

    from perfcmp_core.compare.overall_metrics import STEP_TIME_TABLES
    from perfcmp_core.load.steps import ordered_by_start, rows_at, step_ids, step_window, window_positions

    paths = {**{k: v[:2] for k, v in PAIRS.items()},
             "db": ("fixtures/npu_db/base_ascend_pt", "fixtures/npu_db/comp_ascend_pt")}[pair]
    for path in paths:
        profile = load_profile(str(ROOT / path), LoadOptions(use_cache=False))
        ordered = [t for t in STEP_TIME_TABLES if ordered_by_start(profile, t)]
        assert "kernels" in ordered  # the loaders sort kernels by start
        for table in ordered:
            for step in step_ids(profile):
                _, lo, hi = step_window(profile, step)
                df = getattr(profile, table)
                pd.testing.assert_frame_equal(rows_at(df, window_positions(profile, table, lo, hi, ordered=True)),
                                              rows_at(df, window_positions(profile, table, lo, hi)), check_exact=True)
        k = profile.kernels
        if len(k) > 1:
            swapped = k.iloc[[1, 0, *range(2, len(k))]].reset_index(drop=True)
            if swapped["start_ns"].iat[0] != swapped["start_ns"].iat[1]:
                from dataclasses import replace

                assert not ordered_by_start(replace(profile, kernels=swapped), "kernels")
