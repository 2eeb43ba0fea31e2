"""The Timeline picture beside the workbook (``export``), to paste into a report: as plain text —
the same glyphs the app draws (:mod:`perfcmp_core.lanes.picture`), so it reads without colour —
and as SVG, the same characters coloured as the app colours them. Both written
atomically, never over an existing file (:func:`~.safe_write.safe_write`)."""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from perfcmp_core.compare.result import ComparisonResult
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.lanes import TIMELINE, sides_of
from perfcmp_core.lanes.picture import COLOURS, picture_lines

#: Characters per line of the file: wide enough for a step's shape, narrow enough to paste.
WIDTH = 160


def timeline_path(workbook: Path, suffix: str = ".txt") -> Path:
    """``…/performance_comparison_result_<time>.xlsx`` → ``…_<time>_timeline.txt`` (or ``.svg``)."""
    return workbook.with_name(workbook.stem + "_timeline" + suffix)


def write_timeline(result: ComparisonResult, workbook: Path, width: int = WIDTH) -> tuple[Path, Path] | None:
    """Write the picture of the result's Timeline table beside ``workbook`` as text and as SVG;
    the paths written, or None when the run made no timeline (no steps and no device activity
    on a side)."""
    table = result.tables.get(TIMELINE)
    if table is None:
        return None
    lines = picture_lines(sides_of(table), width)
    text = "\n".join(line for line, _ in lines) + "\n"  # picture_text, from the lines made once
    txt = safe_write(timeline_path(workbook), lambda fh: fh.write(text.encode("utf-8")))
    svg = picture_svg(lines)
    return txt, safe_write(timeline_path(workbook, ".svg"), lambda fh: fh.write(svg.encode("utf-8")))


#: Cell size of the SVG's character grid in px, and its default colours (a dark terminal's).
CELL_W, CELL_H = 8.4, 17.0
BACKGROUND, FOREGROUND = "#0c0c0c", "#c5c8c6"


def picture_svg(lines: list[tuple[str, list[str]]]) -> str:
    """The picture's lines (:func:`~perfcmp_core.lanes.picture.picture_lines`) as an SVG
    document: a monospace grid, every line as it is (no wrapping), each run of cells of one
    class in the colour the app gives it (:data:`~perfcmp_core.lanes.picture.COLOURS`). Written
    directly rather than through a terminal renderer's SVG export: that cost more than the
    picture."""
    from rich.color import Color  # the app's colour names, read as the app reads them

    fills = {cls: (Color.parse(style.split()[-1]).get_truecolor().hex, "bold" in style.split())
             for cls, style in COLOURS.items()}
    cols = max(len(text) for text, _ in lines)
    w, h = cols * CELL_W + 2 * CELL_W, (len(lines) + 1) * CELL_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
           f'viewBox="0 0 {w:.0f} {h:.0f}">',
           "<title>perfcmp-tui Timeline</title>",
           "<style>text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; "
           f"font-size: 14px; white-space: pre; fill: {FOREGROUND} }}"
           + "".join(f" .c-{cls} {{ fill: {hexa}{'; font-weight: bold' if bold else ''} }}"
                     for cls, (hexa, bold) in fills.items()) + "</style>",
           f'<rect width="100%" height="100%" fill="{BACKGROUND}"/>']
    for n, (text, cls) in enumerate(lines):
        y = (n + 1) * CELL_H
        runs = []
        start = 0
        classes = cls + [""] * (len(text) - len(cls))
        for i in range(1, len(text) + 1):  # one run per class: a line has ≤ width runs
            if i == len(text) or classes[i] != classes[start]:
                part = escape(text[start:i])
                if part.strip():
                    mark = f' class="c-{classes[start]}"' if classes[start] in fills else ""
                    runs.append(f'<tspan x="{(start + 1) * CELL_W:.1f}"{mark}>{part}</tspan>')
                start = i
        if runs:
            out.append(f'<text y="{y:.0f}" xml:space="preserve">{"".join(runs)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
