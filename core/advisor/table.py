"""The ``Advisor`` table of a comparison (both sides and their difference) and its terminal section.

Rows are (scope, stage, category): each side's shares with the rule findings and their evidence,
then ``diff`` rows — comparison − base in mean time per step and in share points, with the
operators that moved most in the row's direction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..compare import Context
from ..compare.result import IS_TOTAL, Column, Table
from .analysis import ROW_ORDER, Analysis, analyse
from .rules import ALL, COMM_EXPOSED, AdvisorConfig, Finding, Rule
from .text import NS_PER_MS, ms, pct, range_text, steps_text, top_text

TABLE_NAME = "Advisor"
#: The smallest change an evidence line names: half the 0.001 ms it is printed with.
_VISIBLE_NS = 500.0


class _OperatorTimes:
    """One side's operator times per (stage, category): each operator's summed time, operators
    in order of first appearance, as ``operators[stage & category].groupby(key)`` gives them.
    Made with one groupby per key for all the table's rows (a filter and a groupby per row,
    on a table of a few dozen operators, were most of the table's time)."""

    def __init__(self, a: Analysis) -> None:
        self.analysis = a
        self._made: dict[str, dict[tuple[str, str], pd.Series]] = {}

    def __call__(self, key: str, stage: str, category: str) -> pd.Series:
        """Time per ``key`` (``label`` or ``operator``) of ``stage``'s ``category``."""
        if key not in self._made:
            g = self.analysis.operators.groupby(["stage", "category", key], sort=False)["time_ns"].sum()
            parts: dict[tuple[str, str], tuple[list[Any], list[float]]] = {}
            for (st, cat, name), ns in zip(g.index.tolist(), g.tolist()):
                labels, times = parts.setdefault((st, cat), ([], []))
                labels.append(name)
                times.append(ns)
            self._made[key] = {sc: pd.Series(times, index=pd.Index(labels, dtype=object, name=key), dtype="float64",
                                             name="time_ns")
                               for sc, (labels, times) in parts.items()}
        found = self._made[key].get((stage, "Comm" if category == COMM_EXPOSED else category))
        return pd.Series(dtype="float64", name="time_ns") if found is None else found

    def top(self, stage: str, category: str, n: int) -> list[tuple[str, float]]:
        """:meth:`Analysis.top <perfcmp_core.advisor.analysis.Analysis.top>` from these sums."""
        sel = self("label", stage, category).sort_values(ascending=False, kind="stable").head(n)
        return list(zip(sel.index.tolist(), sel.astype(float).tolist()))


def _evidence(times: _OperatorTimes, row: pd.Series, finding: Finding | None, rules: dict[tuple[str, str], Rule],
              n_top: int) -> str:
    """Share vs threshold (when a rule watches this row) and the top operators with their times."""
    a = times.analysis
    stage, cat = row["stage"], row["category"]
    if row["is_total"]:
        wall = f"wall-clock {ms(row['wall_ns'])} (streams overlap)" if ms(row["wall_ns"]) != ms(row["busy_ns"]) else ""
        if stage == ALL:
            return "; ".join(filter(None, (steps_text(a), wall)))
        return "; ".join(filter(None, (f"{pct(row['share'])} of device busy time", wall)))
    parts = []
    rule = finding.rule if finding is not None else rules.get((stage, cat))
    if rule is not None:
        if rule.of == "comm":
            value = row["time_ns"] / row["comm_ns"] if row["comm_ns"] else 0.0
            parts.append(f"{pct(value)} of {stage} communication {ms(row['comm_ns'])} "
                         f"(threshold {rule.threshold:g}%); {pct(row['share'])} of {stage} time")
        else:
            parts.append(f"share {pct(row['share'])} of {stage} busy {ms(row['busy_ns'])} "
                         f"(threshold {rule.threshold:g}%)")
    if row["time_ns"] > 0:
        parts.append("top: " + top_text(times.top(stage, cat, n_top)))
    return "; ".join(parts)


