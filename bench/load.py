#!/usr/bin/env python3
"""Time loading profiles: median of N runs, MB/s against the file size, peak RSS.

    .venv/bin/python bench/load.py [PATH ...] [--runs 5]

Without paths it loads the real GPU pair from ../shared/data/gpu-real. Each run happens in a fresh
process with the profile cache off (so peak RSS belongs to one load, taken before anything else
runs), and the raw ``orjson.loads`` time of the same decompressed bytes is measured afterwards, with
the garbage collector paused as the loader does, as the floor we compare against.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [
    ROOT.parent / "shared" / "data" / "gpu-real" / "trace_diff_control.pt.trace.json.gz",
    ROOT.parent / "shared" / "data" / "gpu-real" / "trace_diff_test.pt.trace.json.gz",
]

_CHILD = r"""
import gzip, json, resource, sys, time
from pathlib import Path
import orjson
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions
path = sys.argv[1]
p = Path(path)
import gc
t0 = time.perf_counter(); prof = load_profile(path, LoadOptions(force=True, use_cache=False)); t_load = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
raw = gzip.open(p, "rb").read() if p.name.endswith(".gz") else (p.read_bytes() if p.is_file() else b"")
gc.disable()  # as the loader does
t0 = time.perf_counter(); orjson.loads(raw) if raw else None; t_parse = time.perf_counter() - t0
print(json.dumps({"load": t_load, "parse": t_parse, "rss_mb": rss,
                  "ops": len(prof.ops), "kernels": len(prof.kernels)}))
"""


def _size(path: Path) -> int:
    """Uncompressed bytes of a trace (what is actually parsed)."""
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return len(fh.read())
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench(path: Path, runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], check=True,
                             capture_output=True, text=True)
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    mb = _size(path) / 1e6
    load = statistics.median(s["load"] for s in samples)
    parse = statistics.median(s["parse"] for s in samples)
    return {"MB": mb, "load_s": load, "orjson_s": parse, "MB_per_s": mb / load,
            "load_over_parse": load / parse if parse else float("nan"),
            "peak_rss_mb": max(s["rss_mb"] for s in samples),
            "ops": samples[0]["ops"], "kernels": samples[0]["kernels"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    paths = args.paths or DEFAULT
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"missing input: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print(f"{'input':<44} {'MB':>7} {'load s':>8} {'orjson s':>9} {'MB/s':>7} "
          f"{'load/parse':>10} {'peak RSS MB':>11}")
    for p in paths:
        r = bench(p, args.runs)
        print(f"{p.name[:44]:<44} {r['MB']:7.1f} {r['load_s']:8.3f} {r['orjson_s']:9.3f} "
              f"{r['MB_per_s']:7.1f} {r['load_over_parse']:10.2f} {r['peak_rss_mb']:11.0f}")
    print(f"(median of {args.runs} runs, each in a fresh process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
