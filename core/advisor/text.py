"""How the advisor words its figures: milliseconds, percentages, step ranges, operator lists.

One owner for these phrases, so the Advisor table, the terminal section and ``advise`` say the
same thing the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from .analysis import Analysis

NS_PER_MS = 1e6


def ms(ns: float) -> str:
    """``1234567`` → ``"1.235 ms"``."""
    return f"{ns / NS_PER_MS:,.3f} ms"


def pct(fraction: float) -> str:
    """``0.5556`` → ``"55.56%"``."""
    return f"{fraction * 100:.2f}%"


def steps_text(a: Analysis) -> str:
    """Which steps the figures are means of, and what was left out."""
    if not a.steps:
        return "no steps recorded: whole profile"
    text = f"{len(a.steps)} step(s) analysed ({', '.join(map(str, a.steps))}), means per step"
    if a.warmup:
        text += f"; warmup excluded: {', '.join(map(str, a.warmup))}"
    if a.excluded_ns:
        text += f"; {ms(a.excluded_ns)} of device time outside the analysed steps"
    return text


def range_text(row: pd.Series, n_steps: int) -> str:
    """The per-step share range of a summary row."""
    if n_steps < 2 or pd.isna(row["step_min"]):
        return f"{n_steps} step" if n_steps == 1 else "whole profile"
    return f"{pct(row['step_min'])}–{pct(row['step_max'])} over {n_steps} steps"


def top_text(top: list[tuple[str, float]]) -> str:
    """``[("MatMulV3", 6e5)]`` → ``"MatMulV3 0.600 ms"``."""
    return ", ".join(f"{label} {ms(ns)}" for label, ns in top) or "no operators"
