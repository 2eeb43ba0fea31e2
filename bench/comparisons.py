#!/usr/bin/env python3
"""CPU time of the comparisons that dominate a big pair, each on its own, and proof of no change.

    .venv/bin/python bench/comparisons.py BASE COMP [--runs 3] [--save F.pkl] [--check F.pkl]

Loads both profiles once (through the profile cache, so a warm second run loads in seconds),
then times, per run, the module comparison, the operator match, the operator sheets and the
memory sheets (``time.process_time`` of this process: the pipeline runs them in a worker, where
a phase's wall time also holds the other steps' contention). Each run works on fresh copies of
the profiles, so nothing one run derived and cached (op forests, kernel lines) helps the next.
Prints every run and the medians.

``--save`` pickles every table these comparisons made (data, notes, absent reasons) and the
operator pair list; ``--check`` compares them with such a file, exactly (values, dtypes, row
order): run ``--save`` on the old code and ``--check`` on the new one to prove a speed-up
changed nothing.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from typing import Any, Callable

import pandas as pd

from perfcmp_core.compare.equivalence import load_equivalence
from perfcmp_core.compare.memory import compare_memory
from perfcmp_core.compare.modules import compare_modules
from perfcmp_core.compare.operators import compare_operators, match_operators
from perfcmp_core.load import load_profile
from perfcmp_core.options import CompareOptions, LoadOptions


def _timed(base: Any, comp: Any, opts: CompareOptions, equivalence: Any) -> tuple[dict[str, float], dict[str, Any]]:
    seconds: dict[str, float] = {}

    def clock(label: str, run: Callable[[], Any]) -> Any:
        t = time.process_time()
        out = run()
        seconds[label] = time.process_time() - t
        return out

    modules, reason = clock("modules", lambda: compare_modules(base, comp, opts, equivalence))
    match = clock("operator match", lambda: match_operators(base, comp, opts, equivalence))
    _, operators = clock("operator sheets", lambda: compare_operators(base, comp, opts, match))
    memory = clock("memory", lambda: compare_memory(base, comp, opts, match))
    tables = [*(modules.tables() if modules else []), *operators, *memory]
    out: dict[str, Any] = {t.name: (t.data, t.notes, t.absent_reason) for t in tables}
    out["module reason"] = reason
    out["operator pairs"] = (match.pairs, [], "")
    return seconds, out


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    if old.keys() != new.keys():
        return [f"tables differ: {sorted(old.keys() ^ new.keys())}"]
    found = []
    for name, was in old.items():
        now = new[name]
        if name == "module reason":
            if was != now:
                found.append(f"{name}: {was!r} vs {now!r}")
            continue
        try:
            pd.testing.assert_frame_equal(was[0], now[0], check_exact=True)
        except AssertionError as e:
            found.append(f"{name}: {str(e).splitlines()[0]}")
        if was[1:] != now[1:]:
            found.append(f"{name}: notes or absent reason differ")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("comp")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--save", help="pickle the tables to this file")
    ap.add_argument("--check", help="compare the tables with this pickle (from --save)")
    args = ap.parse_args()
    base, comp = load_profile(args.base, LoadOptions()), load_profile(args.comp, LoadOptions())
    opts, equivalence = CompareOptions(), load_equivalence()
    runs: list[dict[str, float]] = []
    tables: dict[str, Any] = {}
    for _ in range(max(1, args.runs)):
        b, c = pickle.loads(pickle.dumps(base)), pickle.loads(pickle.dumps(comp))
        seconds, tables = _timed(b, c, opts, equivalence)
        seconds["total"] = sum(seconds.values())
        runs.append(seconds)
        print("  ".join(f"{k} {v:.2f}" for k, v in seconds.items()), flush=True)
    print("median CPU s: " + "  ".join(f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in runs[0]))
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump(tables, f)
    if args.check:
        with open(args.check, "rb") as f:
            found = _differences(pickle.load(f), tables)
        print("\n".join(found) if found else "tables identical")
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
