"""One profile's advisor analysis: stages × categories, per-step and mean shares, top operators.

:func:`analyse` ties the pieces together — work items (:mod:`.items`), their category
(:mod:`.categories`) and stage (:mod:`.stages`), the time measurement (:mod:`.measure`) and the
rules (:mod:`.rules`) — into an :class:`Analysis`, the one structure the table, the terminal
section and ``advise`` render.

Shares are of the stage's busy time — the sum of its category times, so a stage's categories
add up to 100 % (:mod:`.measure`); exposed communication is shown beside them. With steps, the
figures are means over the analysed steps (leading warmup steps excluded) and every step's share
is kept as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..compare.api import group_sums
from ..model import Profile
from .categories import classify
from .checks import CheckFinding, CheckSkipped, check_profile
from .items import build_items, combined_codes, first_rows
from .measure import Window, measure
from .rules import ALL, CATEGORIES, COMM_EXPOSED, ROW_CATEGORIES, AdvisorConfig, Finding, evaluate
from .stages import assign_stages
from .workload import Workload, detect_workload

if TYPE_CHECKING:
    from ..compare.equivalence import Equivalence
    from ..explain import StepExplanation

#: Category of a stage's Total row.
TOTAL = "Total"
#: Row order of one stage: its Total, then the categories.
ROW_ORDER = (TOTAL, *ROW_CATEGORIES)


@dataclass
class Analysis:
    """The advisor's view of one profile (times are mean ns per analysed step)."""

    source: str
    kind: str
    platform: str  # "gpu" or "npu": whether operator labels of two analyses can be compared
    method: str  # how stages were found ("" when there are none)
    stage_note: str
    steps: tuple[int, ...]  # analysed step ids; () = no steps recorded, the whole profile
    warmup: tuple[int, ...]  # leading steps left out
    excluded_ns: int  # device time outside the analysed steps (warmup, between steps)
    summary: pd.DataFrame  # stage, category, time_ns, share, compute_share, busy_ns, wall_ns, comm_ns,
    #                        step_min, step_max, is_total
    per_step: pd.DataFrame  # step, stage, category, time_ns, share
    operators: pd.DataFrame  # stage, category, label, operator, time_ns
    findings: list[Finding] = field(default_factory=list)
    config_source: str = ""
    workload: Workload | None = None  # training / inference, model family, and the evidence
    checks: list[CheckFinding] = field(default_factory=list)  # checks beyond the seed's rules
    skipped: list[CheckSkipped] = field(default_factory=list)  # checks that could not run, and why

    @property
    def has_stages(self) -> bool:
        """True when some work was attributed to a real stage (DiT, VAE …)."""
        return bool(self.method)

    def top(self, stage: str, category: str, n: int) -> list[tuple[str, float]]:
        """The ``n`` operators with the most time in ``stage``'s ``category``."""
        cat = "Comm" if category == COMM_EXPOSED else category
        ops = self.operators
        sel = ops[(ops["stage"] == stage) & (ops["category"] == cat)]
        sel = sel.groupby("label", sort=False)["time_ns"].sum().sort_values(ascending=False, kind="stable").head(n)
        return list(zip(sel.index.tolist(), sel.astype(float).tolist()))


