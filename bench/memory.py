"""Where a headless run's memory goes: the summed PSS of its process tree over time.

Runs ``perfcmp-tui export BASE COMP --no-cache`` of a checkout and samples every process of its
tree (``/proc/PID/smaps_rollup``: proportional set size, and the private part), so that pages a
forked worker shares with its parent count once. Prints the series (every ``--every``-th sample:
seconds, the summed PSS, then each process's PSS / private MB) and the peak with the process split
at that instant, which says which phase decides it (both sides loading, the steps beside, the
workbook's child). Issue 27 asks ≤ 1 GB summed on the 32×92 NPU pairs.

    .venv/bin/python bench/memory.py BASE COMP [--perfcmp OTHER/.venv/bin/perfcmp-tui] [--every 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import _tree, rollup_kb  # noqa: E402  (the process tree and its memory, as the side-by-side benchmark reads them)


def rollup(pid: int) -> tuple[int, int] | None:
    """(PSS, private) of a process in MB, None once it has gone."""
    kb = rollup_kb(pid)
    return None if kb is None else (kb[0] // 1024, kb[1] // 1024)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("comp")
    ap.add_argument("--perfcmp", default=str(Path(sys.executable).with_name("perfcmp-tui")),
                    help="the perfcmp-tui that runs (default: this environment's; another checkout's "
                         ".venv/bin/perfcmp-tui to measure it)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    ap.add_argument("--every", type=int, default=5, help="print every N-th sample (0: the peak only)")
    args = ap.parse_args()
    command = args.perfcmp
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.Popen([command, "export", args.base, args.comp, "-o", out, "--no-cache"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        t0 = time.perf_counter()
        peak: tuple[int, float, list[str]] = (0, 0.0, [])
        n = 0
        while proc.poll() is None:
            now = time.perf_counter() - t0
            parts = [(pid, rollup(pid)) for pid in _tree(proc.pid)]
            alive = [(pid, r) for pid, r in parts if r is not None]
            total = sum(r[0] for _, r in alive)
            split = [f"{pid}:{r[0]}/{r[1]}" for pid, r in alive]
            if total > peak[0]:
                peak = (total, now, split)
            if args.every and n % args.every == 0:
                print(f"{now:7.2f} s {total:6d} MB  " + " ".join(split))
            n += 1
            time.sleep(args.interval)
        wall = time.perf_counter() - t0
    print(f"wall {wall:.2f} s, exit {proc.returncode}, peak summed PSS {peak[0]} MB at {peak[1]:.2f} s "
          f"(pid:PSS/private MB) {' '.join(peak[2])}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
