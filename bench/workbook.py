#!/usr/bin/env python3
"""Time the workbook writer alone on one pair of profiles.

    .venv/bin/python bench/workbook.py BASE COMP [--runs N] [export options]

Runs the comparison once (through the profile cache, as ``export`` does), then writes the
workbook ``N`` times (3) into a temporary folder and prints each write's CPU seconds (every thread
of the writer, and its child where it forks one) and wall seconds, their medians, the workbook's
size, the size of its sheet XML, and the peak RSS of this process during the writes against its
RSS before them (Linux: the peak is reset after the comparison, through
``/proc/self/clear_refs``; the child's memory is not in it). ``bench/compare.py`` times whole
runs; this isolates the last step of ``export``, which on a large NPU pair writes millions of
cells.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from perfcmp_core.collect import collect
from perfcmp_core.export.xlsx import write_workbook
from perfcmp_core.pipeline import comparison_events
from perfcmp_tui import cli


def _status_mb(field: str) -> float:
    """``VmRSS`` / ``VmHWM`` (peak) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _cpu() -> float:
    """CPU seconds of this process and of its children reaped so far (the writer's child)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ns, export_args = ap.parse_known_args()
    request = cli.run_request(cli.build_parser("export").parse_args(export_args))
    result = collect(comparison_events(request), request.base, request.comp)
    cpu, wall = [], []
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := RSS now
    before = _status_mb("VmRSS")
    with tempfile.TemporaryDirectory() as out:
        for _ in range(ns.runs):
            c0, t0 = _cpu(), time.perf_counter()
            path = write_workbook(result, out)
            cpu.append(_cpu() - c0)
            wall.append(time.perf_counter() - t0)
            with zipfile.ZipFile(path) as book:
                xml = sum(i.file_size for i in book.infolist() if i.filename.startswith("xl/worksheets/"))
            size = path.stat().st_size
            path.unlink()
    print(f"write_workbook cpu s {[round(c, 2) for c in cpu]} median {statistics.median(cpu):.2f}")
    print(f"write_workbook wall s {[round(w, 2) for w in wall]} median {statistics.median(wall):.2f}")
    print(f"workbook {size / 2**20:.1f} MB, sheet XML {xml / 2**20:.1f} MB; "
          f"RSS {before:.0f} MB before the writes, peak {_status_mb('VmHWM'):.0f} MB during them "
          "(this process; not the writer's child)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