def _check_rows(scope: str, a: Analysis) -> list[dict[str, Any]]:
    """One row per tripped check of a side (stage All, the check as its category)."""
    return [{
        "scope": scope, "stage": ALL, "category": c.key, "time_ms": c.time_ns / NS_PER_MS,
        "share": c.value if c.key != "syncs" else np.nan, "steps": steps_text(a),
        "finding": c.headline, "direction": c.direction, "evidence": f"{c.evidence}; top: {c.top_text}",
        IS_TOTAL: False,
    } for c in a.checks]


def _side_rows(scope: str, times: _OperatorTimes, cfg: AdvisorConfig) -> list[dict[str, Any]]:
    a = times.analysis
    found = {(f.rule.stage, f.rule.category): f for f in a.findings}
    rules = {(r.stage, r.category): r for r in cfg.rules}
    n_steps = len(a.steps)
    out = []
    for _, row in a.summary.iterrows():
        finding = found.get((row["stage"], row["category"]))
        total = bool(row["is_total"])
        out.append({
            "scope": scope, "stage": row["stage"], "category": row["category"],
            "time_ms": row["time_ns"] / NS_PER_MS, "share": row["share"],
            "steps": range_text(row, n_steps),
            "finding": (a.stage_note if total and row["stage"] == ALL else
                        finding.headline if finding is not None else ""),
            "direction": finding.rule.direction if finding is not None else "",
            "evidence": _evidence(times, row, finding, rules, cfg.top_operators),
            IS_TOTAL: total,
        })
    return out


def _drivers(base: _OperatorTimes, comp: _OperatorTimes, stage: str, category: str, grew: bool, n: int) -> str:
    """The operators, present on both sides, whose time moved most in the direction of the row's
    change; what moved in operators found on one side only is summed, not named.

    Operators are the platform labels (op type, kernel) when both sides run on the same platform,
    else what both platforms share: the equivalence class of the op around the launch
    (``flash attention``, ``tensor-parallel linear``: docs/matching.md), else the framework
    operator (``aten::mm``) — a GPU kernel name and an Ascend op type never name the same thing.
    """
    key = "label" if base.analysis.platform == comp.analysis.platform else "operator"
    b, c = base(key, stage, category), comp(key, stage, category)
    common = b.index.intersection(c.index)
    delta = c[common] - b[common]
    moved = delta[delta >= _VISIBLE_NS] if grew else delta[delta <= -_VISIBLE_NS]
    moved = moved.sort_values(ascending=not grew, kind="stable").head(n)
    parts = [f"{label} {'+' if d > 0 else '−'}{ms(abs(d))} ({ms(b[label])} → {ms(c[label])})"
             for label, d in moved.items()]
    text = "driven by: " + ", ".join(parts) if parts else ""
    one_sided = float(c.drop(common).sum() - b.drop(common).sum())
    if abs(one_sided) >= _VISIBLE_NS and (one_sided > 0) == grew:
        # Name the largest of them: which side holds the work in this category (NPU TransData in
        # aten::addmm's Vector time, an op only one run has …).
        lone = pd.concat([c.drop(common), -b.drop(common)])
        lone = lone[lone > 0] if grew else lone[lone < 0]
        lone = lone.reindex(lone.abs().sort_values(ascending=False, kind="stable").index).head(n)
        named = ", ".join(f"{label} {'+' if d > 0 else '−'}{ms(abs(d))} ({'comparison' if d > 0 else 'base'} only)"
                          for label, d in lone.items() if abs(d) >= _VISIBLE_NS)
        what = "operators found on one side only" + (f": {named}" if named else "")
        text += ("; " if text else "") + f"{'+' if one_sided > 0 else '−'}{ms(abs(one_sided))} in {what}"
    return text


