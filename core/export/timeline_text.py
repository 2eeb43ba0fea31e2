"""The Timeline picture beside the workbook (``export``), to paste into a report: as plain text —
the same glyphs the app draws (:mod:`perfcmp_core.lanes.picture`), so it reads without colour —
and as SVG, the same characters coloured as the app colours them, rendered by Rich (Textual's
own renderer, so no new dependency: ``Console(record=True).export_svg``). Both written
atomically, never over an existing file (:func:`~.safe_write.safe_write`)."""

from __future__ import annotations

import io
from pathlib import Path

from perfcmp_core.compare.result import ComparisonResult
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.lanes import TIMELINE, SideLanes, sides_of
from perfcmp_core.lanes.picture import COLOURS, picture_lines, picture_text

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
    sides = sides_of(table)
    text = picture_text(sides, width)
    txt = safe_write(timeline_path(workbook), lambda fh: fh.write(text.encode("utf-8")))
    svg = picture_svg(sides, width)
    return txt, safe_write(timeline_path(workbook, ".svg"), lambda fh: fh.write(svg.encode("utf-8")))


def picture_svg(sides: tuple[SideLanes, SideLanes], width: int = WIDTH) -> str:
    """The picture of :func:`~perfcmp_core.lanes.picture.picture_text` as an SVG document: every
    line as it is (no wrapping: the console is as wide as the longest line), each run of cells
    of one class in its colour."""
    from rich.console import Console  # here: only export pays for importing Rich
    from rich.text import Text

    lines = picture_lines(sides, width)
    console = Console(record=True, width=max(len(text) for text, _ in lines), file=io.StringIO(),
                      color_system="truecolor", force_terminal=True, legacy_windows=False)
    for text, cls in lines:
        line = Text(text, no_wrap=True, overflow="crop")
        start = 0
        for i in range(1, len(cls) + 1):  # one style per run of a class: a line has ≤ width runs
            if i == len(cls) or cls[i] != cls[start]:
                if cls[start] in COLOURS:
                    line.stylize(COLOURS[cls[start]], start, i)
                start = i
        console.print(line)
    return console.export_svg(title="perfcmp-tui Timeline")
