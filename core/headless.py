"""``perfcmp-tui export`` and ``summary``: run one request in this process, print the terminal
report, write the outputs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from .collect import collect
from .compare.result import ComparisonResult
from .pipeline import comparison_events
from .report import terminal_report
from .request import RunRequest


def run_export(
    request: RunRequest,
    *,
    out_dir: str | None,
    json_path: str | None,
    write_workbook: bool,
    out: TextIO | None = None,
) -> int:
    """Compare, print the report (to ``out``, default stdout), write the JSON and the workbook.

    A destination that cannot be written is an ``InputError`` naming it (exit 2), raised before
    the comparison when it can be seen then, by the writers when the disk fills up.
    """
    check_destinations(out_dir, json_path, write_workbook)
    result = collect(comparison_events(request), request.base, request.comp)
    out = out or sys.stdout
    print(terminal_report(result), file=out)
    return write_outputs(result, out_dir=out_dir, json_path=json_path,
                         write_workbook=write_workbook, out=out)


def check_destinations(out_dir: str | None, json_path: str | None, write_workbook: bool) -> None:
    """Fail on an unusable destination before a long comparison, but create nothing yet: a run
    that then fails on its input must leave no (empty) output folder behind."""
    from .export.safe_write import check_dir

    if write_workbook:
        check_dir(out_dir or ".")
    if json_path:
        check_dir(Path(json_path).parent)


def write_outputs(result: ComparisonResult, *, out_dir: str | None, json_path: str | None,
                  write_workbook: bool, out: TextIO) -> int:
    """Write the JSON and the workbook of ``result`` as asked, saying where on ``out``."""
    from .export.json_out import write_json
    from .export.xlsx import NothingToWrite
    from .export.xlsx import write_workbook as write_xlsx

    if json_path:
        print(f"JSON written: {write_json(result, json_path)}", file=out)
    if not write_workbook:
        return 0
    try:
        path = write_xlsx(result, out_dir or ".")
    except NothingToWrite as exc:
        print(exc, file=out)
        return 0
    from .export.timeline_text import write_timeline

    pictures = write_timeline(result, Path(path))
    if pictures is not None:
        print(f"Timeline of one step per side: {pictures[0]} (SVG: {pictures[1]})", file=out)
    # Last, as the reference prints it: scripts read the workbook's path from the last line.
    print(f"The comparison result file has been generated: {path}", file=out)
    return 0
