"""bench/memory.py: a run's summed PSS over time, and its peak with the process split."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_memory_reports_the_series_and_the_peak_of_a_run() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "memory.py"), "--every", "1",
                          str(ROOT / "fixtures" / "gpu" / "base.pt.trace.json"),
                          str(ROOT / "fixtures" / "npu_text" / "comp_ascend_pt")],
                         capture_output=True, text=True, check=True).stdout
    *series, last = out.splitlines()
    peak = re.fullmatch(r"wall [\d.]+ s, exit 0, peak summed PSS (\d+) MB at ([\d.]+) s \(pid:PSS/private MB\) (.+)",
                        last)
    assert peak, last
    split = [tuple(int(v) for v in re.fullmatch(r"(\d+):(\d+)/(\d+)", p).groups()) for p in peak[3].split()]
    # The peak is the sum of its processes' PSS, each holding at least its private pages.
    assert int(peak[1]) == sum(pss for _, pss, _ in split) > 0
    assert all(private <= pss for _, pss, private in split)
    totals = [int(re.match(r"\s*[\d.]+ s\s+(\d+) MB", line)[1]) for line in series]
    assert totals and max(totals) == int(peak[1])
    # A pair of two sides: the comparison side loads in a worker of its own.
    assert max(len(line.split()) - 4 for line in series) >= 2
