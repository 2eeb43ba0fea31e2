"""bench/floor.py: the floor program reads a pair, and the report's bounds follow from its runs."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "fixtures" / "gpu"
FLOOR = ROOT / "bench" / "floor.py"


def test_the_floor_program_reads_both_traces() -> None:
    done = subprocess.run([sys.executable, str(FLOOR), "--read-only", str(GPU / "base.pt.trace.json"),
                           str(GPU / "comp.pt.trace.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_floor_program_fails_on_a_trace_it_cannot_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    done = subprocess.run([sys.executable, str(FLOOR), "--read-only", str(GPU / "base.pt.trace.json"),
                           str(bad)], capture_output=True, text=True)
    assert done.returncode != 0


def test_report_medians_ratios_and_the_spread_bound(tmp_path: Path) -> None:
    # A stand-in for msprof-analyze: it must be given the reference's arguments, and takes a
    # known time without CPU.
    reference = tmp_path / "msprof-analyze"
    reference.write_text(f"#!{sys.executable}\nimport sys, time\n"
                         "assert sys.argv[1] == 'compare' and '-bp' in sys.argv and '--force' in sys.argv\n"
                         "time.sleep(1.5)\n")
    reference.chmod(reference.stat().st_mode | stat.S_IXUSR)
    out = subprocess.run([sys.executable, str(FLOOR), "--runs", "1", "--reference", str(reference),
                          str(GPU / "base.pt.trace.json"), str(GPU / "comp.pt.trace.json")],
                         capture_output=True, text=True, check=True).stdout
    rows = {m[1]: (float(m[2]), float(m[3]), float(m[4]))
            for m in re.finditer(r"^  (\w+) +([\d.]+) s wall +([\d.]+) s CPU \(reference / this: +([\d.]+)x\)$",
                                 out, re.M)}
    assert set(rows) == {"reference", "ours", "floor"}, out
    rounds = re.findall(r"^round 1 (\w+) +([\d.]+) s wall +([\d.]+) s CPU$", out, re.M)
    # Each tool ran once, and with one round the medians are those runs.
    assert sorted(name for name, *_ in rounds) == ["floor", "ours", "reference"]
    for name, wall, cpu in rounds:
        assert rows[name][:2] == (float(wall), float(cpu))
    ref_wall = rows["reference"][0]
    assert ref_wall >= 1.5
    for name, (wall, _, ratio) in rows.items():
        # Within what the printed rounding (0.01 s, 0.1x) allows.
        assert (ref_wall - 0.005) / (wall + 0.005) - 0.05 <= ratio <= (ref_wall + 0.005) / (wall - 0.005) + 0.05
    # The floor only reads: it does less than ours does.
    assert rows["floor"][1] < rows["ours"][1]
    bound = re.search(r"spread over (\d+) cores, without a wait: ([\d.]+) s \(([\d.]+)x\)", out)
    assert bound, out
    cores, spread = int(bound[1]), float(bound[2])
    expected = rows["floor"][0] + (rows["ours"][1] - rows["floor"][1]) / cores
    assert abs(spread - expected) <= 0.011
    assert rows["floor"][0] <= spread
