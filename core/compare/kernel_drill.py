"""The kernels of one operator or module, base against comparison: what `K` shows in the app.

A row's ``Kernel Details`` cells list its kernels as the reference prints them — one line per
kernel launch (operators: ``<name>[, <task id>, <task type>][, [input shapes: …]] [duration:
<µs>]``) or per kernel name (modules: ``<name>, [number: <n>], [duration_ms: <ms>]``). Read back
and grouped by kernel name, they make a small comparison table — count and total per side, the
difference — so the question "which kernel of this op got slower" is one key away. The numbers are
the cells' own: the table adds up to the rows it was made from.
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import pandas as pd

from ..compat import as_text
from .result import Column, Table, diff, ratio

TABLE_NAME = "OpKernels"
HEADER = "Kernel Details"  # the header of the cells this reads, on every sheet that has them

_OP_LINE = re.compile(r"^(?P<head>.*?) \[duration: (?P<us>[-\d.eE+]+)\]$")
_MODULE_LINE = re.compile(r"^(?P<name>.*), \[number: (?P<n>\d+)\], \[duration_ms: (?P<ms>[-\d.eE+]+)\]$")
#: What follows an NPU kernel's name in an operator line: task id and type, then the shapes.
_NPU_TAIL = re.compile(r", (?:\d+|None), (?:[A-Z_0-9]+|None)(?:, \[input shapes: .*\])?$")

COLUMNS: tuple[Column, ...] = (
    Column("kernel", "Kernel Name", "key", "bold", "", 40),
    Column("diff_us", "Diff(us)", "diff", "float", "us", 14),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 10),
    Column("base_n", "Count", "base", "int", "count", 8),
    Column("comp_n", "Count", "comparison", "int", "count", 8),
    Column("base_us", "Total(us)", "base", "float", "us", 12),
    Column("comp_us", "Total(us)", "comparison", "float", "us", 12),
)


def parse_kernels(texts: Iterable[str]) -> pd.DataFrame:
    """``kernel, n, us`` per kernel name (first-seen order) of ``Kernel Details`` cells."""
    names: list[str] = []
    counts: list[int] = []
    micros: list[float] = []
    for text in texts:
        if not isinstance(text, str):
            continue
        for line in text.splitlines():
            line = line.strip()
            if m := _MODULE_LINE.match(line):
                names.append(m["name"])
                counts.append(int(m["n"]))
                micros.append(float(m["ms"]) * 1000.0)
            elif m := _OP_LINE.match(line):
                names.append(_NPU_TAIL.sub("", m["head"]))
                counts.append(1)
                micros.append(float(m["us"]))
    df = pd.DataFrame({"kernel": names, "n": np.asarray(counts, dtype="int64"),
                       "us": np.asarray(micros, dtype="float64")})
    return df.groupby("kernel", sort=False, as_index=False).agg(n=("n", "sum"), us=("us", "sum"))


def detail_keys(table: Table) -> tuple[str, str] | None:
    """The base and comparison ``Kernel Details`` column keys of ``table``, if it has them."""
    base = [c.key for c in table.columns if c.header == HEADER and c.role == "base"]
    comp = [c.key for c in table.columns if c.header == HEADER and c.role == "comparison"]
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


def op_kernels(base_texts: Iterable[str], comp_texts: Iterable[str], label: str) -> Table:
    """The kernel comparison of one operator / module: kernels of either side by name, the
    largest absolute difference first."""
    b, c = parse_kernels(base_texts), parse_kernels(comp_texts)
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
