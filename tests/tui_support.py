"""Shared helpers of the TUI tests: fixture pairs, their event streams (computed once), the app.

Pilot and snapshot tests replay the events of the in-process
``perfcmp_core.pipeline.comparison_events`` for each fixture pair: deterministic, and each pair is
compared once per test session instead of once per test.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Awaitable, Callable, Iterator

import numpy as np

from perfcmp_core.compare.result import Table
from perfcmp_core.events import Event, TableReady
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_tui.app import PerfCmpApp
from perfcmp_tui.widgets.frame_view import FrameView

ROOT = Path(__file__).resolve().parents[1]

#: name -> (base, comparison, CompareOptions fields); paths relative to the repository root.
PAIRS: dict[str, tuple[str, str, dict[str, object]]] = {
    "mixed": ("fixtures/gpu/base.pt.trace.json", "fixtures/npu_text/comp_ascend_pt", {}),
    # every comparison but the kernels: a screen with nothing to show
    "mixed_no_kernels": ("fixtures/gpu/base.pt.trace.json", "fixtures/npu_text/comp_ascend_pt",
                         {"enabled": frozenset({"profiling", "operator", "communication", "memory", "api"})}),
    "npu": ("fixtures/npu_text/base_ascend_pt", "fixtures/npu_text/comp_ascend_pt", {}),
    "npu_ops": ("fixtures/npu_text/base_ascend_pt", "fixtures/npu_text/comp_ascend_pt",
                {"disable_module": True}),
    "npu_types": ("fixtures/npu_text/base_ascend_pt", "fixtures/npu_text/comp_ascend_pt",
                  {"use_kernel_type": True}),
    "gpu": ("fixtures/gpu/base.pt.trace.json", "fixtures/gpu/comp.pt.trace.json", {}),
    "ms": ("fixtures/npu_ms/base_ascend_ms", "fixtures/npu_ms/comp_ascend_ms", {}),
    # DiT + VAE inference, the comparison with FA (fixtures/README.md): advisor rules trip.
    "infer": ("fixtures/npu_infer/dit_vae_ascend_pt", "fixtures/npu_infer/dit_vae_fa_ascend_pt", {}),
    # the host-bound pattern pair: every idle cause worked out by hand (tests/test_explain.py)
    "hostbound": ("fixtures/gpu_patterns/step_base.pt.trace.json", "fixtures/gpu_patterns/step_hostbound.pt.trace.json",
                  {}),
}


def aio(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test with asyncio (the test environment has no pytest asyncio plugin)."""
    @functools.wraps(test)
    def run(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))
    return run


def request(pair: str) -> RunRequest:
    """The run request of a fixture pair (absolute paths, no cache, shipped configs)."""
    base, comp, extra = PAIRS[pair]
    load = LoadOptions(use_cache=False)
    return RunRequest.read(str(ROOT / base), str(ROOT / comp), load, load,
                           CompareOptions(**extra))  # type: ignore[arg-type]


@functools.cache
def events(pair: str) -> tuple[Event, ...]:
    """The whole event stream of one pair, computed in this process once per session."""
    return tuple(comparison_events(request(pair)))


def tables(pair: str) -> dict[str, Table]:
    """The comparison tables of a pair, straight from core (the reference the screens must match)."""
    return {e.table.name: e.table for e in events(pair) if isinstance(e, TableReady)}


def operators_named(pair: str, needle: str) -> int:
    """How many OperatorCompareStatistic rows of a pair have ``needle`` in their name (what a
    filter on the Operators screen must leave), counted from core's table."""
    names = tables(pair)["OperatorCompareStatistic"].data["name"].astype(str)
    return int(names.str.contains(needle, case=False, regex=False).sum())


def replay(stream: tuple[Event, ...]) -> Callable[[Callable[[], bool]], Iterator[Event]]:
    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        for event in stream:
            if should_stop():
                return
            yield event
    return source


def make_app(pair: str, **kwargs: object) -> PerfCmpApp:
    """The app on a fixture pair, labelled with repository-relative paths, timings hidden."""
    base, comp, _ = PAIRS[pair]
    kwargs.setdefault("timings", False)
    return PerfCmpApp(base, comp, replay(events(pair)), **kwargs)  # type: ignore[arg-type]


async def settle(pilot: object, app: PerfCmpApp, timeout: float = 20.0) -> None:
    """Wait until the run finished (or failed) and the screen caught up."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not (app.finished or app.failed) and loop.time() < end:
        await pilot.pause(0.02)  # type: ignore[attr-defined]
    assert app.finished or app.failed, "the comparison did not finish in time"
    await pilot.pause()  # type: ignore[attr-defined]


async def open_view(pilot: object, app: PerfCmpApp, name: str) -> None:
    """Cycle the current screen's views (``v``) until table ``name`` is shown (the Overall
    screen opens on StepTime; OverallMetrics is its next view)."""
    for _ in range(len(app.pane.names())):
        if app.pane.current == name:
            return
        await pilot.press("v")  # type: ignore[attr-defined]
    assert app.pane.current == name, f"{name} is not a view of this screen: {app.pane.names()}"


def frame(app: PerfCmpApp) -> FrameView:
    return app.pane.frame


def shown(app: PerfCmpApp) -> list[dict[str, str]]:
    """Every row of the current table as drawn, as {full screen header: cell text}."""
    f = frame(app)
    assert f.view is not None
    return [dict(zip(f.headers, f.row_cells(i))) for i in range(len(f.view))]


def text_of(widget: object) -> str:
    """Plain text of a Static (markup removed)."""
    visual = widget.visual  # type: ignore[attr-defined]
    return str(getattr(visual, "plain", visual))


def headers(app: PerfCmpApp) -> list[str]:
    return frame(app).header_cells()


def signed(value: float) -> str:
    """A difference as the screen prints it (written here independently of the app's formatter)."""
    return ("+" if value > 0 else "") + plain(value)


def plain(value: float) -> str:
    """Two decimals; a non-zero value that would read 0.00 keeps three significant digits
    (0.0012 → 0.00120; issue 30 #7)."""
    if value != 0 and abs(value) < 0.005:
        if abs(value) < 1e-9:
            return f"{value:.2e}"
        return f"{value:.{2 - int(np.floor(np.log10(abs(value))))}f}"
    return f"{value:,.2f}"


def change(ratio: float) -> str:
    """A comparison ÷ base ratio as the screens print it: the change in percent, (ratio − 1) ×
    100, signed; ``new`` when only the comparison has it (written here independently of the
    app's formatter)."""
    if np.isinf(ratio):
        return "new"
    text = f"{(ratio - 1) * 100:+,.2f}%"
    return "0.00%" if text in ("+0.00%", "-0.00%") else text


def same(cells: list[str], full: list[str]) -> bool:
    """Each cell shows the value at the same position (cut or not)."""
    return len(cells) == len(full) and all(fits(c, str(f)) for c, f in zip(cells, full))


def fits(cell: str, full: str) -> bool:
    """A cell shows ``full``, possibly cut to its column (… marks where)."""
    if "…" not in cell:
        return cell == full
    head, _, tail = cell.partition("…")
    return full.startswith(head) and full.endswith(tail)
