"""A check's verdict: limit, noise test, and the contributors a failure names.

A metric regresses when its per-step mean grew by more than the limit allows **and**, when both
sides hold at least ``min_steps`` analysed steps, the one-sided Mann-Whitney U test on the
per-step values rejects "no shift" at ``alpha``. With fewer steps the limit alone decides, and the
verdict says the noise was not assessed. A metric the profiles do not record (memory without
memory samples, wait / transmit where communication is not split, an ``op:`` / ``module:`` pattern
matching nothing on either side) is skipped, not passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..explain.table import CAUSE_TITLE, why
from .series import SideSeries
from .spec import BYTES, CAUSE, E2E, MEMORY, MODULE, OP, PART, Check, GateSpec
from .stats import RankTest, mann_whitney_greater

PASS, FAIL, SKIP = "pass", "fail", "skip"
#: Contributors a failed check lists (other than E2E, whose sentence chooses its own).
TOP = 3


@dataclass(frozen=True)
class Verdict:
    """One check on one pair of profiles (one rank pair of a cluster)."""

    metric: str
    unit: str  # TIME | BYTES
    limit: str
    base: float  # per-step mean (ns or bytes)
    comp: float
    allowed: float  # the growth the limit allows over ``base``
    base_steps: int
    comp_steps: int
    test: RankTest | None  # None: noise not assessed
    status: str  # PASS | FAIL | SKIP
    reason: str  # one line: why this status
    contributors: tuple[str, ...] = ()
    rank: int | None = None  # cluster: the rank pair this verdict is from

    @property
    def change(self) -> float:
        return self.comp - self.base

    @property
    def ratio(self) -> float | None:
        return self.change / self.base if self.base else None

    @property
    def exceeded(self) -> bool:
        return self.change > self.allowed

    @property
    def excess(self) -> float:
        """How far past its limit the change went, relative to the base (for picking the worst
        rank of a cluster)."""
        return (self.change - self.allowed) / max(abs(self.base), 1.0)


def evaluate(check: Check, base: SideSeries, comp: SideSeries, spec: GateSpec) -> Verdict:
    """The verdict of ``check`` on two sides' series."""
    name = check.metric.name
    b, c = base.values[name], comp.values[name]
    b_mean = float(np.mean(b)) if len(b) else 0.0
    c_mean = float(np.mean(c)) if len(c) else 0.0
    allowed = check.limit.allowed(b_mean)
    common = dict(metric=name, unit=check.metric.unit, limit=check.limit.text, base=b_mean, comp=c_mean,
                  allowed=allowed, base_steps=len(b), comp_steps=len(c))
    missing = [side for side, s in (("base", base), ("comparison", comp)) if not s.recorded[name]]
    # A pattern needs a match on either side (an op that appears only in the comparison is
    # exactly what a gate is for); anything else must be recorded on both.
    if (len(missing) == 2 if check.metric.kind in (OP, MODULE) else missing) or not len(b) or not len(c):
        what = {MEMORY: "no memory samples", OP: "no kernel launched under a matching op",
                MODULE: "no kernel launched inside a matching module",
                CAUSE: "communication not split into wait and transmit"}.get(check.metric.kind, "no steps")
        return Verdict(**common, test=None, status=SKIP,  # type: ignore[arg-type]
                       reason=f"not checked: {what} in the {' and '.join(missing or ['profiles'])}")
    assessed = len(b) >= spec.min_steps and len(c) >= spec.min_steps
    test = mann_whitney_greater(b, c) if assessed else None
    exceeded = c_mean - b_mean > allowed
    if not exceeded:
        status, reason = PASS, "within the limit"
    elif test is None:
        status = FAIL
        reason = (f"limit exceeded; noise not assessed ({len(b)} vs {len(c)} analysed steps, the rank test "
                  f"needs {spec.min_steps} per side)")
    elif test.p < spec.alpha:
        status, reason = FAIL, f"limit exceeded and beyond step-to-step noise (p < α = {spec.alpha:g})"
    else:
        status, reason = PASS, f"limit exceeded but within step-to-step noise (p ≥ α = {spec.alpha:g})"
    contributors = _contributors(check, base, comp) if status == FAIL else ()
    return Verdict(**common, test=test, status=status, reason=reason, contributors=contributors)  # type: ignore[arg-type]


def _contributors(check: Check, base: SideSeries, comp: SideSeries) -> tuple[str, ...]:
    """What grew: E2E names its causes with the step explanation's sentence; a part its causes, a
    cause or kernel class its labels, an op or module pattern the matching names."""
    name = check.metric.name
    if check.metric.kind == E2E:
        sentence = why(base.explanation, comp.explanation)
        return (sentence,) if sentence else ()
    b, c = base.parts.get(name, {}), comp.parts.get(name, {})
    moved = [(k, c.get(k, 0.0) - b.get(k, 0.0)) for k in dict.fromkeys([*b, *c])]
    grown = sorted((m for m in moved if m[1] > 0), key=lambda m: -m[1])[:TOP]
    unit = BYTES if check.metric.unit == BYTES else "ms"
    if check.metric.kind == PART:  # a part's contributors are causes: say what each one is
        return tuple(f"{CAUSE_TITLE.get(label, label) or '(unnamed)'} {format_change(d, unit)}" for label, d in grown)
    return tuple(f"{label or '(unnamed)'} {format_change(d, unit)}" for label, d in grown)


def format_value(v: float, unit: str) -> str:
    """ns as ms, bytes as GiB / MiB."""
    if unit == BYTES:
        return f"{v / 2 ** 30:,.3f} GiB" if abs(v) >= 2 ** 30 else f"{v / 2 ** 20:,.1f} MiB"
    return f"{v / 1e6:,.3f} ms"


def format_change(v: float, unit: str) -> str:
    return ("+" if v >= 0 else "") + format_value(v, unit)
