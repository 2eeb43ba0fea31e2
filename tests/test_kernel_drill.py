"""The kernels of one row (`K`): the row's structured kernel entries, grouped by kernel name.

`K` reads the detail tables' child tables (``KernelRows``), not their text. These tests check it
against the text the workbook holds: each row's ``Kernel Details`` cells are rendered, read back
here with this file's own parser, and grouped — what the app's `K` gave when it parsed the cells
— on the fixtures and on the real pairs in ``../shared/data`` (skipped when absent).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.kernel_drill import detail_keys, op_kernels, rows_matching
from perfcmp_core.compare.modules import compare_modules
from perfcmp_core.compare.operators import compare_operators
from perfcmp_core.compare.result import Table
from perfcmp_core.load import load_profile
from perfcmp_core.options import CompareOptions, LoadOptions
from tui_support import tables

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FIXTURES = ROOT / "fixtures"

_LAUNCH = re.compile(r"^(?P<head>.*) \[duration: (?P<us>[^\]]+)\]$")
_SUMMARY = re.compile(r"^(?P<name>.*), \[number: (?P<n>\d+)\], \[duration_ms: (?P<ms>[^\]]+)\]$")
_TASK = re.compile(r", (?:\d+|None), (?:[A-Z_0-9]+|None)(?:, \[input shapes: .*\])?$")


def _from_text(cells: list[str]) -> pd.DataFrame:
    """``kernel, n, us`` per kernel name (first seen) of rendered cells: the reference's lines
    read back (a module statistic line gives its count and ms, a launch line one kernel)."""
    names, counts, micros = [], [], []
    for cell in cells:
        for line in cell.splitlines():
            if m := _SUMMARY.match(line):
                names.append(m["name"])
                counts.append(int(m["n"]))
                micros.append(float(m["ms"]) * 1000.0)
            elif m := _LAUNCH.match(line):
                names.append(_TASK.sub("", m["head"]))
                counts.append(1)
                micros.append(float(m["us"]))
            else:
                raise AssertionError(f"unreadable Kernel Details line {line!r}")
    df = pd.DataFrame({"kernel": pd.Series(names, dtype=object), "n": np.asarray(counts, dtype="int64"),
                       "us": np.asarray(micros, dtype="float64")})
    return df.groupby("kernel", sort=False, as_index=False).agg(n=("n", "sum"), us=("us", "sum"))


def _expected(table: Table, keys: tuple[str, str], rows: np.ndarray) -> pd.DataFrame:
    b = _from_text(table.values(keys[0], rows).tolist())
    c = _from_text(table.values(keys[1], rows).tolist())
    df = b.merge(c, on="kernel", how="outer", suffixes=("_b", "_c"), sort=False).fillna(0)
    df["diff"] = df["us_c"] - df["us_b"]
    return df.iloc[np.argsort(-np.abs(df["diff"].to_numpy()), kind="stable")].reset_index(drop=True)


def _check(table: Table, rows: np.ndarray) -> int:
    """`K` on ``rows`` of ``table`` equals the text read back: same kernels in the same order,
    counts, totals (exact for launch lines, within the ms text's rounding for summary lines).
    Returns how many kernel names it compared."""
    keys = detail_keys(table)
    assert keys is not None
    got = op_kernels(table, keys, rows, "row").data
    want = _expected(table, keys, rows)
    if table.name == "ModuleCompareStatistic":
        # "[duration_ms: 0.042]": the text rounds each line to the µs, the entries keep the ns.
        # So totals agree within that rounding, and kernels whose difference the rounding changes
        # may swap places: compared by name, the order checked as largest exact change first.
        lines = max(1, sum(v.count("\n") for k in keys for v in table.values(k, rows).tolist()))
        both = got.merge(want, on="kernel", how="outer", indicator=True)
        assert (both["_merge"] == "both").all()
        assert both["base_n"].tolist() == both["n_b"].astype("int64").tolist()
        assert both["comp_n"].tolist() == both["n_c"].astype("int64").tolist()
        np.testing.assert_allclose(both["base_us"], both["us_b"], rtol=0, atol=0.5 * lines + 1e-6)
        np.testing.assert_allclose(both["comp_us"], both["us_c"], rtol=0, atol=0.5 * lines + 1e-6)
        assert (np.diff(np.abs(got["diff_us"].to_numpy())) <= 0).all()
        return len(got)
    assert got["kernel"].tolist() == want["kernel"].tolist()
    assert got["base_n"].tolist() == want["n_b"].astype("int64").tolist()
    assert got["comp_n"].tolist() == want["n_c"].astype("int64").tolist()
    assert got["base_us"].tolist() == want["us_b"].tolist()  # the launch lines' µs, exactly
    assert got["comp_us"].tolist() == want["us_c"].tolist()
    return len(got)


def _rows_to_check(table: Table, limit: int = 150) -> list[np.ndarray]:
    """Single rows spread over the table (the largest cells among them), then a few groups of
    rows (what `K` reads for a statistic row or a module's [ TOTAL ] row)."""
    n = len(table.data)
    sizes = np.zeros(n, dtype="int64")
    for key in detail_keys(table) or ():
        sizes += np.diff(table.children[key].ptr)
    picks = np.unique(np.r_[np.linspace(0, n - 1, min(n, limit)).astype("int64"),
                            np.argsort(-sizes, kind="stable")[:10]]) if n else np.zeros(0, dtype="int64")
    groups = [np.arange(a, min(a + 7, n)) for a in range(0, n, max(1, n // 5))]
    return [np.array([r]) for r in picks.tolist()] + groups


def _sheets(base: str, comp: str) -> list[Table]:
    b = load_profile(base, LoadOptions(use_cache=False))
    c = load_profile(comp, LoadOptions(use_cache=False))
    opts = CompareOptions()
    _, ops = compare_operators(b, c, opts)
    modules, _ = compare_modules(b, c, opts)
    out = [t for t in ops if detail_keys(t)]
    if modules is not None:
        out += [t for t in modules.tables() if detail_keys(t)]
    return out


def _check_pair(base: Path, comp: Path) -> None:
    sheets = _sheets(str(base), str(comp))
    assert {"OperatorCompare"} <= {t.name for t in sheets}
    compared = 0
    for table in sheets:
        for rows in _rows_to_check(table):
            compared += _check(table, rows)
    assert compared > 0


@pytest.mark.parametrize("pair", [("gpu/base.pt.trace.json", "gpu/comp.pt.trace.json"),
                                  ("npu_text/base_ascend_pt", "npu_text/comp_ascend_pt"),
                                  ("npu_db/base_ascend_pt", "npu_text/comp_ascend_pt")])
def test_k_reads_what_the_cells_say_on_fixtures(pair: tuple[str, str]) -> None:
    _check_pair(FIXTURES / pair[0], FIXTURES / pair[1])


REAL = [
    ("gpu-real/trace_diff_control.pt.trace.json.gz", "gpu-real/trace_diff_test.pt.trace.json.gz"),
    ("gpu-real/h200/gpt2_train_bf16_base.pt.trace.json.gz", "gpu-real/h200/gpt2_train_bf16_hostbound.pt.trace.json.gz"),
    ("npu-real-runs/text/level1/rank0_ascend_pt", "npu-real-runs/text/level1/rank1_ascend_pt"),
    ("npu-real-runs/db/level1/rank0_ascend_pt", "npu-real-runs/text/level1/rank1_ascend_pt"),
]


@pytest.mark.parametrize("pair", REAL, ids=[p[0].split("/")[-1] for p in REAL])
def test_k_reads_what_the_cells_say_on_real_pairs(pair: tuple[str, str]) -> None:
    base, comp = DATA / pair[0], DATA / pair[1]
    if not (base.exists() and comp.exists()):
        pytest.skip(f"real profiles not found under {DATA}")
    _check_pair(base, comp)


def test_op_kernels_of_a_module_statistic_row_add_up_to_it() -> None:
    """ModuleCompareStatistic's Linear_4 row (fixtures/README.md #1: its MatMulV3 100 → 130 µs
    per step): the kernels of its matched rows add up to the row's device self time."""
    stat = tables("npu")["ModuleCompareStatistic"].data
    detail = tables("npu")["ModuleCompare"]
    path = "/ TransformerLM_0/ TransformerLayer_1/ Attention_1/ Linear_4"
    row = stat[(stat["module_name"] == path) & ~stat["_is_total"]].iloc[0]
    rows = rows_matching(detail.data, ((("module_name",), path), (("base_op", "comp_op"), row["op"])))
    k = op_kernels(detail, ("base_kernels", "comp_kernels"), rows, path).data
    assert k["kernel"].iloc[0].endswith("MatMulV3")
    assert k["diff_us"].iloc[0] == pytest.approx(90.0, abs=1.5)  # 3 steps × 30 µs
    for side in ("base", "comp"):
        assert k[f"{side}_us"].sum() / 1000 == pytest.approx(row[f"{side}_self"], abs=5e-3)


@pytest.mark.parametrize("path", ["gpu/base.pt.trace.json", "npu_db/base_ascend_pt"])
def test_coded_column_is_the_taken_cells_factorized(path: str) -> None:
    """``Coded.column`` (from the profile's column codes) codes the taken cells as coding their
    texts does: codes by first appearance among the taken rows, the dictionary cut to them."""
    from perfcmp_core.compare.kernel_rows import Coded

    profile = load_profile(str(FIXTURES / path), LoadOptions(use_cache=False))
    k = profile.kernels
    rng = np.random.default_rng(7)
    for rows in (np.arange(len(k))[::-1], rng.integers(0, len(k), 3 * len(k)), np.zeros(0, dtype="int64")):
        for column in ("name", "task_type", "input_shapes"):
            cells = k[column].to_numpy(dtype=object)[rows]
            got = Coded.column(profile, "kernels", column, rows)
            first: dict[object, int] = {}
            for cell in cells.tolist():
                first.setdefault(cell, len(first))
            assert got.values.tolist() == list(first)
            assert got.codes.dtype == np.int32
            assert got.codes.tolist() == [first[c] for c in cells.tolist()]
