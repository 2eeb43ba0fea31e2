#!/usr/bin/env python3
"""The app's ``S`` (another step), timed as the app sees it, before and after, alternating.

    git worktree add /tmp/before 3120a3d
    .venv/bin/python bench/step_change.py --a /tmp/before:fresh --b .:served --rounds 5 \\
        ../shared/data/gpu-real/h200/llama_train_bf16.pt.trace.json.gz \\
        ../shared/data/gpu-real/h200/llama16_train_bf16_12steps.pt.trace.json.gz

What the app does on ``S``, without the screen: a comparison child's events read as the app's
worker thread reads them (each table's view prepared, the Timeline's lanes indexed; ``--no-views``
leaves that out), timed from the step chosen to the run's ``Finished``. Each side is ``CHECKOUT:WAY``, the packages imported
from that checkout (as ``bench/ab.py`` does) and one of two ways:

* ``fresh``: a new child on the chosen steps (``runner.start_comparison``), as the app did
  before its child served step changes: it reads both inputs from the profile cache and runs the
  whole comparison;
* ``served``: the next run of one serving child (``start_comparison(..., serve=True)`` then
  ``ChildRun.again``), which holds both profiles since its first run (every step), as the app
  does now.

A session (one process) runs the first comparison (every step, untimed: it also fills the
cache), then visits the comparison side's steps ``--steps`` (default: its first three) with the
base side on every step. Sessions alternate which side goes first in each round (this host's
load drifts by ±30 %: only medians of alternating runs compare). Printed per side: the median
and every sample, in seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab import IMPORT_CHECKOUT  # noqa: E402

#: One session in a child interpreter: argv = checkout, way, views, base, comp, steps (JSON),
#: both, pause.
SESSION = IMPORT_CHECKOUT + """
import json, time
from dataclasses import replace
from perfcmp_core.events import Failed, Finished, Loaded, TableReady
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.request import RunRequest
from perfcmp_core.runner import prepare, start_comparison
from perfcmp_core.view import TableView
try:
    from perfcmp_core.lanes import sides_of
except ImportError:  # a checkout from before the Timeline
    sides_of = lambda table: TableView(table).prepare()

way, views, base, comp, wanted, both = (sys.argv[2], sys.argv[3] == "1", sys.argv[4], sys.argv[5],
                                        json.loads(sys.argv[6]), sys.argv[7] == "1")
pause = float(sys.argv[8])

def read(run):
    steps = {}
    for event in run.events():
        if isinstance(event, TableReady) and views:
            # as the app's worker thread does: the Timeline's lanes indexed, a table's view made
            if event.table.name == "Timeline":
                sides_of(event.table)
            else:
                TableView(event.table).prepare()
        elif isinstance(event, Loaded):
            steps[event.side] = [int(s["step"]) for s in event.info.get("steps", ())]
        elif isinstance(event, Failed):
            raise SystemExit(f"the run failed: {event.message}")
        elif isinstance(event, Finished):
            break
    return time.perf_counter(), steps

prepare()
request = RunRequest.read(base, comp, LoadOptions(), LoadOptions(), CompareOptions())
first = start_comparison(request, serve=True) if way == "served" else start_comparison(request)
_, steps = read(first)
samples = []
comp_steps = wanted or steps["comparison"][:3]
# --both: each side's step at the same position (the picker's `j j Enter`), else every base step
base_steps = ([steps["base"][min(steps["comparison"].index(s), len(steps["base"]) - 1)] for s in comp_steps]
              if both else [None] * len(comp_steps))
try:
    for base_step, step in zip(base_steps, comp_steps):
        time.sleep(pause)
        cut = replace(request, base_opts=replace(request.base_opts, step=base_step),
                      comp_opts=replace(request.comp_opts, step=step))
        t0 = time.perf_counter()
        if way == "served":
            if not first.again(request=cut):
                raise SystemExit("the serving child did not take the next run")
            run = first
        else:
            run = start_comparison(cut)
        samples.append(read(run)[0] - t0)
finally:
    first.close()
print(json.dumps(samples))
"""


def session(side: str, views: bool, base: str, comp: str, steps: list[int], both: bool,
            pause: float) -> list[float]:
    """One session's samples; ``side`` is ``CHECKOUT:WAY``."""
    checkout, _, way = side.rpartition(":")
    if way not in ("fresh", "served"):
        raise SystemExit(f"{side}: the way is fresh or served")
    out = subprocess.run([sys.executable, "-c", SESSION, str(Path(checkout).resolve()), way,
                          "1" if views else "0", base, comp, json.dumps(steps), "1" if both else "0", str(pause)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side}: exit {out.returncode}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base")
    parser.add_argument("comp")
    parser.add_argument("--a", default=".:fresh", help="CHECKOUT:WAY before (default .:fresh)")
    parser.add_argument("--b", default=".:served", help="CHECKOUT:WAY after (default .:served)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, nargs="*", default=[],
                        help="comparison steps to visit, in order")
    parser.add_argument("--no-views", action="store_true", help="do not prepare the tables' views")
    parser.add_argument("--both", action="store_true",
                        help="cut the base side too, to its step at the same position (the "
                             "picker's j j Enter); default: the base side on every step")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds between step changes (the user reading the screen)")
    ns = parser.parse_args()
    views = not ns.no_views
    samples: dict[str, list[float]] = {ns.a: [], ns.b: []}
    for r in range(ns.rounds):
        for side in ((ns.a, ns.b) if r % 2 == 0 else (ns.b, ns.a)):
            samples[side] += session(side, views, ns.base, ns.comp, ns.steps, ns.both, ns.pause)
    print(f"S on {Path(ns.comp).name}: {ns.rounds} rounds alternating, views {'on' if views else 'off'}, "
          f"base {'on the same position' if ns.both else 'every step'}, pause {ns.pause} s")
    for name, side in (("A", ns.a), ("B", ns.b)):
        got = samples[side]
        print(f"  {name} {side}: median {statistics.median(got):.3f} s  ({' '.join(f'{s:.2f}' for s in got)})")
    print(f"  B / A: {statistics.median(samples[ns.b]) / statistics.median(samples[ns.a]):.3f}")


if __name__ == "__main__":
    main()
