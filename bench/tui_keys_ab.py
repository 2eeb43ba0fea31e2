#!/usr/bin/env python3
"""A/B of the app's keys: the same keys from two checkouts, compared only where they did the same.

    git worktree add /tmp/before 77bf16f
    .venv/bin/python bench/tui_keys_ab.py --a /tmp/before --b . --rounds 2 \\
        --pair bench/data/gpu-x8/control.pt.trace.json bench/data/gpu-x8/test.pt.trace.json

`bench/tui_redraw.py` times a session of keys on one version. Across versions its session stops
meaning the same thing once a key changes its meaning (Backspace became "back", `/` a search in
place): the keys after it act on another screen. Here each round runs one session per checkout
(alternating which goes first), in a child process that imports that checkout's packages, and
records after every key the state it left (screen, view, cursor row and column, sort key, rows
shown). A key is compared only where both versions left the same state; the rest are counted.
The session is `tui_redraw`'s without its filter edits (`/`, Backspace). Printed: the keys
compared, the sum of their CPU medians per checkout, the keys over 100 ms and those ≥ 10 %
slower by median with every sample (one key's CPU varies by ±30 % between sessions on a shared
host: read the samples, not only the ratio).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab import IMPORT_CHECKOUT  # noqa: E402 - a sibling script

#: The session, as `tui_redraw.SESSION` without `/` and Backspace (their meaning changed).
KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("(no key)", ("f20", "f20", "f20")),
    ("Overall", ("1", "j", "u", "u", "d", "v", "j", "v")),
    ("Operators", ("2", "d", "d", "u", "u", "d", "enter", "d", "d", "f", "escape", "q", "v", "d",
                   "j", "enter", "escape", "v", "l", "l", "l", "l", "minus", "plus",
                   "greater_than_sign", "less_than_sign", "y", "Y")),
    ("Modules", ("3", "enter", "j", "enter", "G", "enter", "g", "v", "d", "t", "t", "v", "v")),
    ("Comm", ("4", "l", "l", "l", "l", "l", "l", "h", "h")),
    ("Memory", ("5", "d", "v", "d")),
    ("Kernels", ("6", "d")),
    ("API", ("7", "d", "d", "u")),
    ("Advisor", ("8", "j", "d")),
)

#: Run in the child: the checkout's packages, then one session whose CPU per key and state after
#: it go to the JSON file named by argv[5].
CHILD = IMPORT_CHECKOUT + """
import asyncio, json, time
base, comp, keys, out = sys.argv[2:6]
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_tui.app import PerfCmpApp

request = RunRequest.read(base, comp, LoadOptions(), LoadOptions(), CompareOptions())
stream = tuple(comparison_events(request))

def source(should_stop):
    return iter(stream)

def state(app):
    pane = app.pane
    frame, view = pane.frame, pane.view
    return [type(app.screen).__name__, pane.spec.id, pane.current, frame.cursor, frame.col,
            *((view.sort_key, len(view.order())) if view is not None else ())]

async def session():
    times, states = {}, {}
    app = PerfCmpApp(base, comp, source, timings=False)
    async with app.run_test(size=(120, 36)) as pilot:
        while not (app.finished or app.failed):
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        for group, pressed in json.loads(keys):
            seen = {}
            for key in pressed:
                seen[key] = seen.get(key, 0) + 1
                label = f"{group}: {key}" + (f" #{seen[key]}" if seen[key] > 1 else "")
                c0 = time.process_time()
                await pilot.press(key)
                await pilot.pause()
                app.screen._compositor.render_full_update()
                times[label] = (time.process_time() - c0) * 1e3
                states[label] = state(app)
        await pilot.press("ctrl+q")
    return times, states

times, states = asyncio.run(session())
json.dump({"times": times, "states": states}, open(out, "w"))
"""


def one_session(checkout: Path, base: str, comp: str, python: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([python, "-c", CHILD, str(checkout.resolve()), base, comp, json.dumps(KEYS),
                        out.name], check=True, stderr=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (after)")
    ap.add_argument("--pair", nargs=2, required=True, metavar=("BASE", "COMP"))
    ap.add_argument("--rounds", type=int, default=2, help="sessions per checkout")
    args = ap.parse_args()
    samples: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
    states: dict[str, dict[str, list]] = {}
    for i in range(args.rounds):
        for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
            got = one_session(getattr(args, side), *args.pair, sys.executable)
            for label, ms in got["times"].items():
                samples[side].setdefault(label, []).append(ms)
            states[side] = got["states"]
    same = [k for k in samples["a"] if k in samples["b"] and states["a"][k] == states["b"][k]]
    med = {side: {k: statistics.median(samples[side][k]) for k in same} for side in ("a", "b")}
    total_a, total_b = sum(med["a"].values()), sum(med["b"].values())
    print(f"{args.pair[0]} vs {args.pair[1]}: {len(same)} keys left the same state "
          f"({len(samples['a']) - len(same)} did not); {args.rounds} sessions each, ms of CPU")
    print(f"  sum of medians A {total_a:,.0f}  B {total_b:,.0f}  (B/A {total_b / total_a:.3f})")
    print("  over 100 ms in B:", ", ".join(f"{k} {med['b'][k]:.0f}" for k in same
                                          if med["b"][k] > 100) or "none")
    for k in sorted(same, key=lambda k: med["b"][k] / med["a"][k]):
        if med["b"][k] >= 1.1 * med["a"][k]:
            print(f"  slower: {k:<28} A {[round(x) for x in samples['a'][k]]} "
                  f"B {[round(x) for x in samples['b'][k]]}")


if __name__ == "__main__":
    main()
