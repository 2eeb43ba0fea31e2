"""Operator comparison: forest, matching, drill-down and both sheets, on hand-built profiles
(values derived by hand in the comments) and on the real GPU pair against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.operators import (
    compare_operators,
    match_operators,
    operator_kernels,
    screen_kernel_text,
    shape_key,
)
from perfcmp_core.compare.optree import build_forest, segment_pairs, split_segments
from perfcmp_core.model import KERNELS, OPS, Profile, ProfileMeta, frame
from perfcmp_core.options import CompareOptions

US = 1000  # ns per µs


def make_profile(ops: list[tuple], kernels: list[tuple], kind: str = "gpu", backward_tid: int = -1) -> Profile:
    """ops: (name, tid, start_us, end_us, parent, depth[, input_dims]); kernels: (name, op_row,
    dur_us[, task_type]). Rows must be listed in start order (the OPS contract)."""
    o = pd.DataFrame([(*op, "")[:7] if len(op) == 6 else op for op in ops],
                     columns=["name", "tid", "s", "e", "parent", "depth", "input_dims"])
    ops_df = frame(OPS, {
        "name": o["name"], "cat": ["cpu_op"] * len(o), "pid": [1] * len(o), "tid": o["tid"],
        "start_ns": o["s"] * US, "end_ns": o["e"] * US, "input_dims": o["input_dims"],
        "parent": o["parent"], "depth": o["depth"], "is_step": o["name"].str.startswith("ProfilerStep#"),
    })
    k = pd.DataFrame([(*kk, "kernel")[:4] for kk in kernels], columns=["name", "op_row", "dur", "task_type"])
    start = [ops_df["start_ns"][r] + 1 if r >= 0 else 0 for r in k["op_row"]]
    kernels_df = frame(KERNELS, {
        "name": k["name"], "op_row": k["op_row"], "dur_ns": k["dur"] * US, "start_ns": start,
        "task_type": k["task_type"], "in_trace": [True] * len(k),
    })
    meta = ProfileMeta(kind=kind, source=f"/data/{kind}", backward_tid=backward_tid)  # type: ignore[arg-type]
    return Profile(meta=meta, ops=ops_df, kernels=kernels_df)


def base_profile() -> Profile:
    """Main thread 1: a step holding forward (linear, relu) and backward; the autograd thread 2
    runs AddmmBackward inside the backward annotation's window."""
    return make_profile(
        ops=[
            ("ProfilerStep#1", 1, 0, 1000, -1, 0),  # 0
            ("## forward ##", 1, 10, 400, 0, 1),  # 1
            ("aten::linear", 1, 20, 200, 1, 2, "[[8, 16], [32, 16]]"),  # 2
            ("cudaLaunchKernel", 1, 30, 40, 2, 3),  # 3
            ("aten::relu", 1, 210, 300, 1, 2, "[[8, 32]]"),  # 4
            ("cudaLaunchKernel", 1, 220, 230, 4, 3),  # 5
            ("## backward ##", 1, 500, 900, 0, 1),  # 6
            ("AddmmBackward", 2, 510, 700, -1, 0),  # 7  (root of thread 2)
            ("cudaLaunchKernel", 2, 520, 530, 7, 1),  # 8
        ],
        kernels=[
            ("gemm", 3, 50),
            ("relu_k", 5, 10),
            ("memset", 5, 99, "gpu_memset"),  # never device time for operators
            ("bwd_gemm", 8, 80),
            ("orphan", -1, 7),  # launched by no known op
        ],
    )