def _diff_rows(base_times: _OperatorTimes, comp_times: _OperatorTimes, cfg: AdvisorConfig) -> list[dict[str, Any]]:
    base, comp = base_times.analysis, comp_times.analysis
    keys = ["stage", "category"]
    cols = [*keys, "time_ns", "share", "is_total"]
    merged = base.summary[cols].merge(comp.summary[cols], on=keys, how="outer", suffixes=("_b", "_c"), sort=False)
    order = {s: i for i, s in enumerate((*cfg.stage_names, ALL))}
    cat_order = {c: i for i, c in enumerate(ROW_ORDER)}
    merged = merged.assign(_s=merged["stage"].map(order), _c=merged["category"].map(cat_order))
    merged = merged.sort_values(["_s", "_c"], kind="stable")
    directions = {(f.rule.stage, f.rule.category): f.rule.direction for f in comp.findings}
    # A profile without steps is one window: its figures are totals, not means per step.
    per = "per step" if base.steps and comp.steps else "in total" if not (base.steps or comp.steps) else \
        "(per step where a side has steps, in total where it has none)"
    out = []
    for _, row in merged.iterrows():
        tb, tc = np.nan_to_num(row["time_ns_b"]), np.nan_to_num(row["time_ns_c"])
        d = tc - tb
        d_share = np.nan_to_num(row["share_c"]) - np.nan_to_num(row["share_b"])
        total = bool(row["is_total_b"] if pd.notna(row["is_total_b"]) else row["is_total_c"])
        if d == 0:
            finding = "unchanged"
        else:
            finding = (f"{'grew' if d > 0 else 'shrank'} {ms(abs(d))} {per} "
                       f"({'+' if d_share >= 0 else '−'}{abs(d_share) * 100:.2f} pt share)")
        evidence = "" if total or d == 0 else _drivers(base_times, comp_times, row["stage"], row["category"], d > 0,
                                                        cfg.top_operators)
        out.append({
            "scope": "diff", "stage": row["stage"], "category": row["category"],
            "time_ms": d / NS_PER_MS, "share": d_share,
            "steps": f"base {len(base.steps) or 'whole'} / comparison {len(comp.steps) or 'whole'}",
            "finding": finding, "direction": directions.get((row["stage"], row["category"]), ""),
            "evidence": evidence, IS_TOTAL: total,
        })
    return out


COLUMNS: tuple[Column, ...] = (
    Column("scope", "Scope", "key", "text", width=12),
    Column("stage", "Stage", "key", "text", width=8),
    Column("category", "Category", "key", "bold", width=14),
    Column("time_ms", "Time(ms)", "diff", "float", "ms", width=12),
    Column("share", "Share", "diff", "percent", width=10),
    Column("steps", "Steps", "text", "text", width=26),
    Column("finding", "Finding", "text", "text", width=44),
    Column("direction", "Direction", "text", "text", width=40),
    Column("evidence", "Evidence", "text", "text", width=90),
)


def _table(rows: list[dict[str, Any]], notes: list[str]) -> Table:
    data = pd.DataFrame(rows, columns=[*(c.key for c in COLUMNS), IS_TOTAL])
    data[IS_TOTAL] = data[IS_TOTAL].astype(bool)
    data["time_ms"] = data["time_ms"].astype("float64")
    data["share"] = data["share"].astype("float64")
    # No "Base / Comparison Profiling" title spans: sides are rows here, not column groups.
    return Table(TABLE_NAME, COLUMNS, data, (0, -1), (0, -1),
                 title="Advisor: stage and category shares, rule findings and what grew",
                 default_sort="time_ms", notes=notes)


def advisor_tables(ctx: Context, cfg: AdvisorConfig, config_file: str | None = None,
                   analyses: tuple[Analysis, Analysis] | None = None) -> list[Table]:
    """The ``Advisor`` table of a comparison: each side's analysis, then their difference.

    ``cfg`` is read once with the run request; ``config_file`` is the user's file it came from
    (named in a note), None for the shipped rules alone. Operators are named across platforms
    by the context's equivalence table. ``analyses``: each side's analysis by ``cfg`` when the
    caller made them already (a comparison makes them where each side loads)."""
    if analyses is None:
        b_cls, c_cls = ctx.kernel_classes()
        b_ex, c_ex = ctx.explanations()
        analyses = (analyse(ctx.base, cfg, ctx.equivalence, b_cls, b_ex),
                    analyse(ctx.comp, cfg, ctx.equivalence, c_cls, c_ex))
    base, comp = analyses
    b_times, c_times = _OperatorTimes(base), _OperatorTimes(comp)
    rows = (_side_rows("base", b_times, cfg) + _check_rows("base", base) + _side_rows("comparison", c_times, cfg)
            + _check_rows("comparison", comp) + _diff_rows(b_times, c_times, cfg))
    notes = [f"base: {base.stage_note}", f"comparison: {comp.stage_note}"]
    if base.method != comp.method:
        notes.append("the sides' stages were found differently; compare the All rows first")
    notes += [f"{side}: check {s.key} could not run: {s.reason}"
              for side, a in (("base", base), ("comparison", comp)) for s in a.skipped]
    if config_file:
        notes.append(f"rules from {config_file} on top of the defaults")
    table = _table(rows, notes)
    return [replace(table, lead=findings_text(table))]


