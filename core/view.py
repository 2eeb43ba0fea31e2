"""View state of a table on screen: sort, filter, focus, `[ TOTAL ]`-only, unchanged rows hidden,
hidden columns, expanded tree nodes — and the text of the cells about to be drawn.

The TUI keeps each table in pandas and renders only the visible window; this module computes which
rows are visible and in which order (numpy argsort / boolean masks: a few ms on 100k rows) and
formats just the cells about to be drawn. It has no Textual dependency so it is tested directly.

Everything a key needs that is costly to compute — each text column factorised into its distinct
values (lower-cased for the search, cut to :data:`CLIP` characters for the screen), the numeric
sort keys, which rows changed — is built once by :meth:`TableView.prepare`, which the app runs in
its worker thread as each table arrives, so no key press pays for it. The kernel lists of the
detail tables (44 MB of text on the 8× real pair, up to 290,000 characters in one cell) are not
text here: they are structured child tables (:class:`KernelIndex`), a cell rendered when its row
is drawn and clipped, a filter testing each distinct kernel line once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd

from .compat import as_text
from .compare.kernel_rows import KernelRows, join_runs
from .compare.operators import screen_kernel_text
from .compare.result import (IS_TOTAL, LEVEL, MATCH_ALL, NODE, PARENT, SHOWN, Column, Table,
                             change_percent, change_text, number_format, screen_format,
                             screen_header)

#: A focus condition: the row matches when any of the column keys holds exactly the value.
Condition = tuple[tuple[str, ...], str]
#: Characters of a text cell kept for the screen: its head and its tail around "…" (no column is
#: wider, and a cut in the middle keeps both ends; the full text is a key away).
CLIP = 240
#: Leading words that say which side a column holds; two columns that differ only by them are
#: one quantity ("Base Device Duration(ms)" / "Comparison Device Duration(ms)").
SIDE_WORDS = ("Base ", "Comparison ", "Comp ")
_REGEX_CHARS = frozenset(".^$*+?{}[]\\|()")


def format_value(value: object, col: Column) -> str:
    """Text of one cell in the workbook's number format of its column
    (:func:`~perfcmp_core.compare.result.number_format`: ratios as comparison ÷ base); the
    terminal report prints this. The screen prints :func:`screen_text`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    return _formatted(value, number_format(col))


def _formatted(value: object, fmt: str) -> str:
    if fmt == "change":
        return change_text(value)
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
        if math.isinf(v):
            return "INF"
        return f"{v:,.2f}" if v == 0 or abs(v) >= SMALL else small_text(v)
    return str(value)


#: Below this a number's two decimals would read 0.00 (``+0.00 ▲+20.74%``): it gets
#: :data:`SIGNIFICANT` significant digits instead.
SMALL = 0.005
SIGNIFICANT = 3


def small_text(v: float) -> str:
    """A non-zero number under :data:`SMALL` with :data:`SIGNIFICANT` significant digits
    (0.0012 → ``0.00120``), in scientific notation below a nanosecond's worth (1e-9)."""
    if abs(v) < 1e-9:
        return f"{v:.{SIGNIFICANT - 1}e}"
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(v)))
    return f"{v:.{decimals}f}"


def exact_text(value: object, col: Column) -> str:
    """A cell at the precision it is stored with — what `y` / `Y` copy and the line under the
    table shows (the screen rounds: 0.0012345 ms shows as 0.00123): numbers keep 15
    significant digits, a ratio its change in percent likewise; anything else as on screen."""
    fmt = screen_format(col)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and fmt in (
            "float", "change", "percent"):
        v = float(value)
        if fmt == "change":
            return f"{change_percent(v):+.15g}%"
        if fmt == "percent":
            return f"{v * 100:.15g}%"
        return ("+" if v > 0 and is_signed(col) else "") + f"{v:.15g}"
    return screen_text(value, col)


def is_signed(col: Column) -> bool:
    """Difference columns (a ``Diff`` header that is not a ratio) show an explicit sign."""
    return "Diff" in col.header and "Ratio" not in col.header


