"""The terminal report of ``export`` and ``summary``: what a result says, as plain text.

Where the time went (the step explanation), the time distribution, the top regressions, the
advisor's findings and the notes — read from a
:class:`ComparisonResult` only, so the text can never disagree with the workbook written from the
same result. The text fits the terminal it is printed on and uses the app's units (milliseconds
with microsecond precision, :func:`perfcmp_core.insight.amount`): the reference's ``0.000s``
cells hide every difference of a fixture-sized run. The workbook and ``--json`` keep the
reference's figures (``summary_figures``) unchanged.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import Any

import numpy as np

from .compare import ADVISOR, SHEETS
from .compare.result import IS_TOTAL, LEVEL, ComparisonResult, Table, is_ratio, screen_header
from .explain.table import TABLE_NAME as STEP_TIME
from .insight import SUMMARY_TITLE, summary_rows
from .view import screen_text

NO_SUMMARY = (f"{SUMMARY_TITLE}: not available "
              "(profiling comparison disabled or no kernels)")
#: Narrowest report: below this the columns would be unreadable anyway.
MIN_WIDTH = 60
#: Width when the output is no terminal (a pipe, a file): wide enough for every column.
PIPE_WIDTH = 120
_GAP = "  "


def terminal_width() -> int | None:
    """Columns of the terminal the report goes to (``COLUMNS`` wins), ``None`` when it goes to
    no terminal (a pipe, a file)."""
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return None
    return max(MIN_WIDTH, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)


def terminal_report(result: ComparisonResult, width: int | None = None) -> str:
    """The whole report, one line per line (no trailing newline), at most ``width`` columns
    (default: the terminal's).

    To no terminal, the tables are :data:`PIPE_WIDTH` wide and prose (findings, notes) is left
    unfolded: one note per line, whole, for ``grep`` and scripts.
    """
    width = width or terminal_width()
    tables_width = max(MIN_WIDTH, width or PIPE_WIDTH)
    figures = result.summary.get("figures")
    where = where_the_time_went(result, tables_width)
    parts = [*([where, ""] if where else []),
             summary_table(figures, tables_width) if figures else NO_SUMMARY, "",
             top_regressions(result, width=tables_width)]
    advice = result.tables.get(ADVISOR.name)
    if advice is not None and not advice.empty:
        from .advisor import format_findings

        parts += ["", format_findings(advice)]
    parts += [f"note: {note.line}" for note in result.notes]
    if width is None:
        return "\n".join(parts)
    width = max(MIN_WIDTH, width)
    return "\n".join(line for part in parts for line in wrap(part, width))


def wrap(text: str, width: int) -> list[str]:
    """Each line of ``text`` folded to ``width`` columns; a continuation is indented four more
    than the line it continues (so findings and notes stay readable in a narrow terminal)."""
    out: list[str] = []
    for line in text.splitlines() or [""]:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, initial_indent="", subsequent_indent=lead + "    ",
                             break_on_hyphens=False, drop_whitespace=True) or [line[:width]]
    return out


# -- where the time went ----------------------------------------------------------------------
WHERE_TITLE = "Where the time went"
#: A label row (an op, a frame, a collective) is printed when it moved at least this share of
#: the step time's change (launch-bound and device-side time spread over many ops: a larger
#: share), and at least this many ms; at most this many per cause.
_LABEL_SHARE, _SPREAD_SHARE, _LABEL_MS, _LABELS = 0.01, 0.05, 0.005, 4
_SPREAD = ("launch-bound", "device-side")


def where_the_time_went(result: ComparisonResult, width: int) -> str:
    """The step explanation first: the "why" sentence, then the per-step waterfall down to the
    causes, and below a cause the labels that moved a noticeable share of the change ("" when
    the run has no StepTime table)."""
    table = result.tables.get(STEP_TIME)
    if table is None or table.empty:
        return ""
    df = table.data
    level = df[LEVEL].to_numpy()
    d = np.abs(df["diff_ms"].to_numpy(dtype=float))
    moved = (df["base_ms"].to_numpy(dtype=float) != 0) | (df["comp_ms"].to_numpy(dtype=float) != 0)
    keep = moved & (level <= 2)
    # Which labels: per cause, those that moved enough, largest first, a few at most.
    cause_at = np.maximum.accumulate(np.where(level == 2, np.arange(len(df)), 0))
    total = abs(float(df["diff_ms"].iloc[0]))
    for cause in np.unique(cause_at[level == 3]):
        spread = str(df["index"].iloc[cause]).startswith(_SPREAD)
        floor = max(_LABEL_MS, (_SPREAD_SHARE if spread else _LABEL_SHARE) * total)
        labels = np.flatnonzero((level == 3) & (cause_at == cause) & (d >= floor))
        keep[labels[np.argsort(-d[labels], kind="stable")][:_LABELS]] = True
    rows = [["", "Base", "Comp", "Diff", "Change"]]
    for i in np.flatnonzero(keep):
        rec = df.iloc[i]
        rows.append(["  " * int(level[i]) + str(rec["index"]), f"{rec['base_ms']:,.3f}", f"{rec['comp_ms']:,.3f}",
                     f"{rec['diff_ms']:+,.3f}", screen_text(rec["diff_ratio"], table.column("diff_ratio"))])
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    widths[0] = max(12, min(widths[0], width - sum(widths[1:]) - len(_GAP) * 4))
    lines = [f"{WHERE_TITLE} (ms per step, base → comparison)"]
    if table.lead:
        lines.append(f"  {table.lead}")
    for r in rows:
        lines.append(_GAP.join([_fit(r[0], widths[0]).ljust(widths[0]),
                                *(c.rjust(w) for c, w in zip(r[1:], widths[1:]))]).rstrip())
    lines += [f"  note: {n}" for n in table.notes]
    return "\n".join(lines)


# -- the time distribution ---------------------------------------------------------------------
def summary_table(figures: dict[str, dict[str, Any]], width: int) -> str:
    """:data:`SUMMARY_TITLE` as a table of ``width`` columns at most: counts are left out, then
    the change column, then labels are cut, until it fits."""
    kinds = figures.get("", {})
    head = ["", f"Base ({kinds.get('base_text', 'base')})",
            f"Comp ({kinds.get('comparison_text', 'comparison')})", "Diff", "Change"]
    for counts, change in ((True, True), (False, True), (False, False)):
        rows = [head, *summary_rows(figures, counts)]
        if not change:
            rows = [r[:4] for r in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if sum(widths) + len(_GAP) * (len(widths) - 1) <= width:
            break
    spare = width - (sum(widths[1:]) + len(_GAP) * (len(widths) - 1))
    widths[0] = max(8, min(widths[0], spare))
    title = f"{SUMMARY_TITLE} (base → comparison" + ("; kernel counts in parentheses)"
                                                      if counts else ")")
    if kinds.get("per_step"):
        title += (f"; times are per-step means: base {_steps(kinds.get('base_steps'))}, comparison "
                  f"{_steps(kinds.get('comparison_steps'))} (a side without steps counts as one)")
    lines = [title]
    for r in rows:
        cells = [_fit(r[0], widths[0]).ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append(_GAP.join(cells).rstrip())
    return "\n".join(lines)


def _steps(n: object) -> str:
    count = int(n or 0)  # type: ignore[call-overload]
    return f"{count or 'no'} step{'' if count == 1 else 's'}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle: both ends of a module path or
    an op name tell rows apart (``/[ BACKWARD ]/ Net_0/…/ Linear_6``)."""
    if len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    tail = (width - 1) * 3 // 5
    return text[:width - 1 - tail] + "…" + text[len(text) - tail:]


# -- top regressions ---------------------------------------------------------------------------
def top_regressions(result: ComparisonResult, n: int = 10, width: int = PIPE_WIDTH) -> str:
    """The top ``n`` rows of every declared table that ranks regressions (modules, then
    operators: :attr:`~perfcmp_core.compare.result.Sheet.regressions`), by its default sort, one
    block each: a module row holds its ops, so the operator that grew most (``ToCopyBackward0``)
    would never show among the module rows. The change reads as the app's Δ%."""
    blocks = []
    for sheet in SHEETS.values():
        table = result.tables.get(sheet.name)
        if sheet.regressions is None or table is None or table.empty or not table.default_sort:
            continue
        blocks.append(_regressions(result, table, sheet.regressions, n, width))
    return "\n\n".join(blocks) or "No operator or module table: no top regressions to show."


def _regressions(result: ComparisonResult, table: Table, name_key: str, n: int, width: int) -> str:
    """One table's block of :func:`top_regressions`."""
    df = table.data
    if IS_TOTAL in df:
        df = df[df[IS_TOTAL].astype(bool)]
    df = df.sort_values(table.default_sort, ascending=False, kind="stable").head(n)
    name_col = table.column(name_key)
    diff_col = table.column(table.default_sort)
    ratio_col = next((c for c in table.columns if is_ratio(c)), None)
    unit = f" {diff_col.unit}" if diff_col.unit else ""
    cells = []
    for row in df.itertuples(index=False):
        rec = row._asdict()
        diff = screen_text(rec[diff_col.key], diff_col) + unit
        ratio = f"({screen_text(rec[ratio_col.key], ratio_col)})" if ratio_col else ""
        cells.append((str(rec[name_col.key]), diff, ratio))
    w_diff = max(len(c[1]) for c in cells)
    w_ratio = max(len(c[2]) for c in cells)
    w_name = max(12, min(max(len(c[0]) for c in cells), width - 6 - w_diff - w_ratio - 4))
    kinds = result.summary.get("figures", {}).get("", {})
    totals = (f"; totals over base {_steps(kinds.get('base_steps'))}, comparison "
              f"{_steps(kinds.get('comparison_steps'))}" if kinds.get("per_step") else "")
    change = f", {screen_header(ratio_col)} in parentheses" if ratio_col else ""
    lines = [f"Top {len(df)} regressions ({table.name}, by {diff_col.header}{change}{totals}):"]
    for i, (name, diff, ratio) in enumerate(cells, 1):
        lines.append(f"  {i:>2}. {middle(name, w_name):<{w_name}}  {diff:>{w_diff}}  "
                     f"{ratio:>{w_ratio}}".rstrip())
    return "\n".join(lines)
