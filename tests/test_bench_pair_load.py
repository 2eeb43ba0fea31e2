"""bench/pair_load.py runs: both settings load a pair and report three medians each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pair_load_reports_both_settings() -> None:
    gpu = ROOT / "fixtures" / "gpu"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_load.py"), "--runs", "1",
                          "--fraction", "0.4", str(gpu / "base.pt.trace.json"), str(gpu / "comp.pt.trace.json")],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].endswith("1 runs each, medians in s")
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["one", "split", "0.4"]
    for line in lines[1:]:
        parts = line.split(":")[1].split(",")
        assert [p.rsplit(" ", 1)[0].strip() for p in parts] == ["base profile", "comparison profile", "both analyses"]
        times = [float(p.rsplit(" ", 1)[1]) for p in parts]
        assert 0 < times[0] and 0 < times[1] <= times[2]