def _steps(profile: Profile, warmup: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(analysed, warmup) step ids in time order; warmup only when more steps than that exist."""
    ids = tuple(int(s) for s in profile.steps.sort_values("start_ns", kind="stable")["step"])
    if len(ids) > warmup:
        return ids[warmup:], ids[:warmup]
    return ids, ()


def _rows(w: Window, stage_names: tuple[str, ...], scale: float) -> pd.DataFrame:
    """Long rows (window, stage, category, time_ns, share, compute_share, busy_ns, wall_ns, comm_ns,
    is_total) of every window: a Total row per stage (its busy time, share of the whole profile's
    busy time), then its categories (share of the stage's busy time; compute_share: of its busy
    time without communication, NaN for the communication rows). Times are divided by ``scale``."""
    n_win, width, _ = w.cat_ns.shape
    cat = {c: w.cat_ns[:, :, i] for i, c in enumerate(CATEGORIES)}
    cat[COMM_EXPOSED] = w.exposed_ns
    cat[TOTAL] = w.busy_ns
    values = np.stack([cat[c] for c in ROW_ORDER], axis=2).astype("float64")  # (win, stage, row)
    busy = w.busy_ns.astype("float64")
    denom = np.repeat(busy[:, :, None], len(ROW_ORDER), axis=2)
    denom[:, :, 0] = np.repeat(busy[:, -1:], width, axis=1)  # Total rows: share of All
    share = np.divide(values, denom, out=np.zeros_like(values), where=denom > 0)
    # Share of compute (busy time without communication): what does not depend on how long a
    # collective waited for its peers, so it compares across recordings and platforms.
    compute = busy - w.cat_ns[:, :, CATEGORIES.index("Comm")]
    cdenom = np.repeat(compute[:, :, None], len(ROW_ORDER), axis=2)
    cdenom[:, :, 0] = np.repeat(compute[:, -1:], width, axis=1)
    cvalues = values.copy()
    cvalues[:, :, 0] = compute
    compute_share = np.divide(cvalues, cdenom, out=np.zeros_like(values), where=cdenom > 0)
    compute_share[:, :, [ROW_ORDER.index("Comm"), ROW_ORDER.index(COMM_EXPOSED)]] = np.nan
    per_row = len(ROW_ORDER)
    return pd.DataFrame({
        "window": np.repeat(np.arange(n_win), width * per_row),
        "stage": np.tile(np.repeat(np.asarray((*stage_names, ALL), dtype=object), per_row), n_win),
        "category": np.tile(np.asarray(ROW_ORDER, dtype=object), n_win * width),
        "time_ns": values.ravel() / scale,
        "share": share.ravel(),
        "compute_share": compute_share.ravel(),
        "busy_ns": np.repeat(busy.ravel(), per_row) / scale,
        "wall_ns": np.repeat(w.wall_ns.astype("float64").ravel(), per_row) / scale,
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


def analyse(profile: Profile, config: AdvisorConfig, equivalence: Equivalence | None = None,
            classes: pd.DataFrame | None = None, explanation: StepExplanation | None = None) -> Analysis:
    """Stages, categories, shares, per-step figures, top operators, tripped rules and checks of a
    profile (``equivalence``: the table that names operators across platforms, None for the
    built-in one; ``classes`` and ``explanation``: the profile's kernel classification and step
    explanation when the caller has them — a comparison computes each once per side)."""
    from ..compare.equivalence import builtin_equivalence
    from ..compare.kernel_families import kernel_classes
    from ..explain import explain_profile

    items = build_items(profile, equivalence)
    table = equivalence or builtin_equivalence()
    if classes is None:
        classes = kernel_classes(profile, table)
    if explanation is None:
        explanation = explain_profile(profile, table, classes)
    cats = classify(items, config, classes)
    workload = detect_workload(profile, config, classes)
    assignment = assign_stages(profile, items, config, workload)
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
    summary = _present(_rows(w.pooled(), stage_names, float(n_windows)), assignment.method).drop(columns="window")
    steps_df = pd.DataFrame(columns=["step", "stage", "category", "time_ns", "share"])
    if analysed:
        rows = _rows(w, stage_names, 1.0)
        rows.insert(0, "step", np.asarray(analysed, dtype="int64")[rows.pop("window").to_numpy()])
        steps_df = rows.merge(summary[["stage", "category"]], on=["stage", "category"])[list(steps_df.columns)]
    ranges = steps_df.groupby(["stage", "category"], sort=False)["share"].agg(["min", "max"])
    summary = summary.join(ranges.rename(columns={"min": "step_min", "max": "step_max"}),
                           on=["stage", "category"])

    ops = {"stage": np.asarray(stage_names, dtype=object)[stage[keep]],
           "category": np.asarray(CATEGORIES, dtype=object)[cats[keep]],
           "label": items.label[keep], "operator": items.operator[keep]}
    time_ns = f["dur_ns"].to_numpy()[keep]
    by_stage = _time_by(ops, time_ns)
    whole = _time_by({c: ops[c] for c in ("category", "label", "operator")}, time_ns)
    whole.insert(0, "stage", ALL)
    operators = pd.concat([by_stage, whole], ignore_index=True)
    operators["time_ns"] = operators["time_ns"] / n_windows
    checks, skipped = check_profile(profile, explanation, classes, config)

    return Analysis(
        source=profile.meta.source, kind=profile.meta.label,
        platform="gpu" if profile.meta.kind == "gpu" else "npu", method=assignment.method,
        stage_note=assignment.note, steps=analysed, warmup=warm,
        excluded_ns=int(f["dur_ns"].to_numpy()[~keep].sum()), summary=summary,
        per_step=steps_df.reset_index(drop=True), operators=operators,
        findings=evaluate(config.rules, summary), config_source=config.source, workload=workload,
        checks=checks, skipped=skipped,
    )


def _time_by(keys: dict[str, np.ndarray], time_ns: np.ndarray) -> pd.DataFrame:
    """``time_ns`` summed per distinct combination of the text columns ``keys``, in order of first
    appearance: what ``pd.DataFrame({**keys, "time_ns": time_ns}).groupby(list(keys), sort=False,
    as_index=False)["time_ns"].sum()`` gives. The texts are numbered by object
    (:func:`.items.combined_codes`) where the groupby hashed every cell's text (25,911 work items
    × 4 columns on the H200 side)."""
    code = combined_codes(*keys.values())
    first = first_rows(code)
    out = pd.DataFrame({name: values[first] for name, values in keys.items()})
    out["time_ns"] = group_sums(code, np.asarray(time_ns, dtype="int64"), len(first))
    return out
