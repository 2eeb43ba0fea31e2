#!/usr/bin/env python3
"""Time every key of the app on a real pair (the issue's budget: each key ≤ 100 ms).

    .venv/bin/python bench/tui_redraw.py                           # bench/data/gpu-real, 120x36
    .venv/bin/python bench/tui_redraw.py --pair bench/data/gpu-x8 --runs 3 --size 200x50
    .venv/bin/python bench/tui_redraw.py --base A --comp B --json out.json
    .venv/bin/python bench/tui_redraw.py --base L --comp L --timeline  # the Timeline's keys (T)

The comparison runs once, in this process (``perfcmp_core.pipeline.comparison_events``); the
app then replays its events, exactly as the tests do, and a Pilot presses the keys of a working
session on every screen: switching screens, ``d``, ``s`` (narrowed by typing), the filter letter
by letter, ``n``, ``u``, ``l`` across the columns, ``-`` / ``+``, ``<`` / ``>``, ``v``, Enter on a
tree node and on a statistic row (the drill), ``d`` inside the drill, ``f`` (the full row) and
``q`` back. One key's time runs from the press until the app is idle again (its deferred work,
such as a layout refresh, done) and every line of
the screen has been rendered (``Compositor.render_full_update``: more than a real redraw, which
renders only what changed). It is counted as the CPU time the process spent on it
(``time.process_time``, all threads): on a shared host wall time mostly measures the other
processes, and the Pilot's own wait for idleness sleeps in steps. The wall time is printed
beside it. ``(no key)`` is an unbound key: what the Pilot itself costs. Printed per key: median
and worst CPU time of ``--runs`` sessions, and the median wall time; the slowest key last. A key
that a screen does not offer (no Diff column, no tree) still costs its warning and is timed like
any other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from perfcmp_core.events import Event, TableReady
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_tui.app import PerfCmpApp

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "bench" / "data" / "gpu-real"
NAMES = ("trace_diff_control.pt.trace.json", "trace_diff_test.pt.trace.json")

#: (label, keys pressed one after the other, each timed). Screen keys come first in each group.
SESSION: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("(no key)", ("f20", "f20", "f20")),
    ("Overall", ("1", "enter", "enter", "j", "u", "u")),
    ("Operators", ("2", "d", "d", "s", *"calls", "enter", "slash", *"aten", "enter", "n", "n",
                   "slash", *["backspace"] * 4, "enter", "u", "u", "d", "enter", "d", "d", "f",
                   "escape", "q", "v", "d", "j", "enter", "escape", "v", "l", "l", "l", "l",
                   "minus", "plus", "greater_than_sign", "less_than_sign", "y", "Y")),
    ("Modules", ("3", "enter", "j", "enter", "G", "enter", "g", "v", "d", "t", "t", "v", "v",
                 "slash", *"backward", "enter", "n", "slash", *["backspace"] * 8, "enter")),
    ("Comm", ("4", "enter", "l", "l", "l", "l", "l", "l", "h", "h")),
    ("Memory", ("5", "d", "v", "d")),
    ("Kernels", ("6", "d")),
    ("API", ("7", "d", "d", "u", "slash", *"mm|conv", "enter", "slash", *["backspace"] * 7,
             "enter")),
    ("Advisor", ("8", "j", "d")),
)
#: ``--timeline``: the Timeline's keys instead (issue 26): open it, move the cursor, zoom in four
#: times, pan, zoom out, switch the scale twice, anchor at the backward pass, then at the first
#: top-level module, back to the backward pass (A), fit, close; then from the Modules tree's first
#: row (T marks that module's span), the cursor, close.
TIMELINE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("(no key)", ("f20", "f20", "f20")),
    ("Timeline", ("T", "right", "right", "right", "plus", "plus", "plus", "plus", "l", "l", "h",
                  "left", "minus", "o", "o", "a", "a", "A", "0", "q")),
    ("Module row", ("3", "T", "right", "q")),
)


def events_of(base: str, comp: str) -> tuple[Event, ...]:
    load = LoadOptions(use_cache=False)
    request = RunRequest.read(base, comp, load, load, CompareOptions())
    return tuple(comparison_events(request))


def replay(stream: tuple[Event, ...]):  # noqa: ANN201 - the app's source protocol
    def source(should_stop) -> Iterator[Event]:  # noqa: ANN001
        for event in stream:
            if should_stop():
                return
            yield event
    return source


async def session(base: str, comp: str, stream: tuple[Event, ...], size: tuple[int, int],
                  times: dict[str, list[tuple[float, float]]],
                  keys: tuple[tuple[str, tuple[str, ...]], ...] = SESSION) -> None:
    app = PerfCmpApp(base, comp, replay(stream), timings=False)
    async with app.run_test(size=size) as pilot:
        while not (app.finished or app.failed):
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        for group, pressed in keys:
            seen: dict[str, int] = {}
            for key in pressed:
                seen[key] = seen.get(key, 0) + 1
                label = f"{group}: {key}" + (f" #{seen[key]}" if seen[key] > 1 else "")
                c0, t0 = time.process_time(), time.perf_counter()
                await pilot.press(key)
                await pilot.pause()  # timers the key set (a layout refresh) have run
                app.screen._compositor.render_full_update()  # every line drawn anew
                times.setdefault(label, []).append(((time.process_time() - c0) * 1e3,
                                                    (time.perf_counter() - t0) * 1e3))
        await pilot.press("ctrl+q")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", type=Path, default=PAIR, help="folder holding the two traces")
    ap.add_argument("--base")
    ap.add_argument("--comp")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", default="120x36", help="terminal WIDTHxHEIGHT")
    ap.add_argument("--json", type=Path, help="write the timings (ms per key and run) here")
    ap.add_argument("--timeline", action="store_true", help="time the Timeline's keys (T) instead")
    args = ap.parse_args()
    base = args.base or str(args.pair / NAMES[0])
    comp = args.comp or str(args.pair / NAMES[1])
    w, h = (int(x) for x in args.size.split("x"))
    t0 = time.perf_counter()
    stream = events_of(base, comp)
    rows = {e.table.name: len(e.table.data) for e in stream if isinstance(e, TableReady)}
    print(f"compared in {time.perf_counter() - t0:.1f} s; rows: "
          + ", ".join(f"{k} {v:,}" for k, v in rows.items()), file=sys.stderr)
    times: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        asyncio.run(session(base, comp, stream, (w, h), times, TIMELINE if args.timeline else SESSION))
    load = os.getloadavg()[0]
    print(f"{base} vs {comp}\n{w}x{h}, {args.runs} sessions, load average {load:.1f} "
          "(ms per key: CPU median / worst, wall median)")
    cpu = {label: [c for c, _ in ts] for label, ts in times.items()}
    for label, ts in times.items():
        print(f"  {label:<28} {statistics.median(cpu[label]):7.1f} / {max(cpu[label]):7.1f}"
              f"   {statistics.median(w for _, w in ts):7.1f}")
    worst = max(cpu.items(), key=lambda kv: statistics.median(kv[1]))
    print(f"slowest key (CPU median): {worst[0]} {statistics.median(worst[1]):.1f} ms; "
          f"keys over 100 ms (CPU median): "
          f"{sum(statistics.median(ts) > 100 for ts in cpu.values())} of {len(cpu)}")
    if args.json:
        args.json.write_text(json.dumps({"base": base, "comp": comp, "size": [w, h],
                                         "load": load, "times_ms": times}, indent=1))


if __name__ == "__main__":
    main()
