"""The Timeline picture as a plain-text file beside the workbook (``export``), to paste into a
report: the same glyphs the app draws (:mod:`perfcmp_core.lanes.picture`), so it reads without
colour. Written atomically, never over an existing file (:func:`~.safe_write.safe_write`)."""

from __future__ import annotations

from pathlib import Path

from perfcmp_core.compare.result import ComparisonResult
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.lanes import TIMELINE, sides_of
from perfcmp_core.lanes.picture import picture_text

#: Characters per line of the file: wide enough for a step's shape, narrow enough to paste.
WIDTH = 160


def timeline_path(workbook: Path) -> Path:
    """``…/performance_comparison_result_<time>.xlsx`` → ``…_<time>_timeline.txt``."""
    return workbook.with_name(workbook.stem + "_timeline.txt")


def write_timeline(result: ComparisonResult, workbook: Path, width: int = WIDTH) -> Path | None:
    """Write the picture of the result's Timeline table beside ``workbook``; the path written,
    or None when the run made no timeline (no steps and no device activity on a side)."""
    table = result.tables.get(TIMELINE)
    if table is None:
        return None
    text = picture_text(sides_of(table), width)
    return safe_write(timeline_path(workbook), lambda fh: fh.write(text.encode("utf-8")))
