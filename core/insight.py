"""Short answers to "where did the time go?" for the top of the overall screen.

Both functions only read results the comparisons already produced (the OverallMetrics table and
the summary figures), so the words on screen can never disagree with the numbers below them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .compat import as_text
from .compare.result import LEVEL, SHOWN, Table

#: The time distribution's title (the reference's table, the terminal report, the README sheet).
SUMMARY_TITLE = "Model Profiling Time Distribution"
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
    change: str  # "+1.5%", "new" (base 0), "" (both print as 0, or a side lacks the figure)
    direction: int  # +1 grew (worse: more time or memory), -1 shrank, 0 equal


def amount(value: float, unit: str, signed: bool = False) -> str:
    """A summary figure in the app's units: seconds as ms with µs precision (the reference's
    0.001 s hides fixture-sized runs), other units with two decimals."""
    fmt = "+,.3f" if signed else ",.3f"
    if unit == "s":
        return f"{value * 1e3:{fmt}} ms"
    fmt = "+,.2f" if signed else ",.2f"
    return f"{value:{fmt}} {unit}".rstrip()


#: How a side that does not hold a figure prints (absent is not zero: a Db export has no bandwidth).
ABSENT = "—"


def figure(label: str, f: dict[str, Any]) -> Headline:
    """One summary figure (an entry of ``summary_figures``) as the app and the terminal print it.

    A side whose value is ``None`` lacks the figure: it prints :data:`ABSENT` and the figure has
    no difference. Two sides that both print as 0 have no change: 0 → 0.1 µs is not "new".
    """
    unit = str(f.get("unit", ""))
    raw_b, raw_c = f.get("base"), f.get("comparison")
    if raw_b is None or raw_c is None:
        return Headline(label=label,
                        base=ABSENT if raw_b is None else amount(float(raw_b), unit),
                        comparison=ABSENT if raw_c is None else amount(float(raw_c), unit),
                        diff="", change="", direction=0)
    b, c = float(raw_b), float(raw_c)
    zero = amount(0.0, unit)
    if amount(b, unit) == zero and amount(c, unit) == zero:
        change = ""  # both print as 0: no change to speak of (not "new", not "+900%")
    else:
        change = f"{(c / b - 1) * 100:+.1f}%" if b else "new"
    return Headline(label=label, base=amount(b, unit), comparison=amount(c, unit),
                    diff=amount(c - b, unit, True), change=change, direction=(c > b) - (c < b))


def headlines(figures: dict[str, dict[str, Any]]) -> list[Headline]:
    """The E2E, Computing, Uncovered Communication, Free and Mem Usage figures, in that order
    (times labelled "/ step" when they are per-step means: the sides hold different numbers of
    steps)."""
    per_step = bool(figures.get("", {}).get("per_step"))
    out = []
    for prefix in HEADLINES:
        key = next((k for k in figures if k.startswith(prefix)), None)
        if key is not None:
            label = prefix.removesuffix(" Time")
            if per_step and figures[key].get("unit") == "s":
                label += " / step"
            out.append(figure(label, figures[key]))
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
    names = as_text(df[SHOWN] if SHOWN in df else df["index"]).str.strip().to_numpy()
    labels = as_text(df["index"]).str.strip().to_numpy()
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


@dataclass(frozen=True)
class Part:
    """One segment of a side's E2E bar: a computing class, uncovered communication or free."""

    label: str
    base_ms: float
    comp_ms: float


def time_parts(table: Table, keep: int = 5) -> list[Part]:
    """E2E split into parts that add up to it on each side, for the Overall screen's bars:
    the ``keep`` largest computing classes (the Computing row's children, in the table's order;
    the smaller ones together as ``other computing``), uncovered communication, free time.

    The classes are sums over kernels while Computing is a union of their intervals: where
    parallel streams make the classes exceed Computing, they are scaled down to it, so a bar is
    never longer than its E2E. Negative free time (overlap beyond E2E) draws as none.
    """
    df = table.data
    if df.empty:
        return []
    labels = as_text(df["index"]).str.strip().to_numpy()
    names = as_text(df[SHOWN] if SHOWN in df else df["index"]).str.strip().to_numpy()
    level = df[LEVEL].to_numpy() if LEVEL in df else np.zeros(len(df), dtype=int)
    base = df["base_ms"].to_numpy(dtype="float64")
    comp = df["comp_ms"].to_numpy(dtype="float64")
    parts: list[Part] = []
    top = np.flatnonzero(labels == "Computing Time")
    if len(top):
        i = int(top[0])
        j = i + 1
        kids = []
        while j < len(df) and level[j] > 0:
            if level[j] == 1:
                kids.append(j)
            j += 1
        scale = [min(1.0, side[i] / total) if (total := side[kids].sum()) > 0 else 0.0
                 for side in (base, comp)]
        kids = [k for k in kids if base[k] > 0 or comp[k] > 0]
        big = set(sorted(kids, key=lambda k: -max(base[k], comp[k]))[:keep])
        parts += [Part(names[k], float(base[k] * scale[0]), float(comp[k] * scale[1]))
                  for k in kids if k in big]
        small = [k for k in kids if k not in big]
        if small:
            parts.append(Part("other computing", float(base[small].sum() * scale[0]),
                              float(comp[small].sum() * scale[1])))
        if not kids:
            parts.append(Part("Computing", float(base[i]), float(comp[i])))
    for row, label in (("Uncovered Communication Time", "Uncovered Communication"),
                       ("Free Time", "Free")):
        hit = np.flatnonzero(labels == row)
        if len(hit):
            k = int(hit[0])
            parts.append(Part(label, float(max(base[k], 0.0)), float(max(comp[k], 0.0))))
    return parts


# -- the time distribution as rows ------------------------------------------------------------
def _label(key: str) -> str:
    """A figure's label without the reference's header decorations: ``Conv Time(Forward)(Num)``
    → ``Conv Time (Forward)`` (counts are printed in parentheses beside the values)."""
    text = re.sub(r"\((Num|Wait Time|Not minimal profiling)\)", "", key)
    return re.sub(r"(\S)\(", r"\1 (", text).strip()


def _count(value: object, signed: bool = False) -> str:
    if value is None:
        return ""
    return f" ({int(value):+d})" if signed else f" ({int(value)})"  # type: ignore[call-overload]


def summary_rows(figures: dict[str, dict[str, Any]], counts: bool = True) -> list[list[str]]:
    """The time distribution as rows: label, base, comparison, diff, change (``counts``: kernel
    counts in parentheses). Uncovered communication's wait time gets a row of its own."""
    rows = []
    for key, f in figures.items():
        if not key:
            continue
        h = figure(_label(key), f)
        b_n, c_n = f.get("base_count"), f.get("comparison_count")
        both = counts and b_n is not None and c_n is not None
        rows.append([h.label, h.base + (_count(b_n) if both else ""),
                     h.comparison + (_count(c_n) if both else ""),
                     h.diff + (_count(int(c_n) - int(b_n), signed=True) if both else ""),  # type: ignore[arg-type]
                     h.change])
        waits = {"unit": "s", "base": float(f.get("base_wait") or 0.0),
                 "comparison": float(f.get("comparison_wait") or 0.0)}
        w = figure("  of which wait", waits)
        if w.base != w.comparison or w.base != amount(0.0, "s"):  # a wait that prints as one
            rows.append([w.label, w.base, w.comparison, w.diff, w.change])
    return rows