def comp_profile() -> Profile:
    """Same model; linear slower (70), relu replaced by gelu (12), backward 100, and one extra
    top-level ``aten::zeros`` after the backward annotation."""
    return make_profile(
        ops=[
            ("ProfilerStep#1", 1, 0, 1200, -1, 0),  # 0
            ("## forward ##", 1, 10, 400, 0, 1),  # 1
            ("aten::linear", 1, 20, 200, 1, 2, "[[8, 16], [32, 16]]"),  # 2
            ("cudaLaunchKernel", 1, 30, 40, 2, 3),  # 3
            ("aten::gelu", 1, 210, 300, 1, 2, "[[8, 32]]"),  # 4
            ("cudaLaunchKernel", 1, 220, 230, 4, 3),  # 5
            ("## backward ##", 1, 500, 900, 0, 1),  # 6
            ("AddmmBackward", 2, 510, 700, -1, 0),  # 7
            ("cudaLaunchKernel", 2, 520, 530, 7, 1),  # 8
            ("aten::zeros", 1, 950, 960, 0, 1),  # 9
        ],
        kernels=[("gemm", 3, 70), ("gelu_k", 5, 12), ("bwd_gemm", 8, 100)],
    )


# ---------------------------------------------------------------------------------------------
# Forest
# ---------------------------------------------------------------------------------------------


