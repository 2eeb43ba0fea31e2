"""KernelCompare / KernelTypeCompare: hand-built NPU profiles and the real kernel_details samples."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.kernels import compare_kernels, kernel_compare, kernel_type_compare
from perfcmp_core.model import KERNELS, OP_STATISTIC, Profile, ProfileMeta, frame
from perfcmp_core.options import CompareOptions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "npu-real"


def _npu(rows: list[tuple[str, str, float, bool]], kind: str = "npu_text") -> Profile:
    """rows: (op type, input shapes, duration µs, has_details)."""
    kernels = frame(KERNELS, {
        "name": [f"{r[0]}_{i}" for i, r in enumerate(rows)], "op_type": [r[0] for r in rows],
        "input_shapes": [r[1] for r in rows], "dur_ns": [int(round(r[2] * 1000)) for r in rows],
        "start_ns": [1000 * i for i in range(len(rows))], "has_details": [r[3] for r in rows],
        "in_trace": [True] * len(rows),
    })
    return Profile(ProfileMeta(kind=kind, source=kind), kernels=kernels)


BASE = _npu([
    ("MatMulV2", "8,16;16,32", 30, True),
    ("Add", "", 2.004, True),
    ("MatMulV2", "4,4;4,4", 10, True),
    ("Mul", "2", 0.004, True),
    ("MatMulV2", "8,16;16,32", 31.5, True),
    ("N/A", "", 7, True),  # rows without a type are skipped
    ("Add", "", 99, False),  # a trace-only kernel has no details
])
COMP = _npu([
    ("Cast", "", 3, True),
    ("MatMulV2", "8,16;16,32", 42, True),
    ("Add", "", 2, True),
    ("Mul", "2", 0.006, True),
])


def test_kernel_compare_layout():
    t, reason = kernel_compare(BASE, COMP)
    assert reason == ""
    assert t.name == "KernelCompare"
    assert [c.header for c in t.columns] == [
        "Order Id", "Kernel", "Input Shape", "Total Duration(us)", "Avg Duration(us)",
        "Max Duration(us)", "Min Duration(us)", "Calls", "Total Duration(us)", "Avg Duration(us)",
        "Max Duration(us)", "Min Duration(us)", "Calls", "Diff Total Ratio", "Diff Avg Ratio",
    ]
    assert [c.width for c in t.columns] == [10, 30] + [20] * 13
    assert (t.base_span, t.comp_span) == ((3, 7), (8, 12))  # D1:H1, I1:M1
    assert t.column("kernel").fmt == "bold" and t.column("total_ratio").fmt == "float"


def test_kernel_compare_groups_and_order():
    d = kernel_compare(BASE, COMP)[0].data
    # Base types in first-seen order, each type's shapes together; then comparison-only groups.
    assert list(zip(d["kernel"], d["shape"])) == [
        ("MatMulV2", "8,16;16,32"), ("MatMulV2", "4,4;4,4"), ("Add", "N/A"), ("Mul", "2"), ("Cast", "N/A"),
    ]
    assert d["order"].tolist() == [1, 2, 3, 4, 5]
    mm = d.iloc[0]
    assert (mm["base_total"], mm["base_avg"], mm["base_max"], mm["base_min"], mm["base_calls"]) == (61.5, 30.75, 31.5, 30, 2)
    assert (mm["comp_total"], mm["comp_avg"], mm["comp_calls"]) == (42, 42, 1)
    assert mm["total_ratio"] == pytest.approx(42 / 61.5) and mm["avg_ratio"] == pytest.approx(42 / 30.75)


def test_kernel_compare_one_sided_rows():
    d = kernel_compare(BASE, COMP)[0].data
    small, cast = d.iloc[1], d.iloc[4]
    # Missing side: Total 0, Avg 0, Max/Min/Calls blank.
    assert (small["comp_total"], small["comp_avg"]) == (0, 0)
    assert np.isnan([small["comp_max"], small["comp_min"], small["comp_calls"]]).all()
    assert (small["total_ratio"], small["avg_ratio"]) == (0, 0)
    assert (cast["base_total"], cast["base_avg"], cast["comp_total"]) == (0, 0, 3)
    assert cast["total_ratio"] == math.inf and cast["avg_ratio"] == math.inf


def test_kernel_compare_ratios_from_unrounded_values():
    """The reference rounds totals to 0.01 µs first: Add 2.004 → 2.00 gives ratio 1.0 and
    Mul 0.004 → 0.00 gives INF; unrounded they are 2/2.004 and 1.5."""
    d = kernel_compare(BASE, COMP)[0].data.set_index("kernel")
    assert d.loc["Add", "total_ratio"] == pytest.approx(2 / 2.004)
    assert d.loc["Mul", "total_ratio"] == pytest.approx(1.5)
    assert d.loc["Mul", "base_total"] == pytest.approx(0.004)


def test_kernel_compare_needs_npu_details_on_both_sides():
    gpu = Profile(ProfileMeta(kind="gpu", source="gpu"))
    assert kernel_compare(gpu, COMP) == (
        None, "KernelCompare needs NPU kernel details on both sides (base is GPU)")
    assert kernel_compare(BASE, gpu)[1] == "KernelCompare needs NPU kernel details on both sides (comparison is GPU)"
    no_details = _npu([("Add", "", 1, False)])
    assert kernel_compare(BASE, no_details) == (
        None, "comparison has no kernel details (kernel_details.csv / compute task info)")
    level0 = _npu([("", "", 1, True), ("N/A", "", 2, True)])  # rows describe tasks, Type N/A
    assert kernel_compare(level0, COMP) == (
        None, "base has kernel details without op types (a Level0 export writes Type N/A): no KernelCompare")


def _stats(rows: list[tuple[str, str, int, float, float, float, float]], kind: str = "npu_text") -> Profile:
    """rows: (op type, core type, count, total, avg, max, min)."""
    cols = ["op_type", "core_type", "count", "total_us", "avg_us", "max_us", "min_us"]
    stats = frame(OP_STATISTIC, {c: [r[i] for r in rows] for i, c in enumerate(cols)})
    return Profile(ProfileMeta(kind=kind, source=kind), op_statistic=stats)


def test_kernel_type_compare_sorted_by_total_ratio():
    base = _stats([("MatMulV2", "AI_CORE", 2, 30, 15, 16, 14), ("Add", "AI_VECTOR_CORE", 4, 8, 2, 3, 1)])
    comp = _stats([("MatMulV2", "AI_CORE", 3, 42, 14, 15, 13), ("Cast", "AI_VECTOR_CORE", 1, 3, 3, 3, 3),
                   ("Add", "AI_VECTOR_CORE", 4, 4, 1, 1, 1)])
    t, reason = compare_kernels(base, comp, CompareOptions(use_kernel_type=True))
    assert reason == "" and t.name == "KernelTypeCompare"
    assert [c.header for c in t.columns][1:3] == ["Kernel Type", "Core Type"]
    d = t.data
    assert d["kernel_type"].tolist() == ["Cast", "MatMulV2", "Add"]  # INF, 1.4, 0.5
    assert d["core_type"].tolist() == ["AI_VECTOR_CORE", "AI_CORE", "AI_VECTOR_CORE"]
    assert d["order"].tolist() == [1, 2, 3]
    assert d["total_ratio"].tolist() == [math.inf, pytest.approx(1.4), pytest.approx(0.5)]
    assert d["avg_ratio"].tolist() == [math.inf, pytest.approx(14 / 15), pytest.approx(0.5)]
    cast = d.iloc[0]
    # Missing side: every number 0 (not blank) in this sheet.
    assert [cast[f"base_{s}"] for s in ("total", "avg", "max", "min", "calls")] == [0, 0, 0, 0, 0]
    assert (cast["comp_total"], cast["comp_calls"]) == (3, 1)


def test_kernel_type_compare_one_sided_when_a_side_has_no_statistics():
    comp = _stats([("MatMulV2", "AI_CORE", 3, 42, 14, 15, 13)])
    t, _ = kernel_type_compare(Profile(ProfileMeta(kind="gpu", source="gpu")), comp)
    assert t.data["kernel_type"].tolist() == ["MatMulV2"] and t.data["base_total"].tolist() == [0]
    assert t.notes == ["base has no op statistics: its columns are 0"]
    empty = Profile(ProfileMeta(kind="npu_text", source="x"))
    assert kernel_type_compare(empty, empty) == (
        None, "no op statistics on either side (op_statistic.csv / compute task info)")


def test_compare_kernels_needs_the_kernel_switch():
    assert compare_kernels(BASE, COMP, CompareOptions(enabled=frozenset({"operator"}))) == (
        None, "kernel comparison is not enabled")


# ---------------------------------------------------------------------------------------------
# Real kernel_details samples against the reference
# ---------------------------------------------------------------------------------------------

# Reference KernelCompare rows for base kernel_details.a.csv vs comparison kernel_details.b.csv,
# (type, shapes without the quirk quotes, base total, base calls, comparison total, comparison
# calls), from:
#   mkdir -p npu{a,b}/ASCEND_PROFILER_OUTPUT; echo '{}' > npu{a,b}/profiler_info.json
#   cp trace_view.partial.json npu{a,b}/ASCEND_PROFILER_OUTPUT/trace_view.json
#   cp kernel_details.{a,b}.csv npu{a,b}/ASCEND_PROFILER_OUTPUT/kernel_details.csv
#   msprof-analyze compare -d npub -bp npua -o out --force --enable_kernel_compare   # 26.2.0
# The reference rounds totals to 0.01 µs.
GOLDEN_REAL = [
    ('MatMulV2', '81920,4096;8192,512', 750.59, 4, 0, 0),
    ('MatMulV3', '81920,1536;8192,4096', 2037.1, 4, 0, 0),
    ('MatMulV3', '8192,15365;8192,4096', 2085.24, 4, 0, 0),
    ('FlashAttentionScore', '4096,2,512;4096,2,512;4096,2,512;;;;4096,4096;;;;;', 1628.55, 4, 0, 0),
    ('FlashAttentionScore', '4096,2,511;4096,2,512;4096,2,512;;;;4096,4096;;;;;', 405.23, 1, 0, 0),
    ('FlashAttentionScoreGrad', '4096,2,512;4096,2,512;4096,2,512;4096,2,512;4096,4096;2,4,4096,8;2,4,4096,8;;4096,2,512;', 3038.44, 4, 0, 0),
    ('Add', '512,2,4096;512,2,4096', 110.08, 4, 0, 0),
    ('Add', ';', 5.92, 4, 36.28, 29),
    ('ZerosLike', '544404480', 0, 0, 607.98, 1),
    ('ZerosLike', '8,25', 0, 0, 1.24, 1),
    ('hcom_broadcast_', 'N/A', 0, 0, 308989.62, 2),
    ('Cast', '4,1025', 0, 0, 3.14, 1),
    ('Cast', '4,1024', 0, 0, 5.26, 3),
    ('Cast', '4,1024,1', 0, 0, 1.62, 1),
    ('Cast', '', 0, 0, 785.18, 7),
    ('Cast', '1024,4,6400', 0, 0, 40.96, 1),
    ('Cast', '1024,4', 0, 0, 9.48, 5),
    ('Cast', '4096', 0, 0, 2.82, 1),
    ('Cast', '78643200', 0, 0, 675.94, 2),
    ('Cast', '12582912', 0, 0, 124.42, 2),
    ('Cast', '56623104', 0, 0, 1038.7, 4),
    ('Cast', '18874368', 0, 0, 361.32, 4),
    ('Cast', '75497472', 0, 0, 2780.16, 8),
    ('Cast', '12288', 0, 0, 57.46, 28),
    ('Cast', '4608', 0, 0, 8.2, 4),
    ('Cast', '6144', 0, 0, 9.36, 4),
    ('Slice', '4,1025;2;2', 0, 0, 3.68, 2),
    ('OnesLike', '1,1024,1024', 0, 0, 7.96, 1),
    ('OnesLike', '4,1024', 0, 0, 1.54, 1),
    ('OnesLike', '1', 0, 0, 2.42, 2),
    ('MemSet', '', 0, 0, 67.98, 59),
    ('MemSet', 'N/A', 0, 0, 103.72, 25),
    ('Tril', '1,1024,1024', 0, 0, 16.88, 1),
    ('Less', '1,1,1024,1024;', 0, 0, 10.04, 1),
    ('Less', '4,1024;', 0, 0, 2.22, 1),
    ('Less', '1024,4;', 0, 0, 1.88, 1),
    ('GreaterEqual', '4,1024;', 0, 0, 1.88, 1),
    ('GreaterEqual', '1024,4;', 0, 0, 2.2, 1),
    ('LogicalOr', '4,1024;4,1024', 0, 0, 1.52, 1),
    ('LogicalOr', '1024,4;1024,4', 0, 0, 1.36, 1),
    ('Sub', '4,1024;', 0, 0, 2.38, 1),
    ('Sub', '1024,4,6400;1024,4,1', 0, 0, 76.28, 1),
    ('Sub', '1024,4;', 0, 0, 2.12, 1),
    ('Sub', '1024,4;1024,4', 0, 0, 2.1, 1),
    ('LogicalNot', '4,1024', 0, 0, 1.38, 1),
    ('LogicalNot', '4,1024,1', 0, 0, 1.68, 1),
    ('LogicalNot', '1024,4', 0, 0, 2.94, 2),
    ('Mul', '4,1024;4,1024', 0, 0, 1.62, 1),
    ('Mul', '4,1024,12288;4,1024,1', 0, 0, 47.06, 1),
    ('Mul', '12,1024,1024;', 0, 0, 30.66, 2),
    ('Mul', '1024,4;1024,4', 0, 0, 3.9, 2),
    ('Mul', '4096;4096', 0, 0, 1.96, 1),
    ('Mul', '78643200;1', 0, 0, 314.42, 1),
    ('Mul', '12582912;1', 0, 0, 89.28, 1),
    ('Mul', '56623104;1', 0, 0, 711.92, 2),
    ('Mul', '18874368;1', 0, 0, 244.26, 2),
    ('Mul', '75497472;1', 0, 0, 1886.92, 4),
    ('Mul', '12288;1', 0, 0, 30.26, 14),
    ('Mul', '4608;1', 0, 0, 3.94, 2),
    ('Mul', '6144;1', 0, 0, 4.36, 2),
    ('GatherV2', '6400,12288;4,1024;1', 0, 0, 115.52, 1),
    ('GatherV2', '1024,12288;4,1024;1', 0, 0, 48.38, 1),
    ('hcom_allReduce_', 'N/A', 0, 0, 27867.58, 14),
    ('BroadcastTo', '1,1024;2', 0, 0, 5.84, 1),
    ('BroadcastTo', '1,1,12288;3', 0, 0, 123.98, 4),
    ('Add', '4,1024,12288;4,1024,12288', 0, 0, 237.48, 1),
    ('Add', '1024,4,4608;4608', 0, 0, 55.54, 2),
    ('Add', '1024,4,12288;1024,4,12288', 0, 0, 1714.12, 8),
    ('Add', '1024,4,6144;6144', 0, 0, 84.96, 2),
    ('Add', '1;', 0, 0, 1.42, 1),
    ('Transpose', '4,1024,12288;3', 0, 0, 87.74, 1),
    ('Transpose', '1024,12,512;3', 0, 0, 63.72, 2),
    ('Transpose', '4,3,1024,512;4', 0, 0, 34.88, 2),
    ('Transpose', '4,1024;2', 0, 0, 11, 1),
    ('Transpose', '1024,4;2', 0, 0, 10.62, 1),
    ('DSAStatelessGenBitMask', '1;;1;2', 0, 0, 2176.58, 7),
    ('DropOutDoMask', '1024,4,12288;6291456;', 0, 0, 527.16, 5),
    ('DropOutDoMask', '4,3,1024,1024;1572864;', 0, 0, 54.06, 2),
    ('LayerNormV3', '1024,4,12288;12288;12288', 0, 0, 1640.02, 5),
    ('MatMul', '4096,12288;4608,12288', 0, 0, 2949.08, 2),
    ('MatMul', '4096,1536;12288,1536', 0, 0, 991.66, 2),
    ('MatMul', '4096,12288;6144,12288', 0, 0, 4096.44, 2),
    ('MatMul', '4096,6144;12288,6144', 0, 0, 3961.08, 2),
    ('MatMul', '4096,12288;6400,12288', 0, 0, 2072.3, 1),
    ('AsStrided', '1024,4,4608;3;3;', 0, 0, 72.48, 6),
    ('BatchMatMul', '12,1024,512;12,512,1024', 0, 0, 89.96, 2),
    ('BatchMatMul', '12,1024,1024;12,1024,512', 0, 0, 92.2, 2),
    ('ScaledMaskedSoftmax', '4,3,1024,1024;1,1,1024,1024', 0, 0, 182.96, 2),
    ('FastGelu', '1024,4,6144', 0, 0, 173.06, 2),
    ('ArgMaxWithValue', '1024,4,6400', 0, 0, 77.78, 1),
    ('Index', '4096,6400;2;1;4096;4096', 0, 0, 26.5, 1),
    ('Exp', '1024,4,6400', 0, 0, 65.76, 1),
    ('ReduceSumD', '1024,4,6400', 0, 0, 95.3, 1),
    ('ReduceSumD', '4096', 0, 0, 13.28, 2),
    ('ReduceSumD', '78643200', 0, 0, 348.64, 1),
    ('ReduceSumD', '12582912', 0, 0, 38.78, 1),
    ('ReduceSumD', '56623104', 0, 0, 277.44, 2),
    ('ReduceSumD', '18874368', 0, 0, 99.78, 2),
    ('ReduceSumD', '75497472', 0, 0, 730.78, 4),
    ('ReduceSumD', '12288', 0, 0, 56.78, 14),
    ('ReduceSumD', '4608', 0, 0, 12.56, 2),
    ('ReduceSumD', '6144', 0, 0, 11.58, 2),
    ('Log', '1024,4', 0, 0, 1.96, 1),
    ('RealDiv', '1024,4,6400;1024,4,1', 0, 0, 72.34, 1),
    ('RealDiv', ';', 0, 0, 4.24, 3),
    ('RealDiv', '1;', 0, 0, 1.48, 1),
    ('RealDiv', '544404480;', 0, 0, 1714.62, 1),
    ('hcom_reduceScatter_', 'N/A', 0, 0, 4614.42, 1),
    ('Fill', '1;', 0, 0, 1.38, 1),
    ('Reciprocal', '1', 0, 0, 1.4, 1),
    ('LpNormReduceV2', '78643200', 0, 0, 396.14, 1),
    ('LpNormReduceV2', '12582912', 0, 0, 39.88, 1),
    ('LpNormReduceV2', '56623104', 0, 0, 280.64, 2),
    ('LpNormReduceV2', '18874368', 0, 0, 101.84, 2),
    ('LpNormReduceV2', '75497472', 0, 0, 733, 4),
    ('LpNormReduceV2', '12288', 0, 0, 57.22, 14),
    ('LpNormReduceV2', '4608', 0, 0, 12.06, 2),
    ('LpNormReduceV2', '6144', 0, 0, 12.46, 2),
    ('LpNormUpdateV2', '', 0, 0, 33.86, 28),
    ('Square', '', 0, 0, 36.84, 28),
    ('ApplyAdamW', '78643200;78643200;78643200;;;;;;;;78643200', 0, 0, 1724.88, 1),
    ('ApplyAdamW', '12582912;12582912;12582912;;;;;;;;12582912', 0, 0, 322.4, 1),
    ('ApplyAdamW', '56623104;56623104;56623104;;;;;;;;56623104', 0, 0, 2723.68, 2),
    ('ApplyAdamW', '18874368;18874368;18874368;;;;;;;;18874368', 0, 0, 938.96, 2),
    ('ApplyAdamW', '75497472;75497472;75497472;;;;;;;;75497472', 0, 0, 7127.5, 4),
    ('ApplyAdamW', '12288;12288;12288;;;;;;;;12288', 0, 0, 85.32, 14),
    ('ApplyAdamW', '4608;4608;4608;;;;;;;;4608', 0, 0, 7.88, 2),
    ('ApplyAdamW', '6144;6144;6144;;;;;;;;6144', 0, 0, 8.76, 2),
    ('hcom_allGather_', 'N/A', 0, 0, 4927.12, 2),
    ('StridedSliceD', '8,25', 0, 0, 70.88, 50),
    ('Greater', '8;', 0, 0, 31.22, 25),
    ('NonZero', '8', 0, 0, 102.02, 25),
]


def _from_csv(path: Path) -> Profile:
    """Kernel detail rows as the model holds them: quirk quotes stripped, N/A shapes absent."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    shapes = df["Input Shapes"].str.strip('"').where(df["Input Shapes"] != "N/A", "")
    dur = [int(round(float(v) * 1000)) for v in df["Duration(us)"]]
    kernels = frame(KERNELS, {"name": df["Name"], "op_type": df["Type"], "input_shapes": shapes,
                              "dur_ns": dur, "has_details": [True] * len(df)})
    return Profile(ProfileMeta(kind="npu_text", source=str(path)), kernels=kernels)


