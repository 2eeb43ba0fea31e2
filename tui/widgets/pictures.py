"""Pictures above a table, for what people would rather see than read: the Overall screen's E2E
of both sides as stacked bars on one scale (what the time went to) and its E2E per step as a
sparkline (a slow step stands out).

Every number drawn comes from :mod:`perfcmp_core` (:func:`~perfcmp_core.insight.time_parts`,
the StepCompare table); this module only turns them into cells. Colour never carries meaning
alone, and without it (``NO_COLOR``, a 16-colour terminal) each segment has its own fill glyph,
named in the legend.
"""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.app import App
from textual.widget import Widget

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
