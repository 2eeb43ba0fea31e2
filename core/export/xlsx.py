"""The headless workbook: a drop-in for the reference's ``performance_comparison_result_*.xlsx``.

Every comparison sheet keeps the reference layout (merged ``Base Profiling:`` / ``Comparison
Profiling:`` titles in row 1, headers in row 3, data from row 4, same sheet names, headers and
widths) so scripts that read it with ``pandas.read_excel(path, sheet_name=S, header=2)`` keep
working. On top of that: ratios always use the percent format (the reference switches format for
red cells only), improvements get a green fill, panes are frozen under the header, the header row
has an autofilter, long-text columns wrap, text is never turned into a formula, and a ``README``
sheet (plus ``Advisor`` when given) explains the workbook.

Speed: openpyxl (write-only) builds the workbook skeleton — sheets, styles, column widths, merged
titles, frozen panes, autofilter — but its per-cell XML serialisation costs ~15 µs a cell, about
4 s for a 20k-row sheet. So the ``<sheetData>`` rows are rendered here as XML text with the style
ids openpyxl registered, and spliced into the saved skeleton while copying it into the output zip.
"""

from __future__ import annotations

import io
import math
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.worksheet._write_only import WriteOnlyWorksheet
from openpyxl.worksheet.filters import AutoFilter

from perfcmp_core import __version__
from perfcmp_core.compare.matching_sheet import matching_table
from perfcmp_core.compare.result import LEVEL, RATIO_HEADERS, Column, ComparisonResult, Table
from perfcmp_core.export.safe_write import safe_write

FILE_PREFIX = "performance_comparison_result_"
#: Tables that only the TUI shows (besides any whose name starts with "_").
UI_ONLY = frozenset({"ModuleTree"})
ADVISOR_SHEET = "Advisor"
README_SHEET = "README"

TITLE_ROW, HEADER_ROW, FIRST_DATA_ROW = 1, 3, 4
#: Excel's hard row limit, minus the three title/header rows.
MAX_DATA_ROWS = 1_048_576 - (FIRST_DATA_ROW - 1)
#: Excel's cell text limit, in UTF-16 code units.
CELL_CHARS = 32_767
#: Rows rendered into one encoded chunk (bounds the size of the intermediate strings).
ROWS_PER_CHUNK = 5000
#: xlsxwriter (the reference) stores ``width + 0.7109375``; doing the same gives identical columns.
WIDTH_PAD = 0.7109375

BASE_FILL = "00FF00"  # header / title over base and shared columns
COMP_FILL = "FFFF00"  # header / title over comparison columns
WORSE_FILL = "FF0000"  # ratio > 1 (or INF): comparison is slower / bigger / more frequent
BETTER_FILL = "92D050"  # ratio < 1: comparison is better (the reference has no such fill)
TOP_LEVEL_FILL = "00BFFF"  # OverallMetrics level-0 rows
FIRST_LEVEL_FILL = "87CEFA"  # OverallMetrics level-1 rows
LEVEL_FILLS = {0: TOP_LEVEL_FILL, 1: FIRST_LEVEL_FILL}
TONE_FILLS = {1: WORSE_FILL, -1: BETTER_FILL}  # ratio fills win over row fills

NUMBER_FORMATS = {
    "int": "#,##0",
    "float": "#,##0.00",
    "percent": "0.00%",
    "text": "General",
    "bold": "General",
}
#: Multi-line text columns: wrapped so their line breaks show (the reference does not wrap).
WRAP_HEADERS = frozenset(
    {"Kernel Details", "Allocated Details", "Base Call Stack", "Comparison Call Stack"}
)

