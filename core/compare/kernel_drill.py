"""The kernels of one operator or module, base against comparison: what `K` shows in the app.

A row's ``Kernel Details`` cells are kept as structured child tables of its table
(:class:`~.kernel_rows.KernelRows`: per row, kernel name, count and duration of each launch or
each kernel name). Grouped by kernel name, a row's entries make a small comparison table — count
and total per side, the difference — so the question "which kernel of this op got slower" is one
key away. The numbers are the rows' own: the table adds up to the rows it was made from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text
from .result import Column, Table, diff, ratio

TABLE_NAME = "OpKernels"
HEADER = "Kernel Details"  # the header of the cells this reads, on every sheet that has them

COLUMNS: tuple[Column, ...] = (
    Column("kernel", "Kernel Name", "key", "bold", "", 40),
    Column("diff_us", "Diff(us)", "diff", "float", "us", 14),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 10),
    Column("base_n", "Count", "base", "int", "count", 8),
    Column("comp_n", "Count", "comparison", "int", "count", 8),
    Column("base_us", "Total(us)", "base", "float", "us", 12),
    Column("comp_us", "Total(us)", "comparison", "float", "us", 12),
)


def detail_keys(table: Table) -> tuple[str, str] | None:
    """The base and comparison ``Kernel Details`` column keys of ``table``, if it has them (as
    child tables)."""
    base = [c.key for c in table.columns if c.header == HEADER and c.role == "base" and c.key in table.children]
    comp = [c.key for c in table.columns if c.header == HEADER and c.role == "comparison"
            and c.key in table.children]
    return (base[0], comp[0]) if base and comp else None


def rows_matching(df: pd.DataFrame, conditions: tuple[tuple[tuple[str, ...], str], ...]) -> np.ndarray:
    """Row positions meeting every condition (any of its keys holds the value exactly): the
    rows Enter on a statistic row opens."""
    keep = np.ones(len(df), dtype=bool)
    for keys, value in conditions:
        hit = np.zeros(len(df), dtype=bool)
        for key in keys:
            hit |= (as_text(df[key]) == value).to_numpy()
        keep &= hit
    return np.flatnonzero(keep)


def op_kernels(source: Table, keys: tuple[str, str], rows: np.ndarray, label: str) -> Table:
    """The kernel comparison of rows ``rows`` of ``source`` (one operator / module, or the rows
    a statistic row groups): kernels of either side by name, the largest absolute difference
    first. ``keys``: the base and comparison ``Kernel Details`` columns (:func:`detail_keys`)."""
    rows = np.asarray(rows, dtype="int64")
    b, c = (source.children[key].by_name(rows) for key in keys)
    df = b.merge(c, on="kernel", how="outer", suffixes=("_b", "_c"), sort=False)
    data = pd.DataFrame({
        "kernel": as_text(df["kernel"]),
        "base_n": df["n_b"].fillna(0).astype("int64"), "comp_n": df["n_c"].fillna(0).astype("int64"),
        "base_us": df["us_b"].fillna(0.0), "comp_us": df["us_c"].fillna(0.0),
    })
    data["diff_us"] = diff(data["base_us"], data["comp_us"])
    data["ratio"] = ratio(data["base_us"], data["comp_us"])
    order = np.argsort(-np.abs(data["diff_us"].to_numpy()), kind="stable")
    data = data.iloc[order].reset_index(drop=True)
    return Table(TABLE_NAME, COLUMNS, data, (3, 5), (4, 6), title=f"Kernels of {label}")
