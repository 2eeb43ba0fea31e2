"""The cluster tables as terminal text (``export`` / ``summary``).

A terminal shows a handful of ranks; the workbook and ``--json`` hold every row. Up to
:data:`ALL_RANKS` ranks are all printed; beyond that the flagged ranks and the largest E2E
regressions, with a line saying how many more there are.
"""

from __future__ import annotations

import numpy as np

from ..compare.result import Table
from .tables import WAITED_FOR

ALL_RANKS = 16
TOP_RANKS = 10


def _ms(value: float) -> str:
    return "—" if np.isnan(value) else f"{value:,.3f}"


def _signed(value: float) -> str:
    return "—" if np.isnan(value) else f"{value:+,.3f}"


def format_ranks(table: Table, headline: str) -> str:
    """``headline``, then one line per rank (or the ranks worth a look) with the differences."""
    df = table.data
    shown = df
    more = 0
    if len(df) > ALL_RANKS:
        flagged = df[df["flag"] != ""]
        top = df.assign(_d=df["diff_e2e"].fillna(-np.inf)).nlargest(TOP_RANKS, "_d")
        shown = df[df.index.isin(flagged.index.union(top.index))]
        more = len(df) - len(shown)
    lines = [headline, f"  {'Rank':>6}  {'E2E base → comparison (ms)':<30} {'diff':>9}  "
                       f"{'Computing':>10}  {'Uncovered comm':>14} {'(wait)':>9}  {'Free':>9}  Flag"]
    for r in shown.itertuples(index=False):
        e2e = f"{_ms(r.base_e2e)} → {_ms(r.comp_e2e)}"
        lines.append(f"  {r.rank:>6}  {e2e:<30} {_signed(r.diff_e2e):>9}  {_signed(r.diff_compute):>10}  "
                     f"{_signed(r.diff_uncovered):>14} {'(' + _signed(r.diff_wait) + ')':>9}  "
                     f"{_signed(r.diff_free):>9}  {r.flag}".rstrip())
    if more:
        lines.append(f"  … {more} more ranks (every rank is in the workbook's ClusterCompare sheet "
                     "and in --json)")
    return "\n".join(lines)


def format_waits(groups: Table | None) -> str:
    """One line per group whose ranks wait for one of them (comparison side)."""
    if groups is None or groups.empty:
        return ""
    df = groups.data
    lines = []
    for group, rows in df.groupby("group", sort=False):
        hit = rows[rows["flag"].str.startswith(WAITED_FOR)]
        if hit.empty:
            continue
        r = hit.iloc[0]
        others = rows[rows["rank"] != r["rank"]]["comp_wait"].dropna()
        span = (f"{others.min():,.3f}–{others.max():,.3f}" if len(others) > 1
                else f"{others.iloc[0]:,.3f}") if len(others) else "—"
        lines.append(f"  {group}: the others wait for rank {r['rank']} (its wait "
                     f"{r['comp_wait']:,.3f} ms, theirs {span} ms)")
    if not lines:
        return ""
    return "\n".join(["Communication groups (comparison):", *lines])
