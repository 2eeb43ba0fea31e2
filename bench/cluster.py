#!/usr/bin/env python3
"""How a cluster comparison scales with the number of ranks (1, 8, 32, 64 per side by default).

    .venv/bin/python bench/cluster.py                       # 1,8,32,64 ranks, 3 runs each
    .venv/bin/python bench/cluster.py --ranks 1,8 --runs 1  # a quick look
    .venv/bin/python bench/cluster.py --write-doc           # also refresh docs/performance.md
    .venv/bin/python bench/cluster.py --scheduler tcp://host:8786   # the same on a Dask cluster

Each side is a folder of N copies of the NPU Text fixture (``fixtures/npu_text/base_ascend_pt`` /
``comp_ascend_pt``, or ``make_fixtures.py --scale S`` with ``--npu-scale S``), one rank folder per
copy with its own ``profiler_info_<rank>.json``; the large files are hard links, so 64 ranks cost
no disk. The command timed is ``perfcmp-tui summary BASE COMP --ranks 0-<N-1> --no-cache``:
every rank of both sides loaded and summarised in the process pool (``--jobs``, default: every
core), the two cluster tables, then the detailed comparison of the rank pair they single out,
which costs the same at every N. Per N it prints the median wall time, the time with a warm
profile cache (the second open), CPU time, the wall and CPU cost of each rank added since the
first N (constant when the cost grows linearly), and peak memory: the largest sum of PSS over the
whole process tree (pool workers included), sampled every 50 ms in a run of its own
(``bench/compare.py`` explains why sampling runs are not timed). Inputs go to
``bench/data/cluster/``, raw results to ``bench/out/cluster-<date>.json``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compare import DATA, DOC, OUT, ROOT, Run, fixture_root, machine_line, measure, ours_command, \
    replace_section

CLUSTERS = DATA / "cluster"
#: Rank-folder files copied (small, rewritten per rank) rather than hard-linked.
_PER_RANK = ("profiler_info_0.json",)


@dataclass
class Point:
    ranks: int
    mb_per_side: float
    runs: list[Run] = field(default_factory=list)
    cached: list[Run] = field(default_factory=list)
    mem: list[Run] = field(default_factory=list)

    def summary(self) -> dict[str, float | None]:
        def median(runs: list[Run]) -> float | None:
            good = [r.wall_s for r in runs if r.ok]
            return statistics.median(good) if good else None

        cold = median(self.runs)
        peaks = [r.peak_mb for r in self.mem if r.ok] + [r.max_rss_mb for r in self.runs if r.ok]
        def cpu(runs: list[Run]) -> float | None:
            good = [r.cpu_s for r in runs if r.ok]
            return statistics.median(good) if good else None

        return {"cold_s": cold, "cached_s": median(self.cached), "peak_mb": max(peaks) if peaks else None,
                "cpu_s": cpu(self.runs), "cached_cpu_s": cpu(self.cached)}


def make_side(src: Path, dst: Path, ranks: int) -> float:
    """``dst`` holds ``ranks`` rank folders copied from the run folder ``src``; returns MB."""
    marker = dst / ".complete"
    if not marker.exists():
        shutil.rmtree(dst, ignore_errors=True)
        for rank in range(ranks):
            run = dst / f"node-{rank // 8}_{30_000 + rank}_ascend_pt"
            for path in sorted(src.rglob("*")):
                target = run / path.relative_to(src)
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                elif path.name in _PER_RANK:
                    info = json.loads(path.read_text())
                    info["rank_id"] = rank
                    target.parent.mkdir(parents=True, exist_ok=True)
                    (target.parent / f"profiler_info_{rank}.json").write_text(json.dumps(info))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.link(path, target)
        marker.touch()
    return sum(p.stat().st_size for p in dst.rglob("*") if p.is_file()) / 1e6


def run_point(n: int, base: Path, comp: Path, args: argparse.Namespace, env: dict[str, str]) -> Point:
    b_dir, c_dir = CLUSTERS / f"x{args.npu_scale}-n{n}" / "base", CLUSTERS / f"x{args.npu_scale}-n{n}" / "comp"
    mb = make_side(base, b_dir, n)
    make_side(comp, c_dir, n)
    point = Point(n, mb)
    work = OUT / "cluster" / f"n{n}"
    # --ranks keeps cluster mode at N = 1 too (a folder of one rank folder is a single profile)
    cmd = [*ours_command(), "summary", str(b_dir), str(c_dir), "--force", "--ranks", f"0-{n - 1}"]
    if args.jobs:
        cmd += ["--jobs", str(args.jobs)]
    if args.scheduler:
        cmd += ["--scheduler", args.scheduler]

    def one(label: str, cache: bool, sample: bool = False) -> Run:
        r = measure(cmd if cache else [*cmd, "--no-cache"], env, work / f"{label}.log", sample)
        print(f"  {n:>4} ranks {label:<10} " + (f"{r.wall_s:7.2f} s  {r.peak_mb:7.0f} MB" if r.ok
                                                 else f"FAILED: {r.error}"), flush=True)
        return r

    for i in range(args.runs):
        point.runs.append(one(f"run-{i}", cache=False))
    for i in range(args.mem_runs):
        point.mem.append(one(f"mem-{i}", cache=False, sample=True))
    if args.cached_runs:
        shutil.rmtree(Path(env["XDG_CACHE_HOME"]), ignore_errors=True)
        if one("prime", cache=True).ok:
            for i in range(args.cached_runs):
                point.cached.append(one(f"cached-{i}", cache=True))
    return point


def table(points: list[Point]) -> str:
    """The docs table. Linearity shows in the cost of each rank added since the smallest point
    (the fixed part — start-up, the detailed comparison of one rank pair — cancels out); CPU time
    of the process tree is the steadier measure on a shared machine, wall time the one users feel."""
    def fmt(v: float | None, spec: str) -> str:
        return format(v, spec) if v is not None else "—"

    def added(p: Point, first: Point, key: str) -> float | None:
        now, then = p.summary()[key], first.summary()[key]
        if p is first or now is None or then is None:
            return None
        return (now - then) / (p.ranks - first.ranks) * 1000

    rows = ["| ranks per side | MB per side | cold s | CPU s | cached s | cached CPU s "
            "| wall ms per added rank | CPU ms per added rank | cached CPU ms per added rank "
            "| peak MB |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        s = p.summary()
        rows.append(f"| {p.ranks} | {p.mb_per_side:.0f} | {fmt(s['cold_s'], '.2f')} | "
                    f"{fmt(s['cpu_s'], '.1f')} | {fmt(s['cached_s'], '.2f')} | "
                    f"{fmt(s['cached_cpu_s'], '.1f')} | "
                    f"{fmt(added(p, points[0], 'cold_s'), '.0f')} | "
                    f"{fmt(added(p, points[0], 'cpu_s'), '.0f')} | "
                    f"{fmt(added(p, points[0], 'cached_cpu_s'), '.0f')} | {fmt(s['peak_mb'], '.0f')} |")
    return "\n".join(rows)


def _counts(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, e.g. 1,8,32,64") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("rank counts must be ≥ 1")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=_counts, default=[1, 8, 32, 64],
                    help="ranks per side to measure (default 1,8,32,64)")
    ap.add_argument("--runs", type=int, default=3, help="timed cold runs per point (default 3)")
    ap.add_argument("--cached-runs", type=int, default=1,
                    help="runs with a warm profile cache per point (default 1; 0 skips)")
    ap.add_argument("--mem-runs", type=int, default=1,
                    help="memory-sampled runs per point, not timed (default 1)")
    ap.add_argument("--npu-scale", type=int, default=1,
                    help="make_fixtures.py --scale of the rank's profile (default 1: the committed "
                         "fixture)")
    ap.add_argument("--jobs", type=int, default=0, help="--jobs of the command (default: its own)")
    ap.add_argument("--scheduler", default="", help="--scheduler of the command (a Dask address)")
    ap.add_argument("--write-doc", action="store_true",
                    help=f"replace the cluster table in {DOC.relative_to(ROOT)}")
    args = ap.parse_args(argv)

    fixtures = ROOT / "fixtures" if args.npu_scale == 1 else fixture_root(args.npu_scale, False)
    base, comp = fixtures / "npu_text" / "base_ascend_pt", fixtures / "npu_text" / "comp_ascend_pt"
    for package in ("core", "tui"):  # as pip would for an installed package (bench/compare.py)
        compileall.compile_dir(ROOT / package, quiet=1)
    env = dict(os.environ, XDG_CACHE_HOME=str(DATA / "xdg-cache-cluster"), PYTHONWARNINGS="ignore")
    t0 = time.perf_counter()
    points = [run_point(n, base, comp, args, env) for n in args.ranks]
    engine = f"Dask {args.scheduler}" if args.scheduler else \
        f"--jobs {args.jobs}" if args.jobs else "a pool of every core"
    note = (f"NPU Text fixture x{args.npu_scale} per rank, {engine}; {args.runs} cold runs per point "
            f"(median), {args.cached_runs} cached; whole benchmark {(time.perf_counter() - t0) / 60:.1f} min")
    print()
    print(machine_line(note))
    print()
    print(table(points))
    OUT.mkdir(parents=True, exist_ok=True)
    dump = OUT / f"cluster-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dump.write_text(json.dumps({"machine": machine_line(note),
                                "points": [{**asdict(p), "summary": p.summary()} for p in points]},
                               indent=2))
    print(f"\nraw results: {dump.relative_to(ROOT)}")
    if args.write_doc:
        text = replace_section(DOC.read_text(encoding="utf-8"), "cluster",
                               machine_line(note) + "\n\n" + table(points))
        DOC.write_text(text, encoding="utf-8")
        print(f"updated {DOC.relative_to(ROOT)}")
    return 0 if all(r.ok for p in points for r in (*p.runs, *p.cached, *p.mem)) else 1


if __name__ == "__main__":
    sys.exit(main())
