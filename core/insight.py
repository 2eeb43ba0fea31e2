"""Short answers to "where did the time go?" for the top of the overall screen.

Both functions only read results the comparisons already produced (the OverallMetrics table and
the summary figures), so the words on screen can never disagree with the numbers below them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .compare.result import LEVEL, SHOWN, Table

#: Summary figures shown as headline lines, by the prefix of their terminal column name.
HEADLINES = ("E2E Time", "Computing Time", "Uncovered Communication Time", "Free Time", "Mem Usage")

#: Smallest difference (ms) the gap sentence mentions; smaller ones print as +0.00 anyway.
MIN_MS = 0.005


@dataclass(frozen=True)
class Headline:
    """One summary figure, base against comparison, ready to print."""

    label: str  # "E2E", "Computing", …
    base: str  # "18.717 ms"
    comparison: str
    diff: str  # "+0.276 ms"
    change: str  # "+1.5%", "new" (base 0) or "" (both 0)
    direction: int  # +1 grew (worse: more time or memory), -1 shrank, 0 equal


def amount(value: float, unit: str, signed: bool = False) -> str:
    """A summary figure in the app's units: seconds as ms with µs precision (the reference's
    0.001 s hides fixture-sized runs), other units with two decimals."""
    fmt = "+,.3f" if signed else ",.3f"
    if unit == "s":
        return f"{value * 1e3:{fmt}} ms"
    fmt = "+,.2f" if signed else ",.2f"
    return f"{value:{fmt}} {unit}".rstrip()


def figure(label: str, f: dict[str, Any]) -> Headline:
    """One summary figure (an entry of ``summary_figures``) as the app and the terminal print it."""
    unit = str(f.get("unit", ""))
    b, c = float(f.get("base") or 0), float(f.get("comparison") or 0)
    change = f"{(c / b - 1) * 100:+.1f}%" if b else ("new" if c else "")
    return Headline(label=label, base=amount(b, unit), comparison=amount(c, unit),
                    diff=amount(c - b, unit, True), change=change, direction=(c > b) - (c < b))


def headlines(figures: dict[str, dict[str, Any]]) -> list[Headline]:
    """The E2E, Computing, Uncovered Communication, Free and Mem Usage figures, in that order."""
    out = []
    for prefix in HEADLINES:
        key = next((k for k in figures if k.startswith(prefix)), None)
        if key is not None:
            out.append(figure(prefix.removesuffix(" Time"), figures[key]))
    return out


def _short(label: str) -> str:
    """``dp: Group 10.20.0.11%enp…_60000 Communication`` → ``dp`` (group names are noise here)."""
    head, sep, _ = label.partition(": ")
    return head if sep and len(head) <= 24 else label.removesuffix(" Time")


def gap_sentence(table: Table, top: int = 3) -> str:
    """Which OverallMetrics rows explain the E2E difference, largest first.

    Top-level rows (Computing, Uncovered Communication, Free) are the parts of E2E; for each that
    moved, the largest-moving children are named, so the sentence reads like "+0.47 ms Computing
    (AllGatherMatmul +0.66, Matmul −0.30, rest +0.11)". Parts that did not move are left out.
    The figures add up as printed: what the named children leave of their part is its ``rest``,
    and what the named parts leave of E2E (parts under 0.005 ms, LCCL, which has no row) is the
    sentence's ``rest``.
    """
    df = table.data
    if df.empty:
        return ""
    names = (df[SHOWN] if SHOWN in df else df["index"]).astype(str).str.strip().to_numpy()
    labels = df["index"].astype(str).str.strip().to_numpy()
    level = df[LEVEL].to_numpy() if LEVEL in df else np.zeros(len(df), dtype=int)
    # Rounded as printed: the printed parts then add up to the printed totals exactly.
    diff = np.round(df["diff_ms"].to_numpy(dtype="float64"), 2)
    parts: list[tuple[float, str]] = []
    i = 0
    while i < len(df):
        if level[i] == 0 and labels[i] != "E2E Time":
            j = i + 1
            kids = []
            while j < len(df) and level[j] > 0:
                if level[j] == 1 and abs(diff[j]) >= MIN_MS:
                    kids.append((diff[j], _short(names[j])))
                j += 1
            if abs(diff[i]) >= MIN_MS or kids:
                kids.sort(key=lambda x: -abs(x[0]))
                named = kids[:top]
                rest = _rest(diff[i], [d for d, _ in named])
                if named and rest:
                    named.append((rest, "rest"))
                detail = ", ".join(f"{name} {_ms(d)}" for d, name in named)
                text = f"{_ms(diff[i])} ms {_short(names[i])}"
                parts.append((diff[i], text + (f" ({detail})" if detail else "")))
            i = j
        else:
            i += 1
    parts.sort(key=lambda x: -abs(x[0]))
    e2e = diff[labels == "E2E Time"]
    head = f"E2E {_ms(e2e[0])} ms" if len(e2e) else "Difference"
    if len(e2e) and parts:
        rest = _rest(e2e[0], [d for d, _ in parts])
        if rest:
            parts.append((rest, f"{_ms(rest)} ms rest"))
    body = "; ".join(p for _, p in parts) or "no part moved by 0.01 ms or more"
    return f"Where the gap comes from — {head}: {body}"


def _ms(value: float) -> str:
    return f"{value:+,.2f}"


def _rest(total: float, parts: list[float]) -> float:
    """What ``parts`` leave of ``total`` at the printed precision (0.0 when nothing)."""
    rest = round(float(total) - sum(parts), 2)
    return rest if abs(rest) >= 0.01 else 0.0
