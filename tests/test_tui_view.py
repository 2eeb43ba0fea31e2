"""perfcmp_core.view and perfcmp_core.insight: what the TUI shows, computed without Textual.

Every expected value here is worked out by hand from the tiny tables built below.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.result import IS_TOTAL, LEVEL, NODE, PARENT, SHOWN, Column, Table
from perfcmp_core.compare.result import tone as trend
from perfcmp_core.insight import gap_sentence, headlines
from perfcmp_core.view import (TableView, _level_links, display_columns, display_header,
                               format_value, label_column, screen_text, sign)

NAME = Column("name", "Operator Name", "key", "bold")
BASE = Column("base", "Duration(us)", "base", "float")
COMP = Column("comp", "Duration(us)", "comparison", "float")
DIFF = Column("diff", "Diff Duration(us)", "diff", "float")
RATIO = Column("ratio", "Diff Ratio", "ratio", "percent")


def flat() -> Table:
    data = pd.DataFrame({
        "name": ["aten::mm", "aten::add", "aten::to", "Total"],
        "base": [10.0, 5.0, 0.0, 15.0],
        "comp": [13.0, 4.0, 2.0, 19.0],
        "diff": [3.0, -1.0, 2.0, 4.0],
        "ratio": [1.3, 0.8, math.inf, 19 / 15],
        IS_TOTAL: [False, False, False, True],
    })
    return Table("T", (NAME, BASE, COMP, DIFF, RATIO), data, (1, 1), (2, 2), default_sort="diff")


def tree(roots: int = 2) -> Table:
    """A (node 10) > a1 (11) > a11 (12); A > a2 (13); B (20) as a second root when roots == 2."""
    rows = [("A", 10, -1, 0, 5.0), ("a1", 11, 10, 1, 1.0), ("a11", 12, 11, 2, 0.5),
            ("a2", 13, 10, 1, 4.0), ("B", 20, -1, 0, 9.0)][: 4 if roots == 1 else 5]
    data = pd.DataFrame(rows, columns=["name", NODE, PARENT, LEVEL, "diff"])
    return Table("Tree", (Column("name", "Module Name", "key", "text"), DIFF), data, (0, 0),
                 (0, 0), default_sort="diff", tree="nodes")


def names(view: TableView) -> list[str]:
    return view.table.data["name"].to_numpy()[view.order()].tolist()


# -- formatting ---------------------------------------------------------------------------------
def test_screen_text_signs_differences_only() -> None:
    assert screen_text(3.0, DIFF) == "+3.00"
    assert screen_text(-1.0, DIFF) == "-1.00"
    assert screen_text(0.0, DIFF) == "0.00"
    assert screen_text(2.5, BASE) == "2.50"
    # A ratio (comparison ÷ base) reads as the change in percent on screen; the workbook's
    # text keeps the reference's Diff Ratio.
    assert screen_text(1.3, RATIO) == "+30.00%"
    assert screen_text(0.4507, RATIO) == "-54.93%"
    assert screen_text(1.0, RATIO) == "0.00%"
    assert screen_text(0.99999, RATIO) == "0.00%"  # rounds to no change: no sign
    assert screen_text(math.inf, RATIO) == "new"
    assert format_value(1.3, RATIO) == "130.00%"
    assert format_value(math.inf, RATIO) == "INF"
    assert screen_text(float("nan"), DIFF) == ""
    # Module sheets put "Diff" in the middle of the header: still a difference.
    assert screen_text(33.1, Column("d", "Device Total Time Diff(us)", "diff", "float")) == "+33.10"
    assert format_value(1234567, Column("n", "Calls", "base", "int")) == "1,234,567"


def test_trend_and_sign_carry_direction_without_colour() -> None:
    assert trend(1.3, RATIO) == 1 and trend(0.8, RATIO) == -1 and trend(1.0, RATIO) == 0
    assert trend(math.inf, RATIO) == 1
    assert trend(2.0, DIFF) == 0  # only ratio headers get ▲/▼
    assert sign(2.0, DIFF) == 1 and sign(-0.5, DIFF) == -1 and sign(0.0, DIFF) == 0
    assert sign(2.0, RATIO) == 0


def test_display_columns_put_names_then_differences_then_side_pairs() -> None:
    cols = (
        Column("order", "Order Id", "key", "int"),
        Column("base_name", "Operator Name", "base", "bold"),
        Column("base_shape", "Input Shape", "base", "text"),
        Column("base_us", "Device Duration(us)", "base", "float"),
        Column("comp_name", "Operator Name", "comparison", "bold"),
        Column("comp_shape", "Input Shape", "comparison", "text"),
        Column("comp_us", "Device Duration(us)", "comparison", "float"),
        Column("diff", "Diff Duration(us)", "diff", "float"),
        Column("ratio", "Diff Ratio", "ratio", "percent"),
    )
    table = Table("OperatorCompare", cols, pd.DataFrame({c.key: [] for c in cols}), (1, 3), (4, 6))
    order = [c.key for c in display_columns(table)]
    # Numbers per side before text per side: the durations show before the shapes.
    assert order == ["base_name", "comp_name", "diff", "ratio", "base_us", "comp_us",
                     "base_shape", "comp_shape", "order"]
    headers = [display_header(c, table) for c in display_columns(table)]
    assert headers[:4] == ["Base Operator Name", "Comp Operator Name", "Diff Duration(us)", "Δ%"]
    assert headers[4:6] == ["Base Device Duration(us)", "Comp Device Duration(us)"]


def test_side_pairs_match_by_quantity_across_spellings() -> None:
    """Module sheets spell the sides out ("Base Device Duration(ms)", "Comparison Device
    Duration(ms)"): they are one quantity, adjacent on screen, and read "Base …" / "Comp …"."""
    cols = (
        Column("name", "Module Name", "key", "text"),
        Column("b_self", "Base Self Time(ms)", "base", "float"),
        Column("b_total", "Base Total Time(ms)", "base", "float"),
        Column("c_self", "Comparison Self Time(ms)", "comparison", "float"),
        Column("c_total", "Comparison Total Time(ms)", "comparison", "float"),
        Column("diff", "Total Time Diff(ms)", "diff", "float"),
        Column("ratio", "Total Time Diff Ratio", "ratio", "float"),
    )
    table = Table("M", cols, pd.DataFrame({c.key: [] for c in cols}), (1, 2), (3, 4))
    shown = display_columns(table)
    assert [c.key for c in shown] == ["name", "diff", "ratio", "b_self", "c_self", "b_total",
                                      "c_total"]
    assert [display_header(c, table) for c in shown] == [
        "Module Name", "Total Time Diff(ms)", "Δ% Total Time", "Base Self Time(ms)",
        "Comp Self Time(ms)", "Base Total Time(ms)", "Comp Total Time(ms)"]


def test_label_column_prefers_bold_then_name() -> None:
    module_cols = (Column("cls", "Module Class", "key", "text"),
                   Column("mod", "Module Name", "key", "text"), DIFF)
    assert label_column(module_cols) == 1
    assert label_column((Column("x", "Scope", "key", "text"), NAME)) == 1
    assert label_column((DIFF,)) == 0


# -- flat tables --------------------------------------------------------------------------------
def test_sort_by_diff_descending_then_flipped() -> None:
    view = TableView(flat())
    assert names(view) == ["aten::mm", "aten::add", "aten::to", "Total"]  # table order at first
    view.sort_by(view.diff_key())
    assert names(view) == ["Total", "aten::mm", "aten::to", "aten::add"]  # 4, 3, 2, -1
    view.sort_by(view.diff_key())
    assert names(view) == ["aten::add", "aten::to", "aten::mm", "Total"]


def test_sort_text_column_and_infinite_ratio() -> None:
    view = TableView(flat())
    view.sort_by("name", descending=False)  # code-point order: "T" < "a"
    assert names(view) == ["Total", "aten::add", "aten::mm", "aten::to"]
    view.sort_by("ratio", descending=True)  # inf, 1.3, 19/15 = 1.267, 0.8
    assert names(view) == ["aten::to", "aten::mm", "Total", "aten::add"]


def test_missing_values_sort_last_both_ways() -> None:
    table = flat()
    table.data.loc[1, "diff"] = np.nan
    view = TableView(table)
    view.sort_by("diff", descending=True)
    assert names(view)[-1] == "aten::add"
    view.sort_by("diff", descending=False)
    assert names(view)[-1] == "aten::add"


def test_text_numbers_sort_numerically() -> None:
    """OverallMetrics' Number column mixes counts and "/" (no count)."""
    data = pd.DataFrame({"name": ["a", "b", "c", "d"], "n": [3, "/", 12, 5]})
    table = Table("N", (NAME, Column("n", "Number", "base", "int")), data, (1, 1), (1, 1))
    view = TableView(table)
    view.sort_by("n", descending=True)
    assert names(view) == ["c", "d", "a", "b"]


def test_filter_is_case_insensitive_substring_over_text_columns() -> None:
    view = TableView(flat())
    view.set_filter("  ATEN::  ")
    assert names(view) == ["aten::mm", "aten::add", "aten::to"]
    view.set_filter("mm")
    assert names(view) == ["aten::mm"]
    view.set_filter("")
    assert len(view) == 4


def test_totals_only_and_focus() -> None:
    view = TableView(flat())
    view.toggle_totals()
    assert names(view) == ["Total"]
    view.toggle_totals()
    view.set_focus(((("name",), "aten::to"),), "aten::to")
    assert names(view) == ["aten::to"] and view.focus_label == "aten::to"
    view.set_focus(())
    assert len(view) == 4 and view.focus_label == ""


def test_focus_matches_either_side_exactly() -> None:
    data = pd.DataFrame({"b": ["aten::to", "aten::to_copy", ""],
                         "c": ["", "aten::to_copy", "aten::to"]})
    cols = (Column("b", "Operator Name", "base", "bold"),
            Column("c", "Operator Name", "comparison", "bold"))
    view = TableView(Table("D", cols, data, (0, 0), (1, 1)))
    view.set_focus(((("b", "c"), "aten::to"),))
    assert view.order().tolist() == [0, 2]  # not aten::to_copy


def test_diff_key_falls_back_to_first_diff_then_ratio() -> None:
    table = flat()
    table.default_sort = None
    assert TableView(table).diff_key() == "diff"
    only_ratio = Table("R", (NAME, RATIO), table.data, (0, 0), (0, 0))
    assert TableView(only_ratio).diff_key() == "ratio"
    assert TableView(Table("X", (NAME,), table.data, (0, 0), (0, 0))).diff_key() is None


# -- trees --------------------------------------------------------------------------------------
def test_linked_tree_with_several_roots_starts_closed() -> None:
    view = TableView(tree())
    assert names(view) == ["A", "B"]
    assert view.toggle_node(0)
    assert names(view) == ["A", "a1", "a2", "B"]
    assert view.toggle_node(1)
    assert names(view) == ["A", "a1", "a11", "a2", "B"]
    assert not view.toggle_node(2)  # a leaf
    assert view.toggle_node(0)
    assert names(view) == ["A", "B"]


def test_linked_tree_with_one_root_starts_open() -> None:
    assert names(TableView(tree(roots=1))) == ["A", "a1", "a2"]


def test_tree_sort_keeps_children_under_their_parent() -> None:
    view = TableView(tree())
    view.toggle_node(0)
    view.toggle_node(1)
    view.sort_by("diff", descending=True)  # roots B 9 > A 5; under A: a2 4 > a1 1
    assert names(view) == ["B", "A", "a2", "a1", "a11"]
    view.sort_by("diff")
    assert names(view) == ["A", "a1", "a11", "a2", "B"]


def test_filtered_tree_is_a_flat_list() -> None:
    view = TableView(tree())
    view.set_filter("a1")
    assert names(view) == ["a1", "a11"]  # a11's parent stays closed, yet the match shows
    assert view.flat


def test_indented_hierarchy_is_derived_from_levels_and_starts_open() -> None:
    levels = np.array([0, 1, 2, 1, 0, 1])
    assert _level_links(levels).tolist() == [-1, 0, 1, 0, -1, 4]
    data = pd.DataFrame({"name": ["Computing", "\tMatmul", "\t\tMatmul (Cube)", "\tVector",
                                  "Free", "\tSDMA"], LEVEL: levels,
                         "diff": [3.0, 1.0, 1.0, 2.0, -1.0, -1.0]})
    view = TableView(Table("OverallMetrics", (Column("name", "Index", "key", "text"), DIFF),
                           data, (0, 0), (0, 0), tree="outline"))
    assert view.is_tree and len(view) == 6
    view.toggle_node(0)
    assert names(view) == ["Computing", "Free", "\tSDMA"]


# -- insight ------------------------------------------------------------------------------------
def test_headlines_in_ms_with_direction() -> None:
    figures = {
        "": {"unit": "", "base_text": "GPU", "comparison_text": "NPU"},
        "E2E Time(Not minimal profiling)": {"unit": "s", "base": 0.018716861, "comparison": 0.018992429},
        "Free Time": {"unit": "s", "base": 0.000316764, "comparison": 0.00024701},
        "Mem Usage": {"unit": "G", "base": 2.3125, "comparison": 2.875},
        "Computing Time": {"unit": "s", "base": 0.0, "comparison": 0.002},
    }
    got = {h.label: h for h in headlines(figures)}
    assert [h.label for h in headlines(figures)] == ["E2E", "Computing", "Free", "Mem Usage"]
    e2e = got["E2E"]
    assert (e2e.base, e2e.comparison, e2e.diff, e2e.change, e2e.direction) == (
        "18.717 ms", "18.992 ms", "+0.276 ms", "+1.5%", 1)
    free = got["Free"]  # 0.247010 / 0.316764 - 1 = -22.02 %
    assert (free.diff, free.change, free.direction) == ("-0.070 ms", "-22.0%", -1)
    mem = got["Mem Usage"]  # 2.875 / 2.3125 - 1 = 24.32 %
    assert (mem.base, mem.comparison, mem.diff, mem.change) == ("2.31 G", "2.88 G", "+0.56 G", "+24.3%")
    assert got["Computing"].change == "new"


def test_gap_sentence_names_largest_parts_with_short_group_labels() -> None:
    rows = [("Computing Time", 0, 0.47), ("\tAllGatherMatmul", 1, 0.66), ("\tMatmul", 1, -0.30),
            ("\tOther", 1, 0.08), ("\tVector", 1, 0.001),
            ("Uncovered Communication Time", 0, -0.12),
            ("\tdp: Group 10.20.0.11%enp189s0f0_60000_0_17364 Communication", 1, 0.60),
            ("Free Time", 0, 0.0), ("\tSDMA", 1, 0.0), ("E2E Time", 0, 0.28)]
    data = pd.DataFrame(rows, columns=["index", LEVEL, "diff_ms"])
    text = gap_sentence(Table("OverallMetrics", (), data, (0, 0), (0, 0)))
    # The figures add up as printed: Computing 0.47 = 0.66 − 0.30 + 0.08 + rest 0.03; the
    # group's −0.72 rest; E2E 0.28 = 0.47 − 0.12 + rest −0.07.
    assert text == ("Where the gap comes from — E2E +0.28 ms: +0.47 ms Computing (AllGatherMatmul "
                    "+0.66, Matmul -0.30, Other +0.08, rest +0.03); -0.12 ms Uncovered "
                    "Communication (dp +0.60, rest -0.72); -0.07 ms rest")


def test_gap_sentence_parts_add_up_and_use_the_screen_labels() -> None:
    """Children under 0.005 ms and a fourth child are the part's rest; a group is named as the
    screen names it (``_shown``)."""
    rows = [("Computing Time", 0, 0.40, "Computing Time"), ("\tMatmul", 1, 0.20, "\tMatmul"),
            ("\tVector", 1, 0.10, "\tVector"), ("\tCube", 1, 0.05, "\tCube"),
            ("\tOther", 1, 0.04, "\tOther"), ("\tSDMA (Tensor Move)", 1, 0.004, "\tSDMA"),
            ("Uncovered Communication Time", 0, -0.10, "Uncovered Communication Time"),
            ("\ttp: Group 7 Communication", 1, -0.10, "\ttp: Communication"),
            ("Free Time", 0, 0.001, "Free Time"), ("E2E Time", 0, 0.31, "E2E Time")]
    data = pd.DataFrame(rows, columns=["index", LEVEL, "diff_ms", SHOWN])
    text = gap_sentence(Table("OverallMetrics", (), data, (0, 0), (0, 0)))
    assert text == ("Where the gap comes from — E2E +0.31 ms: +0.40 ms Computing (Matmul +0.20, "
                    "Vector +0.10, Cube +0.05, rest +0.05); -0.10 ms Uncovered Communication "
                    "(tp -0.10); +0.01 ms rest")


@pytest.mark.parametrize("rows", [100_000])
def test_large_table_sort_and_filter_are_exact(rows: int) -> None:
    """The 100k-row path the redraw budget is measured on (bench/tui_redraw.py) is also right."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"name": [f"op_{i % 1000}" for i in range(rows)],
                         "diff": rng.normal(0, 10, rows)})
    view = TableView(Table("Big", (NAME, DIFF), data, (0, 0), (0, 0), default_sort="diff"))
    view.sort_by("diff")
    assert np.array_equal(view.order(), np.argsort(-data["diff"].to_numpy(), kind="stable"))
    view.set_filter("op_12")  # op_12, op_120..op_129: 11 names, 100 rows each
    assert len(view) == 1100
    assert set(data["name"].to_numpy()[view.order()]) == {"op_12", *(f"op_12{i}" for i in range(10))}
    shown = data["diff"].to_numpy()[view.order()]
    assert (np.diff(shown) <= 0).all()


def _kernel_table() -> Table:
    """Three NPU operator rows whose kernels are child rows: a short list, none, and a long run
    of 300 launches (more lines than a screen cell shows characters) with placeholders, a name
    holding a tab and one holding a carriage return."""
    from perfcmp_core.compare.kernel_rows import LAUNCH, Coded, KernelRows, offsets

    names = (["MatMulV2", "hcom_allReduce_"] + [f"Add\t{i % 7}" if i % 11 else f"Mul\r{i}" for i in range(300)])
    ids = [11, -1] + [100 + i if i % 5 else -1 for i in range(300)]
    types = ["AI_CORE", ""] + ["AI_VECTOR_CORE" if i % 3 else "" for i in range(300)]
    shapes = ["8,16;16,32", ""] + ["" if i % 4 else "4,4" for i in range(300)]
    kernels = KernelRows(LAUNCH, offsets(np.array([2, 0, 300])), Coded.of(np.array(names, dtype=object)),
                         np.ones(302, dtype="int64"), np.arange(302, dtype="int64") * 250 + 1000,
                         (np.array(ids, dtype="int64"),
                          *(Coded.of(np.array(v, dtype=object)) for v in (types, shapes))))
    data = pd.DataFrame({"name": ["aten::mm", "aten::zero_", "aten::add"]})
    return Table("OperatorCompare", (NAME, Column("details", "Kernel Details", "base", "text")), data,
                 (0, 1), (1, 1), children={"details": kernels})


def test_kernel_cells_are_rendered_when_drawn_and_clipped_as_text_would_be() -> None:
    """A child column's screen cell is clip_text of its rendered text without placeholders —
    the long row's too, though only its first and last lines are rendered for it."""
    from perfcmp_core.compare.operators import screen_kernel_text
    from perfcmp_core.view import clip_text

    table = _kernel_table()
    full = table.values("details").tolist()
    assert full[0] == ("MatMulV2, 11, AI_CORE, [input shapes: 8,16;16,32] [duration: 1.0]\n"
                       "hcom_allReduce_, None, None [duration: 1.25]\n")
    assert full[1] == "" and full[2].count("\n") == 300
    view = TableView(table).prepare()
    col = table.column("details")
    assert view.cells(np.array([2, 0, 1]), (col,)) == [[clip_text(screen_kernel_text(full[r]))] for r in (2, 0, 1)]
    assert view.cell(2, col) == clip_text(screen_kernel_text(full[2])) and len(view.cell(2, col)) == 240
    assert view.full_text(0, col) == screen_kernel_text(full[0])


def test_filter_on_kernel_lists_matches_a_line() -> None:
    """A kernel list matches when one of its lines (as shown: no placeholders) does."""
    view = TableView(_kernel_table())
    view.set_filter("hcom_allreduce_ [duration")  # the placeholders are not on screen
    assert view.order().tolist() == [0]
    view.set_filter("^mul\r")
    assert view.order().tolist() == [2]
    view.set_filter("aten::zero_|v2, 11")
    assert view.order().tolist() == [0, 1]
    view.set_filter("duration: 1.0]")
    assert view.order().tolist() == [0]
    assert view.matched_in("details").tolist() == [True, False, False]
