"""The workbook writer: reference layout, our fixes, safety, atomic never-overwriting output.

All expected values are written by hand from the synthetic tables below; layout facts (merge
ranges, header row, fills, formats) come from comparisons-and-outputs.md §8.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import subprocess
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import openpyxl
import pandas as pd
import pytest

from perfcmp_core import __version__
from perfcmp_core.compare import SHEETS, declare
from perfcmp_core.compare.result import ComparisonResult, Column, Table
from perfcmp_core.notes import ABSENT, Note
from perfcmp_core.errors import InputError
from perfcmp_core.export import xlsx
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.export.xlsx import NothingToWrite, write_workbook

NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
NAME = "performance_comparison_result_20240102030405.xlsx"
RED, GREEN = "00FF0000", "0092D050"

OP_STAT_COLUMNS = (
    Column("top", "Top", "key", "int", width=10),
    Column("name", "Operator Name", "key", "bold", width=30),
    Column("b_ms", "Base Device Duration(ms)", "base", "float", width=25),
    Column("b_n", "Base Operator Number", "base", "int", width=25),
    Column("c_ms", "Comparison Device Duration(ms)", "comparison", "float", width=30),
    Column("c_n", "Comparison Operator Number", "comparison", "int", width=30),
    Column("d_ms", "Diff Duration(ms)", "diff", "float", width=20),
    Column("ratio", "Diff Ratio", "ratio", "percent", width=20),
)


def op_stat() -> Table:
    """Five rows: worse, better, base-zero (INF), equal, missing ratio; names look like formulas."""
    data = pd.DataFrame(
        {
            "top": [1, 2, 3, 4, 5],
            "name": ["=cmd|' /C calc'!A0", "+aten::add", "-neg", "@at", "aten::mm"],
            "b_ms": [2.0, 4.0, 0.0, 1.0, np.nan],
            "b_n": [3, 2, 0, 1, 0],
            "c_ms": [3.0, 2.0, 1.5, 1.0, np.nan],
            "c_n": [3, 2, 1, 1, 0],
            "d_ms": [1.0, -2.0, 1.5, 0.0, np.nan],
            "ratio": [1.5, 0.5, np.inf, 1.0, np.nan],
            "_hidden": [9, 9, 9, 9, 9],
        }
    )
    return Table("OperatorCompareStatistic", OP_STAT_COLUMNS, data, (2, 3), (4, 5),
                 notes=["grouped by raw name"])


def overall() -> Table:
    trio = ("Duration(ms)", "Duration Ratio", "Number")
    cols = [Column("index", "Index", "key", "text", width=40)]
    for side, role in (("b", "base"), ("c", "comparison")):
        cols += [
            Column(f"{side}_dur", trio[0], role, "float"),
            Column(f"{side}_share", trio[1], role, "percent"),
            Column(f"{side}_num", trio[2], role, "int", width=10),
        ]
    cols += [
        Column("diff", "Diff Duration(ms)", "diff", "float"),
        Column("ratio", "Diff Ratio", "ratio", "percent", width=10),
    ]
    data = pd.DataFrame(
        {
            "index": ["Computing Time", "\tMatmul", "\t\tMatmul (Cube)", "\tOther", "E2E Time"],
            "b_dur": [10.0, 6.0, 6.0, 4.0, 20.0],
            "b_share": [0.5, 0.3, 0.3, 0.2, 1.0],
            "b_num": [5, 3, 3, "/", "/"],
            "c_dur": [12.0, 9.0, 9.0, 3.0, 20.0],
            "c_share": [0.6, 0.45, 0.45, 0.15, 1.0],
            "c_num": [6, 4, 4, "/", "/"],
            "diff": [2.0, 3.0, 3.0, -1.0, 0.0],
            "ratio": [1.2, 1.5, 1.5, 0.75, 1.0],
            "_level": [0, 1, 2, 1, 0],
        }
    )
    return Table("OverallMetrics", tuple(cols), data, (1, 3), (4, 6))


def api() -> Table:
    """ApiCompare declares its ratio columns as float (like the reference); they must be percent."""
    cols = (
        Column("name", "api name", "key", "bold", width=30),
        Column("b_total", "Total Duration(ms)", "base", "float"),
        Column("c_total", "Total Duration(ms)", "comparison", "float"),
        Column("r_total", "Diff Total Ratio", "ratio", "float"),
        Column("r_calls", "Diff Calls Ratio", "ratio", "float"),
    )
    data = pd.DataFrame(
        {"name": ["aten::zeros"], "b_total": [3.88], "c_total": [5.0], "r_total": [1.2887], "r_calls": [0.8]}
    )
    return Table("ApiCompare", cols, data, (1, 1), (2, 2))


def module_compare(details: list[str]) -> Table:
    cols = (
        Column("order", "Order Id", "key", "int", width=10),
        Column("b_kd", "Kernel Details", "base", "text"),
        Column("b_self", "Device Self Time(us)", "base", "float"),
        Column("c_kd", "Kernel Details", "comparison", "text"),
        Column("c_self", "Device Self Time(us)", "comparison", "float"),
        Column("stack", "Base Call Stack", "text", "text", width=30),
    )
    n = len(details)
    data = pd.DataFrame(
        {"order": range(1, n + 1), "b_kd": pd.Series(details, dtype=object),  # core's text dtype
         "b_self": [1.0] * n, "c_kd": [""] * n,
         "c_self": [2.0] * n, "stack": ["a.py(1): f\nb.py(2): g"] * n}
    )
    return Table("ModuleCompare", cols, data, (1, 2), (3, 4))


def empty(name: str, reason: str = "") -> Table:
    return Table(name, OP_STAT_COLUMNS, pd.DataFrame({c.key: [] for c in OP_STAT_COLUMNS}), (2, 3), (4, 5),
                 absent_reason=reason)


def make_result(*tables: Table) -> ComparisonResult:
    """The tables as the pipeline hands them over: carrying what their sheets declare."""
    result = ComparisonResult("base/trace.json", "/data/comp_ascend_pt")
    for t in tables:
        result.add(declare(t) if t.name in SHEETS else t)
    return result


def standard() -> ComparisonResult:
    tree = Table("ModuleTree", OP_STAT_COLUMNS, op_stat().data, (2, 3), (4, 5))
    private = Table("_scratch", OP_STAT_COLUMNS, op_stat().data, (2, 3), (4, 5), export=False)
    result = make_result(overall(), empty("CommunicationCompare", "no communication ops on either side"),
                         op_stat(), tree, private, api())
    result.notes.append(Note("memory comparison skipped: no memory records", ABSENT, screens=("memory",)))
    result.options = {"enabled": frozenset({"operator", "api"}), "max_kernel_num": None, "step": 3}
    result.summary = {  # the shape the pipeline's SummaryReady gives
        "figures": {"": {"unit": "", "base_text": "GPU", "comparison_text": "NPU"},
                    "E2E Time": {"unit": "s", "base": np.float64(0.020), "comparison": 0.0205,
                                 "base_count": None, "comparison_count": None},
                    "Cube Time(Num)": {"unit": "s", "base": 0.004, "comparison": 0.003,
                                       "base_count": 12, "comparison_count": 10}},
        "text": "Model Profiling Time Distribution\nIndex  Base  Comparison",
    }
    return result


def fill_of(cell: openpyxl.cell.cell.Cell) -> str | None:
    """The cell's solid fill colour (ARGB as openpyxl reports it), None when unfilled."""
    return cell.fill.fgColor.rgb if cell.fill.fill_type else None


