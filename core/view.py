"""View state of a table on screen: sort, filter, focus, `[ TOTAL ]`-only, expanded tree nodes.

The TUI keeps each table in pandas and renders only the visible window; this module computes which
rows are visible and in which order (numpy argsort / boolean masks: a few ms on 100k rows) and
formats just the cells about to be drawn. It has no Textual dependency so it is tested directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .compare.operators import screen_kernel_text
from .compare.result import IS_TOTAL, LEVEL, MATCH_ALL, NODE, PARENT, Column, Table, number_format

#: A focus condition: the row matches when any of the column keys holds exactly the value.
Condition = tuple[tuple[str, ...], str]


def format_value(value: object, col: Column) -> str:
    """Display text of one cell, in the workbook's number format of its column
    (:func:`~perfcmp_core.compare.result.number_format`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    fmt = number_format(col)
    if fmt == "percent":
        v = float(value)  # type: ignore[arg-type]
        return "INF" if math.isinf(v) else f"{v * 100:,.2f}%"
    if fmt == "int":
        try:
            return f"{int(value):,}"  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return str(value)
    if fmt == "float":
        v = float(value)  # type: ignore[arg-type]
        return "INF" if math.isinf(v) else f"{v:,.2f}"
    return str(value)


def is_signed(col: Column) -> bool:
    """Difference columns (a ``Diff`` header that is not a ratio) show an explicit sign."""
    return "Diff" in col.header and "Ratio" not in col.header


def screen_text(value: object, col: Column) -> str:
    """Cell text on screen: the workbook format, plus ``+`` on positive differences.

    Meaning never rests on colour alone: a difference carries its sign, a ratio its ▲/▼ (added by
    the renderer from :func:`~perfcmp_core.compare.result.tone`, the rule of the workbook's
    fills too).
    """
    if isinstance(value, str):
        return screen_kernel_text(value)
    text = format_value(value, col)
    if text and is_signed(col) and not isinstance(value, str):
        try:
            if float(value) > 0:  # type: ignore[arg-type]
                return "+" + text
        except (TypeError, ValueError):
            return text
    return text


def sign(value: object, col: Column) -> int:
    """+1 / -1 for a positive / negative difference cell (see :func:`is_signed`), else 0."""
    if not is_signed(col) or isinstance(value, str) or value is None:
        return 0
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0
    if math.isnan(v) or v == 0:
        return 0
    return 1 if v > 0 else -1


def label_column(columns: tuple[Column, ...]) -> int:
    """Index (in ``columns``) of the column that names a row and carries tree indentation.

    The first bold column (the sheets' row label), else the first text column whose header says
    "Name", else the first text column.
    """
    text = [i for i, c in enumerate(columns) if c.fmt in ("text", "bold")]
    for pick in ([i for i in text if columns[i].fmt == "bold"],
                 [i for i in text if "Name" in columns[i].header], text):
        if pick:
            return pick[0]
    return 0


def _with_twins(picked: list[Column], cols: tuple[Column, ...], taken: list[Column]) -> list[Column]:
    """``picked`` in order, each base column followed by its comparison twin (same header)."""
    out: list[Column] = []
    for c in picked:
        if c in taken or c in out:
            continue
        out.append(c)
        if c.role == "base":
            twin = next((d for d in cols if d.role == "comparison" and d.header == c.header
                         and d not in taken and d not in out), None)
            if twin is not None:
                out.append(twin)
    return out


def display_columns(table: Table) -> tuple[Column, ...]:
    """The table's columns in screen order: names, then the differences, then base/comparison.

    A workbook row is read left to right over a wide sheet; a terminal of 80 columns shows a
    handful. The row's label comes first, then the other names (a module's operator, a
    collective's task), then Diff and ratio (what got slower, without scrolling), then the other
    keys, then each base column beside its comparison twin (same header), so the two numbers
    being compared sit side by side. Order ids, levels and free text come last.
    """
    cols = table.columns
    if not cols:
        return ()
    out = _with_twins([cols[label_column(cols)]], cols, [])
    named = [c for c in cols if c.fmt in ("text", "bold") and "Name" in c.header
             and c.role in ("key", "base", "comparison")]
    out += _with_twins(named, cols, out)
    out += [c for c in cols if c.role in ("diff", "ratio")]
    out += [c for c in cols if c.role == "key" and c.fmt in ("text", "bold") and c not in out]
    out += _with_twins([c for c in cols if c.role in ("base", "comparison")], cols, out)
    return tuple(out + [c for c in cols if c not in out])


def display_header(col: Column, table: Table) -> str:
    """The header on screen: every comparison-side header reads ``Comp …``, and a base/comparison
    column whose header repeats gets ``Base`` / ``Comp``.

    The workbook tells the two sides apart by a merged title row above the headers; a screen
    header must say it itself, and in one word per side (the reference's own headers say
    ``Comparison …``, which a screen would otherwise mix with ``Comp …``).
    """
    if col.header.startswith("Comparison "):
        return "Comp " + col.header.removeprefix("Comparison ")
    if col.role not in ("base", "comparison"):
        return col.header
    if sum(c.header == col.header for c in table.columns) < 2:
        return col.header
    return ("Base " if col.role == "base" else "Comp ") + col.header


def _sort_values(series: pd.Series) -> np.ndarray:
    """Numeric sort keys for a column: numbers as-is, "INF" as +inf, other text by rank.

    Text columns that hold numbers (OverallMetrics' ``Number`` mixes counts with ``/``) sort
    numerically; a sample decides, so a 100k-row name column is not parsed as numbers.
    """
    if series.dtype.kind in "ifub":
        return series.to_numpy(dtype="float64", na_value=np.nan)
    sample = series.head(256).astype(str)
    if pd.to_numeric(sample, errors="coerce").notna().mean() > 0.5 or sample.eq("INF").any():
        text = series.astype(str)
        num = pd.to_numeric(series, errors="coerce").where(text != "INF", np.inf)
        return num.fillna(-np.inf).to_numpy(dtype="float64")
    codes, _ = pd.factorize(series.astype(str), sort=True)
    return codes.astype("float64")


def _level_links(levels: np.ndarray) -> np.ndarray:
    """Parent row of each row of an indented hierarchy (the previous row one level up)."""
    parent = np.full(len(levels), -1, dtype="int64")
    stack: list[int] = []  # row positions of the open ancestors, one per level
    for i, lvl in enumerate(levels.tolist()):
        del stack[max(int(lvl), 0):]
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


@dataclass
class TableView:
    """Which rows of a :class:`Table` are shown, in which order.

    Tree tables (declared ``tree="nodes"``: ``_node``/``_parent`` links; ``tree="outline"``: an
    indented ``_level`` hierarchy such as OverallMetrics) show a row only when its ancestors are
    expanded, and sort siblings under their parent. An outline starts fully expanded (it is read
    like a report); a linked tree starts with a single root open (a module tree) or all closed
    (one row per collective).
    """

    table: Table
    sort_key: str | None = None
    descending: bool = True
    filter_text: str = ""
    totals_only: bool = False
    focus: tuple[Condition, ...] = ()
    focus_label: str = ""
    expanded: set[int] = field(default_factory=set)
    _order: np.ndarray | None = field(default=None, repr=False)
    _links: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _text: list[str] | None = field(default=None, repr=False)
    _keys: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        df = self.table.data
        tree = self.table.tree
        if tree == "nodes" and NODE in df.columns and PARENT in df.columns:
            node = df[NODE].to_numpy(dtype="int64")
            parent = df[PARENT].to_numpy(dtype="int64")
            self._links = (node, parent)
            roots = node[parent < 0]
            if len(roots) == 1 and not self.expanded:
                self.expanded = {int(roots[0])}
        elif (tree == "outline" and LEVEL in df.columns and len(df)
              and (df[LEVEL].to_numpy() > 0).any()):
            node = np.arange(len(df), dtype="int64")
            parent = _level_links(df[LEVEL].to_numpy(dtype="int64"))
            self._links = (node, parent)
            if not self.expanded:
                self.expanded = set(int(p) for p in np.unique(parent) if p >= 0)

    @property
    def is_tree(self) -> bool:
        return self._links is not None

    @property
    def has_totals(self) -> bool:
        return IS_TOTAL in self.table.data.columns

    def node_of(self, row: int) -> int:
        """Tree node id of data row ``row`` (tree tables only)."""
        assert self._links is not None
        return int(self._links[0][row])

    def has_children(self, row: int) -> bool:
        return self._links is not None and bool((self._links[1] == self._links[0][row]).any())

    def parent_nodes(self) -> set[int]:
        """Ids of the tree nodes that have children."""
        if self._links is None:
            return set()
        return set(int(p) for p in np.unique(self._links[1]) if p >= 0)

    def invalidate(self) -> None:
        self._order = None

    def order(self) -> np.ndarray:
        """Row positions (into table.data) currently visible, in display order."""
        if self._order is None:
            self._order = self._compute()
        return self._order

    def __len__(self) -> int:
        return len(self.order())

    @property
    def flat(self) -> bool:
        """True when a filter is on, so a tree is shown as a plain list of the matching rows."""
        return bool(self.filter_text or self.totals_only or self.focus)

    def _compute(self) -> np.ndarray:
        df = self.table.data
        n = len(df)
        mask = np.ones(n, dtype=bool)
        if self.totals_only and self.has_totals:
            mask &= df[IS_TOTAL].to_numpy(dtype=bool)
        for keys, value in self.focus:
            hit = np.zeros(n, dtype=bool)
            for key in keys:
                hit |= (df[key].astype(str) == value).to_numpy()
            mask &= hit
        if self.filter_text:
            needle = self.filter_text.lower()
            mask &= np.fromiter((needle in row for row in self._haystack()), dtype=bool, count=n)
        tree = self.is_tree and not self.flat
        if tree:
            mask &= self._tree_visible()
        rows = np.flatnonzero(mask)
        if self.sort_key is not None:
            keys = self._sort_keys(self.sort_key)[rows]
            if tree:
                rows = self._tree_sorted(rows, keys)
            else:
                rows = rows[np.argsort(-keys if self.descending else keys, kind="stable")]
        return rows

    def _sort_keys(self, key: str) -> np.ndarray:
        """Numeric sort keys of a column, computed once per view (text ranks are costly)."""
        if key not in self._keys:
            self._keys[key] = _sort_values(self.table.data[key])
        return self._keys[key]

    def ready_filter(self) -> None:
        """Build the search text now (the filter box opened), so no keystroke pays for it."""
        self._haystack()

    def _haystack(self) -> list[str]:
        """Every text cell of a row, lower-cased and joined by a separator no needle contains.

        Built once per view: the filter runs on each keystroke, and one substring test per row
        costs a third of one per cell (plain Python strings: faster here than pandas' str ops).
        """
        if self._text is None:
            df = self.table.data
            cols = [df[c.key].astype(str).tolist() for c in self.table.columns
                    if c.fmt in ("text", "bold")]
            self._text = ["\x1f".join(cells).lower() for cells in zip(*cols)] if cols \
                else [""] * len(df)
        return self._text

    def _tree_visible(self) -> np.ndarray:
        """Rows whose every ancestor is expanded (roots always)."""
        assert self._links is not None
        node, parent = self._links
        pos = pd.Series(np.arange(len(node)), index=node)
        ppos = pos.reindex(parent).to_numpy()
        has_parent = ~np.isnan(ppos)
        pidx = np.where(has_parent, ppos, 0).astype("int64")
        open_ = np.isin(node, np.fromiter(self.expanded, dtype="int64", count=len(self.expanded)))
        visible = ~has_parent
        # Walk down one level per pass: a row shows when its parent shows and is expanded.
        while True:
            new = visible | (has_parent & visible[pidx] & open_[pidx])
            if (new == visible).all():
                return visible
            visible = new

    def _tree_sorted(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Sort siblings by key, keeping children right under their parent."""
        assert self._links is not None
        node = self._links[0][rows]
        parent = self._links[1][rows]
        by_parent: dict[int, list[int]] = {}
        sign_ = -1.0 if self.descending else 1.0
        for i in np.argsort(sign_ * keys, kind="stable").tolist():
            by_parent.setdefault(int(parent[i]), []).append(i)
        present = set(node.tolist())
        roots = [i for p, kids in by_parent.items() if p not in present for i in kids]
        stack = roots[::-1]
        out: list[int] = []
        while stack:
            i = stack.pop()
            out.append(int(rows[i]))
            stack.extend(reversed(by_parent.get(int(node[i]), [])))
        return np.asarray(out, dtype="int64")

    # -- actions ------------------------------------------------------------------------------
    def sort_by(self, key: str | None, descending: bool | None = None) -> None:
        """Sort by ``key``; without ``descending``, a new key sorts descending, the same one flips."""
        if descending is None:
            descending = not self.descending if key == self.sort_key else True
        self.sort_key, self.descending = key, descending
        self.invalidate()

    def diff_key(self) -> str | None:
        """The column the `d` key sorts by: the table's default, else its first Diff/ratio column."""
        if self.table.default_sort:
            return self.table.default_sort
        for role in ("diff", "ratio"):
            key = next((c.key for c in self.table.columns if c.role == role), None)
            if key is not None:
                return key
        return None

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self.invalidate()

    def drill(self, row: int) -> tuple[tuple[Condition, ...], str]:
        """The focus that Enter on data row ``row`` sets on the table's drill target, and its
        label: the row's values of the declared match columns (:class:`~.compare.result.Drill`)."""
        assert self.table.drill is not None
        df = self.table.data
        conditions, label = [], []
        for source_key, target_keys in self.table.drill.match:
            value = str(df[source_key].iat[row])
            if value not in MATCH_ALL:
                conditions.append((target_keys, value))
                label.append(value)
        return tuple(conditions), " / ".join(label) or "all"

    def set_focus(self, conditions: tuple[Condition, ...], label: str = "") -> None:
        """Show only rows meeting every condition (exact match): a statistic row's detail rows."""
        self.focus, self.focus_label = conditions, label if conditions else ""
        self.invalidate()

    def toggle_totals(self) -> None:
        self.totals_only = not self.totals_only
        self.invalidate()

    def toggle_node(self, row: int) -> bool:
        """Expand/collapse the tree node of data row ``row``; False when it has no children."""
        if not self.has_children(row):
            return False
        self.expanded.symmetric_difference_update({self.node_of(row)})
        self.invalidate()
        return True

    def cells(self, rows: np.ndarray, columns: tuple[Column, ...] | None = None) -> list[list[str]]:
        """Screen text of the given data rows (only what is about to be measured or drawn)."""
        cols = self.table.columns if columns is None else columns
        sub = self.table.data.iloc[rows]
        values = [sub[c.key].tolist() for c in cols]
        return [[screen_text(values[j][i], c) for j, c in enumerate(cols)] for i in range(len(rows))]
