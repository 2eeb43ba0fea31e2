#!/usr/bin/env python3
"""Time a sort / filter redraw of a 100k-row table in the TUI (the issue's ≤ 100 ms budget).

    .venv/bin/python bench/tui_redraw.py [--rows 100000] [--runs 7] [--size 120x40]

A synthetic OperatorCompare-like table (names, shapes, kernel details, base/comparison/diff/ratio)
is shown by a :class:`FrameView` inside a headless app of the given size. One "redraw" is what a
key press costs: the TableView recomputes the visible order (``d``: sort by Diff; ``/``: filter by
text) and the FrameView recomputes its size and renders every visible line. Printed: median
and worst of ``--runs`` for each action, and the one-off cost of opening the filter box (the
lower-cased search text of the table is built then, not on the first keystroke).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
from textual.app import App, ComposeResult

from perfcmp_core.compare.result import Column, Table
from perfcmp_core.view import TableView
from perfcmp_tui.widgets.frame_view import FrameView


def synthetic_table(rows: int, seed: int = 7) -> Table:
    """A detail-sized table: 2k distinct op names, long kernel strings, skewed durations."""
    rng = np.random.default_rng(seed)
    names = np.array([f"aten::op_{i:04d}" for i in range(2000)], dtype=object)
    base = rng.gamma(2.0, 40.0, rows)
    comp = base * rng.normal(1.0, 0.2, rows).clip(0.1)
    data = pd.DataFrame({
        "order": np.arange(1, rows + 1),
        "name": names[rng.integers(0, len(names), rows)],
        "shape": [f"{a},{b};{b},{a}" for a, b in rng.integers(1, 4096, (rows, 2))],
        "kernels": [f"MatMulV3_{i % 97}, AI_CORE [duration: {d:.3f}]" for i, d in enumerate(base)],
        "base_us": base,
        "comp_us": comp,
        "diff": comp - base,
        "ratio": comp / base,
    })
    columns = (
        Column("order", "Order Id", "key", "int"),
        Column("name", "Operator Name", "key", "bold"),
        Column("shape", "Input Shape", "key", "text"),
        Column("kernels", "Kernel Details", "base", "text"),
        Column("base_us", "Device Duration(us)", "base", "float"),
        Column("comp_us", "Device Duration(us)", "comparison", "float"),
        Column("diff", "Diff Duration(us)", "diff", "float"),
        Column("ratio", "Diff Ratio", "ratio", "percent"),
    )
    return Table("Synthetic", columns, data, (3, 4), (5, 5), default_sort="diff")


class Bench(App[None]):
    def __init__(self, view: TableView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield FrameView(id="frame")


def redraw(frame: FrameView) -> None:
    """What a key press costs after the view changed: new order and size, then every line drawn."""
    frame.refresh_data()
    for y in range(frame.size.height):
        frame.render_line(y)


async def measure(rows: int, runs: int, size: tuple[int, int]) -> dict[str, list[float]]:
    view = TableView(synthetic_table(rows))
    app = Bench(view)
    times: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        frame = app.query_one(FrameView)
        frame.set_view(view)
        await pilot.pause()

        t0 = time.perf_counter()
        view.ready_filter()  # what opening the filter box (`/`) costs, once per table
        times["open filter box, once"] = [(time.perf_counter() - t0) * 1e3]
        actions: dict[str, Callable[[], None]] = {
            "sort by Diff (d)": lambda: view.sort_by("diff"),
            "sort by name (s)": lambda: view.sort_by("name"),
            "filter 'op_12' (/)": lambda: view.set_filter("op_12"),
            "filter 'matmulv3_5' (/)": lambda: view.set_filter("matmulv3_5"),
            "clear filter": lambda: view.set_filter(""),
        }
        for label, act in actions.items():
            for _ in range(runs):
                t0 = time.perf_counter()
                act()
                redraw(frame)
                times.setdefault(label, []).append((time.perf_counter() - t0) * 1e3)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", default="120x40", help="terminal WIDTHxHEIGHT")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    times = asyncio.run(measure(args.rows, args.runs, (w, h)))
    print(f"{args.rows:,} rows, {w}x{h}, {args.runs} runs each (ms: median / worst)")
    for label, ts in times.items():
        print(f"  {label:<26} {statistics.median(ts):7.1f} / {max(ts):7.1f}")


if __name__ == "__main__":
    main()
