"""Pictures above a table, for what people would rather see than read: the Overall screen's E2E
of both sides as stacked bars on one scale (what the time went to) and its E2E per step as a
sparkline (a slow step stands out); the Advisor screen's category shares of each stage as bars,
base beside comparison (which kind of work a stage's time moved to).

Every number drawn comes from :mod:`perfcmp_core` (:func:`~perfcmp_core.insight.time_parts`,
the StepCompare table, the Advisor table's shares); this module only turns them into cells. Colour never carries meaning
alone, and without it (``NO_COLOR``, a 16-colour terminal) each segment has its own fill glyph,
named in the legend.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from rich.text import Text
from textual.app import App
from textual.widget import Widget

from perfcmp_core.advisor.rules import ALL, COMM_EXPOSED, ROW_CATEGORIES
from perfcmp_core.compare.result import IS_TOTAL
from perfcmp_core.insight import Part

#: Segment colours (256-colour and true-colour terminals) and, without colour, fill glyphs.
COLOURS = ("dodger_blue2", "green3", "gold3", "medium_purple2", "dark_orange", "grey50",
           "red3", "grey70")
GLYPHS = ("█", "▓", "▒", "░", "#", "=", "+", ":")
SPARKS = "▁▂▃▄▅▆▇█"


def draws_colour(app: App[object]) -> bool:
    """Whether pictures tell their parts apart by colour: not under NO_COLOR (the app draws with
    the terminal's colours only) nor on a 16-colour terminal, where they would not differ
    enough; then each part gets its own glyph."""
    return not app.ansi_color and app.console.color_system not in (None, "standard", "windows")


def cells(values: Sequence[float], scale: float, width: int) -> list[int]:
    """Cell widths of consecutive segments on a bar of ``width`` cells for ``scale``: rounded
    at the segment ends, so the segments add up to the rounded total exactly."""
    if scale <= 0 or width <= 0:
        return [0] * len(values)
    out, done, acc = [], 0, 0.0
    for v in values:
        acc += max(v, 0.0)
        end = round(acc / scale * width)
        out.append(end - done)
        done = end
    return out


def stacked_bars(parts: list[Part], width: int, colour: bool) -> Text:
    """Base and comparison E2E as two bars on one scale, then the legend."""
    text = Text()
    if not parts or width < 30:
        return text
    totals = (sum(p.base_ms for p in parts), sum(p.comp_ms for p in parts))
    scale = max(totals)
    bar_width = width - len("Base ") - len(" 00,000.000 ms")
    for side, total in zip(("Base", "Comp"), totals):
        text.append(f"{side} ", style="bold")
        values = [p.base_ms if side == "Base" else p.comp_ms for p in parts]
        for i, n in enumerate(cells(values, scale, bar_width)):
            glyph = "█" if colour else GLYPHS[i % len(GLYPHS)]
            text.append(glyph * n, style=COLOURS[i % len(COLOURS)] if colour else "")
        text.append(f" {total:,.3f} ms\n")
    for i, p in enumerate(parts):
        glyph = "█" if colour else GLYPHS[i % len(GLYPHS)]
        text.append(("  " if i else "") + glyph, style=COLOURS[i % len(COLOURS)] if colour else "")
        text.append(f" {p.label} {p.base_ms:,.2f}→{p.comp_ms:,.2f}")
    return text


def sparkline(values: Sequence[float], lo: float, hi: float, width: int) -> str:
    """One block per value between ``lo`` and ``hi`` (one scale for both sides); more values
    than ``width`` are binned, each bin drawn by its largest (the slow step shows)."""
    vals = [v for v in values if v == v]  # NaN: a step one side lacks
    if not vals or width <= 0:
        return ""
    if len(vals) > width:
        size = -(-len(vals) // width)
        vals = [max(vals[i:i + size]) for i in range(0, len(vals), size)]
    if hi <= lo:
        return SPARKS[3] * len(vals)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in vals)


def step_sparklines(base: Sequence[float], comp: Sequence[float], width: int) -> Text:
    """E2E per step of both sides, on one scale, with that scale's range."""
    every = [v for v in (*base, *comp) if v == v]
    text = Text()
    if len(every) < 3:
        return text
    lo, hi = min(every), max(every)
    room = max(4, (width - 44) // 2)
    text.append("E2E per step ", style="bold")
    text.append("base ")
    text.append(sparkline(base, lo, hi, room), style="dodger_blue2")
    text.append("  comp ")
    text.append(sparkline(comp, lo, hi, room), style="dark_orange")
    text.append(f"  ({lo:,.3f}–{hi:,.3f} ms)")
    return text


#: The categories a stage's busy time splits into (their shares add up to 1); ``Comm exposed``
#: is the part of ``Comm`` nothing overlaps, so it is no segment of its own.
SHARE_CATEGORIES = tuple(c for c in ROW_CATEGORIES if c != COMM_EXPOSED)


def stage_shares(advisor: pd.DataFrame) -> list[tuple[str, list[float], list[float]]]:
    """(stage, base shares, comparison shares) per stage of an Advisor table, in its order, the
    shares of :data:`SHARE_CATEGORIES` of the stage's busy time; stages idle on both sides are
    left out, the whole run (``All``) comes last."""
    rows = advisor[~advisor[IS_TOTAL] & advisor["scope"].isin(("base", "comparison"))]
    out = []
    for stage in pd.unique(rows["stage"]):
        sel = rows[rows["stage"] == stage]
        sides = []
        for scope in ("base", "comparison"):
            got = sel[sel["scope"] == scope].set_index("category")["share"]
            sides.append([float(got.get(c, 0.0)) for c in SHARE_CATEGORIES])
        if any(sides[0]) or any(sides[1]):
            out.append((str(stage), sides[0], sides[1]))
    return sorted(out, key=lambda s: s[0] == ALL)


def share_bars(advisor: pd.DataFrame, width: int, colour: bool) -> Text:
    """One line per stage: its category shares as a bar per side (a full bar is the stage's
    busy time), base beside comparison, then the legend."""
    text = Text()
    stages = stage_shares(advisor)
    if not stages or width < 40:
        return text
    name_width = max(len(s[0]) for s in stages)
    bar_width = (width - name_width - len(" base ") - len("  comp ")) // 2
    text.append("Category shares of each stage's busy time\n", style="bold")
    for stage, base, comp in stages:
        text.append(f"{stage:<{name_width}}", style="bold")
        for side, shares in (("base", base), ("comp", comp)):
            text.append(f" {side} " if side == "base" else f"  {side} ")
            for i, n in enumerate(cells(shares, 1.0, bar_width)):
                glyph = "█" if colour else GLYPHS[i % len(GLYPHS)]
                text.append(glyph * n, style=COLOURS[i % len(COLOURS)] if colour else "")
            text.append(" " * (bar_width - sum(cells(shares, 1.0, bar_width))))
        text.append("\n")
    for i, cat in enumerate(SHARE_CATEGORIES):
        glyph = "█" if colour else GLYPHS[i % len(GLYPHS)]
        text.append(("  " if i else "") + glyph, style=COLOURS[i % len(COLOURS)] if colour else "")
        text.append(f" {cat}")
    return text


class AdvisorPicture(Widget):
    """The Advisor screen's share bars, redrawn for the width it gets."""

    DEFAULT_CSS = "AdvisorPicture { height: auto; padding: 0 1; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.advisor = pd.DataFrame()

    def set_data(self, advisor: pd.DataFrame) -> None:
        self.advisor = advisor
        self.refresh(layout=True)

    def render(self) -> Text:
        if self.advisor.empty:
            return Text()
        return share_bars(self.advisor, max(self.size.width, 40), draws_colour(self.app))


class OverallPicture(Widget):
    """The Overall screen's bars and step sparkline, redrawn for the width it gets."""

    DEFAULT_CSS = "OverallPicture { height: auto; padding: 0 1; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.parts: list[Part] = []
        self.steps: tuple[list[float], list[float]] = ([], [])

    def set_data(self, parts: list[Part], steps: tuple[list[float], list[float]]) -> None:
        self.parts, self.steps = parts, steps
        self.refresh(layout=True)

    def render(self) -> Text:
        width = max(self.size.width, 40)
        text = stacked_bars(self.parts, width, draws_colour(self.app))
        spark = step_sparklines(*self.steps, width)
        if spark.plain:
            text.append("\n")
            text.append_text(spark)
        return text
