"""The app on two cluster folders (Pilot + snapshots): the Ranks screen against the core tables
and the designed job of fixtures/README.md ("Clusters"), the group view, Enter opening a rank
pair on the usual screens (on demand, replacing the previous one), ranks that cannot be opened,
progress, and the workbook `e` writes."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from openpyxl import load_workbook
from textual.pilot import Pilot
from textual.widgets import Input, Static

from perfcmp_core.cluster import ClusterOptions
from perfcmp_core.cluster.events import cluster_events
from perfcmp_core.cluster.request import ClusterRequest, cluster_request
from perfcmp_core.events import Event
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_tui.cluster_app import NOT_OPEN, ClusterApp
from perfcmp_tui.screens.export_dialog import ExportDialog
from perfcmp_tui.widgets.pane import TablePane

from test_cluster_fixtures import DESIGNED_DIFF_MS, rank_folders
from tui_support import ROOT, aio, open_view, replay, settle, shown, signed, text_of

BASE, COMP = "fixtures/cluster/npu_base", "fixtures/cluster/npu_comp"
SIZE = (200, 50)


def make_request(base: Path, comp: Path) -> ClusterRequest:
    load = LoadOptions(use_cache=False)
    pair = RunRequest.read(str(base), str(comp), load, load, CompareOptions())
    req = cluster_request(pair, None, ClusterOptions(scheduler="local", jobs=1))
    assert req is not None
    return req


@functools.cache
def fixture_request() -> ClusterRequest:
    # Paths as a user types them from the repository root: the Ranks note line names them, and
    # a snapshot must not hold the checkout's own path.
    return make_request(*(Path(os.path.relpath(ROOT / p)) for p in (BASE, COMP)))


_STREAMS: dict[tuple[int, int | None], tuple[ClusterRequest, tuple[Event, ...]]] = {}


def stream(req: ClusterRequest, rank: int | None = None) -> tuple[Event, ...]:
    """The cluster's events (rank None) or one rank pair's, computed once per session (a request
    holds dicts: it is keyed by identity, and kept alive with its events)."""
    key = (id(req), rank)
    if key not in _STREAMS:
        events = cluster_events(req) if rank is None else comparison_events(req.rank_request(rank))
        _STREAMS[key] = (req, tuple(events))
    return _STREAMS[key][1]


def make_app(req: ClusterRequest | None = None, labels: tuple[str, str] = (BASE, COMP),
             opens: tuple[int, ...] = (), **kw: Any) -> ClusterApp:
    """The app on a replayed cluster; the rank pairs in ``opens`` are compared before it starts
    (in the running app a comparison would start a process with Textual's threads around)."""
    req = req or fixture_request()
    for rank in opens:
        stream(req, rank)
    opened: list[int] = []

    def open_rank(rank: int) -> Callable[..., Any]:
        req.rank_request(rank)  # raises for a rank that is not on both sides
        opened.append(rank)
        return replay(stream(req, rank))

    app = ClusterApp(*labels, replay(stream(req)), open_rank,
                     ranks=(len(req.inputs.base.ranks), len(req.inputs.comp.ranks)), timings=False, **kw)
    app.opened = opened  # type: ignore[attr-defined]
    return app


async def open_rank(pilot: Pilot, app: ClusterApp, rank: int) -> None:
    await pilot.press("0", "g", *(["j"] * rank), "enter")
    await settle(pilot, app)


def row_of(rows: list[dict[str, str]], rank: int) -> dict[str, str]:
    return next(r for r in rows if r["Rank"] == str(rank))


@aio
async def test_the_ranks_screen_comes_first_with_the_designed_values() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.pane.spec.id == "ranks" and app.pane.current == "ClusterCompare"
        rows = shown(app)
        assert [r["Rank"] for r in rows] == ["0", "1", "2", "3"]
        for rank, designed in DESIGNED_DIFF_MS.items():
            row = row_of(rows, rank)
            for header, key in (("Diff E2E Time(ms)", "e2e"), ("Diff Computing Time(ms)", "compute"),
                                ("Diff Uncovered Communication Time(ms)", "uncovered"),
                                ("Diff Wait Time(ms)", "wait"), ("Diff Free Time(ms)", "free")):
                assert row[header] == signed(designed[key]), (rank, header)
        assert row_of(rows, 1)["Flag"] == "slowest; largest regression"
        assert row_of(rows, 0)["Base E2E Time(ms)"] == "6.78" and row_of(rows, 0)["Comp E2E Time(ms)"] == "7.35"
        header = text_of(app.query_one("#inputs", Static)).splitlines()
        assert header == [f"BASE {BASE}  · 4 ranks  · Enter on a rank compares that rank pair",
                          f"COMP {COMP}  · 4 ranks"]
        # screens 1 … 8 wait for a rank pair; they say how to get one
        app.action_pane("overall")
        await pilot.pause()
        assert NOT_OPEN in text_of(app.pane.query_one("#message", Static))
        assert app.opened == []  # nothing loaded on demand yet


@aio
async def test_v_shows_who_waits_for_whom() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("v")
        assert app.pane.current == "ClusterCommGroups"
        rows = shown(app)
        assert [r["Flag"] for r in rows] == ["", "others wait for it", "", ""]
        assert [r["Diff Wait Time(ms)"] for r in rows] == ["+0.60", "0.00", "+0.60", "+0.30"]
        assert [r["Diff Transmit Time(ms)"] for r in rows] == ["0.00", "0.00", "0.00", "+0.30"]


@aio
async def test_enter_opens_a_rank_pair_on_the_usual_screens() -> None:
    app = make_app(opens=(1, 3))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await open_rank(pilot, app, 1)
        assert app.opened == [1] and app.rank == 1 and app.pane.spec.id == "overall"
        await open_view(pilot, app, "OverallMetrics")
        rows = {r["Index"].lstrip("▾▸ ").strip(): r for r in shown(app)}
        # fixtures/README.md: rank 1 computes +0.570 ms and waits no more (its E2E +0.570 too)
        assert rows["E2E Time"]["Diff Duration(ms)"] == "+0.57"
        assert rows["Computing Time"]["Diff Duration(ms)"] == "+0.57"
        header = text_of(app.query_one("#inputs", Static)).splitlines()
        assert header[0] == (f"BASE {BASE}  · 4 ranks  · rank 1 {rank_folders('npu_base')[1].name}"
                             " · NPU Text · 3 steps")
        assert header[1].startswith(f"COMP {COMP}  · 4 ranks  · rank 1 {rank_folders('npu_comp')[1].name}")
        # another rank replaces it; the ranks stay
        await open_rank(pilot, app, 3)
        assert app.opened == [1, 3] and app.rank == 3
        await open_view(pilot, app, "OverallMetrics")
        rows = {r["Index"].lstrip("▾▸ ").strip(): r for r in shown(app)}
        assert rows["Computing Time"]["Diff Duration(ms)"] == signed(DESIGNED_DIFF_MS[3]["compute"])
        assert app.query_one("#pane-ranks", TablePane).current == "ClusterCompare"
        await pilot.press("0")
        assert app.pane.spec.id == "ranks" and len(shown(app)) == 4


@aio
async def test_a_rank_on_one_side_only_is_not_opened(tmp_path: Path) -> None:
    comp = tmp_path / "comp"
    for rank, run in rank_folders("npu_comp").items():
        if rank != 2:
            shutil.copytree(run, comp / run.name)
    app = make_app(make_request(ROOT / BASE, comp), labels=(BASE, "comp"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert row_of(shown(app), 2)["Flag"] == "only in base"
        await pilot.press("g", "j", "j", "enter")
        await pilot.pause()
        assert app.opened == [] and app.rank is None and app.pane.spec.id == "ranks"
        assert any("rank 2: only in base, nothing to compare" in n.message for n in app._notifications)


@aio
async def test_progress_counts_the_ranks() -> None:
    app = make_app()
    seen: list[str] = []
    original = app.handle_event

    def spy(event: Any, view: Any = None) -> None:
        original(event, view)
        seen.append(str(app.query_one("#phase-now", Static).visual))

    app.handle_event = spy  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
    counted = [s for s in seen if s.startswith("loading ranks")]
    assert counted[0].startswith("loading ranks 1/8") and counted[-1].startswith("loading ranks 8/8")


@aio
async def test_export_writes_the_rank_pair_then_the_cluster_sheets(tmp_path: Path) -> None:
    app = make_app(opens=(1,), out_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await open_rank(pilot, app, 1)
        await pilot.press("e")
        assert isinstance(app.screen, ExportDialog)
        app.screen.query_one("#export-dir", Input).value = str(tmp_path / "out")
        await pilot.press("tab", "enter")
        for _ in range(500):
            if any((tmp_path / "out").glob("*.xlsx")):
                break
            await pilot.pause(0.02)
    (book,) = (tmp_path / "out").glob("*.xlsx")
    names = load_workbook(book, read_only=True).sheetnames
    assert names[0] == "OverallMetrics"
    assert names[-4:] == ["ClusterCompare", "ClusterCommGroups", "Advisor", "README"]


# -- snapshots ----------------------------------------------------------------------------------
def finished(app: ClusterApp, *keys: str) -> Callable[[Pilot], Any]:
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot, app)
        if keys:
            await pilot.press(*keys)
            await settle(pilot, app)
    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 44)])
def test_snapshot_ranks(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    app = make_app()
    assert snap_compare(app, terminal_size=size, run_before=finished(app))


def test_snapshot_groups(snap_compare: Callable[..., bool]) -> None:
    app = make_app()
    assert snap_compare(app, terminal_size=(120, 30), run_before=finished(app, "v"))


def test_snapshot_rank_opened(snap_compare: Callable[..., bool]) -> None:
    app = make_app(opens=(1,))
    assert snap_compare(app, terminal_size=(120, 36), run_before=finished(app, "j", "enter"))