def screen_text(value: object, col: Column) -> str:
    """Cell text on screen, in full: the screen format of its column
    (:func:`~perfcmp_core.compare.result.screen_format`: a ratio as the change in percent), plus
    ``+`` on positive differences.

    Meaning never rests on colour alone: a difference carries its sign, a ratio its sign and its
    ▲/▼ (added by the renderer from :func:`~perfcmp_core.compare.result.tone`, the rule of the
    workbook's fills too).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return screen_kernel_text(value)
    text = _formatted(value, screen_format(col))
    if text and is_signed(col):
        try:
            if float(value) > 0:  # type: ignore[arg-type]
                return "+" + text
        except (TypeError, ValueError):
            return text
    return text


def clip_text(text: str, limit: int = CLIP) -> str:
    """One screen line of at most ``limit`` characters: line breaks shown as ⏎, a longer text
    keeps its head and its tail around "…" (a path's first part and its last ones both matter)."""
    text = _flat(text)
    if len(text) > limit:
        head = limit // 2
        text = text[:head] + "…" + text[len(text) - (limit - head - 1):]
    return text


def _flat(text: str) -> str:
    """``text`` on one line: line breaks as ⏎, tabs as spaces, carriage returns dropped."""
    if "\n" in text or "\r" in text or "\t" in text:
        text = text.replace("\r\n", "\n").replace("\r", "").replace("\n", "⏎").replace("\t", " ")
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


def quantity(header: str) -> str:
    """A header without the word naming its side: the quantity a base/comparison pair shares."""
    for word in SIDE_WORDS:
        if header.startswith(word):
            return header[len(word):]
    return header


def _with_twins(picked: list[Column], cols: tuple[Column, ...], taken: list[Column]) -> list[Column]:
    """``picked`` in order, each base column followed by its comparison twin (same quantity)."""
    out: list[Column] = []
    for c in picked:
        if c in taken or c in out:
            continue
        out.append(c)
        if c.role == "base":
            twin = next((d for d in cols if d.role == "comparison"
                         and quantity(d.header) == quantity(c.header)
                         and d not in taken and d not in out), None)
            if twin is not None:
                out.append(twin)
    return out


def display_columns(table: Table) -> tuple[Column, ...]:
    """The table's columns in screen order: the label, differences, names, numbers per side,
    text per side.

    A workbook row is read left to right over a wide sheet; a terminal of 80 columns shows a
    handful. The row's label comes first (with its comparison twin when each side names the row),
    then Diff and Δ% (what got slower, without scrolling; the absolute differences the screens
    add, :attr:`~perfcmp_core.compare.result.Table.screen_columns`, before the ratios), then the
    other names (a module's operator, a collective's task) and keys, then each base number beside
    its comparison twin (the same quantity: "Base Device Duration(ms)" beside "Comparison Device
    Duration(ms)"), then the text of each side (shapes, kernel lists) the same way. Order ids,
    levels and free text come last. A key that tells apart rows the label does not (a kernel's
    input shape) follows the label at once. A row's flag (a short verdict) follows its names.
    """
    cols = (*table.columns, *table.screen_columns)
    if not cols:
        return ()
    if table.screen_order:  # declared by its sheet: the same on every run
        fixed = [c for key in table.screen_order for c in cols if c.key == key]
        rest = replace(table, columns=tuple(c for c in table.columns if c not in fixed),
                       screen_columns=tuple(c for c in table.screen_columns if c not in fixed),
                       screen_order=())
        return (*fixed, *(c for c in display_columns(rest) if c not in fixed))
    label = cols[label_column(cols)]
    out = _with_twins([label], cols, [])
    # Keys that tell apart rows of one label (a kernel's input shapes) are part of its name.
    out += [c for c in cols if c.role == "key" and c.fmt in ("text", "bold") and c not in out
            and _distinguishes(table.data, c.key, label.key)]
    out += [c for c in cols if c.role == "diff" and c not in out]
    out += [c for c in cols if c.role == "ratio" and c not in out]
    named = [c for c in cols if c.fmt in ("text", "bold") and "Name" in c.header
             and c.role in ("key", "base", "comparison")]
    out += _with_twins(named, cols, out)
    out += [c for c in cols if c.role == "flag" and c not in out]
    out += [c for c in cols if c.role == "key" and c.fmt in ("text", "bold") and c not in out]
    sides = [c for c in cols if c.role in ("base", "comparison")]
    out += _with_twins([c for c in sides if c.fmt not in ("text", "bold")], cols, out)
    out += _with_twins([c for c in sides if c.fmt in ("text", "bold")], cols, out)
    return tuple(out + [c for c in cols if c not in out])


def _distinguishes(data: pd.DataFrame, key: str, label: str) -> bool:
    """True when column ``key`` holds different values on rows with the same ``label``."""
    if key not in data or label not in data or data.empty:
        return False
    labels = pd.factorize(data[label])[0]
    keys = pd.factorize(data[key])[0]
    pairs = labels.astype("int64") * (int(keys.max()) + 2) + keys + 1
    return len(np.unique(pairs)) > len(np.unique(labels))


def display_header(col: Column, table: Table) -> str:
    """The header on screen, never ambiguous: a ratio says it is the change (``Δ%``); a
    base/comparison column says its side in one word, ``Base`` / ``Comp`` (the workbook tells
    the sides apart by a merged title row above the headers; the reference's own headers mix
    "Comparison …" in full, which a screen would otherwise show beside "Comp …")."""
    if col.header.startswith("Comparison "):
        return "Comp " + col.header.removeprefix("Comparison ")
    if col.role not in ("base", "comparison"):
        return screen_header(col)
    name = quantity(col.header)
    if name != col.header or sum(quantity(c.header) == name for c in table.columns) >= 2:
        return ("Base " if col.role == "base" else "Comp ") + name
    return col.header


def _sort_values(series: pd.Series) -> np.ndarray:
    """Numeric sort keys for a column: numbers as-is, "INF" as +inf, other text by rank.

    Text columns that hold numbers (OverallMetrics' ``Number`` mixes counts with ``/``) sort
    numerically; a sample decides, so a 100k-row name column is not parsed as numbers.
    """
    if series.dtype.kind in "ifub":
        return series.to_numpy(dtype="float64", na_value=np.nan)
    sample = as_text(series.head(256))
    if pd.to_numeric(sample, errors="coerce").notna().mean() > 0.5 or sample.eq("INF").any():
        text = as_text(series)
        num = pd.to_numeric(series, errors="coerce").where(text != "INF", np.inf)
        return num.fillna(-np.inf).to_numpy(dtype="float64")
    codes, _ = pd.factorize(as_text(series), sort=True)
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


@dataclass(frozen=True)
class Search:
    """What the filter box holds, compiled: case-insensitive text, ``a|b`` alternatives, or a
    regular expression (VisiData's habit). Text that is no valid regular expression
    (``aten::add(``) is searched for as it stands."""

    text: str
    literals: tuple[str, ...] = ()  # lower-cased alternatives, any of which matches
    regex: re.Pattern[str] | None = None

    @classmethod
    def compile(cls, text: str) -> Search:
        text = text.strip()
        parts = text.split("|")
        if not any(set(p) & _REGEX_CHARS for p in parts):
            # An empty alternative ("aten|" while typing) would match everything: it is left out.
            return cls(text, literals=tuple(p.lower() for p in parts if p) or (text.lower(),))
        try:
            return cls(text, regex=re.compile(text, re.IGNORECASE))
        except re.error:
            return cls(text, literals=(text.lower(),))

    @property
    def is_regex(self) -> bool:
        return self.regex is not None

    def hits(self, lowered: Sequence[str]) -> np.ndarray:
        """Which of the (lower-cased) texts match."""
        n = len(lowered)
        if self.regex is not None:
            search = self.regex.search
            return np.fromiter((search(s) is not None for s in lowered), dtype=bool, count=n)
        if len(self.literals) == 1:
            needle = self.literals[0]
            return np.fromiter((needle in s for s in lowered), dtype=bool, count=n)
        alts = self.literals
        return np.fromiter((any(a in s for a in alts) for s in lowered), dtype=bool, count=n)


@dataclass(frozen=True)
class TextColumnIndex:
    """One text column of a result table as the screen filters it (a profile column's keyword
    tests have :class:`~.compare.masks.TextIndex`): each row's code into its distinct values,
    which are kept lower-cased (searched once per distinct value, not per row) and clipped for
    the screen."""

    codes: np.ndarray  # per row: position in ``values``, -1 for a missing cell
    values: list[str]
    lowered: list[str]
    clipped: list[str]
    positions: dict[str, int]

    @classmethod
    def build(cls, series: pd.Series) -> TextColumnIndex:
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        values = [u if isinstance(u, str) else str(u) for u in uniques.tolist()]
        shown = [screen_kernel_text(v) for v in values]  # what the screen shows is searched
        return cls(codes=codes, values=values, lowered=[v.lower() for v in shown],
                   clipped=[clip_text(v) for v in shown],
                   positions={v: i for i, v in enumerate(values)})

    def equals(self, value: str) -> np.ndarray:
        """Rows holding exactly ``value``."""
        pos = self.positions.get(value)
        if pos is None:
            return np.zeros(len(self.codes), dtype=bool)
        return self.codes == pos

    def matches(self, search: Search) -> np.ndarray:
        """Rows whose text matches ``search``."""
        if not self.values:
            return np.zeros(len(self.codes), dtype=bool)
        hit = np.append(search.hits(self.lowered), False)  # code -1 (missing) never matches
        return hit[self.codes]


@dataclass
class KernelIndex:
    """A column kept as a structured child table (``Kernel Details``,
    :class:`~.compare.kernel_rows.KernelRows`) as the filter and the screen read it: a search
    tests each distinct kernel line once (as the screen shows it, lower-cased) and a row matches
    when one of its lines does; a cell's text is rendered when its row is drawn, and kept."""

    kernels: KernelRows
    _lines: tuple[np.ndarray, list[str]] | None = field(default=None, repr=False)
    _clipped: dict[int, str] = field(default_factory=dict, repr=False)

    def matches(self, search: Search) -> np.ndarray:
        """Rows with a kernel line matching ``search``."""
        if self._lines is None:
            codes, lines = self.kernels.distinct_lines()
            self._lines = codes, [screen_kernel_text(v).lower() for v in lines.tolist()]
        codes, lowered = self._lines
        out = np.zeros(self.kernels.rows, dtype=bool)
        if lowered:
            out[self.kernels.owner()[search.hits(lowered)[codes]]] = True
        return out

    def equals(self, value: str) -> np.ndarray:
        """Rows whose whole cell is ``value`` (every cell rendered: no key asks this of a kernel
        list, a focus names rows by their names)."""
        return self.kernels.render(np.arange(self.kernels.rows, dtype="int64")) == value

    def clipped(self, rows: Sequence[int]) -> list[str]:
        """Screen text of the cells of ``rows``, one line of at most :data:`CLIP` characters
        (:func:`clip_text` of the cell as the screen shows it). A cell of more kernel lines than
        that has characters (each line is one at least, its ⏎) shows only its head and its tail:
        only its first and last lines are rendered."""
        missing = np.array(sorted({r for r in rows if r not in self._clipped}), dtype="int64")
        if not len(missing):
            return [self._clipped[r] for r in rows]
        k = self.kernels
        long = np.diff(k.ptr)[missing] > CLIP
        short = missing[~long]
        self._clipped.update(zip(short.tolist(), (clip_text(screen_kernel_text(t))
                                                  for t in k.render(short).tolist())))
        if long.any():
            head, tail = CLIP // 2, CLIP - CLIP // 2 - 1
            lo, hi = k.ptr[missing[long]], k.ptr[missing[long] + 1]
            heads = join_runs(k.lines((lo[:, None] + np.arange(head)).reshape(-1)), np.full(len(lo), head))
            tails = join_runs(k.lines((hi[:, None] - tail + np.arange(tail)).reshape(-1)), np.full(len(hi), tail))
            self._clipped.update(
                (r, _flat(screen_kernel_text(h))[:head] + "…" + _flat(screen_kernel_text(t))[-tail:])
                for r, h, t in zip(missing[long].tolist(), heads.tolist(), tails.tolist()))
        return [self._clipped[r] for r in rows]


@dataclass
class TableView:
    """Which rows of a :class:`Table` are shown, in which order, and which columns.

    Tree tables (declared ``tree="nodes"``: ``_node``/``_parent`` links; ``tree="outline"``: an
    indented ``_level`` hierarchy such as OverallMetrics) show a row only when its ancestors are
    expanded, and sort siblings under their parent. An outline starts expanded (it is read like
    a report: every level, or the ``open_levels`` its table declares); a linked tree starts with a single root open (a module tree) or all closed
    (one row per collective).
    """

    table: Table
    sort_key: str | None = None
    descending: bool = True
    filter_text: str = ""
    totals_only: bool = False
    #: `u`: rows whose every difference is 0 and every ratio 1 are left out (a tree keeps the
    #: ancestors of the rows that changed).
    hide_unchanged: bool = False
    focus: tuple[Condition, ...] = ()
    focus_label: str = ""
    #: The rows another table's row is made of (:mod:`perfcmp_core.compare.behind`, `o`):
    #: positions into ``table.data``, None without such a focus.
    focus_rows: np.ndarray | None = None
    expanded: set[int] = field(default_factory=set)
    #: Column keys the user hid (`-`); the row's label never is.
    hidden: set[str] = field(default_factory=set)
    _order: np.ndarray | None = field(default=None, repr=False)
    _links: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _ppos: np.ndarray | None = field(default=None, repr=False)  # parent's row, -1 for roots
    _parents: frozenset[int] | None = field(default=None, repr=False)
    _keys: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _texts: dict[str, TextColumnIndex | KernelIndex] = field(default_factory=dict, repr=False)
    _changed: np.ndarray | None = field(default=None, repr=False)
    _columns: tuple[Column, ...] | None = field(default=None, repr=False)
    _search: Search | None = field(default=None, repr=False)
    #: Per text column, the rows the current filter matched there (for `n`/`N` and the hint).
    _match: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: `/`: the search in place (rows stay; the cursor jumps between the rows it matches).
    find_text: str = ""
    _find: Search | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        df = self.table.data
        tree = self.table.tree
        if tree == "nodes" and NODE in df.columns and PARENT in df.columns:
            node = df[NODE].to_numpy(dtype="int64")
            parent = df[PARENT].to_numpy(dtype="int64")
            self._set_links(node, parent)
            roots = node[parent < 0]
            if len(roots) == 1 and not self.expanded:
                self.expanded = {int(roots[0])}
        elif (tree == "outline" and LEVEL in df.columns and len(df)
              and (df[LEVEL].to_numpy() > 0).any()):
            node = np.arange(len(df), dtype="int64")
            self._set_links(node, _level_links(df[LEVEL].to_numpy(dtype="int64")))
            if not self.expanded:
                self.expanded = set(self.parent_nodes())  # a copy: the cache stays whole
                if self.table.open_levels:
                    level = df[LEVEL].to_numpy(dtype="int64")
                    self.expanded = {n for n in self.expanded if level[n] < self.table.open_levels}

    def _set_links(self, node: np.ndarray, parent: np.ndarray) -> None:
        self._links = (node, parent)
        pos = pd.Series(np.arange(len(node)), index=node)
        ppos = pos.reindex(parent).to_numpy()
        self._ppos = np.where(np.isnan(ppos), -1, ppos).astype("int64")

    def prepare(self) -> TableView:
        """Build now what keys would otherwise build on first use: the text indexes (filter,
        focus, clipped cells), which rows changed, and the sort keys of the `d` column. The app
        calls it off the UI thread, as the table arrives."""
        for c in self.columns:
            if c.fmt in ("text", "bold") and c.key not in self.table.children:  # kernel lists: on use
                self.shown_index(c.key)
        self.changed()
        key = self.diff_key()
        if key is not None:
            self._sort_keys(key)
        return self

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
        return self._links is not None and self.node_of(row) in self.parent_nodes()

    def parent_nodes(self) -> frozenset[int]:
        """Ids of the tree nodes that have children (computed once: the tree never changes)."""
        if self._links is None:
            return frozenset()
        if self._parents is None:
            self._parents = frozenset(int(p) for p in np.unique(self._links[1]) if p >= 0)
        return self._parents

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
        return bool(self.filter_text or self.totals_only or self.focus
                    or self.focus_rows is not None)

    # -- the visible rows ---------------------------------------------------------------------
    def _compute(self) -> np.ndarray:
        df = self.table.data
        n = len(df)
        mask = np.ones(n, dtype=bool)
        if self.totals_only and self.has_totals:
            mask &= df[IS_TOTAL].to_numpy(dtype=bool)
        if self.focus_rows is not None:
            within = np.zeros(n, dtype=bool)
            within[self.focus_rows] = True
            mask &= within
        for keys, value in self.focus:
            hit = np.zeros(n, dtype=bool)
            for key in keys:
                hit |= self._equals(key, value)
            mask &= hit
        self._match = {}
        if self.filter_text:
            search = self._search or Search.compile(self.filter_text)
            any_hit = np.zeros(n, dtype=bool)
            for c in self.table.columns:
                if c.fmt in ("text", "bold"):
                    hit = self.shown_index(c.key).matches(search)
                    if hit.any():
                        self._match[c.key] = hit
                        any_hit |= hit
            mask &= any_hit
        tree = self.is_tree and not self.flat
        if self.hide_unchanged:
            changed = self.changed()
            if changed is not None:
                mask &= self._with_ancestors(changed) if tree else changed
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

    def _equals(self, key: str, value: str) -> np.ndarray:
        """Rows whose ``key`` cell reads exactly ``value``."""
        col = next((c for c in self.table.columns if c.key == key), None)
        if col is not None and col.fmt in ("text", "bold"):
            return self.text_index(key).equals(value)
        return (as_text(self.table.data[key]) == value).to_numpy()

    def text_index(self, key: str) -> TextColumnIndex | KernelIndex:
        """The factorised text of data column ``key``, or the index of a child column (built once
        per view)."""
        if key not in self._texts:
            child = self.table.children.get(key)
            self._texts[key] = (KernelIndex(child) if child is not None
                                else TextColumnIndex.build(self.table.data[key]))
        return self._texts[key]

    def shown_index(self, key: str) -> TextColumnIndex | KernelIndex:
        """The factorised text the screen shows for column ``key``: the row label as screens
        say it (:data:`~perfcmp_core.compare.result.SHOWN`) where the table has one."""
        if SHOWN in self.table.data and key == self.label_key:
            return self.text_index(SHOWN)
        return self.text_index(key)

    @property
    def columns(self) -> tuple[Column, ...]:
        """The table's columns in screen order (:func:`display_columns`, computed once)."""
        if self._columns is None:
            self._columns = display_columns(self.table)
        return self._columns

    @property
    def label_key(self) -> str | None:
        """Key of the column that names a row on screen (see :func:`label_column`)."""
        cols = self.columns
        return cols[label_column(cols)].key if cols else None

    def _sort_keys(self, key: str) -> np.ndarray:
        """Numeric sort keys of a column, computed once per view (text ranks are costly)."""
        if key not in self._keys:
            self._keys[key] = _sort_values(self.table.values(key))
        return self._keys[key]

    def changed(self) -> np.ndarray | None:
        """Rows with a difference other than 0 or a ratio other than 1 (None: the table has
        neither column, so "unchanged" means nothing)."""
        if self._changed is None:
            cols = [c for c in self.table.columns if c.role in ("diff", "ratio")]
            if not cols:
                return None
            df = self.table.data
            out = np.zeros(len(df), dtype=bool)
            for c in cols:
                v = pd.to_numeric(df[c.key], errors="coerce").to_numpy(dtype="float64")
                same = 1.0 if c.role == "ratio" else 0.0
                out |= ~np.isnan(v) & (v != same)
            self._changed = out
        return self._changed

    def _with_ancestors(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` plus every ancestor of a row in it (a tree keeps the path to a change)."""
        assert self._ppos is not None
        keep = rows.copy()
        frontier = np.flatnonzero(rows)
        while len(frontier):
            parents = self._ppos[frontier]
            parents = parents[parents >= 0]
            parents = parents[~keep[parents]]
            keep[parents] = True
            frontier = np.unique(parents)
        return keep

    def _tree_visible(self) -> np.ndarray:
        """Rows whose every ancestor is expanded (roots always)."""
        assert self._links is not None and self._ppos is not None
        node = self._links[0]
        has_parent = self._ppos >= 0
        pidx = np.where(has_parent, self._ppos, 0)
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
        """Show only rows whose text matches ``text`` (see :class:`Search`; empty clears)."""
        self.filter_text = text.strip()
        self._search = Search.compile(self.filter_text) if self.filter_text else None
        self.invalidate()

    def set_find(self, text: str) -> None:
        """Search ``text`` in place (see :class:`Search`; empty ends the search): no row is
        hidden, :meth:`found` says which visible rows match."""
        self.find_text = text.strip()
        self._find = Search.compile(self.find_text) if self.find_text else None

    def found(self) -> np.ndarray:
        """Positions, in the visible order, of the rows the search matches in any text column
        (what `n` / `N` step through and "match i/n" counts)."""
        order = self.order()
        if self._find is None or not len(order):
            return np.zeros(0, dtype="int64")
        hit = np.zeros(len(self.table.data), dtype=bool)
        for c in self.table.columns:
            if c.fmt in ("text", "bold"):
                hit |= self.shown_index(c.key).matches(self._find)
        return np.flatnonzero(hit[order])

    @property
    def search(self) -> Search | None:
        """The compiled filter, None without one."""
        return self._search

    def matched_in(self, key: str) -> np.ndarray | None:
        """Rows (positions into table.data) the filter matched in column ``key``, if any."""
        self.order()
        return self._match.get(key)

    def matched_elsewhere(self, shown: Sequence[str]) -> tuple[int, list[str]]:
        """How many visible rows matched the filter only outside the columns ``shown``, and
        which columns those matches are in (kernel lists, a column scrolled away or hidden)."""
        rows = self.order()
        if not self._match or not len(rows):
            return 0, []
        seen = np.zeros(len(rows), dtype=bool)
        for key in shown:
            if key in self._match:
                seen |= self._match[key][rows]
        where = [k for k in self._match if k not in shown and self._match[k][rows][~seen].any()]
        return int((~seen).sum()), where

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
        self.focus_rows = None
        self.invalidate()

    def set_focus_rows(self, rows: np.ndarray, label: str) -> None:
        """Show only ``rows`` (positions into the table): the rows behind another table's row."""
        self.focus, self.focus_rows, self.focus_label = (), np.asarray(rows, dtype="int64"), label
        self.invalidate()

    def toggle_totals(self) -> None:
        self.totals_only = not self.totals_only
        self.invalidate()

    def toggle_unchanged(self) -> bool:
        """`u`: hide / show the rows that did not change; False when the table has no
        difference or ratio column."""
        if self.changed() is None:
            return False
        self.hide_unchanged = not self.hide_unchanged
        self.invalidate()
        return True

    def toggle_node(self, row: int) -> bool:
        """Expand/collapse the tree node of data row ``row``; False when it has no children."""
        if not self.has_children(row):
            return False
        self.expanded.symmetric_difference_update({self.node_of(row)})
        self.invalidate()
        return True

    def expand_all(self, expand: bool) -> bool:
        """Open every node of the tree (``expand``) or close them all; False when this view is no
        tree (or is shown flat)."""
        if not self.is_tree or self.flat:
            return False
        self.expanded = set(self.parent_nodes()) if expand else set()
        self.invalidate()
        return True

    def parent_row(self, row: int) -> int | None:
        """The data row of the tree node holding data row ``row`` (None at a root, or when this
        view is no tree)."""
        if not self.is_tree or self.flat or self._ppos is None:
            return None
        parent = int(self._ppos[row])
        return parent if parent >= 0 else None

    # -- cell text ----------------------------------------------------------------------------
    def cell(self, row: int, col: Column) -> str:
        """Screen text of one cell, at most :data:`CLIP` characters on one line."""
        if col.fmt in ("text", "bold"):
            return self._clipped(col.key, [row])[0]
        return screen_text(self.table.data[col.key].iat[row], col)

    def _clipped(self, key: str, rows: Sequence[int]) -> list[str]:
        """Screen text of text column ``key`` on ``rows``, clipped to one line."""
        index = self.shown_index(key)
        if isinstance(index, KernelIndex):
            return index.clipped(rows)
        return [index.clipped[k] if k >= 0 else "" for k in index.codes[np.asarray(rows, dtype="int64")].tolist()]

    def full_text(self, row: int, col: Column) -> str:
        """One cell in full, numbers at their stored precision (what `y` copies)."""
        key = SHOWN if SHOWN in self.table.data and col.key == self.label_key else col.key
        return exact_text(self.table.value(key, row), col)

    def cells(self, rows: np.ndarray, columns: tuple[Column, ...] | None = None) -> list[list[str]]:
        """Screen text of the given data rows, clipped (only what is about to be measured or
        drawn)."""
        cols = self.table.columns if columns is None else columns
        out: list[list[str]] = [[] for _ in range(len(rows))]
        sub = self.table.data.iloc[rows] if len(rows) else self.table.data.iloc[:0]
        for c in cols:
            if c.fmt in ("text", "bold"):
                texts = self._clipped(c.key, rows.tolist())
            else:
                texts = [screen_text(v, c) for v in sub[c.key].tolist()]
            for line, text in zip(out, texts):
                line.append(text)
        return out