@pytest.fixture
def book(tmp_path: Path) -> Path:
    return write_workbook(standard(), tmp_path / "out", now=NOW)


# ------------------------------------------------------------------------------ sheets & layout


def test_file_name_is_utc_timestamp(tmp_path: Path) -> None:
    beijing = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=8)))
    path = write_workbook(standard(), tmp_path, now=beijing)
    assert path == tmp_path / "performance_comparison_result_20240505230809.xlsx"


def test_sheet_order_skips_empty_and_ui_only_tables(book: Path) -> None:
    assert book.name == NAME
    assert openpyxl.load_workbook(book).sheetnames == [
        "OverallMetrics", "OperatorCompareStatistic", "ApiCompare", "README"
    ]


def advice(name: str = "advice") -> Table:
    return Table(
        name,
        (Column("sev", "Severity", "key", "text"), Column("finding", "Finding", "text", "text", width=80)),
        pd.DataFrame({"sev": ["high"], "finding": ["aten::mm is 1.5x slower"]}),
        (-1, -1),
        (-1, -1),
    )


def test_advisor_sheet_goes_before_readme(tmp_path: Path) -> None:
    path = write_workbook(standard(), tmp_path, advisor=advice(), now=NOW)
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames[-2:] == ["Advisor", "README"]
    ws = wb["Advisor"]
    assert not ws.merged_cells.ranges and ws["A1"].value is None  # no spans → no title row
    back = pd.read_excel(path, sheet_name="Advisor", header=2)
    assert back.to_dict("list") == {"Severity": ["high"], "Finding": ["aten::mm is 1.5x slower"]}