#: One line per sheet for the README.
SHEET_HELP = {
    "OverallMetrics": "Time breakdown per side (computing, uncovered communication, free, E2E):"
    " which direction the difference comes from.",
    "CommunicationCompare": "Communication ops by type: calls and durations per side; NPU task"
    " rows under each op.",
    "ModuleCompareStatistic": "nn.Module paths aggregated: a [ TOTAL ] row per module, then its"
    " ops; device self/total time per side.",
    "ModuleCompare": "Every module instance (TOTAL row) with its aligned top-level ops, kernels"
    " and call stacks.",
    "OperatorCompareStatistic": "Top-level operators grouped by name, sorted by device-time"
    " difference.",
    "OperatorCompare": "Aligned operator pairs in execution order with their kernels.",
    "MemoryCompareStatistic": "Operators grouped by name: allocated memory and lifetime per side,"
    " sorted by memory difference.",
    "MemoryCompare": "Aligned operator pairs with every allocation in their subtree.",
    "ApiCompare": "Every host API / op name: total, self and average time and calls per side.",
    "KernelCompare": "NPU kernels grouped by type and input shapes.",
    "KernelTypeCompare": "NPU kernels grouped by type and core type.",
    "KernelClassCompare": "Device time per kernel class (GEMM, attention, convolution, …) for any"
    " pair, GPU vs NPU and vendor vs vendor included; each class's largest kernels.",
    "KernelOpCompare": "Device time per launching op and kernel class, for kernels whose names"
    " differ by vendor.",
    "Matching": "Rows of the sheets above whose two sides have different names: matched through"
    " the equivalence table or by position (docs/matching.md).",
    ADVISOR_SHEET: "Per side: stage/category shares and rule findings; diff rows: what grew and which operators drive it.",
}

_THIN = Side(style="thin")
_BORDER = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)
#: XML 1.0 forbids these characters; Excel refuses files containing them.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NEEDS_ESCAPE = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: The characters of ``_ILLEGAL_XML`` that ASCII text can hold (C0 controls but tab, LF, CR).
_ILLEGAL_ASCII = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])
_MARKER = "…[truncated {} chars]"
_SHEET_DATA = re.compile(rb"<sheetData\s*/>|<sheetData>\s*</sheetData>")


class NothingToWrite(Exception):
    """No comparison produced a row, so there is no workbook to write.

    The reference writes a workbook with one empty ``Sheet1`` in this case; an empty file only
    hides the fact that nothing was compared.
    """


def write_workbook(
    result: ComparisonResult,
    out_dir: str | PathLike[str],
    *,
    advisor: Table | None = None,
    now: datetime | None = None,
) -> Path:
    """Write ``performance_comparison_result_<UTC YYYYmmddHHMMSS>.xlsx`` into ``out_dir``.

    Returns the path written: a ``_N`` suffix is added when the name exists (never overwrites).
    Raises :class:`NothingToWrite` when no table has rows, and ``InputError`` for an unusable
    ``out_dir``. The advisor's findings come from ``advisor`` or, failing that, from a table
    named ``Advisor`` in ``result``; either way they go last, before ``README``.
    """
    sheets = [
        (name, t)
        for name, t in result.tables.items()
        if name != ADVISOR_SHEET and _written(name, t)
    ]
    if not sheets:
        raise NothingToWrite("no comparison produced any rows; no workbook written")
    matching = matching_table([t for _, t in sheets])
    if matching is not None:  # the Matched As column the reference's sheets cannot hold
        sheets.append((matching.name, matching))
    advisor = advisor if advisor is not None else result.tables.get(ADVISOR_SHEET)
    if advisor is not None and _written(ADVISOR_SHEET, advisor):
        sheets.append((ADVISOR_SHEET, advisor))
    stamp = _utc(now)
    target = Path(out_dir) / f"{FILE_PREFIX}{stamp:%Y%m%d%H%M%S}.xlsx"
    return safe_write(target, lambda fh: _write(fh, result, sheets, stamp))


def python_values(series: pd.Series) -> list[object]:
    """The column as plain Python values: NaN/None/NA → None, numpy scalars → Python, inf kept.

    Shared by the workbook and JSON writers so both see exactly the same values.
    """
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return series.tolist()
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = series.tolist()
        for i in np.flatnonzero(np.isnan(series.to_numpy())):
            values[i] = None
        return values
    missing = series.isna().to_numpy()
    values = series.to_numpy(dtype=object).tolist()
    for i in np.flatnonzero(missing):
        values[i] = None
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _written(name: str, table: Table) -> bool:
    """A table becomes a sheet when it is not UI-only and has rows (and columns)."""
    return not (_ui_only(name) or not table.export or table.empty or not table.columns)


def _ui_only(name: str) -> bool:
    return name in UI_ONLY or name.startswith("_")


