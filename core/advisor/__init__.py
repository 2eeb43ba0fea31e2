"""Bottleneck advisor: where an inference run spends its device time, and what to do about it.

Following the user's inference analysis method (docs/advisor.md): split device work into stages
(DiT transformer vs VAE, :mod:`.stages`), split each stage into FA / MatMul / Vector / Comm /
Other (:mod:`.categories`), and map shares over thresholds to an optimisation direction
(:mod:`.rules`, ``advisor.ini``). :func:`analyse` does this for one profile; the comparison
pipeline runs it on both sides and on their difference (:func:`advisor_tables`), and
``perfcmp-tui advise PATH`` reports a single profile (:func:`run_advise`).

Shares are of the stage's device *busy* time (the union of its work intervals), computed from
unrounded ns; with steps, the figures are means over the analysed steps (leading warmup steps
excluded) and every step's share is kept as well.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import orjson
import pandas as pd

from .. import __version__
from ..compare import Context
from ..compare.result import IS_TOTAL, Column, Table
from ..model import Profile
from ..options import LoadOptions
from .categories import Window, build_items, classify, measure
from .rules import (ALL, CATEGORIES, COMM_EXPOSED, ROW_CATEGORIES, AdvisorConfig, Finding, Rule,
                    evaluate, load_config)
from .stages import assign_stages

__all__ = ["Analysis", "advisor_tables", "analyse", "format_findings", "load_config", "run_advise"]

TABLE_NAME = "Advisor"
TOTAL = "Total"
_NS_PER_MS = 1e6
#: Per-step share columns printed by ``advise`` before switching to a min–max summary.
_MAX_STEP_COLUMNS = 8


@dataclass
class Analysis:
    """The advisor's view of one profile (times are mean ns per analysed step)."""

    source: str
    kind: str
    method: str  # how stages were found ("" when there are none)
    stage_note: str
    steps: tuple[int, ...]  # analysed step ids; () = no steps recorded, the whole profile
    warmup: tuple[int, ...]  # leading steps left out
    excluded_ns: int  # device time outside the analysed steps (warmup, between steps)
    summary: pd.DataFrame  # stage, category, time_ns, share, busy_ns, comm_ns, step_min, step_max, is_total
    per_step: pd.DataFrame  # step, stage, category, time_ns, share
    operators: pd.DataFrame  # stage, category, label, time_ns
    findings: list[Finding] = field(default_factory=list)
    config_source: str = ""

    @property
    def has_stages(self) -> bool:
        """True when some work was attributed to a real stage (DiT, VAE …)."""
        return bool(self.method)

    def top(self, stage: str, category: str, n: int) -> list[tuple[str, float]]:
        """The ``n`` operators with the most time in ``stage``'s ``category``."""
        cat = "Comm" if category == COMM_EXPOSED else category
        ops = self.operators
        sel = ops[(ops["stage"] == stage) & (ops["category"] == cat)]
        sel = sel.sort_values("time_ns", ascending=False, kind="stable").head(n)
        return list(zip(sel["label"].tolist(), sel["time_ns"].astype(float).tolist()))


# ------------------------------------------------------------------------------- analysis


