#!/usr/bin/env python3
"""Side-by-side benchmark: ``perfcmp-tui export`` against ``msprof-analyze compare`` (26.2.0).

    .venv/bin/python bench/compare.py                     # everything (≈ 25 min on 2 idle cores)
    .venv/bin/python bench/compare.py --inputs real --runs 3 --scaling ""   # quick look
    .venv/bin/python bench/compare.py --write-doc         # also refresh docs/performance.md

Both tools run on the same inputs, one after the other, alternating which goes first in each
round so that load from other processes on a busy host hits both alike. Per input it prints the
median wall time of each tool, the ratio (reference / ours), CPU time and peak memory. Inputs
(all generated under ``bench/data/``, which git ignores):

* ``real``     — the real GPU pair from ../shared/data/gpu-real (gunzipped: the reference reads
  only uncompressed traces);
* ``scaled``   — that pair repeated ``--scale`` times in time by ``bench/scale_trace.py``;
* ``npu_text`` / ``npu_db`` — the fixture generator's training pair at ``--npu-scale``;
* ``npu_text_big`` / ``npu_db_big`` — the production-scale NPU pair of
  ``fixtures/make_fixtures.py --big-run`` (default 32 layers × 92 steps: 0.9 GB Text export and
  ≈ 120 MB Db per side), written once in bounded memory.

``--scaling 1,2,4,8`` adds time and memory of both tools at those multiples of the real pair
(1 = the real files, N = ``scale_trace.py`` N×) to show how cost grows; ``--npu-scaling 1,4,16,64``
does the same for the NPU Text and Db pairs of ``make_fixtures.py --scale N``.

The reference runs under ``--peer-timeout`` (its process tree is killed there): a run past the
limit is reported as "> limit", never as a time, and is not tried again on that input.

Ours runs with ``--no-cache`` (every run parses its inputs, a fair comparison); a second row,
"ours, cached", reopens the same pair with a warm profile cache, which is what a user sees the
second time. Timed runs are not watched (sampling /proc costs CPU the tools compete for: +10 %
on our real-pair time); peak memory comes from ``--mem-runs`` extra runs per tool: the peak over
time of the summed PSS of the whole process tree (loader/generator workers included), sampled
every 50 ms, and never less than the largest single process's maximum RSS reported by the
kernel. The reference is taken from /tmp/peer when present, else installed into
``bench/data/peer-venv``.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perfcmp_core.processes import proc_stats
from scale_trace import scale_trace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
OUT = ROOT / "bench" / "out"
SHARED = ROOT.parent / "shared" / "data" / "gpu-real"
REAL = ("trace_diff_control.pt.trace.json", "trace_diff_test.pt.trace.json")  # base, comparison
PEER_VERSION = "26.2.0"
INPUTS = ("real", "scaled", "npu_text", "npu_db", "npu_text_big", "npu_db_big")
#: make_fixtures.py --big-run shape: 0.9 GB Text export and ≈ 120 MB Db per side (issue 14).
BIG_SHAPE = (32, 92)
PEER_PREINSTALLED = Path("/tmp/peer/bin/msprof-analyze")
DOC = ROOT / "docs" / "performance.md"
SAMPLE_S = 0.05
POLL_S = 0.25
#: Time limit of one reference run (its 0.9 GB Text run took 605 s on the issue's host).
PEER_TIMEOUT_S = 1800.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# ---------------------------------------------------------------------------------------------
# Measuring one run
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system of the whole tree
    peak_mb: float  # summed PSS of the tree (sampled), at least the largest process's max RSS
    max_rss_mb: float  # largest single process (kernel's ru_maxrss)
    ok: bool
    error: str = ""
    timed_out: bool = False  # killed at the time limit (``ok`` is False)


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for pid, _state, ppid, _pgrp in proc_stats():
        kids.setdefault(ppid, []).append(pid)
    return kids


def _tree(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def rollup_kb(pid: int) -> tuple[int, int] | None:
    """(PSS, private) of a process in KB from ``/proc/PID/smaps_rollup`` — on old kernels without
    it, the RSS from ``statm`` for both; None once the process has gone."""
    pss = private = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                key, _, rest = line.partition(b":")
                if key == b"Pss":
                    pss = int(rest.split()[0])
                elif key in (b"Private_Clean", b"Private_Dirty"):
                    private += int(rest.split()[0])
        return pss, private
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            rss = int(fh.read().split()[1]) * _PAGE // 1024
        return rss, rss
    except (OSError, ValueError, IndexError):
        return None


def _pss_kb(pid: int) -> int:
    return (rollup_kb(pid) or (0, 0))[0]


def measure(cmd: list[str], env: dict[str, str], log: Path, sample: bool = False,
            timeout: float | None = None) -> Run:
    """Run ``cmd`` to completion; with ``sample``, also sample the memory of its process tree.

    Sampling reads ``/proc`` every :data:`SAMPLE_S` and costs CPU (``smaps_rollup`` walks the
    page tables of a large process), which a tool that keeps both cores busy feels more than a
    mostly single-core one; so timed runs do not sample, and memory is taken from runs of its
    own. Past ``timeout`` seconds the command's whole process group is killed and the run counts
    as timed out (an unsampled run then polls its exit every :data:`POLL_S`, which costs nothing
    measurable).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                start_new_session=True)
        peak_kb = 0
        timed_out = False
        while sample or timeout is not None:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - t0 > timeout:
                timed_out = True
                _kill_group(proc.pid)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            if sample:
                peak_kb = max(peak_kb, sum(_pss_kb(p) for p in _tree(proc.pid)))
            time.sleep(SAMPLE_S if sample else POLL_S)
        else:
            pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    _kill_group(proc.pid)  # workers a finished command left behind
    proc.returncode = os.waitstatus_to_exitcode(status)
    max_rss_mb = usage.ru_maxrss / 1024
    error = ""
    if timed_out:
        error = f"killed after {timeout:.0f} s (time limit)"
    elif proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()
        error = tail[-1] if tail else f"exit {proc.returncode}"
    return Run(wall, usage.ru_utime + usage.ru_stime, max(peak_kb / 1024, max_rss_mb), max_rss_mb,
               proc.returncode == 0 and not timed_out, error, timed_out)


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (the command and every process it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


def peer_command() -> Path:
    """msprof-analyze 26.2.0: the preinstalled one, else a venv under bench/data (made once)."""
    if PEER_PREINSTALLED.exists():
        return PEER_PREINSTALLED
    venv = DATA / "peer-venv"
    exe = venv / "bin" / "msprof-analyze"
    if not exe.exists():
        print(f"installing msprof-analyze=={PEER_VERSION} into {venv} …", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        f"msprof-analyze=={PEER_VERSION}", "openpyxl"], check=True)
    return exe