def _utc(now: datetime | None) -> datetime:
    """``now`` in UTC (a naive value is taken as UTC already)."""
    if now is None:
        return datetime.now(timezone.utc)
    return now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)


# --------------------------------------------------------------------------------------- styles


@dataclass(frozen=True)
class _Style:
    number_format: str = "General"
    bold: bool = False
    fill: str | None = None
    wrap: bool = False
    indent: int = 0
    border: bool = True


class _Palette:
    """Registers cell styles with the workbook once and hands out their ``s=`` ids.

    The ids are openpyxl's own (``cell.style_id``), so the styles part it writes matches the
    rows rendered here.
    """

    def __init__(self, ws: WriteOnlyWorksheet) -> None:
        self._ws = ws
        self._ids: dict[_Style, int] = {}

    def id(self, style: _Style) -> int:
        sid = self._ids.get(style)
        if sid is None:
            cell = WriteOnlyCell(self._ws)
            cell.font = Font(name="Arial", size=11, bold=style.bold)
            cell.alignment = Alignment(
                horizontal="left", vertical="center", wrap_text=style.wrap, indent=style.indent
            )
            if style.border:
                cell.border = _BORDER
            if style.fill:
                cell.fill = PatternFill(fill_type="solid", fgColor=style.fill)
            cell.number_format = style.number_format
            sid = self._ids[style] = cell.style_id
        return sid


# ------------------------------------------------------------------------------------ cell XML


@dataclass
class _SheetXml:
    """The ``<row>`` elements of one worksheet, as UTF-8 chunks, plus what had to be cut."""

    chunks: list[bytes] = field(default_factory=list)
    truncated: int = 0  # cells cut to Excel's text limit

    def add_rows(self, rows: Iterable[str]) -> None:
        self.chunks.append("".join(rows).encode("utf-8", "replace"))

    def cell(self, ref: str, value: object, style: int) -> str:
        """One ``<c>``: numbers as numbers, anything else as an inline string, never a formula.

        Finite floats, strings and ints — nearly every cell, half a million in the module sheets
        of a large NPU export — are recognised by their exact type first; the general tests
        below handle the rest (None, bools, NaN/inf, numpy scalars, other objects)."""
        kind = type(value)
        if kind is float and value - value == 0:  # type: ignore[operator]  # finite
            return f'<c r="{ref}" s="{style}"><v>{float.__repr__(value)}</v></c>'  # type: ignore[arg-type]
        if kind is str:
            return self.text(ref, value, style)  # type: ignore[arg-type]
        if kind is int:
            return f'<c r="{ref}" s="{style}"><v>{int.__repr__(value)}</v></c>'  # type: ignore[arg-type]
        if value is None:
            return f'<c r="{ref}" s="{style}"/>'
        if isinstance(value, bool):
            return f'<c r="{ref}" s="{style}" t="b"><v>{int(value)}</v></c>'
        if isinstance(value, int):
            return f'<c r="{ref}" s="{style}"><v>{int.__repr__(value)}</v></c>'
        if isinstance(value, float):
            if math.isfinite(value):
                return f'<c r="{ref}" s="{style}"><v>{float.__repr__(value)}</v></c>'
            if math.isnan(value):
                return f'<c r="{ref}" s="{style}"/>'
            return self.text(ref, "INF" if value > 0 else "-INF", style)
        return self.text(ref, value if isinstance(value, str) else str(value), style)

    def text(self, ref: str, value: str, style: int) -> str:
        if len(value) > CELL_CHARS // 2:  # only then can it exceed the limit in UTF-16 units
            value = self._fit(value)
        if _NEEDS_ESCAPE.search(value) is not None:
            value = _legal(value)
            value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            value = value.replace("\r", "&#13;")
        return (
            f'<c r="{ref}" s="{style}" t="inlineStr">'
            f'<is><t xml:space="preserve">{value}</t></is></c>'
        )

    def _fit(self, value: str) -> str:
        """Cut text to Excel's limit, ending with a visible ``…[truncated N chars]`` marker.

        Excel counts UTF-16 units, so the cut is made on the UTF-16 form (a pair split in two is
        dropped whole). The marker's length depends on N, hence the loop on its digit count.

        Only the head that can be kept is looked at: every character is at least one unit, so
        the first ``CELL_CHARS + 1`` characters decide. Operator kernel details on a large trace
        run to megabytes per cell, and scanning or encoding all of them cost more than the rest
        of the workbook. Characters XML forbids become U+FFFD here (one unit each, like the
        character they replace), so that lone surrogates can be encoded.
        """
        units = _legal(value[: CELL_CHARS + 1]).encode("utf-16-le")
        if len(units) <= 2 * CELL_CHARS:
            return value
        self.truncated += 1
        digits = 1
        while True:
            room = CELL_CHARS - len(_MARKER.format(0)) + 1 - digits
            kept = units[: 2 * room].decode("utf-16-le", "ignore")
            cut = len(value) - len(kept)
            if len(str(cut)) <= digits:
                return kept + _MARKER.format(cut)
            digits = len(str(cut))


