"""The workbook's cell styles: fills, number formats, fonts, borders — and their ids.

The fills follow the reference (green/yellow headers over base/comparison columns, red ratios
> 1, blue OverallMetrics levels) plus a green fill for ratios < 1; every data cell is Arial 11,
left-aligned and boxed.
"""

from __future__ import annotations

from dataclasses import dataclass

from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.worksheet._write_only import WriteOnlyWorksheet

from perfcmp_core.compare.result import Fmt

BASE_FILL = "00FF00"  # header / title over base and shared columns
COMP_FILL = "FFFF00"  # header / title over comparison columns
WORSE_FILL = "FF0000"  # ratio > 1 (or INF): comparison is slower / bigger / more frequent
BETTER_FILL = "92D050"  # ratio < 1: comparison is better (the reference has no such fill)
TOP_LEVEL_FILL = "00BFFF"  # outline (OverallMetrics) level-0 rows
FIRST_LEVEL_FILL = "87CEFA"  # outline level-1 rows
LEVEL_FILLS = {0: TOP_LEVEL_FILL, 1: FIRST_LEVEL_FILL}
TONE_FILLS = {1: WORSE_FILL, -1: BETTER_FILL}  # ratio fills win over row fills

#: Excel number format of each :func:`~perfcmp_core.compare.result.number_format`.
NUMBER_FORMATS: dict[Fmt, str] = {
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

_THIN = Side(style="thin")
_BORDER = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)


@dataclass(frozen=True)
class Style:
    number_format: str = "General"
    bold: bool = False
    fill: str | None = None
    wrap: bool = False
    indent: int = 0
    border: bool = True


class Palette:
    """Registers cell styles with the workbook once and hands out their ``s=`` ids.

    The ids are openpyxl's own (``cell.style_id``), so the styles part it writes matches the
    rows rendered by :mod:`.sheet_xml`.
    """

    def __init__(self, ws: WriteOnlyWorksheet) -> None:
        self._ws = ws
        self._ids: dict[Style, int] = {}

    def id(self, style: Style) -> int:
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
