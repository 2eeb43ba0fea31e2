"""bench/gpu_tables.py runs: one checkout against itself, a fixture trace read whole and split."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("split", [[], ["--split"]])
def test_gpu_tables_reports_both_checkouts(split: list[str]) -> None:
    trace = ROOT / "fixtures" / "gpu" / "comp.pt.trace.json"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_tables.py"), "--a", str(ROOT),
                          "--b", str(ROOT), "--rounds", "2", "--calls", "2", *split, str(trace)],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("comp.pt.trace.json: load_gpu minus read_trace")
    assert ("(split read)" in lines[0]) == bool(split)
    assert lines[0].endswith("2 processes x 2 calls each, alternating")
    assert [line.split()[0] for line in lines[1:]] == ["A", "B", "B"]
    medians = [float(line.split("CPU median ")[1].split(" ms")[0]) for line in lines[1:3]]
    assert all(m > 0 for m in medians)
    assert lines[3].startswith("  B / A: CPU ")