def _steps(profile: Profile, warmup: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(analysed, warmup) step ids in time order; warmup only when more steps than that exist."""
    ids = tuple(int(s) for s in profile.steps.sort_values("start_ns", kind="stable")["step"])
    if len(ids) > warmup:
        return ids[warmup:], ids[:warmup]
    return ids, ()


_ROW_ORDER = (TOTAL, *ROW_CATEGORIES)


def _rows(w: Window, stage_names: tuple[str, ...], scale: float) -> pd.DataFrame:
    """Long rows (window, stage, category, time_ns, share, busy_ns, comm_ns, is_total) of every
    window: a Total row per stage (share of the whole profile's busy time), then its categories
    (share of the stage's busy time). Times are divided by ``scale``."""
    n_win, width, _ = w.cat_ns.shape
    cat = {c: w.cat_ns[:, :, i] for i, c in enumerate(CATEGORIES)}
    cat[COMM_EXPOSED] = w.exposed_ns
    cat[TOTAL] = w.busy_ns
    values = np.stack([cat[c] for c in _ROW_ORDER], axis=2).astype("float64")  # (win, stage, row)
    busy = w.busy_ns.astype("float64")
    denom = np.repeat(busy[:, :, None], len(_ROW_ORDER), axis=2)
    denom[:, :, 0] = np.repeat(busy[:, -1:], width, axis=1)  # Total rows: share of All
    share = np.divide(values, denom, out=np.zeros_like(values), where=denom > 0)
    per_row = len(_ROW_ORDER)
    return pd.DataFrame({
        "window": np.repeat(np.arange(n_win), width * per_row),
        "stage": np.tile(np.repeat(np.asarray((*stage_names, ALL), dtype=object), per_row), n_win),
        "category": np.tile(np.asarray(_ROW_ORDER, dtype=object), n_win * width),
        "time_ns": values.ravel() / scale,
        "share": share.ravel(),
        "busy_ns": np.repeat(busy.ravel(), per_row) / scale,
        "comm_ns": np.repeat(w.cat_ns[:, :, CATEGORIES.index("Comm")].ravel(), per_row) / scale,
        "is_total": np.tile(np.arange(per_row) == 0, n_win * width),
    })


def _present(rows: pd.DataFrame, method: str) -> pd.DataFrame:
    """Stages with device time; without real stages only the whole profile is shown."""
    busy = rows[rows["is_total"]].set_index("stage")["busy_ns"]
    keep = [s for s, b in busy.items() if b > 0 and (method or s == ALL)]
    if ALL not in keep:
        keep.append(ALL)
    return rows[rows["stage"].isin(keep)].reset_index(drop=True)


def analyse(profile: Profile, config: AdvisorConfig) -> Analysis:
    """Stages, categories, shares, per-step figures, top operators and tripped rules of a profile."""
    items = build_items(profile)
    cats = classify(items, config)
    assignment = assign_stages(profile, items, config)
    stage_names = config.stage_names
    analysed, warm = _steps(profile, config.warmup_steps)
    f = items.frame
    step = f["step"].to_numpy()
    if analysed:
        window = pd.Index(analysed).get_indexer(step)
        keep = window >= 0
    else:
        window = np.zeros(len(f), dtype="int64")
        keep = np.ones(len(f), dtype=bool)
    n_windows = max(len(analysed), 1)
    stage = assignment.codes

    w = measure(f["start_ns"].to_numpy()[keep], f["end_ns"].to_numpy()[keep], window[keep], stage[keep],
                cats[keep], n_windows, len(stage_names))
    pooled = Window(w.cat_ns.sum(axis=0, keepdims=True), w.busy_ns.sum(axis=0, keepdims=True),
                    w.exposed_ns.sum(axis=0, keepdims=True))
    summary = _present(_rows(pooled, stage_names, float(n_windows)), assignment.method).drop(columns="window")
    steps_df = pd.DataFrame(columns=["step", "stage", "category", "time_ns", "share"])
    if analysed:
        rows = _rows(w, stage_names, 1.0)
        rows.insert(0, "step", np.asarray(analysed, dtype="int64")[rows.pop("window").to_numpy()])
        steps_df = rows.merge(summary[["stage", "category"]], on=["stage", "category"])[list(steps_df.columns)]
    ranges = steps_df.groupby(["stage", "category"], sort=False)["share"].agg(["min", "max"])
    summary = summary.join(ranges.rename(columns={"min": "step_min", "max": "step_max"}),
                           on=["stage", "category"])

    ops = pd.DataFrame({"stage": np.asarray(stage_names, dtype=object)[stage[keep]],
                        "category": np.asarray(CATEGORIES, dtype=object)[cats[keep]],
                        "label": items.label[keep], "time_ns": f["dur_ns"].to_numpy()[keep]})
    by_stage = ops.groupby(["stage", "category", "label"], sort=False, as_index=False)["time_ns"].sum()
    whole = ops.groupby(["category", "label"], sort=False, as_index=False)["time_ns"].sum()
    whole.insert(0, "stage", ALL)
    operators = pd.concat([by_stage, whole], ignore_index=True)
    operators["time_ns"] = operators["time_ns"] / n_windows

    return Analysis(
        source=profile.meta.source, kind=profile.meta.label, method=assignment.method,
        stage_note=assignment.note, steps=analysed, warmup=warm,
        excluded_ns=int(f["dur_ns"].to_numpy()[~keep].sum()), summary=summary,
        per_step=steps_df.reset_index(drop=True), operators=operators,
        findings=evaluate(config.rules, summary), config_source=config.source,
    )


# ------------------------------------------------------------------------------ rendering


def _ms(ns: float) -> str:
    return f"{ns / _NS_PER_MS:,.3f} ms"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.2f}%"


def _steps_text(a: Analysis) -> str:
    if not a.steps:
        return "no steps recorded: whole profile"
    text = f"{len(a.steps)} step(s) analysed ({', '.join(map(str, a.steps))}), means per step"
    if a.warmup:
        text += f"; warmup excluded: {', '.join(map(str, a.warmup))}"
    if a.excluded_ns:
        text += f"; {_ms(a.excluded_ns)} of device time outside the analysed steps"
    return text


def _range_text(row: pd.Series, n_steps: int) -> str:
    if n_steps < 2 or pd.isna(row["step_min"]):
        return f"{n_steps} step" if n_steps == 1 else "whole profile"
    return f"{_pct(row['step_min'])}–{_pct(row['step_max'])} over {n_steps} steps"


def _top_text(top: list[tuple[str, float]]) -> str:
    return ", ".join(f"{label} {_ms(ns)}" for label, ns in top) or "no operators"


def _evidence(a: Analysis, row: pd.Series, finding: Finding | None, rules: dict[tuple[str, str], Rule],
              n_top: int) -> str:
    """Share vs threshold (when a rule watches this row) and the top operators with their times."""
    stage, cat = row["stage"], row["category"]
    if row["is_total"]:
        if stage == ALL:
            return _steps_text(a)
        return f"{_pct(row['share'])} of device busy time"
    parts = []
    rule = finding.rule if finding is not None else rules.get((stage, cat))
    if rule is not None:
        if rule.of == "comm":
            value = row["time_ns"] / row["comm_ns"] if row["comm_ns"] else 0.0
            parts.append(f"{_pct(value)} of {stage} communication {_ms(row['comm_ns'])} "
                         f"(threshold {rule.threshold:g}%); {_pct(row['share'])} of {stage} time")
        else:
            parts.append(f"share {_pct(row['share'])} of {stage} busy {_ms(row['busy_ns'])} "
                         f"(threshold {rule.threshold:g}%)")
    if row["time_ns"] > 0:
        parts.append("top: " + _top_text(a.top(stage, cat, n_top)))
    return "; ".join(parts)


def _side_rows(scope: str, a: Analysis, cfg: AdvisorConfig) -> list[dict[str, Any]]:
    found = {(f.rule.stage, f.rule.category): f for f in a.findings}
    rules = {(r.stage, r.category): r for r in cfg.rules}
    n_steps = len(a.steps)
    out = []
    for _, row in a.summary.iterrows():
        finding = found.get((row["stage"], row["category"]))
        total = bool(row["is_total"])
        out.append({
            "scope": scope, "stage": row["stage"], "category": row["category"],
            "time_ms": row["time_ns"] / _NS_PER_MS, "share": row["share"],
            "steps": _range_text(row, n_steps),
            "finding": (a.stage_note if total and row["stage"] == ALL else
                        finding.headline if finding is not None else ""),
            "direction": finding.rule.direction if finding is not None else "",
            "evidence": _evidence(a, row, finding, rules, cfg.top_operators),
            IS_TOTAL: total,
        })
    return out


def _drivers(base: Analysis, comp: Analysis, stage: str, category: str, grew: bool, n: int) -> str:
    """The operators whose time moved most in the direction of the row's change."""
    cat = "Comm" if category == COMM_EXPOSED else category

    def side(a: Analysis) -> pd.Series:
        ops = a.operators
        return ops[(ops["stage"] == stage) & (ops["category"] == cat)].set_index("label")["time_ns"]

    b, c = side(base), side(comp)
    delta = c.sub(b, fill_value=0.0)
    delta = delta[delta > 0] if grew else delta[delta < 0]
    delta = delta.sort_values(ascending=not grew, kind="stable").head(n)
    if delta.empty:
        return ""
    return "driven by: " + ", ".join(
        f"{label} {'+' if d > 0 else '−'}{_ms(abs(d))} ({_ms(b.get(label, 0.0))} → {_ms(c.get(label, 0.0))})"
        for label, d in delta.items())


def _diff_rows(base: Analysis, comp: Analysis, cfg: AdvisorConfig) -> list[dict[str, Any]]:
    keys = ["stage", "category"]
    cols = [*keys, "time_ns", "share", "is_total"]
    merged = base.summary[cols].merge(comp.summary[cols], on=keys, how="outer", suffixes=("_b", "_c"), sort=False)
    order = {s: i for i, s in enumerate((*cfg.stage_names, ALL))}
    cat_order = {c: i for i, c in enumerate((TOTAL, *ROW_CATEGORIES))}
    merged = merged.assign(_s=merged["stage"].map(order), _c=merged["category"].map(cat_order))
    merged = merged.sort_values(["_s", "_c"], kind="stable")
    directions = {(f.rule.stage, f.rule.category): f.rule.direction for f in comp.findings}
    out = []
    for _, row in merged.iterrows():
        tb, tc = np.nan_to_num(row["time_ns_b"]), np.nan_to_num(row["time_ns_c"])
        d = tc - tb
        d_share = np.nan_to_num(row["share_c"]) - np.nan_to_num(row["share_b"])
        total = bool(row["is_total_b"] if pd.notna(row["is_total_b"]) else row["is_total_c"])
        if d == 0:
            finding = "unchanged"
        else:
            finding = (f"{'grew' if d > 0 else 'shrank'} {_ms(abs(d))} per step "
                       f"({'+' if d_share >= 0 else '−'}{abs(d_share) * 100:.2f} pt share)")
        evidence = "" if total or d == 0 else _drivers(base, comp, row["stage"], row["category"], d > 0,
                                                        cfg.top_operators)
        out.append({
            "scope": "diff", "stage": row["stage"], "category": row["category"],
            "time_ms": d / _NS_PER_MS, "share": d_share,
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


def advisor_tables(ctx: Context, cfg: AdvisorConfig, config_file: str | None = None) -> list[Table]:
    """The ``Advisor`` table of a comparison: each side's analysis, then their difference.

    ``cfg`` is read once with the run request; ``config_file`` is the user's file it came from
    (named in a note), None for the shipped rules alone."""
    base, comp = analyse(ctx.base, cfg), analyse(ctx.comp, cfg)
    rows = _side_rows("base", base, cfg) + _side_rows("comparison", comp, cfg) + _diff_rows(base, comp, cfg)
    notes = [f"base: {base.stage_note}", f"comparison: {comp.stage_note}"]
    if base.method != comp.method:
        notes.append("the sides' stages were found differently; compare the All rows first")
    if config_file:
        notes.append(f"rules from {config_file} on top of the defaults")
    return [_table(rows, notes)]


def format_findings(table: Table) -> str:
    """The advisor section of ``export`` / ``summary`` terminal output."""
    df = table.data
    lines = ["Advisor:"]
    lines += [f"  {note}" for note in table.notes]
    for scope in ("base", "comparison"):
        hits = df[(df["scope"] == scope) & ~df[IS_TOTAL] & (df["finding"] != "")]
        if hits.empty:
            lines.append(f"  {scope}: no rule tripped")
        for row in hits.itertuples(index=False):
            lines.append(f"  {scope}: {row.finding} → {row.direction}")
            lines.append(f"      {row.evidence}")
    diff = df[(df["scope"] == "diff") & ~df[IS_TOTAL] & (df["time_ms"] > 0)]
    if (diff["stage"] != ALL).any():
        diff = diff[diff["stage"] != ALL]
    diff = diff[diff["category"] != COMM_EXPOSED].sort_values("time_ms", ascending=False, kind="stable").head(3)
    if diff.empty:
        lines.append("  diff: no stage / category grew")
    for row in diff.itertuples(index=False):
        lines.append(f"  diff: {row.stage} {row.category} {row.finding}")
        if row.evidence:
            lines.append(f"      {row.evidence}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- advise PATH


def report(a: Analysis, cfg: AdvisorConfig) -> str:
    """The readable single-profile report of ``perfcmp-tui advise``."""
    lines = [f"Advisor: {a.source} ({a.kind})", a.stage_note[:1].upper() + a.stage_note[1:],
             f"Steps: {_steps_text(a)}"]
    per_step = a.per_step
    show_steps = 1 < len(a.steps) <= _MAX_STEP_COLUMNS
    for stage, rows in a.summary.groupby("stage", sort=False):
        total = rows[rows["is_total"]].iloc[0]
        lines += ["", f"{stage}: busy {_ms(total['time_ns'])}{' per step' if a.steps else ''} "
                      f"({_pct(total['share'])} of device busy time)"]
        head = f"  {'Category':<14}{'Time(ms)':>12}{'Share':>10}"
        if show_steps:
            head += "".join(f"{'step ' + str(s):>11}" for s in a.steps)
        elif len(a.steps) > 1:
            head += f"{'step min':>11}{'step max':>11}"
        lines.append(head)
        for _, row in rows[~rows["is_total"]].iterrows():
            line = f"  {row['category']:<14}{row['time_ns'] / _NS_PER_MS:>12.3f}{_pct(row['share']):>10}"
            if show_steps:
                mine = per_step[(per_step["stage"] == stage) & (per_step["category"] == row["category"])]
                line += "".join(f"{_pct(v):>11}" for v in mine.set_index("step").reindex(a.steps)["share"])
            elif len(a.steps) > 1:
                line += f"{_pct(row['step_min']):>11}{_pct(row['step_max']):>11}"
            lines.append(line)
    lines += ["", "Findings:"]
    if not a.findings:
        lines.append(f"  none of the {len(cfg.rules)} rule(s) tripped")
    summary = a.summary.set_index(["stage", "category"])
    for f in a.findings:
        row = summary.loc[(f.rule.stage, f.rule.category)]
        lines.append(f"  - {f.headline} → {f.rule.direction}")
        if len(a.steps) > 1:
            lines.append(f"      per step: {_pct(row['step_min'])}–{_pct(row['step_max'])} of stage time")
        lines.append(f"      top: {_top_text(a.top(f.rule.stage, f.rule.category, cfg.top_operators))}")
    return "\n".join(lines)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts; NaN → None."""
    clean = df.astype(object).where(df.notna(), None)
    return clean.to_dict(orient="records")


def document(a: Analysis) -> dict[str, Any]:
    """The ``advise --json`` document."""
    return {
        "tool": "perfcmp-tui", "version": __version__, "command": "advise",
        "source": a.source, "kind": a.kind, "config": a.config_source,
        "stages": {"method": a.method, "note": a.stage_note},
        "steps": {"analysed": list(a.steps), "warmup": list(a.warmup), "excluded_ns": a.excluded_ns},
        "summary": _records(a.summary), "per_step": _records(a.per_step),
        "operators": _records(a.operators.sort_values(["stage", "category", "time_ns"],
                                                      ascending=[True, True, False], kind="stable")),
        "findings": [{"rule": f.rule.key, "stage": f.rule.stage, "category": f.rule.category,
                      "of": f.rule.of, "value": f.value, "threshold_pct": f.rule.threshold,
                      "share": f.share, "time_ns": f.time_ns, "finding": f.rule.finding,
                      "direction": f.rule.direction,
                      "top": [{"label": label, "time_ns": ns}
                              for label, ns in a.top(f.rule.stage, f.rule.category, 10)]}
                     for f in a.findings],
    }


def run_advise(path: str, load_opts: LoadOptions, config_path: str | None, json_path: str | None,
               out: TextIO | None = None) -> int:
    """``perfcmp-tui advise PATH``: analyse one profile, print the report (to ``out``, default
    stdout), optionally write JSON."""
    from ..export.safe_write import safe_write
    from ..load import load_profile

    out = out if out is not None else sys.stdout
    cfg = load_config(config_path)  # a bad config fails before a long load
    a = analyse(load_profile(path, load_opts), cfg)
    print(report(a, cfg), file=out)
    if json_path:
        payload = orjson.dumps(document(a), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
                               | orjson.OPT_INDENT_2)
        written = safe_write(Path(json_path), lambda fh: fh.write(payload))
        print(f"JSON written: {written}", file=out)
    return 0
