#!/usr/bin/env python3
"""A/B of the GPU loader's tables: ``load_gpu`` minus ``read_trace``, two checkouts alternating.

    .venv/bin/python bench/gpu_tables.py --a /work/main --b . --rounds 5 [--split] TRACE

Why: after a trace is read into event columns, its load worker alone builds the profile's tables
(ops nested per thread, kernels linked, memory paired, …); on an unbalanced pair that stretch is
serial while the other process waits (docs/performance.md). Its CPU is a few tenths of the whole
load, lost in the parse's noise when timed end to end.

How: each round starts one process per checkout (the order alternating between rounds), with the
packages imported from that checkout (:data:`ab.IMPORT_CHECKOUT`). The process reads the trace
once (``--split``: in two processes, as the larger side of an unbalanced pair is), then times
``load_gpu`` ``--calls`` times with ``read_trace`` answering the same events (CPU of the
process; the events' cached row lists cleared before each call). Prints the median CPU of every
call per checkout and B ÷ A.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from ab import IMPORT_CHECKOUT

#: Run in a fresh process: argv = checkout, trace, calls, split (0/1); prints one CPU time a line.
TIME_TABLES = IMPORT_CHECKOUT + """
import time
from dataclasses import replace
from perfcmp_core.load import gpu
from perfcmp_core.load.detect import detect
from perfcmp_core.options import LoadOptions
from perfcmp_core.pair import SPLIT_FRACTION
src = detect(sys.argv[2])
opts = LoadOptions(use_cache=False)
if sys.argv[4] == "1":
    opts = replace(opts, split=SPLIT_FRACTION)
doc, events = gpu.read_trace(src.trace, opts, [])
gpu.read_trace = lambda path, o, notes: (dict(doc), events)
for _ in range(int(sys.argv[3])):
    events._rows.clear()
    t0 = time.process_time()
    gpu.load_gpu(src, opts)
    print(time.process_time() - t0)
"""


def run_once(checkout: Path, trace: str, calls: int, split: bool) -> list[float]:
    """CPU seconds of each ``load_gpu`` call after one read, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", TIME_TABLES, str(checkout), trace, str(calls),
                          "1" if split else "0"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: exit {out.returncode}\n{out.stderr}")
    return [float(line) for line in out.stdout.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (after)")
    ap.add_argument("--rounds", type=int, default=5, help="processes per checkout (default 5)")
    ap.add_argument("--calls", type=int, default=5, help="timed calls per process (default 5)")
    ap.add_argument("--split", action="store_true", help="read the trace in two processes")
    ap.add_argument("trace")
    ns = ap.parse_args()
    times: dict[str, list[float]] = {"A": [], "B": []}
    for r in range(ns.rounds):
        order = (("A", ns.a), ("B", ns.b)) if r % 2 == 0 else (("B", ns.b), ("A", ns.a))
        for name, checkout in order:
            times[name] += run_once(checkout.resolve(), ns.trace, ns.calls, ns.split)
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"{Path(ns.trace).name}: load_gpu minus read_trace{' (split read)' if ns.split else ''}, "
          f"{ns.rounds} processes x {ns.calls} calls each, alternating")
    for name in ("A", "B"):
        print(f"  {name} {getattr(ns, name.lower())}: CPU median {med[name] * 1000:.1f} ms "
              f"(min {min(times[name]) * 1000:.1f})")
    print(f"  B / A: CPU {med['B'] / med['A']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
