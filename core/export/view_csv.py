"""The table on screen as it is shown — filtered, sorted, without the hidden columns — as CSV
(`x` in the app) or as tab-separated text (`X`, for the clipboard).

The workbook holds every row of every table; people asked for the view they had narrowed down
(the operators matching "attention", sorted by Diff) in a spreadsheet or a chat. Numbers are
written as stored (not as rounded on screen), ratios as the workbook's comparison ÷ base, and a
text cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``) is written
with a leading apostrophe: text from a profile never becomes a formula.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime, timezone
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np

from perfcmp_core.compare.result import Column
from perfcmp_core.export.safe_write import ensure_dir, safe_write
from perfcmp_core.view import TableView

#: First characters that make a spreadsheet read a cell as a formula.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def view_columns(view: TableView) -> list[Column]:
    """The columns shown: every column of the table but those the user hid (`-`)."""
    return [c for c in view.table.columns if c.key not in view.hidden]


def view_rows(view: TableView) -> tuple[list[str], list[list[object]]]:
    """Headers (as the workbook names them) and the visible rows in screen order: numbers as
    numbers, text as text (formula-safe)."""
    cols = view_columns(view)
    order = view.order()
    columns = [[_cell(v) for v in view.table.values(c.key, order).tolist()] for c in cols]
    return [c.header for c in cols], [list(r) for r in zip(*columns)] if columns else []


def _cell(value: object) -> object:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return "" if math.isnan(v) else ("INF" if math.isinf(v) else v)
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def view_tsv(view: TableView) -> str:
    """The view as tab-separated lines, header first (tabs and line breaks inside a cell become
    spaces and "; ")."""
    header, rows = view_rows(view)
    lines = ["\t".join(header)]
    lines += ["\t".join(one_line(str(v)) for v in row) for row in rows]
    return "\n".join(lines)


def one_line(text: str) -> str:
    """A cell for a tab-separated line: its own tabs and line breaks become spaces / "; "."""
    return text.replace("\t", " ").replace("\r", "").replace("\n", "; ")


def write_view_csv(view: TableView, out_dir: str | PathLike[str],
                   now: datetime | None = None) -> Path:
    """Write ``<table>_<UTC YYYYmmddHHMMSS>.csv`` into ``out_dir`` (atomic, never overwriting:
    a ``_N`` suffix when the name is taken); the path written."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d%H%M%S")
    target = Path(out_dir) / f"{view.table.name}_{stamp}.csv"
    header, rows = view_rows(view)

    def write(fh: BinaryIO) -> None:
        text = io.TextIOWrapper(fh, encoding="utf-8", errors="backslashreplace", newline="", write_through=True)
        writer = csv.writer(text)
        writer.writerow(header)
        writer.writerows(rows)
        text.flush()
        text.detach()

    ensure_dir(out_dir)
    return safe_write(target, write, where=out_dir)
