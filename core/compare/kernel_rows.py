"""The kernels behind a table's ``Kernel Details`` cells, kept as rows: what those cells are made of.

The reference writes each row's kernels into one text cell, one line per kernel launch
(operators, module ops: ``<name>[, <task id>, <task type>][, [input shapes: …]] [duration:
<µs>]``) or per kernel name (module statistic: ``<name>, [number: <n>], [duration_ms: <ms>]``).
On the 8× GPU pair those cells hold 44 MB across 1,560 rows, up to 290,000 characters in one.
A table keeps them instead as a :class:`KernelRows` child table per side — for each table row a
slice of entries, each a kernel name (a code into a dictionary), a count, a total duration and,
for NPU launches, the task id (an integer) and the task type and input shapes (codes too) — and the reference's text
is rendered from it only where text is read: the workbook, ``--json`` and the view's CSV (whole
columns, :meth:`~.result.Table.values`), and the screens (the rows drawn, the row in full). The
`K` drill-down (:mod:`.kernel_drill`) groups the entries by name without any text.

Everything is columnar: entries of all rows are gathered with one index array, lines are built per
distinct value, and only the join of one row's lines is per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..model import Profile

#: One entry per kernel launch (operators, module ops) / per kernel name of a row (module statistic).
Style = Literal["launch", "summary"]
LAUNCH: Style = "launch"
SUMMARY: Style = "summary"
_MS = 1_000_000.0


@dataclass(frozen=True)
class Coded:
    """A text column as codes into its distinct values (the dictionary)."""

    codes: np.ndarray  # int32, one per entry (a table's entries are few enough; half of int64)
    values: np.ndarray  # object array of str

    @classmethod
    def of(cls, values: np.ndarray) -> Coded:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        return cls(codes.astype("int32"), np.asarray(uniques, dtype=object))

    @classmethod
    def column(cls, profile: Profile, table: str, column: str, rows: np.ndarray) -> Coded:
        """``Coded.of(profile.<table>[column][rows])`` from the column's codes
        (:meth:`~perfcmp_core.model.Profile.codes`, made once per profile): the rows' codes are
        renumbered by first appearance as integers, so no cell's text is hashed again (the
        kernel names of every launch taken, 10 ms a table on the H200 pair). A column holding
        anything but text (whose missing values ``pd.factorize`` leaves uncoded) is coded by
        :meth:`of`."""
        codes, distinct = profile.codes(table, column)
        number, used = pd.factorize(codes[rows])
        values = distinct[used]
        if not all(type(v) is str for v in values.tolist()):
            return cls.of(getattr(profile, table)[column].to_numpy(dtype=object)[rows])
        return cls(number.astype("int32"), values)

    def pick(self, rows: np.ndarray) -> Coded:
        """The entries ``rows``, with the dictionary cut to the values they use."""
        used, inverse = np.unique(self.codes[rows], return_inverse=True)
        return Coded(inverse.reshape(-1).astype("int32"), self.values[used])

    def text(self, entries: np.ndarray) -> np.ndarray:
        return self.values[self.codes[entries]]


@dataclass(frozen=True)
class KernelRows:
    """The entries of every row of one ``Kernel Details`` column.

    Row ``r`` of the table owns entries ``[ptr[r], ptr[r + 1])``, in the order its cell lists
    them. ``count`` (int32) is 1 for a launch; ``dur_ns`` (int64) the entry's (summed) device
    time. ``task`` holds the task id (int64, -1: none), task type and input shapes of NPU
    launches (None on GPU and for summaries).
    """

    style: Style
    ptr: np.ndarray
    name: Coded
    count: np.ndarray
    dur_ns: np.ndarray
    task: tuple[np.ndarray, Coded, Coded] | None = None

    @property
    def rows(self) -> int:
        return len(self.ptr) - 1

    def owner(self) -> np.ndarray:
        """The table row of every entry."""
        return np.repeat(np.arange(self.rows, dtype="int64"), np.diff(self.ptr))

    def entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(entry positions of ``rows``, row after row; entries per row)."""
        return gather(self.ptr, np.asarray(rows, dtype="int64"))

    def take(self, source: np.ndarray) -> KernelRows:
        """Rows that each hold the entries of row ``source[i]`` of this table (-1: none)."""
        idx, counts = self.entries(source)
        return KernelRows(self.style, offsets(counts), self.name.pick(idx), self.count[idx],
                          self.dur_ns[idx], None if self.task is None else
                          (self.task[0][idx], self.task[1].pick(idx), self.task[2].pick(idx)))

    def lines(self, entries: np.ndarray) -> np.ndarray:
        """The reference's line (ending in ``\\n``) of each entry: object array of str."""
        name = self.name.text(entries)
        if self.style == SUMMARY:
            count, c_inv = np.unique(self.count[entries], return_inverse=True)
            n_text = np.array([str(v) for v in count.tolist()], dtype=object)[c_inv.reshape(-1)]
            ns, inv = np.unique(self.dur_ns[entries], return_inverse=True)
            ms = np.array([f"{v:.3f}" for v in (ns / _MS).tolist()], dtype=object)[inv.reshape(-1)]
            return name + ", [number: " + n_text + "], [duration_ms: " + ms + "]\n"
        # Durations repeat (a few hundred distinct in 75k kernels): each tail is built once.
        durations, inverse = np.unique(self.dur_ns[entries], return_inverse=True)
        tail = (" [duration: " + float_text(durations / 1000.0) + "]\n")[inverse.reshape(-1)]
        if self.task is None:
            return name + tail
        task_id, task_type, shapes = self.task
        # Task ids are nearly all distinct: each entry's is written as it is read.
        ids = [str(i) if i >= 0 else "None" for i in task_id[entries].tolist()]
        types = np.where(task_type.values == "", "None", task_type.values)[task_type.codes[entries]]
        shape_part = np.where(shapes.values == "", "", ", [input shapes: " + shapes.values + "]")
        # One f-string per line: task ids are nearly all distinct, and one pass over Python lists
        # costs half of chained object-array additions.
        out = np.empty(len(entries), dtype=object)
        out[:] = [f"{n}, {i}, {t}{s}{e}" for n, i, t, s, e in zip(
            name.tolist(), ids, types.tolist(), shape_part[shapes.codes[entries]].tolist(), tail.tolist())]
        return out

    def render(self, rows: np.ndarray) -> np.ndarray:
        """The cells of ``rows`` as the reference writes them (object array of str, "" for a row
        without kernels): each row's lines joined."""
        idx, counts = self.entries(rows)
        return join_runs(self.lines(idx), counts)

    def distinct_lines(self) -> tuple[np.ndarray, np.ndarray]:
        """(per entry, the code of its line; the distinct lines): what a search reads, each line
        once (on GPU a kernel's line repeats with every launch of the same duration)."""
        parts = [self.name.codes, self.count, self.dur_ns]
        if self.task is not None:
            parts += [self.task[0], self.task[1].codes, self.task[2].codes]
        if not len(self.dur_ns):
            return np.zeros(0, dtype="int64"), np.zeros(0, dtype=object)
        _, first, inverse = np.unique(np.stack(parts, axis=1), axis=0, return_index=True, return_inverse=True)
        return inverse.reshape(-1).astype("int64"), self.lines(first)

    def by_name(self, rows: np.ndarray) -> pd.DataFrame:
        """``kernel, n, us`` per kernel name (first-seen order) over the entries of ``rows``."""
        idx, _ = self.entries(rows)
        df = pd.DataFrame({"code": self.name.codes[idx], "n": self.count[idx],
                           "us": self.dur_ns[idx] / 1000.0})
        g = df.groupby("code", sort=False).agg(n=("n", "sum"), us=("us", "sum"))
        return pd.DataFrame({"kernel": self.name.values[g.index.to_numpy()],
                             "n": g["n"].to_numpy(dtype="int64"), "us": g["us"].to_numpy(dtype="float64")})


