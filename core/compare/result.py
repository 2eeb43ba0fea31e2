"""The shape every comparison returns: one source for the workbook, the screens and ``--json``.

A comparison produces a :class:`Table`: a DataFrame whose visible columns are described by
:class:`Column` (exact workbook header, role, number format, unit, width) plus optional hidden
columns whose names start with ``_`` (tree links, indentation level, raw values used for sorting).
The workbook writer and the TUI both render a Table without knowing which comparison made it, so
a number can never differ between the sheet and the screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

Role = Literal["key", "base", "comparison", "diff", "ratio", "text"]
Fmt = Literal["int", "float", "percent", "text", "bold"]

#: Headers whose cells get the "degradation" fill when > 1 (the reference's red-fill rule).
RATIO_HEADERS = frozenset(
    {"Diff Ratio", "Diff Total Ratio", "Diff Avg Ratio", "Diff Calls Ratio", "Diff Self Ratio"}
)

#: Hidden columns with a meaning shared by every writer/renderer.
LEVEL = "_level"  # indentation depth of the row (OverallMetrics hierarchy, tree tables)
NODE = "_node"  # stable id of the row's tree node
PARENT = "_parent"  # id of the parent node, -1 for roots
IS_TOTAL = "_is_total"  # True on `[ TOTAL ]` / summary rows


@dataclass(frozen=True)
class Column:
    key: str  # unique DataFrame column name
    header: str  # exact header text of the reference workbook
    role: Role = "text"
    fmt: Fmt = "text"
    unit: str = ""  # us | ms | KB | MB | count | "" — for labels in the TUI
    width: float = 20
    #: shown on screens and in --json but not written to the reference's sheet (whose columns
    #: must stay exactly the reference's); such columns come last, after the spans
    ui_only: bool = False


@dataclass
class Table:
    """One comparison table (one workbook sheet, one screen view)."""

    name: str  # sheet name, e.g. "OperatorCompareStatistic"
    columns: tuple[Column, ...]
    data: pd.DataFrame
    base_span: tuple[int, int]  # 0-based inclusive column range of the "Base Profiling" title
    comp_span: tuple[int, int]  # same for "Comparison Profiling"
    title: str = ""  # human title for the TUI
    default_sort: str | None = None  # column key sorted descending by the `d` key
    absent_reason: str = ""  # why there are no rows (shown instead of an empty table)
    notes: list[str] = field(default_factory=list)
    #: False for tables the app (and --json) shows but the workbook must not contain, e.g. the
    #: operator tables when the module sheets stand in for them (the reference writes one pair).
    export: bool = True

    @property
    def empty(self) -> bool:
        return self.data.empty

    def column(self, key: str) -> Column:
        for c in self.columns:
            if c.key == key:
                return c
        raise KeyError(key)

    def sheet_columns(self) -> tuple[Column, ...]:
        """The columns of the workbook sheet: the reference's layout, without UI-only columns."""
        return tuple(c for c in self.columns if not c.ui_only)

    def visible(self) -> pd.DataFrame:
        """The data restricted to the visible columns, in order."""
        return self.data[[c.key for c in self.columns]]


@dataclass
class ComparisonResult:
    """Everything one comparison run produced, tables in workbook order."""

    base_label: str  # path as the user gave it
    comp_label: str
    tables: dict[str, Table] = field(default_factory=dict)
    summary: dict[str, dict[str, object]] = field(default_factory=dict)  # terminal figures per side
    notes: list[str] = field(default_factory=list)  # comparisons skipped and why
    options: dict[str, object] = field(default_factory=dict)

    def add(self, table: Table | None) -> None:
        if table is not None:
            self.tables[table.name] = table


def diff(base: pd.Series | np.ndarray, comp: pd.Series | np.ndarray) -> np.ndarray:
    """comparison − base (unrounded; display rounding is the renderer's job)."""
    return np.asarray(comp, dtype="float64") - np.asarray(base, dtype="float64")


def ratio(base: pd.Series | np.ndarray, comp: pd.Series | np.ndarray) -> np.ndarray:
    """comparison ÷ base with the reference's rule: 0/0 → 1, x/0 → inf, 0/x → 0.

    Computed from unrounded values (the reference rounds first, which turns tiny averages into
    spurious ``INF`` — see docs/differences.md).
    """
    b = np.nan_to_num(np.asarray(base, dtype="float64"))
    c = np.nan_to_num(np.asarray(comp, dtype="float64"))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(b == 0, np.where(c == 0, 1.0, np.inf), c / np.where(b == 0, 1.0, b))
    return out