def test_advisor_table_inside_the_result(tmp_path: Path) -> None:
    """The pipeline may carry the findings as a table named Advisor: still one sheet, last."""
    result = standard()
    result.tables = {"Advisor": advice("Advisor"), **result.tables}
    assert openpyxl.load_workbook(write_workbook(result, tmp_path, now=NOW)).sheetnames == [
        "OverallMetrics", "OperatorCompareStatistic", "ApiCompare", "Advisor", "README"
    ]
    with pytest.raises(NothingToWrite):  # findings alone are not a comparison
        write_workbook(make_result(advice("Advisor")), tmp_path / "x", now=NOW)


def test_pandas_reads_reference_columns_and_table_values(book: Path) -> None:
    back = pd.read_excel(book, sheet_name="OperatorCompareStatistic", header=2)
    assert list(back.columns) == [c.header for c in OP_STAT_COLUMNS]
    assert back["Top"].tolist() == [1, 2, 3, 4, 5]
    assert back["Operator Name"].tolist() == ["=cmd|' /C calc'!A0", "+aten::add", "-neg", "@at", "aten::mm"]
    assert back["Base Device Duration(ms)"].tolist()[:4] == [2.0, 4.0, 0.0, 1.0]
    assert math.isnan(back["Base Device Duration(ms)"].iloc[4])  # NaN → blank cell
    assert back["Comparison Operator Number"].tolist() == [3, 2, 1, 1, 0]
    assert back["Diff Duration(ms)"].tolist()[:4] == [1.0, -2.0, 1.5, 0.0]
    ratios = back["Diff Ratio"].tolist()
    assert ratios[:2] == [1.5, 0.5] and ratios[2] == np.inf and ratios[3] == 1.0 and math.isnan(ratios[4])

    overall_back = pd.read_excel(book, sheet_name="OverallMetrics", header=2)
    assert list(overall_back.columns) == [
        "Index", "Duration(ms)", "Duration Ratio", "Number", "Duration(ms).1", "Duration Ratio.1",
        "Number.1", "Diff Duration(ms)", "Diff Ratio",
    ]
    assert overall_back["Index"].tolist() == [
        "Computing Time", "\tMatmul", "\t\tMatmul (Cube)", "\tOther", "E2E Time"
    ]
    assert overall_back["Number"].tolist() == [5, 3, 3, "/", "/"]


