"""The workbook's README sheet: what it holds, from what, with which options, how to read it.

One row per sheet with its declared help line (:attr:`~perfcmp_core.compare.result.Sheet.help`)
and row count, the tables not written and why, the run's notes (and every cut the workbook had to
make), the options, the summary figures and the colour legend.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np
from openpyxl.utils import get_column_letter
from openpyxl.worksheet._write_only import WriteOnlyWorksheet

from perfcmp_core import __version__
from perfcmp_core.compare.result import ComparisonResult, Table
from perfcmp_core.export.sheet_xml import CELL_CHARS, SheetXml
from perfcmp_core.export.styles import (BASE_FILL, BETTER_FILL, COMP_FILL, FIRST_LEVEL_FILL,
                                        TOP_LEVEL_FILL, WORSE_FILL, Palette, Style)
from perfcmp_core.insight import SUMMARY_TITLE, summary_rows

README_SHEET = "README"
#: The colours the README explains: label, fill, meaning.
_LEGEND = [
    ("Diff ratio > 1", WORSE_FILL,
     "comparison is worse: slower, bigger or more calls (ratio = comparison ÷ base)"),
    ("Diff ratio < 1", BETTER_FILL, "comparison is better than base"),
    ("INF", WORSE_FILL, "base is zero, comparison is not"),
    ("Header", BASE_FILL,
     "base columns and columns shared by both sides (names, diffs, ratios)"),
    ("Header", COMP_FILL, "comparison columns"),
    ("OverallMetrics row", TOP_LEVEL_FILL, "top-level category"),
    ("OverallMetrics row", FIRST_LEVEL_FILL, "first-level category"),
]


def readme_sheet(
    ws: WriteOnlyWorksheet,
    result: ComparisonResult,
    sheets: list[tuple[str, Table, SheetXml]],
    stamp: datetime,
    palette: Palette,
) -> SheetXml:
    """What the workbook holds, from what, with which options, and how to read the colours.

    Its styles are registered now (the styles part is saved with the skeleton), its rows made
    when the sheet is written, after the sheets it describes: what those cut to Excel's cell
    limit is known only once they are rendered (:meth:`SheetXml.add_columns`)."""
    for letter, width in (("A", 32), ("B", 100), ("C", 12)):
        ws.column_dimensions[letter].width = width
    plain = palette.id(Style(border=False))
    heading = palette.id(Style(bold=True, border=False))
    legend = [(label, palette.id(Style(fill=fill)), meaning) for label, fill, meaning in _LEGEND]
    xml = SheetXml()

    def rows() -> Iterator[str]:
        lines = _lines(result, sheets, stamp, plain, heading, legend)
        for r, line in enumerate(lines, 1):
            if line:
                yield f'<row r="{r}">' + "".join(
                    xml.cell(f"{get_column_letter(c)}{r}", v, s) for c, (v, s) in enumerate(line, 1)
                ) + "</row>"

    xml.add_later(rows)
    return xml


def _lines(
    result: ComparisonResult,
    sheets: list[tuple[str, Table, SheetXml]],
    stamp: datetime,
    plain: int,
    heading: int,
    legend: list[tuple[str, int, str]],
) -> list[tuple[tuple[object, int], ...]]:
    """The README's rows, each a tuple of (value, style id) cells; () is an empty row."""
    lines: list[tuple[tuple[object, int], ...]] = [
        (("perfcmp-tui comparison workbook", heading),),
        (("Tool version", plain), (__version__, plain)),
        (("Generated (UTC)", plain), (f"{stamp:%Y-%m-%d %H:%M:%S}", plain)),
        (("Base profiling", plain), (result.side_title("base"), plain)),
        (("Comparison profiling", plain), (result.side_title("comparison"), plain)),
        (("Steps compared", plain), (_steps(result), plain)),
        (),
        (("Sheets", heading), ("What it shows", heading), ("Rows", heading)),
    ]
    truncations = []
    for name, table, body in sheets:
        shown, n_cut = body.rows, body.truncated
        lines.append(((name, plain), (table.help or table.title, plain), (shown, plain)))
        if shown < len(table.data):
            truncations.append(
                f"{name}: only the first {shown:,} of {len(table.data):,} rows fit in a sheet"
            )
        if n_cut:
            truncations.append(
                f"{name}: {n_cut} cell(s) cut to Excel's {CELL_CHARS:,}-character limit"
            )
    lines.append(((README_SHEET, plain), ("This sheet.", plain)))

    absent = [
        (n, t.absent_reason)
        for n, t in result.tables.items()
        if t.empty and t.absent_reason and t.export
    ]
    if absent:
        lines += [(), (("Not written", heading), ("Why", heading))]
        lines += [((n, plain), (why, plain)) for n, why in absent]

    notes = [note.line for note in result.notes]
    notes += [f"{name}: {note}" for name, t, _ in sheets for note in t.notes]
    notes += truncations
    if notes:
        lines += [(), (("Notes", heading),)]
        lines += [((note, plain),) for note in notes]

    if result.options:
        lines += [(), (("Options", heading),)]
        lines += [((str(k), plain), (_describe(v), plain)) for k, v in result.options.items()]

    figures = result.summary.get("figures")
    if figures:
        # As the terminal prints it (one owner: report.summary_rows): label, then base → comp,
        # diff and change in one cell.
        lines += [(), ((SUMMARY_TITLE, heading), ("base → comparison, diff, change", heading))]
        for label, base, comp, diff, change in summary_rows(figures, counts=True):
            shown = f"{base} → {comp}" + (f"   {diff}" if diff else "") + (
                f"   {change}" if change else "")
            lines.append(((label, plain), (shown, plain)))
    text = result.summary.get("text")
    if text:  # the reference's own grid, one row per line
        lines += [(), (("As msprof-analyze prints it", heading),)]
        lines += [((None, plain), (part, plain)) for part in str(text).split("\n")]

    lines += [(), (("Legend", heading),)]
    lines += [((label, sid), (meaning, plain)) for label, sid, meaning in legend]
    return lines


def _steps(result: ComparisonResult) -> str:
    """Which steps the workbook describes: every step, or the one picked per side."""
    b, c = result.base_step, result.comp_step
    if b is None and c is None:
        return "every step"
    if b == c:
        return f"step {b} of each side"
    return (f"base step {b if b is not None else 'all'}, comparison step "
            f"{c if c is not None else 'all'}")


def _describe(value: object) -> object:
    """A README cell for an option / summary value: numbers stay numbers, sets are sorted."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (set, frozenset)):
        return ", ".join(sorted(map(str, value)))
    return str(value)
