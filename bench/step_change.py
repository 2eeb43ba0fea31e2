#!/usr/bin/env python3
"""The app's ``S`` (another step): a new comparison child against the serving child's next run.

    .venv/bin/python bench/step_change.py --rounds 5 \\
        ../shared/data/gpu-real/h200/llama_train_bf16.pt.trace.json.gz \\
        ../shared/data/gpu-real/h200/llama16_train_bf16_12steps.pt.trace.json.gz

What the app does on ``S``, without the screen: the comparison's events read in this process
as the app's worker thread reads them (each table's view prepared, ``--no-views`` leaves that
out), timed from the step chosen to the run's ``Finished``. Two ways, alternating in every
round (this host's load drifts; only medians of alternating runs compare):

* ``fresh``: a new child on the chosen steps (:func:`perfcmp_core.runner.start_comparison`), as
  the app did before its child served step changes: it reads both inputs from the profile cache
  and runs the whole comparison;
* ``served``: the next run of one serving child (``serve=True``, :meth:`ChildRun.again`), which
  holds both profiles since the first run (every step), as the app does now.

Each round visits the comparison side's steps ``--steps`` (default: its first three)
with the base side on every step. The profiles come from the cache: the first
(untimed) run of all steps fills it. Printed per way: the median and every sample, in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Callable

from perfcmp_core.events import Failed, Finished, Loaded, TableReady
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.request import RunRequest
from perfcmp_core.runner import ChildRun, prepare, start_comparison
from perfcmp_core.view import TableView


def read(run: ChildRun, views: bool) -> tuple[float, list[int]]:
    """Read one run to its end as the app's worker does; when it ended (perf_counter) and the
    comparison side's steps as its Loaded event says."""
    steps: list[int] = []
    for event in run.events():
        if isinstance(event, TableReady) and views:
            TableView(event.table).prepare()
        elif isinstance(event, Loaded) and event.side == "comparison":
            steps = [int(s["step"]) for s in event.info.get("steps", ())]
        elif isinstance(event, Failed):
            raise SystemExit(f"the run failed: {event.message}")
        elif isinstance(event, Finished):
            break
    return time.perf_counter(), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base")
    parser.add_argument("comp")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, nargs="*", help="comparison steps to visit, in order")
    parser.add_argument("--no-views", action="store_true", help="do not prepare the tables' views")
    ns = parser.parse_args()
    views = not ns.no_views
    prepare()
    request = RunRequest.read(ns.base, ns.comp, LoadOptions(), LoadOptions(), CompareOptions())

    def on(step: int | None) -> RunRequest:
        return replace(request, comp_opts=replace(request.comp_opts, step=step))

    served = start_comparison(request, serve=True)
    _, all_steps = read(served, views)  # also fills the cache for the fresh runs
    visit = ns.steps or all_steps[:3]
    samples: dict[str, list[float]] = {"fresh": [], "served": []}

    def fresh(step: int | None) -> float:
        t0 = time.perf_counter()
        return read(start_comparison(on(step)), views)[0] - t0

    def again(step: int | None) -> float:
        t0 = time.perf_counter()
        if not served.again(request=on(step)):
            raise SystemExit("the serving child did not take the next run")
        return read(served, views)[0] - t0

    ways: dict[str, Callable[[int | None], float]] = {"fresh": fresh, "served": again}
    try:
        for r in range(ns.rounds):
            order = ("fresh", "served") if r % 2 == 0 else ("served", "fresh")
            for step in visit:
                for way in order:
                    samples[way].append(ways[way](step))
    finally:
        served.close()
    print(f"S on {ns.comp} (steps {visit}, {ns.rounds} rounds, views {'on' if views else 'off'})")
    for way, got in samples.items():
        print(f"  {way:6s} median {statistics.median(got):.3f} s   "
              + " ".join(f"{s:.2f}" for s in got))


if __name__ == "__main__":
    main()