def test_real_kernel_details_match_reference():
    if not (DATA / "kernel_details.a.csv").exists():
        pytest.skip("shared sample data not available")
    t, _ = kernel_compare(_from_csv(DATA / "kernel_details.a.csv"), _from_csv(DATA / "kernel_details.b.csv"))
    ours = t.data
    # The model cannot tell an empty shape list ('""' in the CSV) from N/A, so MemSet's two
    # reference rows ("" 59 calls, N/A 25 calls) are one row here; every other row matches.
    expected: dict[tuple[str, str], list[float]] = {}
    for kernel, shape, bt, bc, ct, cc in GOLDEN_REAL:
        acc = expected.setdefault((kernel, shape or "N/A"), [0.0, 0, 0.0, 0])
        acc[0] += bt
        acc[1] += bc
        acc[2] += ct
        acc[3] += cc
    assert list(zip(ours["kernel"], ours["shape"])) == list(expected)
    assert len(ours) == len(GOLDEN_REAL) - 1
    for rec in ours.to_dict("records"):
        bt, bc, ct, cc = expected[(rec["kernel"], rec["shape"])]
        assert rec["base_total"] == pytest.approx(bt, abs=0.011)
        assert rec["comp_total"] == pytest.approx(ct, abs=0.011)
        assert (0 if math.isnan(rec["base_calls"]) else rec["base_calls"]) == bc
        assert (0 if math.isnan(rec["comp_calls"]) else rec["comp_calls"]) == cc
    add = ours[(ours["kernel"] == "Add") & (ours["shape"] == ";")].iloc[0]
    assert add["total_ratio"] == pytest.approx(6.1284, abs=1e-3)  # reference 6.1284
    assert add["avg_ratio"] == pytest.approx(0.8446, abs=1e-3)  # reference 0.8446
