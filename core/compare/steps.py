"""``StepCompare``: E2E, computing, uncovered communication and free time per step, per side.

A run's totals hide a step that was slow (a warm-up left in, a recompilation, a straggling
collective). Each step is measured exactly as ``--base-step N --comparison-step M`` would measure
it — the profile cut to the step's window (:func:`~perfcmp_core.load.steps.select_step`), then the
OverallMetrics of that cut — so a row here is the Overall screen of that step. Steps are paired
by position (the sides' ids may differ: a run profiled after a different number of warm-up
steps); a step one side lacks has its other side alone.

The app shows it on the Overall screen (``v``) and draws its E2E as a sparkline; the workbook
does not carry it (the reference has no such sheet).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..load.steps import ordered_by_start, step_ids, rows_at, step_window, window_positions
from ..model import Profile
from .masks import Masks, TextIndexes
from .overall_metrics import STEP_TIME_TABLES, step_times
from .result import Column, Table, diff, ratio

TABLE_NAME = "StepCompare"
_NS_PER_MS = 1e6
#: (key, header) of the per-step quantities, in the order of the Overall screen's parts.
PARTS = (("e2e", "E2E Time(ms)"), ("computing", "Computing Time(ms)"),
         ("uncovered", "Uncovered Communication Time(ms)"), ("free", "Free Time(ms)"))

COLUMNS: tuple[Column, ...] = (
    Column("step", "Step", "key", "text", "", 12),
    Column("diff_e2e", "E2E Time Diff(ms)", "diff", "float", "ms", 18),
    Column("ratio_e2e", "E2E Time Diff Ratio", "ratio", "percent", "", 12),
    *(Column(f"{side}_{key}", header, role, "float", "ms", 18)
      for key, header in PARTS
      for side, role in (("base", "base"), ("comp", "comparison"))),
)


#: A step is an outlier of its side when it lies more than this many robust standard deviations
#: (1.4826 × the median absolute deviation) from the side's median: a warm-up or a recompiling
#: step stands out, and one slow step cannot hide itself by inflating the spread (as it does a
#: plain standard deviation: among 3 steps no step is ever 2 σ from their mean).
OUTLIER_SIGMAS = 3.0
_MAD_SIGMA = 1.4826
STATS_NAME = "StepStatistics"

STATS_COLUMNS: tuple[Column, ...] = (
    Column("quantity", "Per step", "key", "text", "", 34),
    Column("base_mean", "Base Mean(ms)", "base", "float", "ms", 14),
    Column("base_std", "Base Std Dev(ms)", "base", "float", "ms", 14),
    Column("base_outliers", "Base Outlier Steps", "base", "text", "", 22),
    Column("comp_mean", "Comparison Mean(ms)", "comparison", "float", "ms", 14),
    Column("comp_std", "Comparison Std Dev(ms)", "comparison", "float", "ms", 14),
    Column("comp_outliers", "Comparison Outlier Steps", "comparison", "text", "", 22),
    Column("diff_mean", "Mean Diff(ms)", "diff", "float", "ms", 14),
    Column("ratio_mean", "Mean Diff Ratio", "ratio", "percent", "", 12),
)


def outliers(values: np.ndarray) -> np.ndarray:
    """Which of one side's per-step values are outliers (:data:`OUTLIER_SIGMAS`); none when the
    steps do not spread at all, or with fewer than three steps."""
    ok = ~np.isnan(values)
    out = np.zeros(len(values), dtype=bool)
    if ok.sum() < 3:
        return out
    median = np.median(values[ok])
    mad = np.median(np.abs(values[ok] - median))
    if mad == 0:
        return out
    out[ok] = np.abs(values[ok] - median) > OUTLIER_SIGMAS * _MAD_SIGMA * mad
    return out


def step_statistics(steps: Table) -> Table:
    """``StepStatistics``: per quantity of StepCompare and per side, the mean and the standard
    deviation over the steps (sample, n − 1) and the steps that are outliers (``2 (+41.3)``: the
    step id and how far from the median, ms)."""
    data = steps.data
    rows = []
    for key, header in PARTS:
        row: dict[str, object] = {"quantity": header.removesuffix("(ms)")}
        for side in ("base", "comp"):
            values = data[f"{side}_{key}"].to_numpy(dtype="float64")
            ok = values[~np.isnan(values)]
            row[f"{side}_mean"] = float(ok.mean()) if len(ok) else np.nan
            row[f"{side}_std"] = float(ok.std(ddof=1)) if len(ok) > 1 else np.nan
            flagged = outliers(values)
            median = float(np.median(ok)) if len(ok) else 0.0
            row[f"{side}_outliers"] = ", ".join(
                f"{_side_step(data['step'].iat[i], side)} ({values[i] - median:+,.2f})"
                for i in np.flatnonzero(flagged))
        rows.append(row)
    df = pd.DataFrame(rows)
    df["diff_mean"] = diff(df["base_mean"], df["comp_mean"])
    df["ratio_mean"] = ratio(df["base_mean"], df["comp_mean"])
    return Table(STATS_NAME, STATS_COLUMNS, df[[c.key for c in STATS_COLUMNS]], (1, 3), (4, 6),
                 title="Per step: mean, standard deviation and outlier steps of each side (ms)")


def _side_step(label: str, side: str) -> str:
    """The step id of one side from a StepCompare label (``3``, or ``3 / 5`` when they differ)."""
    base, sep, comp = str(label).partition(" / ")
    return (comp if side == "comp" else base) if sep else base


def step_parts(profile: Profile, step: int, masks: Masks, ordered: frozenset[str] = frozenset(),
               texts: TextIndexes | None = None) -> dict[str, float]:
    """One step's E2E / computing / uncovered communication / free time in ms, measured as the
    Overall screen measures a run cut to that step: :func:`step_times` is that measure's code,
    and the tables it reads are cut to the step's window as ``select_step`` cuts them (their
    links, which it does not read, are left as they are; the other tables are not cut at all).
    ``ordered``: the tables known to be sorted by their start (cut by binary search); ``texts``:
    the whole profile's text indexes, whose tests its steps' cuts share (:meth:`TextIndexes.cut`;
    made here when not given)."""
    hit, lo, hi = step_window(profile, step)
    rows = {name: window_positions(profile, name, lo, hi, name in ordered) for name in STEP_TIME_TABLES}
    cut = replace(profile, meta=replace(profile.meta, selected_step=step), steps=hit.reset_index(drop=True),
                  **{name: rows_at(getattr(profile, name), r) for name, r in rows.items()})
    m = step_times(cut, masks, (TextIndexes(profile) if texts is None else texts).cut(rows))
    return {"e2e": m.e2e_ns / _NS_PER_MS, "computing": m.compute_ns / _NS_PER_MS,
            "uncovered": m.uncovered_ns / _NS_PER_MS, "free": m.free_time_ns / _NS_PER_MS}


def compare_steps(base: Profile, comp: Profile, masks: Masks) -> tuple[Table | None, str]:
    """The per-step table, or why there is none (a side without steps, or one step on both)."""
    b_ids, c_ids = step_ids(base), step_ids(comp)
    for side, ids in (("base", b_ids), ("comparison", c_ids)):
        if not ids:
            return None, f"per-step times need ProfilerStep markers: {side} has none"
    if len(b_ids) == 1 and len(c_ids) == 1:
        return None, "per-step times: one step on each side (the Overall screen is that step)"
    n = max(len(b_ids), len(c_ids))
    rows: dict[str, list[float]] = {f"{s}_{k}": [] for k, _ in PARTS for s in ("base", "comp")}
    ordered = {side: frozenset(t for t in STEP_TIME_TABLES if ordered_by_start(p, t))
               for side, p in (("base", base), ("comp", comp))}
    texts = {"base": TextIndexes(base), "comp": TextIndexes(comp)}
    labels = []
    for i in range(n):
        b = b_ids[i] if i < len(b_ids) else None
        c = c_ids[i] if i < len(c_ids) else None
        labels.append(str(b if b == c else f"{'—' if b is None else b} / {'—' if c is None else c}"))
        for side, profile, step in (("base", base, b), ("comp", comp, c)):
            parts = step_parts(profile, step, masks, ordered[side], texts[side]) if step is not None else {}
            for key, _ in PARTS:
                rows[f"{side}_{key}"].append(parts.get(key, np.nan))
    data = pd.DataFrame({"step": labels, **rows})
    data.insert(1, "diff_e2e", diff(data["base_e2e"], data["comp_e2e"]))
    data.insert(2, "ratio_e2e", ratio(data["base_e2e"], data["comp_e2e"]))
    notes = []
    if len(b_ids) != len(c_ids):
        notes.append(f"steps paired by position: base has {len(b_ids)}, comparison "
                     f"{len(c_ids)}; the unpaired ones stand alone")
    return Table(TABLE_NAME, COLUMNS, data, (3, 3), (4, 4),
                 title="Per step: E2E, computing, uncovered communication, free (ms)",
                 notes=notes), ""
