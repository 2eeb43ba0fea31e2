#!/usr/bin/env python3
"""Make an N times longer GPU trace by repeating a real one in time.

    .venv/bin/python bench/scale_trace.py IN.pt.trace.json[.gz] N OUT.pt.trace.json

Benchmarks need large inputs whose content is realistic (real kernel names, real nesting, real
launch patterns) and whose size is a known multiple of a real trace, so cost growth can be read
off directly. Copy ``k`` (0-based) of every event is shifted so that the copies follow each other
like further training steps of the same run:

* times (``ts``) move by ``k`` × the span of the trace (last end − first start, plus a 1 ms gap);
* integer ids that link events — flow ``id`` and ``args`` ``correlation``, ``External id``,
  ``Python id`` / ``Python parent id``, ``Profiler Event Index`` and ``Ev Idx`` — move by ``k`` ×
  (largest id + 1), so correlation and flow joins stay one-to-one; text flow ids get a ``-k`` suffix;
* ``ProfilerStep#S`` becomes ``ProfilerStep#(S + k × number of steps)``;
* metadata events (``ph == "M"``: process/thread names) are written once.

The output is uncompressed JSON (the reference tool cannot read ``.json.gz``), written one copy at a
time so memory stays at about one parsed copy.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path
from typing import Any, BinaryIO

import orjson

#: ``args`` keys that hold integer ids linking events to each other.
ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Profiler Event Index",
           "Ev Idx")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: Gap between two copies, in the trace's unit (µs).
GAP_US = 1000


def read_trace(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: not a torch.profiler trace (no traceEvents list)")
    return doc


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def plan(events: list[dict[str, Any]]) -> tuple[float, int, int]:
    """(time shift per copy, id shift per copy, step shift per copy) for ``events``."""
    starts = [e["ts"] for e in events if _number(e.get("ts")) and e.get("ph") != "M"]
    ends = [e["ts"] + (e["dur"] if _number(e.get("dur")) else 0)
            for e in events if _number(e.get("ts")) and e.get("ph") != "M"]
    span = (max(ends) - min(starts) + GAP_US) if starts else GAP_US
    ids = [e["id"] for e in events if type(e.get("id")) is int]
    for e in events:
        args = e.get("args")
        if type(args) is dict:
            ids.extend(v for k in ID_ARGS if type(v := args.get(k)) is int)
    id_shift = max(ids, default=0) + 1
    steps = [int(m.group(1)) for e in events
             if type(e.get("name")) is str and (m := _STEP_RE.match(e["name"]))]
    step_shift = (max(steps) - min(steps) + 1) if steps else 0
    return span, id_shift, step_shift


def shifted(event: dict[str, Any], k: int, span: float, id_shift: int, step_shift: int) -> dict[str, Any]:
    """Copy ``k`` of ``event`` (the input is left untouched)."""
    if k == 0:
        return event
    out = dict(event)
    if _number(out.get("ts")):
        out["ts"] = out["ts"] + k * span
    flow_id = out.get("id")
    if type(flow_id) is int:
        out["id"] = flow_id + k * id_shift
    elif type(flow_id) is str:
        out["id"] = f"{flow_id}-{k}"
    name = out.get("name")
    if step_shift and type(name) is str and (m := _STEP_RE.match(name)):
        out["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_shift}"
    args = out.get("args")
    if type(args) is dict and any(type(args.get(key)) is int for key in ID_ARGS):
        args = dict(args)
        for key in ID_ARGS:
            if type(args.get(key)) is int:
                args[key] += k * id_shift
        out["args"] = args
    return out


def write_scaled(doc: dict[str, Any], n: int, fh: BinaryIO) -> int:
    """Write ``doc`` with its events repeated ``n`` times to ``fh``; returns the event count."""
    events = [e for e in doc["traceEvents"] if type(e) is dict]
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    span, id_shift, step_shift = plan(timed)
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    fh.write(orjson.dumps(head)[:-1] + b', "traceEvents": [' if head else b'{"traceEvents": [')
    fh.write(orjson.dumps(meta)[1:-1])
    count = len(meta)
    for k in range(n):
        chunk = orjson.dumps([shifted(e, k, span, id_shift, step_shift) for e in timed])[1:-1]
        if chunk:
            fh.write(b"," if count else b"")
            fh.write(chunk)
            count += len(timed)
    fh.write(b"]}")
    return count


def scale_trace(src: Path, n: int, out: Path) -> int:
    """Write the ``n``× trace of ``src`` to ``out`` (atomically); returns the event count."""
    doc = read_trace(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with tmp.open("wb") as fh:
        count = write_scaled(doc, n, fh)
    tmp.replace(out)
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="a torch.profiler trace (.json or .json.gz)")
    ap.add_argument("n", type=int, help="number of copies (≥ 1)")
    ap.add_argument("out", type=Path, help="output .pt.trace.json")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("n must be ≥ 1")
    count = scale_trace(args.src, args.n, args.out)
    print(f"{args.out}: {count} events, {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