def _legal(value: str) -> str:
    """``value`` with every character XML 1.0 forbids replaced by U+FFFD.

    Most cells are ASCII and hold none: for those one ``bytes.translate`` that drops the C0
    controls tells so ~8x faster than the regular expression (kernel-detail cells of a large
    trace are 32k characters each, and hundreds of them need ``&``/``<`` escaping).
    """
    if value.isascii() and len(value.encode("ascii").translate(None, _ILLEGAL_ASCII)) == len(value):
        return value
    return _ILLEGAL_XML.sub("\ufffd", value)


# ---------------------------------------------------------------------------------- the sheets


def _write(
    fh: BinaryIO, result: ComparisonResult, sheets: list[tuple[str, Table]], stamp: datetime
) -> None:
    """Build the skeleton with openpyxl, render every sheet's rows, and zip them together."""
    wb = Workbook(write_only=True)
    palette: _Palette | None = None
    bodies: dict[WriteOnlyWorksheet, _SheetXml] = {}
    for name, table in sheets:
        ws = wb.create_sheet(name)
        palette = palette or _Palette(ws)
        bodies[ws] = _table_sheet(ws, table, result, palette)
    assert palette is not None  # write_workbook only calls us with at least one sheet
    cut = [body.truncated for body in bodies.values()]
    readme = wb.create_sheet(README_SHEET)
    bodies[readme] = _readme_sheet(readme, result, sheets, cut, stamp, palette)
    skeleton = io.BytesIO()
    wb.save(skeleton)
    parts = {ws.path.lstrip("/"): body for ws, body in bodies.items()}
    _assemble(skeleton, parts, fh)


def _span_ok(span: tuple[int, int], ncols: int) -> bool:
    return 0 <= span[0] <= span[1] < ncols


def _table_sheet(
    ws: WriteOnlyWorksheet, table: Table, result: ComparisonResult, palette: _Palette
) -> _SheetXml:
    """Lay out one comparison table: titles, headers, data, widths, panes, filter, merges."""
    columns = table.sheet_columns()
    ncols = len(columns)
    letters = [get_column_letter(i + 1) for i in range(ncols)]
    data = table.data.iloc[:MAX_DATA_ROWS]
    last_row = FIRST_DATA_ROW + len(data) - 1

    for letter, col in zip(letters, columns):
        ws.column_dimensions[letter].width = col.width + WIDTH_PAD
    ws.freeze_panes = f"A{FIRST_DATA_ROW}"
    ws.auto_filter = AutoFilter(ref=f"A{HEADER_ROW}:{letters[-1]}{last_row}")

    spans = [
        (table.base_span, f"Base Profiling: {result.base_label}", BASE_FILL),
        (table.comp_span, f"Comparison Profiling: {result.comp_label}", COMP_FILL),
    ]
    spans = [s for s in spans if _span_ok(s[0], ncols)]
    if len(spans) == 2 and spans[0][0][1] >= spans[1][0][0] and spans[1][0][1] >= spans[0][0][0]:
        raise ValueError(
            f"{table.name}: base_span {table.base_span} overlaps comp_span {table.comp_span}"
        )
    comp_first, comp_last = table.comp_span if _span_ok(table.comp_span, ncols) else (0, -1)

    xml = _SheetXml()
    title_cells: list[tuple[int, str]] = []
    for (first, last), text, fill in spans:
        sid = palette.id(_Style(bold=True, fill=fill))
        for i in range(first, last + 1):
            value = text if i == first else None
            title_cells.append((i, xml.cell(f"{letters[i]}{TITLE_ROW}", value, sid)))
        if last > first:
            ws.merged_cells.add(f"{letters[first]}{TITLE_ROW}:{letters[last]}{TITLE_ROW}")
    rows = []
    if title_cells:
        rows.append(f'<row r="{TITLE_ROW}">{"".join(c for _, c in sorted(title_cells))}</row>')

    headers = []
    for i, (letter, col) in enumerate(zip(letters, columns)):
        fill = COMP_FILL if comp_first <= i <= comp_last else BASE_FILL
        sid = palette.id(_Style(bold=True, fill=fill))
        headers.append(xml.cell(f"{letter}{HEADER_ROW}", col.header, sid))
    rows.append(f'<row r="{HEADER_ROW}">{"".join(headers)}</row>')
    xml.add_rows(rows)

    levels = _levels(table, data)
    cells = [
        _data_column(xml, letter, col, data[col.key], levels, i == 0, palette)
        for i, (letter, col) in enumerate(zip(letters, columns))
    ]
    numbers = range(FIRST_DATA_ROW, last_row + 1)
    for start in range(0, len(data), ROWS_PER_CHUNK):
        stop = start + ROWS_PER_CHUNK
        xml.add_rows(
            f'<row r="{r}">{"".join(row)}</row>'
            for r, row in zip(numbers[start:stop], zip(*(c[start:stop] for c in cells)))
        )
    return xml


