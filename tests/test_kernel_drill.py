"""The kernels of one row (`K`): the row's Kernel Details read back, grouped by kernel name."""

from __future__ import annotations

import pytest

from perfcmp_core.compare.kernel_drill import op_kernels, parse_kernels, rows_matching
from tui_support import tables


def test_parse_reads_operator_and_module_lines() -> None:
    gpu = ("void gemm<float, 4, 2>(Params<float, int>) [duration: 30.5]\n"
           "void gemm<float, 4, 2>(Params<float, int>) [duration: 9.5]\n")
    npu = ("MatMulV3, 11, AI_CORE, [input shapes: 8,16;16,32] [duration: 30.0]\n"
           "hcom_allReduce__1_0_1, None, None [duration: 5.0]\n")
    module = "Linear_kernel, [number: 3], [duration_ms: 0.042]\n"
    df = parse_kernels([gpu, npu, module, float("nan")])  # type: ignore[list-item]
    rows = {r.kernel: (r.n, r.us) for r in df.itertuples()}
    # A GPU name keeps its commas; an NPU line drops task id, type and shapes.
    assert rows == {"void gemm<float, 4, 2>(Params<float, int>)": (2, 40.0), "MatMulV3": (1, 30.0),
                    "hcom_allReduce__1_0_1": (1, 5.0), "Linear_kernel": (3, pytest.approx(42.0))}


def test_op_kernels_of_a_module_statistic_row_add_up_to_it() -> None:
    """ModuleCompareStatistic's Linear_4 row (fixtures/README.md #1: its MatMulV3 100 → 130 µs
    per step): the kernels of its matched rows add up to the row's device self time."""
    stat = tables("npu")["ModuleCompareStatistic"].data
    detail = tables("npu")["ModuleCompare"].data
    path = "/ TransformerLM_0/ TransformerLayer_1/ Attention_1/ Linear_4"
    row = stat[(stat["module_name"] == path) & ~stat["_is_total"]].iloc[0]
    rows = rows_matching(detail, ((("module_name",), path), (("base_op", "comp_op"), row["op"])))
    k = op_kernels(detail["base_kernels"].iloc[rows], detail["comp_kernels"].iloc[rows], path).data
    assert k["kernel"].iloc[0].endswith("MatMulV3")
    assert k["diff_us"].iloc[0] == pytest.approx(90.0, abs=1.5)  # 3 steps × 30 µs
    for side in ("base", "comp"):
        assert k[f"{side}_us"].sum() / 1000 == pytest.approx(row[f"{side}_self"], abs=5e-3)
