"""What a check of :mod:`.checks` reports: a finding when it trips, or why it could not run.

Its own module so that checks living in their own modules (:mod:`.flop_rate`) return the same
types without importing :mod:`.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckFinding:
    """A check that tripped on one profile."""

    key: str
    headline: str
    value: float  # the compared figure: a fraction (0–1) or, for ``syncs``, a count per step
    threshold: float
    direction: str
    evidence: str
    top: tuple[tuple[str, str], ...]  # (contributor, its figure as text)
    time_ns: float  # mean per step (or total without steps)

    @property
    def top_text(self) -> str:
        return ", ".join(f"{label} {figure}" for label, figure in self.top) or "none named"


@dataclass(frozen=True)
class CheckSkipped:
    """A check that could not run on a profile (the data it reads is not recorded): reported, so
    a missing figure is never read as a pass."""

    key: str
    reason: str