def test_forest_adopts_other_thread_roots_and_sums_subtrees() -> None:
    f = build_forest(base_profile())
    assert f.parent.tolist() == [-1, 0, 1, 2, 1, 4, 0, 6, 7]  # AddmmBackward adopted by backward
    assert f.depth.tolist() == [0, 1, 2, 3, 2, 3, 1, 2, 3]
    assert f.top.tolist() == [1, 6]  # the step is replaced by its children
    # forward = gemm 50 + relu_k 10 (memset excluded), backward = bwd_gemm 80 via adoption
    assert (f.device_ns[[1, 2, 4, 6, 0]] // US).tolist() == [60, 50, 10, 80, 140]
    assert f.kernel_num[[1, 6, 0]].tolist() == [2, 1, 3]
    # preorder numbers every subtree as one contiguous range
    assert sorted(f.pre.tolist()) == list(range(9))
    assert f.pre[6] < f.pre[7] < f.pre[8] < f.pre[6] + f.size[6]


def test_tree_levels_visit_every_row_once_by_depth() -> None:
    """Hand-built forest: 0 → (1 → (3, 4), 2), 5 → 6; children listed in row order."""
    from perfcmp_core.compare.optree import children_csr, children_of, level_depths, tree_levels

    parent = np.array([-1, 0, 0, 1, 1, -1, 5])
    ptr, idx = children_csr(parent)
    assert children_of(np.array([5, 0]), ptr, idx).tolist() == [6, 1, 2]
    assert children_of(np.array([3, 6]), ptr, idx).tolist() == []
    levels = tree_levels(parent, ptr, idx)
    assert [lv.tolist() for lv in levels] == [[0, 5], [1, 2, 6], [3, 4]]
    assert level_depths(levels, len(parent)).tolist() == [0, 1, 1, 2, 2, 0, 1]
    assert tree_levels(np.zeros(0, dtype="int64"), *children_csr(np.zeros(0, dtype="int64"))) == []


def test_float_text_is_python_repr() -> None:
    """Durations and sizes print as Python's repr, each distinct value formatted once (by its
    bits, so -0.0 and 0.0 keep their own text)."""
    from perfcmp_core.compare.kernel_rows import float_text

    values = np.array([333.0, 65.5, 0.1 + 0.2, 333.0, -0.0, 0.0, np.nan, np.inf, 1e16, 1e-05, 65.5])
    assert float_text(values).tolist() == [repr(float(v)) for v in values]
    assert float_text(values).dtype == object
    assert float_text(np.zeros(0)).tolist() == []


def test_adoption_needs_strict_containment() -> None:
    """A thread-2 op that outlives the thread-1 op it starts in, and one with the identical
    interval, stay roots (the reference's start-only stack would nest the first)."""
    p = make_profile(
        ops=[("A", 1, 0, 100, -1, 0), ("B", 2, 50, 150, -1, 0), ("C", 3, 200, 300, -1, 0),
             ("D", 4, 200, 300, -1, 0), ("E", 4, 210, 220, 3, 1)],
        kernels=[],
    )
    f = build_forest(p)
    assert f.parent.tolist() == [-1, -1, -1, -1, 3]
    assert f.top.tolist() == [0, 1, 2, 3]


def test_segments_split_on_backward_thread() -> None:
    tid = np.array([1, 1, 9, 9, 1, 7])
    segs = split_segments(np.arange(6), tid, backward_tid=9)
    assert [(b, s.tolist()) for b, s in segs] == [(False, [0, 1]), (True, [2, 3]), (False, [4, 5])]
    assert [(b, s.tolist()) for b, s in split_segments(np.arange(3), tid, -1)] == [(False, [0, 1, 2])]


def test_segment_pairs_first_kinds_differ() -> None:
    """Base runs fwd,bwd; comparison runs bwd,fwd,bwd: different first kinds and the comparison
    has more runs, so its first run goes alone; then (fwd, fwd), (bwd, bwd)."""
    b = make_profile([("f", 1, 0, 10, -1, 0), ("b", 9, 20, 30, -1, 0)], [], backward_tid=9)
    c = make_profile([("b0", 9, 0, 5, -1, 0), ("f", 1, 10, 15, -1, 0), ("b", 9, 20, 30, -1, 0)], [],
                     backward_tid=9)
    pairs = segment_pairs(build_forest(b), build_forest(c))
    assert [(x.tolist(), y.tolist()) for x, y in pairs] == [([], [0]), ([0], [1]), ([1], [2])]


# ---------------------------------------------------------------------------------------------
# Matching and tables
# ---------------------------------------------------------------------------------------------


def test_statistic_sheet_values_and_order() -> None:
    match, tables = compare_operators(base_profile(), comp_profile(), CompareOptions())
    assert [t.name for t in tables] == ["OperatorCompareStatistic", "OperatorCompare"]
    stat = tables[0]
    d = stat.data
    # backward +0.02 ms, forward +0.022 ms (60 → 82 µs), zeros comparison-only with 0 ms
    assert d["name"].tolist() == ["## forward ##", "## backward ##", "aten::zeros"]
    assert d["top"].tolist() == [1, 2, 3]
    assert np.allclose(d["base_ms"], [0.060, 0.080, 0.0])
    assert np.allclose(d["comp_ms"], [0.082, 0.100, 0.0])
    assert d["base_num"].tolist() == [1, 1, 0] and d["comp_num"].tolist() == [1, 1, 1]
    assert np.allclose(d["diff"], [0.022, 0.020, 0.0])
    assert np.allclose(d["ratio"], [82 / 60, 100 / 80, 1.0])
    assert stat.default_sort == "diff"
    assert (stat.base_span, stat.comp_span) == ((2, 3), (4, 5))
    assert [c.header for c in stat.sheet_columns()] == [
        "Top", "Operator Name", "Base Device Duration(ms)", "Base Operator Number",
        "Comparison Device Duration(ms)", "Comparison Operator Number", "Diff Duration(ms)", "Diff Ratio"]
    assert [c.width for c in stat.sheet_columns()] == [10, 30, 25, 25, 30, 30, 20, 20]
    # device time 50 + 10 + 99 (memset) + 80 + 7 = 246 ns; the orphan's 7 ns = 2.8 %
    assert stat.notes == ["base: 1 kernels (0.007 ms, 2.8 % of device time) are linked to no host op and appear "
                          "in no operator row: 1 carry no correlation id and no flow reaches them"]


def test_detail_sheet_rows_one_sided_and_kernel_text() -> None:
    _, tables = compare_operators(base_profile(), comp_profile(), CompareOptions())
    det = tables[1]
    d = det.data
    assert [c.header for c in det.sheet_columns()] == [
        "Order Id", "Operator Name", "Input Shape", "Input Type", "Kernel Details", "Device Duration(us)",
        "Operator Name", "Input Shape", "Input Type", "Kernel Details", "Device Duration(us)",
        "Diff Duration(us)", "Diff Ratio"]
    assert [c.width for c in det.sheet_columns()] == [10, 30, 20, 20, 20, 20, 30, 20, 20, 20, 20, 20, 20]
    assert (det.base_span, det.comp_span) == ((1, 5), (6, 10))
    assert d["order"].tolist() == [1, 2, 3]
    assert d["base_name"].tolist() == ["## forward ##", "## backward ##", ""]
    assert d["comp_name"].tolist() == ["## forward ##", "## backward ##", "aten::zeros"]
    assert d["base_shape"].tolist() == ["N/A", "N/A", ""]  # no Input Dims → N/A; absent → blank
    assert "base_details" not in d  # a child table, rendered where it is read
    assert det.values("base_details").tolist()[0] == "gemm [duration: 50.0]\nrelu_k [duration: 10.0]\n"
    assert det.values("comp_details").tolist()[1] == "bwd_gemm [duration: 100.0]\n"
    assert det.values("base_details").tolist()[2] == ""  # no base op
    assert d["base_us"].tolist() == [60.0, 80.0, 0.0]
    assert d["diff"].tolist() == [22.0, 20.0, 0.0]
    assert d["ratio"].tolist()[2] == 1.0  # comparison-only op without device time
    assert d["_base_row"].tolist() == [1, 6, -1] and d["_comp_row"].tolist() == [1, 6, 9]


def test_kernel_details_breadth_first() -> None:
    """A launches nothing itself; child B's grandchild launches x, child C launches y directly.
    Breadth-first (the reference's queue order) gives y before x; depth-first would not."""
    p = make_profile(
        ops=[("A", 1, 0, 100, -1, 0), ("B", 1, 10, 40, 0, 1), ("B1", 1, 20, 30, 1, 2), ("C", 1, 50, 60, 0, 1)],
        kernels=[("x", 2, 1), ("y", 3, 2)],
    )
    _, tables = compare_operators(p, p, CompareOptions())
    assert tables[1].values("base_details").tolist() == ["y [duration: 2.0]\nx [duration: 1.0]\n"]
    k = operator_kernels(p, 0)
    assert k["name"].tolist() == ["y", "x"] and k["launched_by"].tolist() == ["C", "B1"]


@pytest.mark.parametrize("fixture", ["npu_text/comp_ascend_pt", "npu_db/base_ascend_pt", "gpu/base.pt.trace.json"])
def test_subtree_gather_is_each_ops_subtree_items(fixture: str) -> None:
    """The detail sheets gather every row's subtree kernels at once (subtree_gather); for every
    op, and for absent rows (-1), that is the drill-in's own walk (subtree_items); rendered, each
    row's cell is its kernels' lines (written here from the kernels table) in that order."""
    from perfcmp_core.compare.optree import forest_of
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import LoadOptions

    profile = load_profile(str(Path(__file__).parents[1] / "fixtures" / fixture), LoadOptions(use_cache=False))
    forest = forest_of(profile)
    rows = np.r_[np.arange(len(profile.ops)), -1, 0]
    picked, counts = forest.subtree_gather(forest.kernels, rows)
    expected = [forest.subtree_items(forest.kernels, r).tolist() if r >= 0 else [] for r in rows.tolist()]
    assert counts.tolist() == [len(e) for e in expected]
    assert picked.tolist() == [k for e in expected for k in e]
    assert any(len(e) > 1 for e in expected)  # some ops hold several kernels
    _, tables = compare_operators(profile, profile, CompareOptions())
    k, det = profile.kernels, tables[1]

    def line(r: int) -> str:
        if not profile.meta.is_npu:
            return f"{k['name'].iat[r]} [duration: {float(k['dur_ns'].iat[r]) / 1000.0!r}]\n"
        shapes = k["input_shapes"].iat[r]
        return (f"{k['name'].iat[r]}, {k['task_id'].iat[r] if k['task_id'].iat[r] >= 0 else 'None'}, {k['task_type'].iat[r] or 'None'}"
                f"{f', [input shapes: {shapes}]' if shapes else ''} [duration: {float(k['dur_ns'].iat[r]) / 1000.0!r}]\n")

    b = det.data["_base_row"].to_numpy()
    want = ["".join(line(i) for i in forest.subtree_items(forest.kernels, r)) if r >= 0 else "" for r in b.tolist()]
    assert det.values("base_details").tolist() == want


def test_npu_kernel_details_format() -> None:
    p = make_profile(ops=[("aten::mm", 1, 0, 100, -1, 0)], kernels=[("MatMulV2", 0, 30), ("hcom_allReduce_", 0, 5)],
                     kind="npu_text")
    p.kernels["task_id"] = [11, -1]
    p.kernels["task_type"] = ["AI_CORE", ""]
    p.kernels["input_shapes"] = ["8,16;16,32", ""]
    _, tables = compare_operators(p, p, CompareOptions())
    assert tables[1].values("base_details").tolist() == [
        "MatMulV2, 11, AI_CORE, [input shapes: 8,16;16,32] [duration: 30.0]\n"
        "hcom_allReduce_, None, None [duration: 5.0]\n"]
    # The workbook keeps the reference's placeholders; a screen drops them (issue 16).
    assert screen_kernel_text(tables[1].value("base_details", 0)) == (
        "MatMulV2, 11, AI_CORE, [input shapes: 8,16;16,32] [duration: 30.0]\n"
        "hcom_allReduce_ [duration: 5.0]\n")


def test_screen_kernel_text_keeps_a_none_that_is_a_name() -> None:
    """Only the placeholder fields go: a kernel or module called ``None`` stays."""
    assert screen_kernel_text("None [duration: 1.0]\n") == "None [duration: 1.0]\n"
    assert screen_kernel_text("k, None, None, [input shapes: 1] [duration: 2.0]") == (
        "k, [input shapes: 1] [duration: 2.0]")
    assert screen_kernel_text("/ None_0/ Linear_1") == "/ None_0/ Linear_1"


def test_lcs_matches_more_than_longest_block() -> None:
    """difflib would take the block (b c d) and leave the four a's unmatched."""
    names_b = ["a", "a", "a", "a", "b", "c", "d"]
    names_c = ["b", "c", "d", "a", "a", "a", "a"]
    b = make_profile([(n, 1, 10 * i, 10 * i + 5, -1, 0) for i, n in enumerate(names_b)], [])
    c = make_profile([(n, 1, 10 * i, 10 * i + 5, -1, 0) for i, n in enumerate(names_c)], [])
    pairs = match_operators(b, c, CompareOptions()).pairs
    assert int(((pairs["base_row"] >= 0) & (pairs["comp_row"] >= 0)).sum()) == 4


def test_op_name_map_pairs_and_groups_under_mapped_name() -> None:
    b = make_profile([("Optimizer.step#SGD.step", 1, 0, 10, -1, 0)], [("k", 0, 5)])
    c = make_profile([("Optimizer.step#FusedSGD.step", 1, 0, 10, -1, 0)], [("k", 0, 3)])
    plain = match_operators(b, c, CompareOptions(exact_names=True)).pairs
    assert plain[["base_row", "comp_row"]].values.tolist() == [[0, -1], [-1, 0]]
    # Without --exact-names the two lone ops of the step pair by position, and say so.
    structural = match_operators(b, c, CompareOptions()).pairs
    assert structural[["base_row", "comp_row", "matched_as"]].values.tolist() == [[0, 0, "by position"]]
    opts = CompareOptions(op_name_map=(("Optimizer.step#SGD.step", "Optimizer.step#FusedSGD.step"),))
    _, tables = compare_operators(b, c, opts)
    assert tables[1].data[["base_name", "comp_name"]].values.tolist() == [
        ["Optimizer.step#SGD.step", "Optimizer.step#FusedSGD.step"]]  # original names shown
    stat = tables[0].data
    assert stat["name"].tolist() == ["Optimizer.step#FusedSGD.step"]  # one row, not two
    assert stat["matched_as"].tolist() == [""]  # the user's own rename: nothing to flag
    assert stat[["base_num", "comp_num"]].values.tolist() == [[1, 1]]
    assert np.allclose(stat["diff"], [-0.002])


def test_use_input_shape_key() -> None:
    b = make_profile([("aten::add", 1, 0, 10, -1, 0, "[[8, 16], [8, 16]]"),
                      ("aten::add", 1, 20, 30, -1, 0, "[[4], [4]]")], [])
    c = make_profile([("aten::add", 1, 0, 10, -1, 0, "8,16;8,16")], [], kind="npu_text")
    by_name = match_operators(b, c, CompareOptions()).pairs
    assert by_name[["base_row", "comp_row"]].values.tolist() == [[0, 0], [1, -1]]
    by_shape = match_operators(b, c, CompareOptions(use_input_shape=True)).pairs
    # the normalised shapes agree across GPU and NPU spellings; [[4], [4]] does not match
    assert by_shape[["base_row", "comp_row"]].values.tolist() == [[0, 0], [1, -1]]
    c2 = make_profile([("aten::add", 1, 0, 10, -1, 0, "4;4")], [], kind="npu_text")
    by_shape2 = match_operators(b, c2, CompareOptions(use_input_shape=True)).pairs
    assert by_shape2[["base_row", "comp_row"]].values.tolist() == [[0, -1], [1, 0]]
    assert shape_key(pd.Series(["[[8, 16], [32], []]", "8,16;32", ""])).tolist() == ["8,16;32;", "8,16;32", ""]


def _drill_profiles() -> tuple[Profile, Profile]:
    """Top op T launches 6 kernels through children L1 (4 kernels) and L2 (2); comparison T has
    L1 (5 kernels) only, plus a one-sided top op X (6 kernels) with children X1 (6)."""
    b = make_profile(
        ops=[("T", 1, 0, 100, -1, 0), ("L1", 1, 10, 40, 0, 1), ("L2", 1, 50, 60, 0, 1)],
        kernels=[("k", 1, 1)] * 4 + [("k", 2, 1)] * 2,
    )
    c = make_profile(
        ops=[("T", 1, 0, 100, -1, 0), ("L1", 1, 10, 40, 0, 1), ("X", 1, 200, 300, -1, 0), ("X1", 1, 210, 220, 2, 1)],
        kernels=[("k", 1, 1)] * 5 + [("k", 3, 1)] * 6,
    )
    return b, c


def test_max_kernel_num_drill_down() -> None:
    b, c = _drill_profiles()
    top = match_operators(b, c, CompareOptions()).pairs
    assert top[["base_row", "comp_row"]].values.tolist() == [[0, 0], [-1, 2]]
    # N=5: T (6 > 5) expands into (L1, L1), (L2, —); X (6 > 5, one-sided) expands into (—, X1);
    # L1 (max 5) and X1 (no children) stop.
    drilled = match_operators(b, c, CompareOptions(max_kernel_num=5)).pairs
    assert drilled[["base_row", "comp_row"]].values.tolist() == [[1, 1], [2, -1], [-1, 3]]
    assert drilled["base_kernel_num"].tolist() == [4, 2, 0]
    assert drilled["comp_kernel_num"].tolist() == [5, 0, 6]
    # N=6: nothing exceeds the limit
    kept = match_operators(b, c, CompareOptions(max_kernel_num=6)).pairs
    assert kept[["base_row", "comp_row"]].values.tolist() == [[0, 0], [-1, 2]]


def test_disable_details_drops_detail_sheet_only() -> None:
    b, c = _drill_profiles()
    opts = CompareOptions(max_kernel_num=5)
    _, full = compare_operators(b, c, opts)
    _, stat_only = compare_operators(b, c, CompareOptions(max_kernel_num=5, disable_details=True))
    assert [t.name for t in stat_only] == ["OperatorCompareStatistic"]
    pd.testing.assert_frame_equal(full[0].data, stat_only[0].data)  # still aligned and drilled
    assert stat_only[0].data["name"].tolist() == ["X1", "L1", "L2"]  # diff +0.006, +0.001, -0.002


def test_one_sided_side_has_no_ops() -> None:
    b = make_profile([], [])
    _, tables = compare_operators(b, comp_profile(), CompareOptions())
    d = tables[1].data
    assert d["base_name"].tolist() == ["", "", ""]
    assert d["ratio"].tolist() == [np.inf, np.inf, 1.0]
    assert tables[0].data["base_num"].tolist() == [0, 0, 0]


# ---------------------------------------------------------------------------------------------
# Real GPU pair against the reference
# ---------------------------------------------------------------------------------------------

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gpu-real"

# OperatorCompareStatistic of the reference (msprof-analyze 26.2.0), produced by:
#   gunzip -c trace_diff_*.pt.trace.json.gz into /tmp, then
#   /tmp/peer/bin/msprof-analyze compare -d /tmp/trace_diff_test.pt.trace.json \
#       -bp /tmp/trace_diff_control.pt.trace.json -o /tmp/peer_out --force
# name: (base ms, base count, comparison ms, comparison count)
REFERENCE_STAT = {
    "## backward ##": (245.2820000000013, 6, 341.1620000000005, 6),
    "## forward ##": (150.4789999999999, 6, 168.7000000000002, 6),
    "## load_batch ##": (50.63999999999999, 6, 66.621, 6),
    "## optimizer ##": (7.641999999999999, 6, 12.281, 6),
    "## wait_sparse_data_dist ##": (2.835, 6, 3.502, 6),
    "aten::zero_": (0.752, 6, 1.263, 6),
    "## metrics:add ##": (0.7130000000000004, 6, 0.7550000000000003, 6),
    "aten::zeros": (0, 66, 0, 66),
    "aten::empty": (0, 6, 0, 6),
    "## metrics:publish ##": (0, 6, 0, 6),
    "## zero_grad ##": (0, 6, 0, 6),
    "## wait_for_batch ##": (0, 6, 0, 6),
    "aten::detach": (0, 54, 0, 53),
    "cudaPointerGetAttributes": (0, 2, 0, 0),
    "cudaDeviceSynchronize": (0, 1, 0, 1),
    "## sparse_data_dist ##": (45.413, 6, 45.361, 6),
}


@pytest.fixture(scope="module")
def real_pair() -> tuple[Profile, Profile]:
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import LoadOptions

    base_gz, comp_gz = DATA / "trace_diff_control.pt.trace.json.gz", DATA / "trace_diff_test.pt.trace.json.gz"
    if not (base_gz.exists() and comp_gz.exists()):
        pytest.skip("real GPU traces not available")
    opts = LoadOptions(force=True)
    return load_profile(str(base_gz), opts), load_profile(str(comp_gz), opts)


def _graph_ms(profile: Profile, op_row: int) -> float:
    k = operator_kernels(profile, op_row)
    return float(k.loc[k["launched_by"] == "cudaGraphLaunch", "dur_ns"].sum()) / 1e6


def test_real_pair_statistic_against_reference(real_pair: tuple[Profile, Profile]) -> None:
    base, comp = real_pair
    match, tables = compare_operators(base, comp, CompareOptions())
    stat = tables[0].data.set_index("name")
    assert set(stat.index) == set(REFERENCE_STAT)
    # The LCS pairs every comparison top-level op (difflib: 161 pairs).
    p = match.pairs
    assert int(((p["base_row"] >= 0) & (p["comp_row"] >= 0)).sum()) == (p["comp_row"] >= 0).sum() == 194
    # Counts agree except two ops the reference nests under a neighbour (start-only, inclusive-end
    # nesting puts an op starting exactly at another's end inside it).
    for name, (b_ms, b_n, c_ms, c_n) in REFERENCE_STAT.items():
        if name == "aten::detach":
            assert (stat.at[name, "base_num"], stat.at[name, "comp_num"]) == (54, 54)
        elif name == "cudaPointerGetAttributes":
            assert (stat.at[name, "base_num"], stat.at[name, "comp_num"]) == (2, 1)
        else:
            assert (stat.at[name, "base_num"], stat.at[name, "comp_num"]) == (b_n, c_n), name
    # Base: identical except where the reference double counts kernels of ops starting at the
    # launching op's µs (§2.1): 3.445 ms in total, all in three annotations.
    over = {n: REFERENCE_STAT[n][0] - stat.at[n, "base_ms"] for n in REFERENCE_STAT}
    assert {n for n, v in over.items() if abs(v) > 1e-9} == {"## backward ##", "## forward ##",
                                                           "## sparse_data_dist ##"}
    assert min(over.values()) > -1e-9 and sum(over.values()) == pytest.approx(3.445, abs=1e-6)
    # Comparison: we also count the 4 470 kernels replayed by cudaGraphLaunch (correlation ids;
    # the reference's flow/timestamp link misses them). Without them the two agree exactly except
    # forward/backward, where the reference's double counting adds < 0.5 ms.
    tops = p[p["comp_row"] >= 0].groupby("group")["comp_row"].apply(list)
    for name, (_, _, c_ms, _) in REFERENCE_STAT.items():
        graph = sum(_graph_ms(comp, r) for r in tops[name])
        ours = stat.at[name, "comp_ms"] - graph
        if name in ("## backward ##", "## forward ##"):
            assert graph > 90 and 0 <= c_ms - ours < 0.5, name
        else:
            assert graph == 0 and ours == pytest.approx(c_ms, abs=1e-9), name


def test_no_ops_on_either_side_gives_reason() -> None:
    empty = make_profile([], [])
    _, tables = compare_operators(empty, empty, CompareOptions())
    assert all(t.empty for t in tables)
    assert tables[0].absent_reason.startswith("no host ops in base or comparison")


@pytest.mark.parametrize("missing_key", [False, True])
def test_grouped_sums_each_key_over_both_sides_in_first_seen_order(missing_key: bool) -> None:
    """``grouped``: per key (base keys first-seen, then comparison-only ones) each side's sum and
    count, the base label first; derived here with plain dicts. A missing key (``None``, never
    made by the matcher) forms no group, as pandas' grouping by text leaves it out."""
    from perfcmp_core.compare.operators import grouped

    rng = np.random.default_rng(3)
    n = 400
    keys = [f"k{i}" for i in rng.integers(0, 30, n)]
    comp_keys = [f"k{i}" for i in rng.integers(10, 45, n)]
    if missing_key:
        keys[5] = None
    base_row = np.where(rng.random(n) < 0.8, np.arange(n), -1)
    comp_row = np.where(rng.random(n) < 0.8, np.arange(n), -1)
    pairs = pd.DataFrame({
        "base_row": base_row, "comp_row": comp_row,
        "group": pd.Series(keys, dtype=object), "comp_group": pd.Series(comp_keys, dtype=object),
        "label": pd.Series([f"L{k}" for k in keys], dtype=object),
        "comp_label": pd.Series([f"C{k}" for k in comp_keys], dtype=object),
        "matched_as": pd.Series([""] * n, dtype=object),
        "b_ns": rng.integers(0, 10**12, n), "c_ns": rng.integers(0, 10**12, n),
    })
    got = grouped(pairs, {"ns": ("b_ns", "c_ns")})
    order: list[str] = []
    acc: dict[str, dict[str, float]] = {}
    for side, rows, key_col, label_col, col in (("base", base_row, keys, "label", "b_ns"),
                                                ("comp", comp_row, comp_keys, "comp_label", "c_ns")):
        for i in np.flatnonzero(rows >= 0).tolist():
            k = key_col[i]
            if k is None:
                continue
            if k not in acc:
                order.append(k)
                acc[k] = {"name": pairs[label_col][i], "base_ns": 0, "base_num": 0, "comp_ns": 0, "comp_num": 0}
            acc[k][f"{side}_ns"] += int(pairs[col][i])
            acc[k][f"{side}_num"] += 1
    assert got["name"].tolist() == [acc[k]["name"] for k in order]
    for col in ("base_ns", "base_num", "comp_ns", "comp_num"):
        assert got[col].tolist() == [acc[k][col] for k in order]
    assert got["matched_as"].tolist() == [""] * len(order)