@dataclass(frozen=True)
class Entry:
    """One thing the advisor found: a rule that tripped on a side, or a row that grew."""

    scope: str  # "base" | "comparison" | "diff"
    headline: str  # "DiT MatMul share high: 52.08% of stage time > 50%", "DiT Vector grew …"
    direction: str = ""  # what to try (rule findings)
    evidence: str = ""  # share vs threshold (rules); what drove the growth (diff rows)
    top: str = ""  # the stage and category's top operators with their times (rules)


def entries(table: Table) -> tuple[list[Entry], list[str]]:
    """The findings of an Advisor table, most telling first — each side's tripped rules, then
    the three stage / category rows that grew most (Comm exposed left out: its Comm row says it)
    — and the scopes where nothing was found."""
    df = table.data
    found: list[Entry] = []
    quiet: list[str] = []
    for scope in ("base", "comparison"):
        hits = df[(df["scope"] == scope) & ~df[IS_TOTAL] & (df["finding"] != "")]
        if hits.empty:
            quiet.append(scope)
        for row in hits.itertuples(index=False):
            evidence, _, top = str(row.evidence).partition("top: ")
            found.append(Entry(scope, row.finding, row.direction, evidence.rstrip("; "), top))
    diff = df[(df["scope"] == "diff") & ~df[IS_TOTAL] & (df["time_ms"] > 0)]
    if (diff["stage"] != ALL).any():
        diff = diff[diff["stage"] != ALL]
    diff = diff[diff["category"] != COMM_EXPOSED].sort_values("time_ms", ascending=False, kind="stable").head(3)
    if diff.empty:
        quiet.append("diff")
    for row in diff.itertuples(index=False):
        found.append(Entry("diff", f"{row.stage} {row.category} {row.finding}", evidence=row.evidence))
    return found, quiet


def format_findings(table: Table) -> str:
    """The advisor section of ``export`` / ``summary`` terminal output."""
    found, quiet = entries(table)
    lines = ["Advisor:"]
    lines += [f"  {note}" for note in table.notes]
    for scope in ("base", "comparison", "diff"):
        if scope in quiet:
            lines.append(f"  {scope}: " + ("no stage / category grew" if scope == "diff"
                                           else "no rule tripped"))
        for e in (e for e in found if e.scope == scope):
            if scope == "diff":
                lines.append(f"  diff: {e.headline}")
                lines += [f"      {e.evidence}"] if e.evidence else []
            else:
                lines.append(f"  {scope}: {e.headline} → {e.direction}")
                lines.append("      " + "; ".join(filter(None, (e.evidence, e.top and f"top: {e.top}"))))
    return "\n".join(lines)


def findings_text(table: Table) -> str:
    """The findings as the Advisor screen shows them above its shares: each one's headline,
    then what to try, the evidence and the top operators on lines of their own."""
    found, quiet = entries(table)
    label = {"base": "base", "comparison": "comparison", "diff": "what grew"}
    lines = ["Findings (Enter on a row of the table shows its evidence in full)"]
    for e in found:
        lines.append(f"{label[e.scope]}: {e.headline}")
        for name, text in (("try", e.direction), ("evidence", e.evidence), ("top", e.top)):
            if text:
                lines.append(f"    {name}: {text}")
    if quiet:
        lines.append("; ".join(f"{label[s]}: " + ("no stage / category grew" if s == "diff"
                                                  else "no rule tripped") for s in quiet))
    return "\n".join(lines)
