"""``perfcmp-tui advise PATH``: the bottleneck report of one profile, as text and as JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson
import pandas as pd

from .. import __version__
from ..options import LoadOptions
from .analysis import Analysis, analyse
from .rules import AdvisorConfig, load_config
from .text import NS_PER_MS, ms, pct, steps_text, top_text

if TYPE_CHECKING:
    from ..settings import Settings

#: Per-step share columns printed before switching to a min–max summary.
_MAX_STEP_COLUMNS = 8


def report(a: Analysis, cfg: AdvisorConfig) -> str:
    """The readable single-profile report of ``perfcmp-tui advise``."""
    lines = [f"Advisor: {a.source} ({a.kind})"]
    if a.workload is not None:
        lines.append(f"Workload: {a.workload.label}")
        lines += [f"  evidence: {e}" for e in a.workload.evidence]
    lines += [a.stage_note[:1].upper() + a.stage_note[1:], f"Steps: {steps_text(a)}"]
    per_step = a.per_step
    show_steps = 1 < len(a.steps) <= _MAX_STEP_COLUMNS
    for stage, rows in a.summary.groupby("stage", sort=False):
        total = rows[rows["is_total"]].iloc[0]
        wall = f", wall-clock {ms(total['wall_ns'])}" if ms(total["wall_ns"]) != ms(total["busy_ns"]) else ""
        lines += ["", f"{stage}: busy {ms(total['time_ns'])}{' per step' if a.steps else ''} "
                      f"({pct(total['share'])} of device busy time{wall})"]
        head = f"  {'Category':<14}{'Time(ms)':>12}{'Share':>10}{'Of compute':>12}"
        if show_steps:
            head += "".join(f"{'step ' + str(s):>11}" for s in a.steps)
        elif len(a.steps) > 1:
            head += f"{'step min':>11}{'step max':>11}"
        lines.append(head)
        for _, row in rows[~rows["is_total"]].iterrows():
            of_compute = "" if pd.isna(row["compute_share"]) else pct(row["compute_share"])
            line = (f"  {row['category']:<14}{row['time_ns'] / NS_PER_MS:>12.3f}{pct(row['share']):>10}"
                    f"{of_compute:>12}")
            if show_steps:
                mine = per_step[(per_step["stage"] == stage) & (per_step["category"] == row["category"])]
                line += "".join(f"{pct(v):>11}" for v in mine.set_index("step").reindex(a.steps)["share"])
            elif len(a.steps) > 1:
                line += f"{pct(row['step_min']):>11}{pct(row['step_max']):>11}"
            lines.append(line)
    lines += ["", "Findings:"]
    if not a.findings and not a.checks:
        unrun = f" ({len(a.skipped)} could not run)" if a.skipped else ""
        lines.append(f"  none of the {len(cfg.rules)} rule(s) and {len(cfg.checks)} check(s) tripped{unrun}")
    for c in a.checks:
        lines.append(f"  - {c.headline} → {c.direction}")
        lines.append(f"      {c.evidence}")
        lines.append(f"      top: {c.top_text}")
    for skipped in a.skipped:
        lines.append(f"  - check {skipped.key} could not run: {skipped.reason}")
    summary = a.summary.set_index(["stage", "category"])
    for f in a.findings:
        row = summary.loc[(f.rule.stage, f.rule.category)]
        lines.append(f"  - {f.headline} → {f.rule.direction}")
        if len(a.steps) > 1:
            lines.append(f"      per step: {pct(row['step_min'])}–{pct(row['step_max'])} of stage time")
        lines.append(f"      top: {top_text(a.top(f.rule.stage, f.rule.category, cfg.top_operators))}")
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
        "workload": None if a.workload is None else {
            "mode": a.workload.mode, "family": a.workload.family, "detail": a.workload.detail,
            "source": a.workload.source, "evidence": list(a.workload.evidence)},
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
        "checks": [{"check": c.key, "value": c.value, "threshold": c.threshold, "finding": c.headline,
                    "direction": c.direction, "evidence": c.evidence, "time_ns": c.time_ns,
                    "top": [{"label": label, "figure": figure} for label, figure in c.top]}
                   for c in a.checks],
        "checks_not_run": [{"check": s.key, "reason": s.reason} for s in a.skipped],
    }


def run_advise(path: str, load_opts: LoadOptions, config_path: str | None, json_path: str | None,
               out: TextIO | None = None, settings: Settings | None = None) -> int:
    """``perfcmp-tui advise PATH``: analyse one profile, print the report (to ``out``, default
    stdout), optionally write JSON. ``config_path``: a legacy advisor INI file, read unless the
    command line already read the run's configuration (``settings``, :mod:`perfcmp_core.settings`)."""
    from ..export.safe_write import safe_write
    from ..load import load_profile

    out = out if out is not None else sys.stdout
    cfg = settings.advisor if settings is not None else load_config(config_path)  # fails before a long load
    a = analyse(load_profile(path, load_opts), cfg, settings.equivalence if settings is not None else None)
    print(report(a, cfg), file=out)
    if json_path:
        payload = orjson.dumps(document(a), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
                               | orjson.OPT_INDENT_2)
        written = safe_write(Path(json_path), lambda fh: fh.write(payload))
        print(f"JSON written: {written}", file=out)
    return 0
