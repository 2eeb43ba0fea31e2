#!/usr/bin/env python3
"""What a GPU pair's export cannot go below on this host, beside ours and the reference.

    .venv/bin/python bench/floor.py --runs 5                       # the real A100 pair
    .venv/bin/python bench/floor.py --runs 5 BASE.json COMP.json   # any pair of plain traces

A ratio target ("≥ 15× the reference") is a wall-time target: the reference's time on this host
divided by the ratio. Before chasing it, this says whether any run of ours could meet it. The
*floor* program does only what every run must do before it can compare anything: start Python,
import numpy and pandas and our trace reader, and read both traces into columns with that
reader, each side in a process of its own (the larger side of an unbalanced pair in two, as
:func:`perfcmp_core.pair.split_larger` has a run do it). No analysis, no comparison, no
workbook. Its wall time is a lower bound on ours; the reference's time over it is the largest
ratio this host allows. A second bound keeps the work a run does: the floor's time plus the CPU
time ours spends beyond the floor's, spread evenly over the cores with no core ever waiting,
which no schedule of that work can beat.

Each round runs the reference (``msprof-analyze compare``), ours (``perfcmp-tui export
--no-cache``) and the floor, in an order that rotates by round (the host's load hits all three
alike), and prints each one's median wall and CPU time and the ratios reference / ours and
reference / floor. This checkout's bytecode is compiled first, as pip compiles an installed
package's (the reference's too). The reference reads only uncompressed traces.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from compare import Run, compile_checkout, measure, ours_command, peer_command, real_pair


def read_pair(base: Path, comp: Path) -> None:
    """The floor program: both traces read with the project's reader, one side per process.

    Forked after the imports, as a run forks its load worker; the larger side of an unbalanced
    pair is read in two processes, as a run reads it."""
    importlib.import_module("pandas")  # every run imports it before it forks

    from perfcmp_core.load import detect
    from perfcmp_core.load.gpu_read import read_trace
    from perfcmp_core.options import LoadOptions
    from perfcmp_core.pair import split_larger

    opts = LoadOptions(use_cache=False)
    base_opts, comp_opts = split_larger(detect(str(base)), detect(str(comp)), opts, opts)
    pid = os.fork()
    if pid == 0:  # the child never returns into the caller's code, whatever happens
        code = 1
        try:
            read_trace(comp, comp_opts, [])
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported, then this process ends
            print(exc, file=sys.stderr)  # an InputError names the file
        finally:
            os._exit(code)
    read_trace(base, base_opts, [])
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reading {comp} failed in the forked process")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pair", nargs="*", type=Path, help="BASE COMP traces (default: the real A100 pair)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (each runs all three)")
    ap.add_argument("--reference", type=Path, help="the msprof-analyze executable (default: "
                    "/tmp/peer's, else one installed under bench/data)")
    ap.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)  # the floor itself
    args = ap.parse_args(argv)
    if args.pair and len(args.pair) != 2:
        ap.error("give two traces, BASE and COMP, or none")
    base, comp = args.pair if args.pair else real_pair()
    if args.read_only:
        read_pair(base, comp)
        return 0

    compile_checkout()
    env = dict(os.environ)
    out = Path(tempfile.mkdtemp(prefix="perfcmp-floor-"))
    try:
        tools = {
            "reference": [str(args.reference or peer_command()), "compare", "-d", str(comp), "-bp", str(base),
                          "-o", str(out / "reference"), "--force"],
            "ours": [*ours_command(), "export", str(base), str(comp), "-o", str(out / "ours"),
                     "--no-cache"],
            "floor": [sys.executable, str(Path(__file__).resolve()), "--read-only", str(base),
                      str(comp)],
        }
        runs: dict[str, list[Run]] = {name: [] for name in tools}
        names = list(tools)
        for i in range(args.runs):
            for name in names[i % 3:] + names[:i % 3]:
                shutil.rmtree(out / name, ignore_errors=True)
                (out / name).mkdir()
                run = measure(tools[name], env, out / f"{name}.log")
                if not run.ok:
                    raise SystemExit(f"{name} failed: {run.error}")
                runs[name].append(run)
                print(f"round {i + 1} {name:<9} {run.wall_s:7.2f} s wall {run.cpu_s:7.2f} s CPU",
                      flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)

    wall = {name: statistics.median(r.wall_s for r in rs) for name, rs in runs.items()}
    cpu = {name: statistics.median(r.cpu_s for r in rs) for name, rs in runs.items()}
    print(f"\n{base.name} vs {comp.name}, medians of {args.runs} rounds")
    for name in names:
        print(f"  {name:<9} {wall[name]:7.2f} s wall {cpu[name]:7.2f} s CPU "
              f"(reference / this: {wall['reference'] / wall[name]:5.1f}x)")
    cores = len(os.sched_getaffinity(0))
    spread = wall["floor"] + max(cpu["ours"] - cpu["floor"], 0.0) / cores
    print(f"  ours with all its CPU beyond the floor spread over {cores} cores, without a wait: "
          f"{spread:.2f} s ({wall['reference'] / spread:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