def test_hidden_columns_are_not_written(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["OperatorCompareStatistic"]
    assert ws.max_column == 8
    assert [c.value for c in ws[3]] == [c.header for c in OP_STAT_COLUMNS]


def test_titles_are_merged_over_the_spans(book: Path) -> None:
    wb = openpyxl.load_workbook(book)
    ws = wb["OperatorCompareStatistic"]
    assert {str(r) for r in ws.merged_cells.ranges} == {"C1:D1", "E1:F1"}
    assert ws["C1"].value == "Base Profiling: base/trace.json"
    assert ws["E1"].value == "Comparison Profiling: /data/comp_ascend_pt"
    assert ws["C1"].font.b and ws["C1"].fill.fgColor.rgb == "0000FF00"
    assert ws["E1"].fill.fgColor.rgb == "00FFFF00"
    assert ws["A1"].value is None and ws["A2"].value is None
    assert {str(r) for r in wb["OverallMetrics"].merged_cells.ranges} == {"B1:D1", "E1:G1"}
    assert not wb["ApiCompare"].merged_cells.ranges  # one-column spans are not merged
    assert wb["ApiCompare"]["B1"].value == "Base Profiling: base/trace.json"


def test_header_row_fills_borders_and_bold(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["OperatorCompareStatistic"]
    fills = [ws.cell(3, c).fill.fgColor.rgb for c in range(1, 9)]
    # Yellow exactly over the comparison span E:F, green elsewhere (diff / ratio included).
    assert fills == ["0000FF00"] * 4 + ["00FFFF00"] * 2 + ["0000FF00"] * 2
    for c in range(1, 9):
        cell = ws.cell(3, c)
        assert cell.font.b and cell.font.name == "Arial" and cell.border.left.style == "thin"


def test_number_formats(book: Path) -> None:
    wb = openpyxl.load_workbook(book)
    ws = wb["OperatorCompareStatistic"]
    assert [ws.cell(4, c).number_format for c in range(1, 9)] == [
        "#,##0", "General", "#,##0.00", "#,##0", "#,##0.00", "#,##0", "#,##0.00", "0.00%"
    ]
    assert ws["B4"].font.b  # "bold" format column
    assert not ws["C4"].font.b
    api_ws = wb["ApiCompare"]
    # Declared float, but ratios are always percent (the reference switches only red cells).
    assert api_ws["D4"].number_format == "0.00%" and api_ws["E4"].number_format == "0.00%"


def test_ratio_fills_and_inf_text(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["OperatorCompareStatistic"]
    ratio = [ws.cell(r, 8) for r in range(4, 9)]
    assert ratio[0].value == 1.5 and ratio[0].fill.fgColor.rgb == RED
    assert ratio[1].value == 0.5 and ratio[1].fill.fgColor.rgb == GREEN
    assert ratio[2].value == "INF" and ratio[2].data_type == "s" and ratio[2].fill.fgColor.rgb == RED
    assert ratio[3].value == 1 and ratio[3].fill.fill_type is None
    assert ratio[4].value is None and ratio[4].fill.fill_type is None
    # Only ratio cells are coloured: the diff next to the red ratio is not.
    assert ws.cell(4, 7).fill.fill_type is None
    api_ws = openpyxl.load_workbook(book)["ApiCompare"]
    assert api_ws["D4"].fill.fgColor.rgb == RED and api_ws["E4"].fill.fgColor.rgb == GREEN


def test_ratio_given_as_text(tmp_path: Path) -> None:
    """A comparator may already hold INF as text; it is coloured like the number would be."""
    table = op_stat()
    data = table.data.copy()
    data["ratio"] = pd.Series(["INF", 2.0, None, "n/a", 0.0], dtype=object)
    table.data = data
    path = write_workbook(make_result(table), tmp_path, now=NOW)
    ws = openpyxl.load_workbook(path)["OperatorCompareStatistic"]
    assert [ws.cell(r, 8).value for r in range(4, 9)] == ["INF", 2, None, "n/a", 0]
    assert [fill_of(ws.cell(r, 8)) for r in range(4, 9)] == [
        RED, RED, None, None, GREEN
    ]


def test_overall_metrics_indent_and_row_fills(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["OverallMetrics"]
    assert [ws.cell(r, 1).alignment.indent for r in range(4, 9)] == [0, 1, 2, 1, 0]
    # Whole-row fills: level 0 blue, level 1 light blue, deeper none.
    assert [fill_of(ws.cell(r, 2)) for r in range(4, 9)] == [
        "0000BFFF", "0087CEFA", None, "0087CEFA", "0000BFFF"
    ]
    assert ws["D5"].fill.fgColor.rgb == "0087CEFA" and ws["B5"].alignment.indent == 0
    # The ratio fill wins over the row fill; ratio 1 keeps the row fill.
    assert ws["I4"].fill.fgColor.rgb == RED and ws["I7"].fill.fgColor.rgb == GREEN
    assert ws["I8"].fill.fgColor.rgb == "0000BFFF"
    assert ws["D7"].value == "/" and ws["D7"].number_format == "#,##0"


def test_panes_filter_widths_and_wrap(tmp_path: Path) -> None:
    details = ["k1 [duration: 1.0]\nk2 [duration: 2.0]\n"]
    path = write_workbook(make_result(op_stat(), module_compare(details)), tmp_path, now=NOW)
    wb = openpyxl.load_workbook(path)
    ws = wb["OperatorCompareStatistic"]
    assert ws.freeze_panes == "A4"
    assert ws.auto_filter.ref == "A3:H8"
    assert ws.column_dimensions["A"].width == 10.7109375  # xlsxwriter's stored width for 10
    assert ws.column_dimensions["C"].width == 25.7109375
    mc = wb["ModuleCompare"]
    wrapped = [bool(mc.cell(4, c).alignment.wrap_text) for c in range(1, 7)]
    assert wrapped == [False, True, False, True, False, True]
    assert mc["B4"].value == "k1 [duration: 1.0]\nk2 [duration: 2.0]\n"


# ------------------------------------------------------------------------------------- safety


def test_formula_like_text_is_stored_as_string(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["OperatorCompareStatistic"]
    for row, text in zip(range(4, 8), ["=cmd|' /C calc'!A0", "+aten::add", "-neg", "@at"]):
        assert ws.cell(row, 2).data_type == "s" and ws.cell(row, 2).value == text
    with zipfile.ZipFile(book) as z:
        assert all(b"<f>" not in z.read(n) for n in z.namelist() if n.startswith("xl/worksheets/"))


def test_long_text_is_truncated_with_marker(tmp_path: Path) -> None:
    ascii_text = "k" * 40_000
    astral = "\U0001F600" * 20_000  # 40,000 UTF-16 units: Excel counts these twice
    just_fits = "x" * 32_767
    path = write_workbook(make_result(module_compare([ascii_text, astral, just_fits])), tmp_path, now=NOW)
    ws = openpyxl.load_workbook(path)["ModuleCompare"]
    # Marker "…[truncated 7256 chars]" is 23 characters: keep 32,767 − 23 = 32,744.
    assert ws["B4"].value == "k" * 32_744 + "…[truncated 7256 chars]"
    # 2k + 23 ≤ 32,767 → k = 16,372 emoji kept, 3,628 cut.
    assert ws["B5"].value == "\U0001F600" * 16_372 + "…[truncated 3628 chars]"
    assert ws["B6"].value == just_fits
    readme = [c.value for row in openpyxl.load_workbook(path)["README"].iter_rows() for c in row]
    assert "ModuleCompare: 2 cell(s) cut to Excel's 32,767-character limit" in readme


def test_text_escaping_and_illegal_characters(tmp_path: Path) -> None:
    texts = ["a & <b> > c", "\tindented ", "line1\r\nline2", "bell\x07char", "INF", "lone \ud83d half"]
    path = write_workbook(make_result(module_compare(texts)), tmp_path, now=NOW)
    ws = openpyxl.load_workbook(path)["ModuleCompare"]
    assert [ws.cell(r, 2).value for r in range(4, 10)] == [
        "a & <b> > c", "\tindented ", "line1\r\nline2", "bell\ufffdchar", "INF", "lone \ufffd half"
    ]
    assert ws["B8"].fill.fill_type is None  # "INF" outside a ratio column is just text


def test_long_text_with_markup_and_illegal_characters_is_cut_then_escaped(tmp_path: Path) -> None:
    """Only the kept head of a long cell is cleaned and escaped: U+FFFD for the forbidden
    character in it, nothing of the tail (whose lone surrogate must not break the cut)."""
    texts = ["<k>&\x00" + "k" * 32_745 + "\ud800" * 10 + "z" * 9_000, "\x01" + "é" * 20_000]
    path = write_workbook(make_result(module_compare(texts)), tmp_path, now=NOW)
    ws = openpyxl.load_workbook(path)["ModuleCompare"]
    # 41,760 characters; the 23-character marker leaves 32,744 of them.
    assert ws["B4"].value == "<k>&\ufffd" + "k" * 32_739 + "…[truncated 9016 chars]"
    assert ws["B5"].value == "\ufffd" + "é" * 20_000  # 20,001 units: fits, cleaned whole


def test_legal_replaces_only_characters_xml_forbids() -> None:
    from perfcmp_core.export.sheet_xml import legal as _legal

    assert _legal("tab\tlf\ncr\r <&> ok") == "tab\tlf\ncr\r <&> ok"
    assert _legal("a\x00b\x1f\x0b") == "a\ufffdb\ufffd\ufffd"
    assert _legal("é\x01\ud800\ufffe\uffff€") == "é\ufffd\ufffd\ufffd\ufffd€"
    assert _legal("") == ""


def test_cell_renders_every_kind_of_value() -> None:
    """``cell`` recognises plain floats, strings and ints by exact type first; every other value
    (bools, NaN/inf, None, numpy scalars, ints beyond 64 bits) must still take its own form."""
    from perfcmp_core.export.sheet_xml import SheetXml as _SheetXml

    def inline(text: str) -> str:
        return f'<c r="C4" s="5" t="inlineStr"><is><t xml:space="preserve">{text}</t></is></c>'

    expected = [
        (1.5, '<c r="C4" s="5"><v>1.5</v></c>'),
        (0.1 + 0.2, '<c r="C4" s="5"><v>0.30000000000000004</v></c>'),
        (-0.0, '<c r="C4" s="5"><v>-0.0</v></c>'),
        (float("inf"), inline("INF")),
        (float("-inf"), inline("-INF")),
        (float("nan"), '<c r="C4" s="5"/>'),
        (None, '<c r="C4" s="5"/>'),
        (7, '<c r="C4" s="5"><v>7</v></c>'),
        (True, '<c r="C4" s="5" t="b"><v>1</v></c>'),
        ("a<b>&c", inline("a&lt;b&gt;&amp;c")),
        ("x\x00", inline("x\ufffd")),
        (np.str_("np"), inline("np")),
        (np.float64(2.5), '<c r="C4" s="5"><v>2.5</v></c>'),
        (2**70, f'<c r="C4" s="5"><v>{2**70}</v></c>'),
    ]
    xml = _SheetXml()
    assert [xml.cell("C4", v, 5) for v, _ in expected] == [want for _, want in expected]


def test_numpy_and_nullable_values(tmp_path: Path) -> None:
    table = op_stat()
    data = table.data.copy()
    data["b_n"] = pd.array([3, None, 0, 1, 0], dtype="Int64")
    data["name"] = pd.array(["a", None, "c", "d", "e"], dtype="string")
    table.data = data
    path = write_workbook(make_result(table), tmp_path, now=NOW)
    ws = openpyxl.load_workbook(path)["OperatorCompareStatistic"]
    assert [ws.cell(r, 4).value for r in range(4, 9)] == [3, None, 0, 1, 0]
    assert [ws.cell(r, 2).value for r in range(4, 9)] == ["a", None, "c", "d", "e"]


def test_overlapping_spans_are_rejected(tmp_path: Path) -> None:
    table = op_stat()
    table.comp_span = (3, 5)
    with pytest.raises(ValueError, match="overlaps"):
        write_workbook(make_result(table), tmp_path, now=NOW)
    assert list(tmp_path.iterdir()) == []


def test_rows_beyond_excel_limit_are_cut_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(xlsx, "MAX_DATA_ROWS", 3)
    path = write_workbook(make_result(op_stat()), tmp_path, now=NOW)
    wb = openpyxl.load_workbook(path)
    ws = wb["OperatorCompareStatistic"]
    assert ws.max_row == 6 and ws.auto_filter.ref == "A3:H6"
    notes = [c.value for row in wb["README"].iter_rows() for c in row]
    assert "OperatorCompareStatistic: only the first 3 of 5 rows fit in a sheet" in notes


# --------------------------------------------------------------------------------- README


def test_readme_sheet(book: Path) -> None:
    ws = openpyxl.load_workbook(book)["README"]
    rows = [[c.value for c in row] for row in ws.iter_rows()]
    pairs = {r[0]: r[1] for r in rows if r and r[0] is not None and len(r) > 1}
    assert pairs["Tool version"] == __version__
    assert pairs["Generated (UTC)"] == "2024-01-02 03:04:05"
    assert pairs["Base profiling"] == "base/trace.json"
    assert pairs["Comparison profiling"] == "/data/comp_ascend_pt"
    listed = [r[0] for r in rows if len(r) > 2 and r[2] is not None and r[0] != "Sheets"]
    assert listed == ["OverallMetrics", "OperatorCompareStatistic", "ApiCompare"]
    assert pairs["OperatorCompareStatistic"].startswith("Top-level operators grouped by name")
    assert pairs["CommunicationCompare"] == "no communication ops on either side"  # "Not written"
    assert "ModuleTree" not in pairs
    flat = [v for r in rows for v in r if v is not None]
    assert "memory comparison skipped: no memory records" in flat
    assert "OperatorCompareStatistic: grouped by raw name" in flat
    assert pairs["enabled"] == "api, operator" and pairs["step"] == 3
    # The figures read as the terminal prints them (issue 30 #1: they were Python dicts):
    # 20 ms → 20.5 ms is +0.5 ms, +2.5 %; 4 ms (12 kernels) → 3 ms (10) is −1 ms (−2), −25 %.
    assert pairs["E2E Time"] == "20.000 ms → 20.500 ms   +0.500 ms   +2.5%"
    assert pairs["Cube Time"] == "4.000 ms (12) → 3.000 ms (10)   -1.000 ms (-2)   -25.0%"
    assert not any("{" in str(v) for r in rows for v in r)
    # The reference's plain-text table is spread over one row per line.
    at = next(i for i, r in enumerate(rows) if r[0] == "As msprof-analyze prints it") + 1
    assert [rows[at][1], rows[at + 1][1]] == ["Model Profiling Time Distribution", "Index  Base  Comparison"]
    assert rows[at + 1][0] is None
    assert pairs["Steps compared"] == "every step"
    keys = ("Diff ratio > 1", "Diff ratio < 1", "INF")
    legend = {r[0]: fill_of(ws.cell(i, 1)) for i, r in enumerate(rows, 1) if r and r[0] in keys}
    assert legend == {"Diff ratio > 1": RED, "Diff ratio < 1": GREEN, "INF": RED}


def test_a_workbook_of_one_step_names_it(tmp_path: Path) -> None:
    """`S`, step 4, `e` (or --base-step 4 --comparison-step 7): the title rows and the README
    say which step each side is (they named only the files)."""
    result = standard()
    result.base_step, result.comp_step = 4, 7
    wb = openpyxl.load_workbook(write_workbook(result, tmp_path, now=NOW))
    titles = [c.value for c in wb["OperatorCompareStatistic"][1] if c.value]
    assert titles == ["Base Profiling: base/trace.json (step 4)",
                      "Comparison Profiling: /data/comp_ascend_pt (step 7)"]
    pairs = {r[0].value: r[1].value for r in wb["README"].iter_rows() if len(r) > 1}
    assert pairs["Base profiling"] == "base/trace.json (step 4)"
    assert pairs["Steps compared"] == "base step 4, comparison step 7"


# --------------------------------------------------------------------------- empty & errors


def test_nothing_to_write(tmp_path: Path) -> None:
    tree = Table("ModuleTree", OP_STAT_COLUMNS, op_stat().data, (2, 3), (4, 5))
    result = make_result(empty("OperatorCompareStatistic"), tree)
    out = tmp_path / "never"
    with pytest.raises(NothingToWrite, match="no comparison produced any rows"):
        write_workbook(result, out, now=NOW)
    assert not out.exists()


def test_output_path_that_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("x")
    with pytest.raises(InputError) as err:
        write_workbook(standard(), blocker, now=NOW)
    assert err.value.path == str(blocker) and "is a file" in err.value.message
    with pytest.raises(InputError) as err:
        write_workbook(standard(), blocker / "sub", now=NOW)
    assert str(blocker) in err.value.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only directory")
def test_unwritable_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(InputError) as err:
            write_workbook(standard(), locked, now=NOW)
        assert err.value.path == str(locked) and "not writable" in err.value.message
    finally:
        locked.chmod(0o700)


def test_directory_reported_unwritable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same check as above for runs as root, where permissions cannot deny the write."""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(InputError) as err:
        write_workbook(standard(), tmp_path, now=NOW)
    assert err.value.path == str(tmp_path) and "not writable" in err.value.message


def test_missing_directory_is_created_0750(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    path = write_workbook(standard(), tmp_path / "a" / "b", now=NOW)
    assert path.parent == tmp_path / "a" / "b"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750 & ~umask


# ---------------------------------------------------------------- atomic, never overwrite


def test_existing_file_gets_a_suffix(tmp_path: Path) -> None:
    first = write_workbook(standard(), tmp_path, now=NOW)
    before = first.read_bytes()
    second = write_workbook(standard(), tmp_path, now=NOW)
    third = write_workbook(standard(), tmp_path, now=NOW)
    assert (first.name, second.name, third.name) == (
        NAME, NAME.replace(".xlsx", "_1.xlsx"), NAME.replace(".xlsx", "_2.xlsx")
    )
    assert first.read_bytes() == before
    assert openpyxl.load_workbook(third).sheetnames[0] == "OverallMetrics"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name, third.name])


def test_failure_mid_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(xml: bytes, part: str) -> tuple[bytes, bytes]:
        raise OSError("disk full")

    monkeypatch.setattr(xlsx, "_split_sheet_data", broken)
    with pytest.raises(InputError, match="disk full"):  # a write error names the destination
        write_workbook(standard(), tmp_path, now=NOW)
    assert list(tmp_path.iterdir()) == []  # neither the workbook nor the hidden temp file


def test_safe_write_cleans_up_after_partial_write(tmp_path: Path) -> None:
    def half(fh) -> None:  # type: ignore[no-untyped-def]
        fh.write(b"PK partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        safe_write(tmp_path / "x.bin", half)
    assert list(tmp_path.iterdir()) == []


def test_safe_write_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object, **kw: object) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    (tmp_path / "r.json").write_bytes(b"old")
    path = safe_write(tmp_path / "r.json", lambda fh: fh.write(b"new"))
    assert path.name == "r_1.json" and path.read_bytes() == b"new"
    assert (tmp_path / "r.json").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r_1.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


# ------------------------------------------------------------------------------- big sheets


def test_twenty_thousand_rows_round_trip(tmp_path: Path) -> None:
    """The reference-sized case (~8k rows a sheet on real data), with margin: 20k rows, 8 columns
    (write time is measured by bench/compare.py, not asserted here)."""
    n = 20_000
    rng = np.random.default_rng(7)
    b, c = rng.random(n) * 100, rng.random(n) * 100
    data = pd.DataFrame({"top": np.arange(1, n + 1), "name": [f"aten::op_{i}" for i in range(n)],
                         "b_ms": b, "b_n": np.ones(n, dtype=int), "c_ms": c, "c_n": np.ones(n, dtype=int),
                         "d_ms": c - b, "ratio": c / b})
    table = Table("OperatorCompareStatistic", OP_STAT_COLUMNS, data, (2, 3), (4, 5))
    path = write_workbook(make_result(table), tmp_path, now=NOW)
    back = pd.read_excel(path, sheet_name="OperatorCompareStatistic", header=2)
    assert len(back) == n and back["Operator Name"].iloc[-1] == f"aten::op_{n - 1}"
    assert np.allclose(back["Diff Ratio"].to_numpy(), c / b)


OFFICE = shutil.which("soffice") or shutil.which("libreoffice")


@pytest.mark.skipif(OFFICE is None, reason="LibreOffice not installed")
def test_libreoffice_opens_the_workbook(book: Path, tmp_path: Path) -> None:
    out = tmp_path / "converted"
    run = subprocess.run([str(OFFICE), "--headless", "--convert-to", "csv", "--outdir", str(out), str(book)],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    csv = out / book.with_suffix(".csv").name
    assert "Base Profiling: base/trace.json" in csv.read_text(encoding="utf-8", errors="replace")