def _levels(table: Table, data: pd.DataFrame) -> list[int] | None:
    """OverallMetrics row levels (indent and row fill); None for every other sheet."""
    if table.name != "OverallMetrics" or LEVEL not in data:
        return None
    levels = pd.to_numeric(data[LEVEL], errors="coerce").fillna(0).astype("int64")
    return levels.clip(lower=0).tolist()


def _data_column(
    xml: _SheetXml,
    letter: str,
    col: Column,
    series: pd.Series,
    levels: list[int] | None,
    indent: bool,
    palette: _Palette,
) -> list[str]:
    """The ``<c>`` elements of one column, rows in order."""
    is_ratio = col.header in RATIO_HEADERS
    base = _Style(
        number_format=NUMBER_FORMATS["percent" if is_ratio else col.fmt],
        bold=col.fmt == "bold",
        wrap=col.header in WRAP_HEADERS,
    )
    values = python_values(series)
    rows = range(FIRST_DATA_ROW, FIRST_DATA_ROW + len(values))
    cell = xml.cell
    if levels is None and not is_ratio:
        sid = palette.id(base)
        return [cell(f"{letter}{r}", v, sid) for r, v in zip(rows, values)]
    # Per-row styles: few distinct (level, tone) pairs, so cache their ids on a cheap key.
    ids: dict[tuple[int, int], int] = {}
    sids = []
    for i, v in enumerate(values):
        key = (levels[i] if levels is not None else -1, _tone(v) if is_ratio else 0)
        sid = ids.get(key)
        if sid is None:
            level, tone = key
            sid = ids[key] = palette.id(
                _Style(
                    base.number_format,
                    base.bold,
                    TONE_FILLS.get(tone) or LEVEL_FILLS.get(level),
                    base.wrap,
                    max(level, 0) if indent else 0,
                )
            )
        sids.append(sid)
    return [cell(f"{letter}{r}", v, s) for r, v, s in zip(rows, values, sids)]


def _tone(value: object) -> int:
    """+1 when a ratio says the comparison is worse (> 1, INF), -1 when better (< 1), else 0."""
    if isinstance(value, str):
        return 1 if value.strip().upper() == "INF" else 0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 1 if value > 1 else -1 if value < 1 else 0
    return 0


# ----------------------------------------------------------------------------------- README


