"""The workbook's ``Matching`` sheet: every row that pairs differently named ops, and how.

The reference's sheets must keep their exact columns (scripts read them by header), so the
``Matched As`` column the screens show (:data:`.operators.MATCHED_AS`, not exported) is not
written into them. This extra sheet carries it instead: one line per row of a written sheet that
was joined through the equivalence table or by position, naming the sheet, the row's position in
it and its names — so a user reading the workbook can tell which pairs are the tool's judgement.
Which columns name a row is each sheet's declaration (:attr:`.result.Sheet.row_names`);
:func:`perfcmp_core.compare.matching` hands them over.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text
from .result import Column, Table

SHEET = "Matching"

COLUMNS: tuple[Column, ...] = (
    Column("sheet", "Sheet", "key", "bold", "", 26),
    Column("row", "Row", "key", "int", "", 8),
    Column("names", "Name", "key", "text", "", 60),
    Column("matched_as", "Matched As", "key", "text", "", 60),
)


def matching_table(tables: list[tuple[Table, tuple[str, ...]]]) -> Table | None:
    """The ``Matching`` table over ``tables`` (the sheets being written, each with the columns
    that name its rows, joined with " | " and empty ones left out), None when no row of them was
    matched by anything but its name."""
    parts = []
    for t, cols in tables:
        if "matched_as" not in t.data or t.empty:
            continue
        d = t.data.reset_index(drop=True)
        hit = as_text(d["matched_as"]) != ""
        if not hit.any():
            continue
        sel = d[hit]
        parts.append(pd.DataFrame({"sheet": t.name, "row": sel.index.to_numpy() + 1,
                                   "names": _joined_names(sel, cols),
                                   "matched_as": as_text(sel["matched_as"]).to_numpy(dtype=object)}))
    if not parts:
        return None
    data = pd.concat(parts, ignore_index=True)
    return Table(SHEET, COLUMNS, data, (-1, -1), (-1, -1), title="Rows matched by the equivalence table or by position")


def _joined_names(rows: pd.DataFrame, cols: tuple[str, ...]) -> np.ndarray:
    """Each row's texts of ``cols`` joined with " | ", empty ones (and NaN) left out; column by
    column over arrays, not a Python function per row (a big pair's OperatorCompare has
    hundreds of thousands of matched rows)."""
    out = np.full(len(rows), "", dtype=object)
    for col in cols:
        values = as_text(rows[col])  # a missing value is "" on every pandas line
        keep = ((values != "") & (values != "nan")).to_numpy(dtype=bool)
        text = values.to_numpy(dtype=object)
        out = out + np.where((out != "") & keep, " | ", "") + np.where(keep, text, "")
    return out.astype(object)
