#!/usr/bin/env python3
"""The load phase of a pair with and without the split read, alternating.

    .venv/bin/python bench/pair_load.py --runs 7 /tmp/llama/base.pt.trace.json /tmp/llama/comp.pt.trace.json

Each run is a fresh interpreter that loads both sides through ``pair.iter_pair`` with each side's
analysis, as a run's load phase does (no cache), and reports when the base profile, the
comparison profile and both analyses were there. "one" runs with ``pair.SPLIT_MIN_BYTES`` raised
past any file (each trace parsed in one process, as before the split read); "split" as shipped.
``--fraction`` times other ``pair.SPLIT_FRACTION`` values beside. Medians per setting; the rounds
alternate, so load from other processes hits all settings alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

#: One timed run: argv = fraction ("one" or a number), base, comparison.
RUN = """
import sys, time
from functools import partial
from itertools import islice
from perfcmp_core import pair
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.request import RunRequest
from perfcmp_core.side import analyse_side

setting, base, comp = sys.argv[1:4]
if setting == "one":
    pair.SPLIT_MIN_BYTES = 1 << 62
elif setting != "split":
    pair.SPLIT_FRACTION = float(setting)
req = RunRequest.read(base, comp, LoadOptions(), LoadOptions(), CompareOptions())
opts = LoadOptions(use_cache=False)
analyse = partial(analyse_side, equivalence=req.equivalence, advisor=req.advisor)
t0 = time.perf_counter()
sides = pair.iter_pair(base, comp, opts, opts, analyse=analyse)
marks, pending = [], []
for _, _, analysis, _ in islice(sides, 2):
    marks.append(time.perf_counter() - t0)
    pending.append(analysis)
for analysis in pending:
    analysis()
marks.append(time.perf_counter() - t0)
sides.close()
print(*marks)
"""
COLUMNS = ("base profile", "comparison profile", "both analyses")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--fraction", type=float, action="append", default=[],
                    help="also time this SPLIT_FRACTION (repeatable)")
    ap.add_argument("base")
    ap.add_argument("comp")
    args = ap.parse_args()
    settings = ["one", "split", *map(str, args.fraction)]
    times: dict[str, list[list[float]]] = {s: [] for s in settings}
    for _ in range(args.runs):
        for setting in settings:
            out = subprocess.run([sys.executable, "-c", RUN, setting, args.base, args.comp],
                                 capture_output=True, text=True, check=True)
            times[setting].append([float(x) for x in out.stdout.split()])
    print(f"{args.base} vs {args.comp}: {args.runs} runs each, medians in s")
    for setting, runs in times.items():
        medians = [statistics.median(column) for column in zip(*runs)]
        print(f"  {setting:>6}: " + ", ".join(f"{name} {m:.3f}" for name, m in zip(COLUMNS, medians)))


if __name__ == "__main__":
    main()