def _readme_sheet(
    ws: WriteOnlyWorksheet,
    result: ComparisonResult,
    sheets: list[tuple[str, Table]],
    cut: list[int],
    stamp: datetime,
    palette: _Palette,
) -> _SheetXml:
    """What the workbook holds, from what, with which options, and how to read the colours."""
    for letter, width in (("A", 32), ("B", 100), ("C", 12)):
        ws.column_dimensions[letter].width = width
    plain = palette.id(_Style(border=False))
    heading = palette.id(_Style(bold=True, border=False))
    lines: list[tuple[tuple[object, int], ...]] = [
        (("perfcmp-tui comparison workbook", heading),),
        (("Tool version", plain), (__version__, plain)),
        (("Generated (UTC)", plain), (f"{stamp:%Y-%m-%d %H:%M:%S}", plain)),
        (("Base profiling", plain), (result.base_label, plain)),
        (("Comparison profiling", plain), (result.comp_label, plain)),
        (),
        (("Sheets", heading), ("What it shows", heading), ("Rows", heading)),
    ]
    truncations = []
    for (name, table), n_cut in zip(sheets, cut):
        shown = min(len(table.data), MAX_DATA_ROWS)
        lines.append(((name, plain), (SHEET_HELP.get(name, table.title), plain), (shown, plain)))
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
        if t.empty and t.absent_reason and not _ui_only(n)
    ]
    if absent:
        lines += [(), (("Not written", heading), ("Why", heading))]
        lines += [((n, plain), (why, plain)) for n, why in absent]

    notes = list(result.notes)
    notes += [f"{name}: {note}" for name, t in sheets for note in t.notes]
    notes += truncations
    if notes:
        lines += [(), (("Notes", heading),)]
        lines += [((note, plain),) for note in notes]

    if result.options:
        lines += [(), (("Options", heading),)]
        lines += [((str(k), plain), (_describe(v), plain)) for k, v in result.options.items()]

    if result.summary:
        lines += [(), (("Summary", heading),)]
        for side, figures in result.summary.items():
            items = figures.items() if isinstance(figures, dict) else [(None, figures)]
            for key, value in items:
                label = str(side) if key is None else f"{side}: {key}"
                shown = _describe(value)
                # Multi-line text (the terminal's time-distribution table): one row per line.
                parts = shown.split("\n") if isinstance(shown, str) else [shown]
                lines.append(((label, plain), (parts[0], plain)))
                lines += [((None, plain), (part, plain)) for part in parts[1:]]

    legend = [
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
    lines += [(), (("Legend", heading),)]
    lines += [
        ((label, palette.id(_Style(fill=fill))), (meaning, plain))
        for label, fill, meaning in legend
    ]

    xml = _SheetXml()
    xml.add_rows(
        f'<row r="{r}">'
        + "".join(xml.cell(f"{get_column_letter(c)}{r}", v, s) for c, (v, s) in enumerate(line, 1))
        + "</row>"
        for r, line in enumerate(lines, 1)
        if line
    )
    return xml


def _describe(value: object) -> object:
    """A README cell for an option / summary value: numbers stay numbers, sets are sorted."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (set, frozenset)):
        return ", ".join(sorted(map(str, value)))
    return str(value)


# ------------------------------------------------------------------------------------ zip


def _assemble(skeleton: io.BytesIO, parts: dict[str, _SheetXml], fh: BinaryIO) -> None:
    """Copy openpyxl's package into ``fh``, filling each worksheet's empty ``<sheetData>``."""
    # Level 1: the XML is very repetitive, so it still shrinks ~8x, at a third of level 6's time.
    with zipfile.ZipFile(skeleton) as src, zipfile.ZipFile(
        fh, "w", zipfile.ZIP_DEFLATED, compresslevel=1
    ) as dst:
        for info in src.infolist():
            data = src.read(info)
            body = parts.get(info.filename)
            if body is None:
                dst.writestr(info.filename, data)
                continue
            head, tail = _split_sheet_data(data, info.filename)
            with dst.open(info.filename, "w") as out:
                out.write(head)
                for chunk in body.chunks:
                    out.write(chunk)
                out.write(tail)


def _split_sheet_data(xml: bytes, part: str) -> tuple[bytes, bytes]:
    """Split a worksheet part around its empty ``<sheetData>`` element."""
    matches = list(_SHEET_DATA.finditer(xml))
    if len(matches) != 1:
        raise RuntimeError(
            f"{part}: expected one empty <sheetData> from openpyxl, found {len(matches)}"
        )
    m = matches[0]
    return xml[: m.start()] + b"<sheetData>", b"</sheetData>" + xml[m.end():]
