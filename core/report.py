"""The terminal report of ``export`` and ``summary``: what a result says, as plain text.

The time-distribution table, the top regressions, the advisor's findings and the notes — read
from a :class:`ComparisonResult` only, so the text can never disagree with the workbook written
from the same result.
"""

from __future__ import annotations

from .compare import ADVISOR, SHEETS
from .compare.result import IS_TOTAL, ComparisonResult, is_ratio
from .view import format_value

NO_SUMMARY = ("Model Profiling Time Distribution: not available "
              "(profiling comparison disabled or no kernels)")


def terminal_report(result: ComparisonResult) -> str:
    """The whole report, one line per line (no trailing newline)."""
    parts = [result.summary.get("text") or NO_SUMMARY, "", top_regressions(result)]
    advice = result.tables.get(ADVISOR.name)
    if advice is not None and not advice.empty:
        from .advisor import format_findings

        parts += ["", format_findings(advice)]
    parts += [f"note: {note}" for note in result.notes]
    return "\n".join(parts)


def top_regressions(result: ComparisonResult, n: int = 10) -> str:
    """The top ``n`` rows of the first declared table that ranks regressions (modules, else
    operators: :attr:`~perfcmp_core.compare.result.Sheet.regressions`), by its default sort."""
    for sheet in SHEETS.values():
        table = result.tables.get(sheet.name)
        if sheet.regressions is None or table is None or table.empty or not table.default_sort:
            continue
        df = table.data
        if IS_TOTAL in df:
            df = df[df[IS_TOTAL].astype(bool)]
        df = df.sort_values(table.default_sort, ascending=False, kind="stable").head(n)
        name_col = table.column(sheet.regressions)
        diff_col = table.column(table.default_sort)
        ratio_col = next((c for c in table.columns if is_ratio(c)), None)
        lines = [f"Top {len(df)} regressions ({table.name}, by {diff_col.header}):"]
        for i, row in enumerate(df.itertuples(index=False), 1):
            rec = row._asdict()
            ratio = f"  ({format_value(rec[ratio_col.key], ratio_col)})" if ratio_col else ""
            lines.append(f"  {i:>2}. {str(rec[name_col.key])[:70]:<70} "
                         f"{format_value(rec[diff_col.key], diff_col):>12}{ratio}")
        return "\n".join(lines)
    return "No operator or module table: no top regressions to show."
