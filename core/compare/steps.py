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

from ..load.steps import step_ids, step_window, window_rows
from ..model import Profile
from .masks import Masks
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


def step_parts(profile: Profile, step: int, masks: Masks) -> dict[str, float]:
    """One step's E2E / computing / uncovered communication / free time in ms, measured as the
    Overall screen measures a run cut to that step: :func:`step_times` is that measure's code,
    and the tables it reads are cut to the step's window as ``select_step`` cuts them (their
    links, which it does not read, are left as they are; the other tables are not cut at all)."""
    hit, lo, hi = step_window(profile, step)
    cut = replace(profile, meta=replace(profile.meta, selected_step=step), steps=hit.reset_index(drop=True),
                  **{name: window_rows(profile, name, lo, hi) for name in STEP_TIME_TABLES})
    m = step_times(cut, masks)
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
    labels = []
    for i in range(n):
        b = b_ids[i] if i < len(b_ids) else None
        c = c_ids[i] if i < len(c_ids) else None
        labels.append(str(b if b == c else f"{'—' if b is None else b} / {'—' if c is None else c}"))
        for side, profile, step in (("base", base, b), ("comp", comp, c)):
            parts = step_parts(profile, step, masks) if step is not None else {}
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
