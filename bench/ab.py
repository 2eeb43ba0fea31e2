#!/usr/bin/env python3
"""A/B: the same headless command from two checkouts of this repository, alternating.

    git worktree add /tmp/before 5c0ebd8
    .venv/bin/python bench/ab.py --a /tmp/before --b . --runs 5 \\
        --pair ../shared/data/gpu-real/trace_diff_control.pt.trace.json.gz \\
               ../shared/data/gpu-real/trace_diff_test.pt.trace.json.gz

What a change costs end to end is only measurable side by side on one host: the rounds alternate
which checkout goes first, so load from other processes hits both alike. Each run is
``perfcmp-tui export BASE COMP -o TMP --no-cache`` (``--command summary`` for the terminal
report only; ``--command info`` loads BASE alone, ``perfcmp-tui info BASE --no-cache``, and adds
its MB per CPU-second: the loading rate of one side) with the packages imported from that checkout's ``core/`` and ``tui/`` (no install
needed: this venv's dependencies serve both). Per pair it prints the median wall and CPU time of
each checkout (CPU: the run's process and every process it started and reaped) and B ÷ A.

``--cached`` times reopening from the profile cache instead: each checkout gets a private cache
folder (a temporary ``XDG_CACHE_HOME``), filled by its untimed first run, and the runs drop
``--no-cache`` (e.g. ``--command info --cached``: reading one entry, two cache formats side by
side). The peak RSS of the run's own process is printed too.

The same checkout in two environments is a comparison too: ``--a . --b . --b-python
/path/to/venv-with-pyarrow/bin/python`` measures what installing pyarrow (pandas then backs
``str`` columns with Arrow) does to a run.

Each checkout first runs once untimed, with bytecode caching on whatever the environment says
(``PYTHONDONTWRITEBYTECODE`` unset for the runs): an installed package has its ``.pyc`` files,
so compiling the project's modules at every run would charge the checkout with more modules
for a cost no user pays (≈ 0.1 s of CPU for the hundred modules of an export), and the first
run's cold page cache would charge whichever checkout goes first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Imports the two packages of the checkout given as argv[1] under their import names, as the
#: editable install maps them (perfcmp_core = core/, perfcmp_tui = tui/).
IMPORT_CHECKOUT = """
import importlib.util, sys
root = sys.argv[1]
for name, folder in (("perfcmp_core", "core"), ("perfcmp_tui", "tui")):
    spec = importlib.util.spec_from_file_location(name, f"{root}/{folder}/__init__.py",
                                                  submodule_search_locations=[f"{root}/{folder}"])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
"""
#: Runs the command line of that checkout.
LAUNCH = IMPORT_CHECKOUT + """
sys.argv = ["perfcmp-tui", *sys.argv[2:]]
from perfcmp_tui.cli import entry
entry()
"""


def run_once(checkout: Path, command: str, base: str, comp: str,
             python: str = sys.executable, cache_home: str | None = None) -> tuple[float, float, float]:
    """Wall and CPU seconds and peak RSS (MB, the run's own process) of one run (``python``: the
    interpreter, and so the environment, it runs in; ``cache_home``: the ``XDG_CACHE_HOME`` of a
    run through the profile cache, None for ``--no-cache``)."""
    with tempfile.TemporaryDirectory() as out:
        paths = [base] if command == "info" else [base, comp]
        args = [python, "-c", LAUNCH, str(checkout), command, *paths]
        if cache_home is None:
            args.append("--no-cache")
        if command == "export":
            args += ["-o", out]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if cache_home is not None:
            env["XDG_CACHE_HOME"] = cache_home
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"{checkout}: exit {proc.returncode}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _size(path: Path) -> int:
    """Bytes of a profile: the file, or every file under the folder."""
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (after)")
    ap.add_argument("--runs", type=int, default=5, help="runs per checkout and pair (default 5)")
    ap.add_argument("--command", choices=("export", "summary", "info"), default="export",
                    help="info: load BASE alone (COMP unused) and print its MB per CPU-second")
    ap.add_argument("--a-python", default=sys.executable,
                    help="interpreter of checkout A's runs (another virtual environment: e.g. one "
                         "with pyarrow installed); default this one")
    ap.add_argument("--b-python", default=sys.executable, help="interpreter of checkout B's runs")
    ap.add_argument("--pair", nargs=2, action="append", required=True, metavar=("BASE", "COMP"))
    ap.add_argument("--cached", action="store_true",
                    help="through the profile cache (a private one per checkout, filled by the "
                         "untimed first run) instead of --no-cache")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfcmp-ab-cache-") as caches:
        homes = {name: f"{caches}/{name}" if ns.cached else None for name in ("A", "B")}
        for base, comp in ns.pair:
            _compare(ns, base, comp, homes)
    return 0


def _compare(ns: argparse.Namespace, base: str, comp: str, homes: dict[str, str | None]) -> None:
    times: dict[str, list[tuple[float, float, float]]] = {"A": [], "B": []}
    python = {"A": ns.a_python, "B": ns.b_python}
    for name, checkout in (("A", ns.a), ("B", ns.b)):  # warm-up: .pyc files, page cache, the cache
        run_once(checkout.resolve(), ns.command, base, comp, python[name], homes[name])
    for r in range(ns.runs):
        order = (("A", ns.a), ("B", ns.b)) if r % 2 == 0 else (("B", ns.b), ("A", ns.a))
        for name, checkout in order:
            times[name].append(run_once(checkout.resolve(), ns.command, base, comp, python[name],
                                        homes[name]))
    how = "from the cache" if ns.cached else "no cache"
    print(f"{Path(base).name} vs {Path(comp).name}: {ns.command}, {how}, {ns.runs} runs each, alternating")
    med = {}
    for name in ("A", "B"):
        walls, cpus, rss = zip(*times[name])
        med[name] = (statistics.median(walls), statistics.median(cpus))
        label = getattr(ns, name.lower()) if python[name] == sys.executable else \
            f"{getattr(ns, name.lower())} ({python[name]})"
        print(f"  {name} {label}: wall {med[name][0]:.3f} s (runs {', '.join(f'{w:.2f}' for w in walls)}), "
              f"CPU {med[name][1]:.3f} s, peak RSS {statistics.median(rss):.0f} MB")
    print(f"  B / A: wall {med['B'][0] / med['A'][0]:.3f}, CPU {med['B'][1] / med['A'][1]:.3f}")
    if ns.command == "info":
        mb = _size(Path(base)) / 1e6
        print(f"  {Path(base).name}: {mb:.0f} MB; MB per CPU-second: A {mb / med['A'][1]:.0f}, "
              f"B {mb / med['B'][1]:.0f}")


if __name__ == "__main__":
    raise SystemExit(main())
