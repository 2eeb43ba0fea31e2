"""The shape every comparison returns: one source for the workbook, the screens and ``--json``.

A comparison produces a :class:`Table`: a DataFrame whose visible columns are described by
:class:`Column` (exact workbook header, role, number format, unit, width) plus optional hidden
columns whose names start with ``_`` (tree links, indentation level, raw values used for sorting).
A column whose cells list a row's kernels (``Kernel Details``) is no DataFrame column but a
structured child table (:attr:`Table.children`), rendered to text by :meth:`Table.values` only
where text is read.
What a table *is* — its help line, whether the workbook holds it, how its rows nest, where Enter
leads, which columns hold call stacks, the screen that shows it — is declared once per table as
a :class:`Sheet` (registered in :data:`perfcmp_core.compare.STEPS`) and carried by the Table.
What the workbook holds has this one owner at both levels: a table is written when it is
``export``-ed (:attr:`Sheet.export` / :attr:`Table.export`), and of a written table the columns
:meth:`Table.sheet_columns` returns (a :attr:`Column.export` ``False`` column, such as ``Matched
As``, is on the screens and in ``--json`` only, so the reference's sheets keep its columns).
The workbook writer and the TUI both render a Table without knowing which comparison made it, so
a number can never differ between the sheet and the screen: the workbook asks
:func:`number_format` how a column reads, the screen :func:`screen_format` (the same, except that
a ratio reads as the change in percent there), and both ask :func:`tone` whether a ratio is worse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ..compat import string_objects
from ..notes import Note

if TYPE_CHECKING:
    from .kernel_rows import KernelRows

#: ``flag``: a short verdict on the row ("slowest", "only in base"), shown next to its name.
Role = Literal["key", "base", "comparison", "diff", "ratio", "text", "flag"]
Fmt = Literal["int", "float", "percent", "text", "bold"]
#: How a table's rows nest: not at all; an indented report (``_level``: the workbook indents
#: and fills rows by level, the screen starts fully expanded); a linked tree (``_node`` /
#: ``_parent``: the screen opens a single root, else starts closed).
Tree = Literal["", "outline", "nodes"]

#: Hidden columns with a meaning shared by every writer/renderer.
LEVEL = "_level"  # indentation depth of the row (OverallMetrics hierarchy, tree tables)
NODE = "_node"  # stable id of the row's tree node
PARENT = "_parent"  # id of the parent node, -1 for roots
IS_TOTAL = "_is_total"  # True on `[ TOTAL ]` / summary rows
#: The row's label as screens show it, where it differs from the workbook's (an OverallMetrics
#: group header named by its process group, not by its raw id); absent: the label column itself.
SHOWN = "_shown"


@dataclass(frozen=True)
class Column:
    key: str  # unique DataFrame column name
    header: str  # exact header text of the reference workbook
    role: Role = "text"
    fmt: Fmt = "text"
    unit: str = ""  # us | ms | KB | MB | count | "" — for labels in the TUI
    width: float = 20
    #: False: on the screens and in --json but not in the workbook sheet (whose columns must stay
    #: exactly the reference's); such columns come last, so the title spans still fit the sheet
    export: bool = True


def is_ratio(col: Column) -> bool:
    """A comparison ÷ base column: its cells are toned (▲/▼ on screen, red/green fill)."""
    return col.role == "ratio"


def number_format(col: Column) -> Fmt:
    """How the cells of ``col`` read in the workbook (and ``--json``'s text): the reference's.

    A ratio reads as a percentage (comparison ÷ base: 1.25 → 125.00%) whatever its column
    declares (the reference's API and kernel sheets declare plain numbers); any other column as
    it declares. The screens read ratios as the change instead (:func:`screen_format`).
    """
    return "percent" if is_ratio(col) else col.fmt


#: How a cell reads on screen: as the workbook's :data:`Fmt`, except that a ratio reads as the
#: change in percent (see :func:`screen_format`).
ScreenFmt = Literal["int", "float", "percent", "text", "bold", "change"]
#: The screen's name for the change in percent, (comparison − base) ÷ base.
CHANGE = "Δ%"


def screen_format(col: Column) -> ScreenFmt:
    """How the cells of ``col`` read on screen: the one definition of "%" in the app.

    A ratio column reads as the change in percent, (comparison − base) ÷ base — the figure the
    headline prints ("Computing 468.154 ms → 210.998 ms −54.9%") and the one people say ("54.9 %
    faster"): a ratio of 0.4507 reads −54.93%, 3.49 reads +249.00%, comparison-only rows read
    ``new``. The workbook keeps the reference's Diff Ratio, comparison ÷ base
    (:func:`number_format`). Any other column reads as it declares.
    """
    return "change" if is_ratio(col) else col.fmt


def change_percent(ratio: float) -> float:
    """The change in percent of a comparison ÷ base ratio: (ratio − 1) × 100 (inf stays inf)."""
    return (ratio - 1.0) * 100.0


def change_text(ratio: object, digits: int = 2) -> str:
    """A ratio as the screen prints it: ``+12.34%`` / ``-54.93%`` / ``0.00%``; ``new`` when only
    the comparison has it (base 0: the ratio is inf); empty when missing."""
    try:
        v = float(ratio)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(ratio) if ratio is not None else ""
    if v != v:  # NaN
        return ""
    if v == float("inf"):
        return "new"
    pct = change_percent(v)
    text = f"{pct:+,.{digits}f}%"
    # -0.00% / +0.00% for a change that rounds to nothing: it reads as no change.
    return f"{0:.{digits}f}%" if text[1:].strip("0.,%") == "" else text


def screen_header(col: Column) -> str:
    """A column's header on screen: a ratio column says what its cells are, the change in
    percent (``Diff Ratio`` → ``Δ%``, ``Diff Total Ratio`` → ``Δ% Total``); any other column
    keeps the workbook's header."""
    if not is_ratio(col):
        return col.header
    words = col.header.replace("Diff", " ").replace("Ratio", " ").split()
    return " ".join([CHANGE, *words])


def tone(value: object, col: Column) -> int:
    """+1 when a ratio cell says the comparison is worse (> 1, INF), -1 better (< 1), else 0
    (equal, missing, text, or not a ratio column): the ▲/▼ on screen, the red/green fill."""
    return ratio_tone(value) if is_ratio(col) else 0


def ratio_tone(value: object) -> int:
    """:func:`tone` of a value known to sit in a ratio column (the workbook's per-cell path)."""
    if type(value) is float:  # nearly every cell
        return 1 if value > 1 else -1 if value < 1 else 0  # NaN compares False both ways
    if isinstance(value, str):
        return 1 if value.strip().upper() == "INF" else 0
    if isinstance(value, bool) or value is None:
        return 0
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0
    return 1 if v > 1 else -1 if v < 1 else 0


#: Source cell values of a drill that match every target row (a module's total row opens all of
#: the module's rows).
MATCH_ALL = frozenset({"[ TOTAL ]"})


@dataclass(frozen=True)
class Drill:
    """Enter on a row opens table ``target`` narrowed to the rows of that entry.

    ``match`` pairs a column key of this table with the target's column keys that must hold the
    same value (any of them: an operator name may sit on the base or the comparison side); a
    value in :data:`MATCH_ALL` narrows nothing.
    """

    target: str
    match: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Screen:
    """One screen of the app: its key, title, what it needs when it stays empty, its tables."""

    id: str
    key: str  # the digit that shows it; screens are numbered in this order
    title: str
    hint: str  # why it is empty when no comparison said why
    headlines: bool = False  # shows the run's headline figures (E2E, Computing …) on top
    sheets: tuple[str, ...] = ()  # the tables it shows, first = default view (`v` cycles)
    #: False: not a table screen in the screen bar; the app draws its table its own way, opened
    #: by its key (the Timeline, ``T``)
    tabbed: bool = True


@dataclass(frozen=True)
class Sheet:
    """What one table is, declared once beside the comparison that makes it."""

    name: str
    screen: Screen | None  # None: a workbook-only table (the Matching sheet)
    help: str = ""  # one line for the workbook's README sheet
    export: bool = True  # False: screens and --json only (the module tree)
    tree: Tree = ""
    drill: Drill | None = None
    stacks: tuple[str, str] | None = None  # column keys of the base / comparison call stacks
    #: Column naming a row in the terminal's "top regressions" (rows ranked by the table's
    #: default sort; the first declared table with rows and this set is the one listed).
    regressions: str | None = None
    #: Columns whose values name a row (joined, they are the row's name in the workbook's
    #: Matching sheet); empty for tables whose rows are never paired by the equivalence table.
    row_names: tuple[str, ...] = ()
    #: Its screen opens on it, although the workbook lists it after the reference's sheets (the
    #: step explanation on Overall).
    opens: bool = False
    #: An outline's levels shown expanded when the screen opens (0: every level).
    open_levels: int = 0
    #: Column keys in the order the screens show them, whatever the rows hold (the columns not
    #: named follow in :func:`perfcmp_core.view.display_columns`' order); empty: that order.
    screen_order: tuple[str, ...] = ()


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
    #: What its :class:`Sheet` declares (set by :func:`perfcmp_core.compare.declare`).
    help: str = ""
    tree: Tree = ""
    open_levels: int = 0
    drill: Drill | None = None
    stacks: tuple[str, str] | None = None
    #: What its :class:`Sheet` declares: a fixed screen column order (see ``Sheet.screen_order``).
    screen_order: tuple[str, ...] = ()
    lead: str = ""  # a sentence reading the table, shown above it ("where the gap comes from")
    #: Columns the screens show after the workbook's, which the workbook (the reference's
    #: drop-in) does not hold: absolute differences where the sheet has only ratios. Their data
    #: keys start with ``_`` (see :func:`screen_diffs`).
    screen_columns: tuple[Column, ...] = ()
    #: Columns kept as structured child tables instead of text in ``data`` (the ``Kernel
    #: Details`` cells: :class:`~.kernel_rows.KernelRows`, one entry slice per row): their text
    #: is rendered where it is read (:meth:`values`), never stored.
    children: dict[str, KernelRows] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # pandas 3 infers its own string dtype for text given as object arrays: the table holds
        # its text as ``object``, the cells' own objects (``compat.STRING_STORAGE``), as every
        # screen and the workbook read it.
        inferred = [key for key, dtype in self.data.dtypes.items()
                    if isinstance(dtype, pd.StringDtype)]  # dtype-neutral: finds the inferred ones
        if inferred:
            self.data = self.data.assign(**{key: string_objects(self.data[key]) for key in inferred})
        for key, child in self.children.items():
            if key in self.data.columns or child.rows != len(self.data):
                raise ValueError(f"{self.name}: child table {key!r} does not fit the rows "
                                 f"({child.rows} for {len(self.data)}, or also a data column)")

    @property
    def empty(self) -> bool:
        return self.data.empty

    def values(self, key: str, rows: np.ndarray | None = None) -> pd.Series:
        """Column ``key`` at row positions ``rows`` (all rows when None), as the workbook holds
        it: a child table's column is rendered to the reference's text here."""
        child = self.children.get(key)
        if child is None:
            column = self.data[key]
            return column if rows is None else column.iloc[rows]
        pos = np.arange(len(self.data), dtype="int64") if rows is None else np.asarray(rows, dtype="int64")
        return pd.Series(child.render(pos), index=self.data.index[pos], dtype=object, name=key)

    def value(self, key: str, row: int) -> object:
        """One cell (row position ``row``) of column ``key``, rendered as :meth:`values` does."""
        child = self.children.get(key)
        if child is None:
            return self.data[key].iat[row]
        return child.render(np.array([row], dtype="int64"))[0]

    def keys(self) -> list[str]:
        """Every column key in order: ``data``'s, with each child column where its
        :class:`Column` stands (after the column declared before it)."""
        keys = list(self.data.columns)
        for i, col in enumerate(self.columns):
            if col.key in self.children:
                before = [c.key for c in self.columns[:i] if c.key in keys]
                keys.insert(keys.index(before[-1]) + 1 if before else 0, col.key)
        return keys

    def column(self, key: str) -> Column:
        for c in (*self.columns, *self.screen_columns):
            if c.key == key:
                return c
        raise KeyError(key)

    def sheet_columns(self) -> tuple[Column, ...]:
        """The columns of its workbook sheet: every exported column (the screens and --json
        show them all). Unexported columns must come last: the title spans index the columns."""
        n = sum(c.export for c in self.columns)
        if not all(c.export for c in self.columns[:n]):
            raise ValueError(f"{self.name}: an unexported column comes before an exported one")
        return self.columns[:n]

    def visible(self) -> pd.DataFrame:
        """The visible columns, in order (child columns rendered: for small tables and tests)."""
        return pd.DataFrame({c.key: self.values(c.key) for c in self.columns}, index=self.data.index)


@dataclass
class ComparisonResult:
    """Everything one comparison run produced, tables in workbook order."""

    base_label: str  # path as the user gave it
    comp_label: str
    tables: dict[str, Table] = field(default_factory=dict)
    summary: dict[str, dict[str, object]] = field(default_factory=dict)  # terminal figures per side
    #: The run's notes (the sides', why comparisons made nothing, the steps'), each once;
    #: the tables' own notes stay on their tables.
    notes: list[Note] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)
    #: The step each side was cut to (``--base-step`` / ``--comparison-step``, the app's `S`);
    #: None: every step.
    base_step: int | None = None
    comp_step: int | None = None

    def side_title(self, side: str) -> str:
        """A side's path as the workbook names it, with the step compared when one was picked:
        ``rank0_ascend_pt (step 4)`` — a workbook of one step must say which."""
        label, step = ((self.base_label, self.base_step) if side == "base"
                       else (self.comp_label, self.comp_step))
        return label if step is None else f"{label} (step {step})"

    def add(self, table: Table | None) -> None:
        if table is not None:
            self.tables[table.name] = table


def diff(base: pd.Series | np.ndarray, comp: pd.Series | np.ndarray) -> np.ndarray:
    """comparison − base (unrounded; display rounding is the renderer's job)."""
    return np.asarray(comp, dtype="float64") - np.asarray(base, dtype="float64")


def screen_diffs(data: pd.DataFrame, quantities: tuple[Column, ...]) -> tuple[Column, ...]:
    """Add comparison − base of each base column in ``quantities`` (data keys ``base_<q>`` /
    ``comp_<q>``) to ``data`` as ``_diff_<q>``, and return their screen columns (``Diff`` +
    the quantity's header): the absolute change beside the reference's ratios, which put a
    kernel that grew 1 µs → 3 µs above one that grew 10 ms → 15 ms."""
    out = []
    for col in quantities:
        q = col.key.removeprefix("base_")
        data[f"_diff_{q}"] = diff(data[f"base_{q}"], data[f"comp_{q}"])
        out.append(Column(f"_diff_{q}", f"Diff {col.header}", "diff", col.fmt, col.unit, col.width))
    return tuple(out)


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