def compile_checkout() -> None:
    """Compile this checkout's bytecode, as pip compiles an installed package's (the
    reference's too): an editable install is compiled on first import only, and not at all under
    ``PYTHONDONTWRITEBYTECODE``, so every run would recompile what was edited since."""
    for package in ("core", "tui"):
        compileall.compile_dir(ROOT / package, quiet=1)


def ours_command() -> list[str]:
    script = Path(sys.executable).parent / "perfcmp-tui"
    return [str(script)] if script.exists() else [sys.executable, "-m", "perfcmp_tui.cli"]


@dataclass
class Pair:
    name: str
    base: Path
    comp: Path
    runs: int
    events_factor: int | None = None  # multiple of the real pair (for the scaling report)


def _size_mb(p: Path) -> float:
    if p.is_file():
        return p.stat().st_size / 1e6
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def real_pair() -> tuple[Path, Path]:
    out = DATA / "gpu-real"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in REAL:
        dst = out / name
        if not dst.exists():
            src = SHARED / (name + ".gz")
            if not src.exists():
                raise SystemExit(f"missing real trace {src}")
            tmp = dst.with_name(dst.name + ".part")
            with gzip.open(src, "rb") as fin, tmp.open("wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            tmp.replace(dst)
        paths.append(dst)
    return paths[0], paths[1]


def scaled_pair(n: int) -> tuple[Path, Path]:
    if n == 1:
        return real_pair()
    base, comp = real_pair()
    out = DATA / f"gpu-x{n}"
    paths = []
    for src in (base, comp):
        dst = out / src.name
        if not dst.exists():
            print(f"making {dst.relative_to(ROOT)} ({n}× {src.name}) …", flush=True)
            scale_trace(src, n, dst)
        paths.append(dst)
    return paths[0], paths[1]


#: Input folders regenerated by this run (``--regen`` rewrites each once).
_MADE: set[Path] = set()


def _needs_making(out: Path, regen: bool) -> bool:
    missing = not (out / "npu_db" / "comp_ascend_pt").exists()
    make = missing or (regen and out not in _MADE)
    _MADE.add(out)
    return make


def big_root(shape: tuple[int, int], regen: bool) -> Path:
    """The production-scale NPU pair (``make_fixtures.py --big-run``), generated once."""
    out = DATA / f"bigrun-{shape[0]}x{shape[1]}"
    if _needs_making(out, regen):
        print(f"generating the {shape[0]}x{shape[1]} NPU pair into {out.relative_to(ROOT)} "
              "(≈ 10 min) …", flush=True)
        subprocess.run([sys.executable, str(ROOT / "fixtures" / "make_fixtures.py"), "--big-run",
                        f"{shape[0]}x{shape[1]}", "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def fixture_root(scale: int, regen: bool) -> Path:
    out = DATA / f"fixtures-x{scale}"
    if _needs_making(out, regen):
        print(f"generating fixtures --scale {scale} into {out.relative_to(ROOT)} …", flush=True)
        subprocess.run([sys.executable, str(ROOT / "fixtures" / "make_fixtures.py"),
                        "--scale", str(scale), "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


# ---------------------------------------------------------------------------------------------
# Running a pair
# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    base: str
    comp: str
    size_mb: float  # both inputs together
    ours: list[Run] = field(default_factory=list)
    peer: list[Run] = field(default_factory=list)
    cached: list[Run] = field(default_factory=list)
    #: Memory-sampled runs (not timed: sampling slows the tool it watches).
    ours_mem: list[Run] = field(default_factory=list)
    peer_mem: list[Run] = field(default_factory=list)

    @staticmethod
    def _median(runs: list[Run]) -> float | None:
        good = [r.wall_s for r in runs if r.ok]
        return statistics.median(good) if good else None

    def peer_limit(self) -> float | None:
        """The time limit a reference run hit on this input (None: every run finished)."""
        hit = [r.wall_s for r in (*self.peer, *self.peer_mem) if r.timed_out]
        return min(hit) if hit else None

    def summary(self) -> dict[str, float | None]:
        ours, peer, cached = self._median(self.ours), self._median(self.peer), self._median(self.cached)

        def peak(runs: list[Run], sampled: list[Run] = ()) -> float | None:  # type: ignore[assignment]
            good = [r.peak_mb for r in sampled if r.ok] + [r.max_rss_mb for r in runs if r.ok]
            return max(good) if good else None

        def cpu(runs: list[Run]) -> float | None:
            good = [r.cpu_s for r in runs if r.ok]
            return statistics.median(good) if good else None

        return {
            "ours_s": ours, "peer_s": peer, "cached_s": cached,
            "ratio": peer / ours if ours and peer else None,
            "ratio_cached": peer / cached if cached and peer else None,
            "ours_cpu_s": cpu(self.ours), "peer_cpu_s": cpu(self.peer),
            "ours_peak_mb": peak(self.ours, self.ours_mem),
            "peer_peak_mb": peak(self.peer, self.peer_mem),
            "cached_peak_mb": peak(self.cached),
            "peer_limit_s": self.peer_limit(),
            "ratio_at_least": self.peer_limit() / ours if ours and self.peer_limit() else None,
        }


def run_pair(pair: Pair, env: dict[str, str], peer: Path | None, cached_runs: int,
             mem_runs: int, peer_timeout: float | None = None) -> Result:
    res = Result(pair.name, str(pair.base.relative_to(ROOT)), str(pair.comp.relative_to(ROOT)),
                 _size_mb(pair.base) + _size_mb(pair.comp))
    work = OUT / pair.name
    ours = ours_command()

    def run_ours(label: str, cache: bool, sample: bool = False) -> Run:
        out = work / "ours"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [*ours, "export", str(pair.base), str(pair.comp), "-o", str(out), "--force"]
        r = measure(cmd if cache else [*cmd, "--no-cache"], env, work / f"ours-{label}.log",
                    sample)
        if r.ok and not any(out.glob("*.xlsx")):
            r.ok, r.error = False, "no workbook written"
        return r

    def run_peer(label: str, sample: bool = False) -> Run:
        assert peer is not None
        out = work / "peer"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        r = measure([str(peer), "compare", "-d", str(pair.comp), "-bp", str(pair.base),
                     "-o", str(out), "--force"], env, work / f"peer-{label}.log", sample, peer_timeout)
        if r.ok and not any(out.glob("*.xlsx")):
            r.ok, r.error = False, "no workbook written"
        return r

    for i in range(pair.runs):
        order = ("ours", "peer") if i % 2 == 0 else ("peer", "ours")
        for who in order:
            if who == "peer" and (peer is None or res.peer_limit() is not None):
                continue  # no reference, or it already ran out of time on this input
            r = run_ours(str(i), cache=False) if who == "ours" else run_peer(str(i))
            (res.ours if who == "ours" else res.peer).append(r)
            print(f"  {pair.name:<10} run {i + 1}/{pair.runs} {who:<5} "
                  + (f"{r.wall_s:7.2f} s" if r.ok else f"FAILED: {r.error}"), flush=True)
    for i in range(mem_runs):
        for who in ("ours", "peer"):
            if who == "peer" and (peer is None or res.peer_limit() is not None):
                continue
            r = run_ours(f"mem-{i}", cache=False, sample=True) if who == "ours" else \
                run_peer(f"mem-{i}", sample=True)
            (res.ours_mem if who == "ours" else res.peer_mem).append(r)
            print(f"  {pair.name:<10} memory run {i + 1}/{mem_runs} {who:<5} "
                  + (f"{r.peak_mb:7.0f} MB" if r.ok else f"FAILED: {r.error}"), flush=True)
    if cached_runs:
        shutil.rmtree(Path(env["XDG_CACHE_HOME"]), ignore_errors=True)
        prime = run_ours("prime", cache=True)  # parses and stores the profiles
        for i in range(cached_runs if prime.ok else 0):
            r = run_ours(f"cached-{i}", cache=True)
            res.cached.append(r)
            print(f"  {pair.name:<10} cached run {i + 1}/{cached_runs} "
                  + (f"{r.wall_s:7.2f} s" if r.ok else f"FAILED: {r.error}"), flush=True)
    return res


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------


def _fmt(v: float | None, spec: str) -> str:
    return format(v, spec) if v is not None else "—"


def compare_table(results: list[Result]) -> str:
    lines = [
        "| input | size (both) | ours s | reference s | ratio | ours cached s | ours CPU s "
        "| ref CPU s | ours peak MB | ref peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r.summary()
        lines.append(
            f"| {r.name} | {r.size_mb:.0f} MB | {_fmt(s['ours_s'], '.2f')} | {_peer_time(s)} "
            f"| {_ratio(s)} | {_fmt(s['cached_s'], '.2f')} "
            f"| {_fmt(s['ours_cpu_s'], '.2f')} | {_fmt(s['peer_cpu_s'], '.2f')} "
            f"| {_fmt(s['ours_peak_mb'], '.0f')} | {_fmt(s['peer_peak_mb'], '.0f')} |")
    return "\n".join(lines)


def _peer_time(s: dict[str, float | None]) -> str:
    """The reference's median time, or "> N" when it ran out of time (never a made-up time)."""
    if s["peer_s"] is None and s["peer_limit_s"] is not None:
        return f"> {s['peer_limit_s']:.0f}"
    return _fmt(s["peer_s"], ".2f")


def _ratio(s: dict[str, float | None]) -> str:
    if s["ratio"] is None and s["ratio_at_least"] is not None:
        return f"> {s['ratio_at_least']:.1f}×"
    return f"{_fmt(s['ratio'], '.1f')}×"


def scaling_table(rows: list[tuple[int, Result]]) -> str:
    lines = [
        "| input size | MB (both) | ours s | reference s | ratio | ours peak MB | ref peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for factor, r in rows:
        s = r.summary()
        lines.append(
            f"| {factor}× | {r.size_mb:.0f} | {_fmt(s['ours_s'], '.2f')} | {_peer_time(s)} "
            f"| {_ratio(s)} | {_fmt(s['ours_peak_mb'], '.0f')} "
            f"| {_fmt(s['peer_peak_mb'], '.0f')} |")
    return "\n".join(lines)


def npu_scaling_table(rows: list[tuple[str, int, Result]]) -> str:
    """Both NPU exports at each ``make_fixtures.py --scale``: time and peak memory of both tools."""
    lines = [
        "| export | scale | MB (both) | ours s | reference s | ratio | ours peak MB | ref peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, factor, r in rows:
        s = r.summary()
        lines.append(
            f"| {kind} | {factor}× | {r.size_mb:.0f} | {_fmt(s['ours_s'], '.2f')} | {_peer_time(s)} "
            f"| {_ratio(s)} | {_fmt(s['ours_peak_mb'], '.0f')} | {_fmt(s['peer_peak_mb'], '.0f')} |")
    return "\n".join(lines)


def machine_line(runs_note: str) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {platform.machine()} "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
            f"{load[0]:.1f} at the end; {runs_note}.")


def replace_section(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{DOC}: markers {begin} / {end} not found")
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + body + "\n" + end + rest.split(end, 1)[1]


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def _shape(text: str) -> tuple[int, int]:
    layers, _, steps = text.lower().partition("x")
    if not (layers.isdigit() and steps.isdigit() and int(layers) > 0 and int(steps) > 0):
        raise argparse.ArgumentTypeError(f"expected LAYERSxSTEPS such as 32x92, not {text!r}")
    return int(layers), int(steps)


def _factors(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, e.g. 1,2,4,8") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("factors must be ≥ 1")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", default=",".join(INPUTS),
                    help=f"comma-separated subset of {','.join(INPUTS)} (default: all)")
    ap.add_argument("--runs", type=int, default=5, help="runs per tool on the real pair (default 5)")
    ap.add_argument("--runs-scaled", type=int, default=3,
                    help="runs per tool on the scaled GPU pair (default 3)")
    ap.add_argument("--runs-npu", type=int, default=2,
                    help="runs per tool on each NPU pair (default 2)")
    ap.add_argument("--scale", type=int, default=8, help="size of the scaled GPU pair (default 8)")
    ap.add_argument("--npu-scale", type=int, default=64,
                    help="fixtures/make_fixtures.py --scale for the NPU pairs (default 64)")
    ap.add_argument("--regen", action="store_true", help="regenerate the NPU fixtures")
    ap.add_argument("--big-shape", type=_shape, default=BIG_SHAPE,
                    help="make_fixtures.py --big-run LAYERSxSTEPS of the production-scale NPU pairs "
                         "(default {}x{})".format(*BIG_SHAPE))
    ap.add_argument("--runs-big", type=int, default=2,
                    help="runs per tool on each production-scale NPU pair (default 2)")
    ap.add_argument("--peer-timeout", type=float, default=PEER_TIMEOUT_S,
                    help=f"seconds before a reference run is killed (default {PEER_TIMEOUT_S:.0f}; "
                         "reported as '> limit')")
    ap.add_argument("--npu-scaling", type=_factors, default=[1, 4, 16, 64],
                    help="make_fixtures.py --scale factors for the NPU scaling report ('' to skip)")
    ap.add_argument("--scaling", type=_factors, default=[1, 2, 4, 8],
                    help="multiples of the real pair for the scaling report ('' to skip)")
    ap.add_argument("--scaling-runs", type=int, default=1,
                    help="runs per tool per scaling point not measured above (default 1)")
    ap.add_argument("--cached-runs", type=int, default=3,
                    help="runs of ours with a warm profile cache per input (default 3; 0 skips)")
    ap.add_argument("--mem-runs", type=int, default=1,
                    help="memory-sampled runs per tool per input, not timed (default 1; 0: peak "
                         "memory is the largest single process's max RSS)")
    ap.add_argument("--no-peer", action="store_true", help="only time ours")
    ap.add_argument("--write-doc", action="store_true",
                    help=f"replace the figures in {DOC.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    chosen = [x.strip() for x in args.inputs.split(",") if x.strip()]
    unknown = set(chosen) - set(INPUTS)
    if unknown:
        ap.error(f"unknown --inputs: {', '.join(sorted(unknown))}")

    peer = None if args.no_peer else peer_command()
    compile_checkout()
    env = dict(os.environ, XDG_CACHE_HOME=str(DATA / "xdg-cache"), PYTHONWARNINGS="ignore")

    pairs: list[Pair] = []
    if "real" in chosen:
        pairs.append(Pair("real", *real_pair(), args.runs, 1))
    if "scaled" in chosen:
        pairs.append(Pair(f"gpu {args.scale}×", *scaled_pair(args.scale), args.runs_scaled,
                          args.scale))
    for kind in ("npu_text", "npu_db"):
        if kind in chosen:
            root = fixture_root(args.npu_scale, args.regen)
            pairs.append(Pair(f"{kind} x{args.npu_scale}", root / kind / "base_ascend_pt",
                              root / kind / "comp_ascend_pt", args.runs_npu))
    for kind in ("npu_text", "npu_db"):
        if f"{kind}_big" in chosen:
            root = big_root(args.big_shape, args.regen)
            pairs.append(Pair(f"{kind} {'x'.join(map(str, args.big_shape))}", root / kind / "base_ascend_pt",
                              root / kind / "comp_ascend_pt", args.runs_big))

    t_start = time.perf_counter()
    results: list[Result] = []
    for pair in pairs:
        print(f"{pair.name}: {pair.base.relative_to(ROOT)} vs {pair.comp.relative_to(ROOT)}",
              flush=True)
        results.append(run_pair(pair, env, peer, args.cached_runs, args.mem_runs, args.peer_timeout))

    scaling: list[tuple[int, Result]] = []
    for factor in args.scaling:
        done = next((r for p, r in zip(pairs, results) if p.events_factor == factor), None)
        if done is None:
            pair = Pair(f"gpu {factor}×", *scaled_pair(factor), args.scaling_runs, factor)
            print(f"scaling {factor}×: {pair.base.relative_to(ROOT)}", flush=True)
            done = run_pair(pair, env, peer, 0, args.mem_runs, args.peer_timeout)
        scaling.append((factor, done))

    npu_scaling: list[tuple[str, int, Result]] = []
    for factor in args.npu_scaling:
        root = fixture_root(factor, args.regen)
        for kind in ("npu_text", "npu_db"):
            done = next((r for p, r in zip(pairs, results) if p.name == f"{kind} x{factor}"), None)
            if done is None:
                pair = Pair(f"{kind} x{factor}", root / kind / "base_ascend_pt", root / kind / "comp_ascend_pt",
                            args.scaling_runs)
                print(f"NPU scaling {pair.name}", flush=True)
                done = run_pair(pair, env, peer, 0, args.mem_runs, args.peer_timeout)
            npu_scaling.append((kind, factor, done))

    elapsed = time.perf_counter() - t_start
    measured = ", ".join(f"{p.name} {p.runs}" for p in pairs)
    extra = [f for f in args.scaling if not any(p.events_factor == f for p in pairs)]
    if extra:
        measured += f", scaling points {'/'.join(f'{f}×' for f in extra)} {args.scaling_runs}"
    main_names = {p.name for p in pairs}
    extra_npu = [f for f in args.npu_scaling if f"npu_text x{f}" not in main_names]
    if extra_npu:
        measured += f", NPU scaling points {'/'.join(f'x{f}' for f in extra_npu)} {args.scaling_runs}"
    if any(r.peer_limit() is not None for r in [*results, *(r for _, r in scaling),
                                                 *(r for _, _, r in npu_scaling)]):
        measured += f"; reference runs killed at {args.peer_timeout:.0f} s"
    note = (f"runs per tool: {measured}; medians of wall time; whole benchmark "
            f"{elapsed / 60:.1f} min")
    print()
    print(machine_line(note))
    print()
    print(compare_table(results))
    if scaling:
        print()
        print(scaling_table(scaling))
    if npu_scaling:
        print()
        print(npu_scaling_table(npu_scaling))

    OUT.mkdir(parents=True, exist_ok=True)
    dump = OUT / f"compare-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dump.write_text(json.dumps({
        "machine": machine_line(note),
        "results": [{**asdict(r), "summary": r.summary()} for r in results],
        "scaling": [{"factor": f, "name": r.name, "summary": r.summary(), "size_mb": r.size_mb}
                    for f, r in scaling],
        "npu_scaling": [{"kind": k, "factor": f, "name": r.name, "summary": r.summary(),
                         "size_mb": r.size_mb} for k, f, r in npu_scaling],
    }, indent=2))
    print(f"\nraw results: {dump.relative_to(ROOT)}")

    if args.write_doc:
        text = DOC.read_text(encoding="utf-8")
        text = replace_section(text, "compare", machine_line(note) + "\n\n" + compare_table(results))
        if scaling:
            text = replace_section(text, "scaling", scaling_table(scaling))
        if npu_scaling:
            text = replace_section(text, "npu-scaling", npu_scaling_table(npu_scaling))
        DOC.write_text(text, encoding="utf-8")
        print(f"updated {DOC.relative_to(ROOT)}")
    failed = [r for res in results for r in (*res.ours, *res.peer, *res.cached)
              if not r.ok and not r.timed_out]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
