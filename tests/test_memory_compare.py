"""Memory comparison on hand-built profiles: attribution, sums, details text, reasons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.memory import attach, compare_memory
from perfcmp_core.compare.operators import compare_operators
from perfcmp_core.model import OP_MEMORY, OPS, Profile, ProfileMeta, frame
from perfcmp_core.options import CompareOptions

US = 1000


def make_profile(ops: list[tuple], records: list[tuple], kind: str = "gpu") -> Profile:
    """ops: (name, tid, start_us, end_us, parent) in start order; records: (name, size_bytes,
    place_us, alloc_ns, release_ns)."""
    o = pd.DataFrame(ops, columns=["name", "tid", "s", "e", "parent"])
    ops_df = frame(OPS, {"name": o["name"], "pid": [1] * len(o), "tid": o["tid"], "start_ns": o["s"] * US,
                         "end_ns": o["e"] * US, "parent": o["parent"], "is_step": [False] * len(o)})
    r = pd.DataFrame(records, columns=["name", "size", "place", "alloc", "release"])
    om = frame(OP_MEMORY, {"name": r["name"], "size_bytes": r["size"], "place_ns": r["place"] * US,
                           "alloc_ns": r["alloc"], "release_ns": r["release"]})
    return Profile(meta=ProfileMeta(kind=kind, source=f"/data/{kind}"), ops=ops_df, op_memory=om)  # type: ignore[arg-type]


OPS_SPEC = [
    ("## forward ##", 1, 0, 100, -1),  # 0
    ("aten::empty", 1, 10, 20, 0),  # 1
    ("aten::add", 1, 30, 60, 0),  # 2
    ("autograd_op", 2, 40, 50, -1),  # 3: thread 2, adopted by aten::add
]

BASE = make_profile(OPS_SPEC, [
    ("", 2048, 15, 15_000, 115_000),  # → aten::empty (takes its name), lives 100 µs
    ("", 1024, 45, 45_000, -1),  # → autograd_op: starts later than aten::add, also contains 45
    ("cann::X", 4096, 60, 60_000, 90_000),  # at aten::add's end: ends are inclusive
    ("", 512, 500, 500_000, -1),  # outside every op
])
COMP = make_profile(OPS_SPEC, [("", 4096, 15, 15_000, 65_500), ("", 1024, 45, 45_000, -1)])


def test_attach_innermost_any_thread() -> None:
    rows = attach(BASE.ops, np.array([15, 45, 60, 500, 5]) * US)
    assert rows.tolist() == [1, 3, 2, -1, 0]


def test_statistic_by_hand() -> None:
    tables = compare_memory(BASE, COMP, CompareOptions())
    assert [t.name for t in tables] == ["MemoryCompareStatistic", "MemoryCompare"]
    stat = tables[0]
    d = stat.data
    # forward subtree: base 2048 + 1024 + 4096 = 7168 B = 7 KB; comparison 4096 + 1024 = 5 KB
    assert d["name"].tolist() == ["## forward ##"]
    assert d["base_mb"].tolist() == [7 / 1024] and d["comp_mb"].tolist() == [5 / 1024]
    # lifetimes: base 100 + 0 (never freed) + 30 µs; comparison 50.5 µs
    assert d["base_ms"].tolist() == pytest.approx([0.130]) and d["comp_ms"].tolist() == pytest.approx([0.0505])
    assert d[["base_num", "comp_num", "top"]].values.tolist() == [[1, 1, 1]]
    assert d["diff"].tolist() == pytest.approx([-2 / 1024]) and d["ratio"].tolist() == pytest.approx([5 / 7])
    assert [c.header for c in stat.sheet_columns()] == [
        "Top", "Operator Name", "Base Allocated Duration(ms)", "Base Allocated Memory(MB)",
        "Base Operator Number", "Comparison Allocated Duration(ms)", "Comparison Allocated Memory(MB)",
        "Comparison Operator Number", "Diff Memory(MB)", "Diff Ratio"]
    assert [c.width for c in stat.sheet_columns()] == [10, 30, 25, 30, 25, 27, 33, 25, 20, 20]
    assert (stat.base_span, stat.comp_span, stat.default_sort) == ((2, 4), (5, 7), "diff")
    assert stat.notes == ["base: 1 memory records lie outside every host op and are not attributed"]


def test_detail_text_breadth_first_and_sizes() -> None:
    det = compare_memory(BASE, COMP, CompareOptions())[1]
    d = det.data
    assert [c.header for c in det.sheet_columns()][4:6] == ["Allocated Details", "Size(KB)"]
    assert [c.header for c in det.sheet_columns()][11] == "Diff Size(KB)"
    assert (det.base_span, det.comp_span) == ((1, 5), (6, 10))
    # level 1: aten::empty's record, aten::add's record; level 2: autograd_op's record
    assert d["base_details"].tolist() == [
        "aten::empty, (15, 115), [duration: 100.0], [size: 2.0]\n"
        "cann::X, (60, 90), [duration: 30.0], [size: 4.0]\n"
        "autograd_op, (45, None), [duration: 0.0], [size: 1.0]\n"]
    assert d["comp_details"].tolist()[0].startswith("aten::empty, (15, 65.5), [duration: 50.5], [size: 4.0]\n")
    assert d[["base_kb", "comp_kb", "diff"]].values.tolist() == [[7.0, 5.0, -2.0]]


def test_npu_release_text_and_ns_precision() -> None:
    p = make_profile([("aten::add", 1, 1_704_161_511_422_900, 1_704_161_511_423_000, -1)],
                     [("", 65536, 1_704_161_511_422_904, 1_704_161_511_422_904_204, -1)], kind="npu_text")
    d = compare_memory(p, p, CompareOptions())[1].data
    assert d["base_details"].tolist() == ["aten::add, (1704161511422904.204, 0), [duration: 0.0], [size: 64.0]\n"]


def test_same_pairs_as_operators_with_drill_down() -> None:
    opts = CompareOptions(max_kernel_num=4)
    match, _ = compare_operators(BASE, COMP, opts)
    reused = compare_memory(BASE, COMP, opts, match)[1].data
    own = compare_memory(BASE, COMP, opts)[1].data
    pd.testing.assert_frame_equal(reused, own)
    assert reused[["_base_row", "_comp_row"]].values.tolist() == match.pairs[["base_row", "comp_row"]].values.tolist()


def test_disable_details_keeps_statistic_only() -> None:
    tables = compare_memory(BASE, COMP, CompareOptions(disable_details=True))
    assert [t.name for t in tables] == ["MemoryCompareStatistic"]


def test_no_memory_on_a_side_gives_reason_not_zeros() -> None:
    empty = make_profile(OPS_SPEC, [])
    tables = compare_memory(BASE, empty, CompareOptions())
    assert [t.name for t in tables] == ["MemoryCompareStatistic", "MemoryCompare"]
    assert all(t.empty for t in tables)
    assert tables[0].absent_reason == (
        "no memory records in comparison (/data/gpu): collect with profile_memory=True")