def gather(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``[ptr[r], ptr[r + 1])`` of every ``r`` in ``rows`` (-1: none), row after
    row, and how many each row has."""
    ok = rows >= 0
    r = np.where(ok, rows, 0)
    lo = np.where(ok, ptr[r], 0)
    counts = np.where(ok, ptr[r + 1] - lo, 0) if len(ptr) > 1 else np.zeros(len(rows), dtype="int64")
    first = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype="int64") + np.repeat(lo - first, counts), counts


def offsets(counts: np.ndarray) -> np.ndarray:
    """CSR offsets (``ptr``) of consecutive runs of ``counts`` entries."""
    return np.concatenate(([0], np.cumsum(counts))).astype("int64")


def join_runs(texts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per run of ``counts`` consecutive ``texts``, their concatenation ("" for an empty run):
    a run of one keeps its text, longer runs take one join each."""
    out = np.full(len(counts), "", dtype=object)
    first = np.cumsum(counts) - counts
    one = counts == 1
    out[one] = texts[first[one]]
    many = np.flatnonzero(counts > 1)
    if len(many):
        items = texts.tolist()
        out[many] = ["".join(items[a:b]) for a, b in zip(first[many].tolist(), (first + counts)[many].tolist())]
    return out


def launches(profile: Profile, counts: np.ndarray, kernel_rows: np.ndarray) -> KernelRows:
    """Launch entries: row ``i`` of the table lists ``counts[i]`` kernels, ``kernel_rows`` (rows
    of ``profile.kernels``) row after row."""
    k = profile.kernels
    task = None
    if profile.meta.is_npu:
        task = (k["task_id"].to_numpy(dtype="int64")[kernel_rows],
                *(Coded.column(profile, "kernels", c, kernel_rows) for c in ("task_type", "input_shapes")))
    return KernelRows(LAUNCH, offsets(counts), Coded.column(profile, "kernels", "name", kernel_rows),
                      np.ones(len(kernel_rows), dtype="int32"),
                      k["dur_ns"].to_numpy(dtype="int64")[kernel_rows], task)  # type: ignore[arg-type]


def float_text(values: np.ndarray) -> np.ndarray:
    """Shortest round-trip text of floats, as Python's ``repr`` prints them (``333.0``, ``65.5``),
    which is how the reference writes durations and sizes into detail cells.

    Kernel durations repeat (a few hundred distinct values in 75k kernels), so each distinct
    value is formatted once; values are told apart by their bits, so ``-0.0`` and NaNs keep
    their own text.
    """
    bits, inverse = np.unique(np.asarray(values, dtype="float64").view("int64"), return_inverse=True)
    text = np.array([float.__repr__(v) for v in bits.view("float64").tolist()], dtype=object)
    return text[inverse.reshape(-1)]
