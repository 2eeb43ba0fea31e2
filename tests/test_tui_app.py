"""Pilot-driven tests of every screen and key of the TUI on the fixture pairs.

What a screen shows is read back through the FrameView's own drawing code (header and row cells)
and compared with values derived without the TUI: the core tables' data, formatted here, and the
designed differences documented in fixtures/README.md (quoted next to each check).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
from openpyxl import load_workbook
from textual.command import CommandPalette
from textual.widgets import Input, OptionList, Static

from perfcmp_core.events import Event, Failed, Finished, Loaded, Planned, TableReady
from perfcmp_core.notes import Note, lines
from perfcmp_tui.app import PerfCmpApp, build_app
from perfcmp_tui.screens.drill import DrillScreen
from perfcmp_tui.screens.error import ErrorScreen
from perfcmp_tui.screens.export_dialog import ExportDialog
from perfcmp_tui.screens.help import KEYS, READING, HelpScreen
from perfcmp_tui.screens.notes import NotesScreen
from perfcmp_tui.screens.sort_picker import SortPicker
from perfcmp_tui.widgets.key_bar import KeyBar
from perfcmp_tui.widgets.pane import ExtraBox, TablePane
from perfcmp_tui.widgets.tab_bar import TabBar
from tui_support import (PAIRS, aio, change, events, fits, frame, make_app, open_view, plain, replay,
                         request, same, settle, shown, signed, tables, text_of)

SIZE = (200, 50)


def label(cell: str) -> str:
    """A name cell without its tree mark and indentation."""
    return cell.lstrip("▾▸ ").strip()


def pane(app: PerfCmpApp, pane_id: str) -> TablePane:
    return app.query_one(f"#pane-{pane_id}", TablePane)


# -- launch, header, progress -------------------------------------------------------------------
@aio
async def test_header_names_inputs_kinds_and_steps() -> None:
    app = make_app("mixed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        text = text_of(app.query_one("#inputs", Static))
        # fixtures/README.md: three steps ProfilerStep#1..3; GPU trace vs torch_npu Text export.
        assert text.splitlines() == [
            "BASE fixtures/gpu/base.pt.trace.json  · GPU · 3 steps",
            "COMP fixtures/npu_text/comp_ascend_pt  · NPU Text · 3 steps",
        ]
        assert app.query_one("#progress").has_class("hidden")


def gated(stream: tuple[Event, ...], after: str) -> tuple[Callable[..., Iterator[Event]],
                                                          threading.Event]:
    """A source that stops after table ``after`` until the gate opens (or the run is cancelled)."""
    gate = threading.Event()

    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        for event in stream:
            yield event
            if isinstance(event, TableReady) and event.table.name == after:
                while not gate.wait(0.02):
                    if should_stop():
                        return
    return source, gate


async def wait_for(pilot: object, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition() and loop.time() < end:
        await pilot.pause(0.02)  # type: ignore[attr-defined]
    assert condition()


@aio
async def test_overall_shows_first_while_the_rest_is_computed() -> None:
    source, gate = gated(events("npu"), "OverallMetrics")
    base, comp, _ = PAIRS["npu"]
    app = PerfCmpApp(base, comp, source, timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pane(app, "overall").current == "OverallMetrics")
        await pilot.pause()
        assert len(shown(app)) == len(tables("npu")["OverallMetrics"].data)
        assert app.running and not app.query_one("#progress").has_class("hidden")
        phases = text_of(app.query_one("#phases", Static))
        # The table arrived before its phase ended; everything after it is still to come.
        assert "✓ load base" in phases and "✓ load comparison" in phases
        assert "▶ OverallMetrics" in phases
        assert "· CommunicationCompare" in phases and "· advisor" in phases
        await pilot.press("4")
        assert text_of(app.query_one("#pane-communication #pane-status", Static)) == "Comm"
        assert "waiting for results" in text_of(app.query_one("#pane-communication #message",
                                                                Static))
        gate.set()
        await settle(pilot, app)
        assert pane(app, "communication").current == "CommunicationCompare"
        assert app.query_one("#progress").has_class("hidden")


@pytest.mark.parametrize("key", ["escape", "q"])
@aio
async def test_esc_or_q_cancels_loading_keeping_what_arrived(key: str) -> None:
    source, gate = gated(events("npu"), "OverallMetrics")
    base, comp, _ = PAIRS["npu"]
    app = PerfCmpApp(base, comp, source, timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pane(app, "overall").current == "OverallMetrics")
        await pilot.press(key)
        assert not app.running and app.is_running  # cancelled, not quit
        assert "✗ cancelled" in text_of(app.query_one("#phases", Static))
        assert pane(app, "overall").current == "OverallMetrics"
        ops = pane(app, "operators")
        assert ops.current is None
        assert "loading was cancelled" in text_of(ops.query_one("#message", Static))
        assert "operators" in app.query_one(TabBar).empty
        await pilot.press("Q")
    assert app.return_code == 0 and app.return_value == 0


# -- Overall ------------------------------------------------------------------------------------
def opened_rows(table: object) -> int:
    """Rows of an outline shown when its screen opens: StepTime opens down to the causes (its
    declared ``open_levels``), each kernel, op and frame one Enter away."""
    data = table.data  # type: ignore[attr-defined]
    return int((data["_level"] <= table.open_levels).sum())  # type: ignore[attr-defined]
@aio
async def test_overall_hierarchy_values_and_headline() -> None:
    table = tables("npu")["OverallMetrics"]
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.pane.current == "StepTime"  # the screen opens on where the time went
        await open_view(pilot, app, "OverallMetrics")
        rows = shown(app)
        df = table.data
        assert [label(r["Index"]) for r in rows] == [s.strip() for s in df["index"]]
        for r, (_, d) in zip(rows, df.iterrows()):
            assert r["Diff Duration(ms)"] == signed(d["diff_ms"])
            assert r["Base Duration(ms)"] == plain(d["base_ms"])
            assert r["Comp Duration(ms)"] == plain(d["comp_ms"])
            arrow = "▲" if d["diff_ratio"] > 1 else "▼" if d["diff_ratio"] < 1 else ""
            # The screens read a ratio as the change in percent (the headline's "-54.9%").
            assert r["Δ%"] == arrow + change(d["diff_ratio"])
        # Indentation follows the hierarchy: "Computing Time" > "Matmul" > "Matmul (Cube)".
        cells = [r["Index"] for r in rows]
        matmul = next(c for c in cells if label(c) == "Matmul")
        cube = next(c for c in cells if label(c) == "Matmul (Cube)")
        assert matmul.startswith("  ▾ ") and cube.startswith("      ")
        extra = app.query_one("#pane-overall #extra-box", ExtraBox).text.plain
        lines = extra.splitlines()
        # fixtures/README.md: +36 µs of device work per step, 3 steps → E2E +0.108 ms; Computing
        # carries all of it; Mem Usage 2.81G / 2.88G.
        e2e = next(line for line in lines if line.startswith("E2E"))
        assert "▲" in e2e and "+0.108 ms" in e2e
        assert "+0.108 ms" in next(line for line in lines if line.startswith("Computing"))
        mem = next(line for line in lines if line.startswith("Mem Usage"))
        assert "2.81 G" in mem and "2.88 G" in mem and "▲" in mem
        gap = extra.split("Where the gap comes from", 1)[1]
        # Matmul +30 µs/step → +0.09 ms; the cast (+30) and the dropout (−24) are Vector.
        assert "E2E +0.11 ms" in gap and "Computing (Matmul +0.09" in gap


@aio
async def test_enter_collapses_and_expands_an_overall_group() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await open_view(pilot, app, "OverallMetrics")
        n = len(shown(app))
        assert label(shown(app)[0]["Index"]) == "Computing Time"
        await pilot.press("enter")
        rows = shown(app)
        df = tables("npu")["OverallMetrics"].data
        top = [s for s, lvl in zip(df["index"], df["_level"]) if lvl == 0]
        first_free = df.index[df["index"].str.strip() == top[1]][0]
        assert [label(r["Index"]) for r in rows][:2] == ["Computing Time", top[1].strip()]
        assert len(rows) == n - first_free + 1
        await pilot.press("enter")
        assert len(shown(app)) == n


# -- Operators ----------------------------------------------------------------------------------
@aio
async def test_operator_statistic_sort_drill_and_back() -> None:
    stat = tables("npu_ops")["OperatorCompareStatistic"].data
    detail_table = tables("npu_ops")["OperatorCompare"]
    detail = detail_table.data
    app = make_app("npu_ops")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        assert pane(app, "operators").current == "OperatorCompareStatistic"
        await pilot.press("d")
        rows = shown(app)
        expected = stat.sort_values("diff", ascending=False, kind="stable")
        assert same([r["Operator Name"] for r in rows], list(expected["name"]))
        assert [r["Diff Duration(ms)"] for r in rows] == [signed(v) for v in expected["diff"]]
        assert "Diff Duration(ms) ▼" in headers_of(app)
        # fixtures/README.md #1: the QKV MatMulV3 +30 µs per step → aten::linear +0.09 ms.
        linear = next(r for r in rows if r["Operator Name"] == "aten::linear")
        assert linear["Diff Duration(ms)"] == "+0.09" and linear["Δ%"].startswith("▲+")
        await pilot.press("d")
        assert same([r["Operator Name"] for r in shown(app)],
                    list(stat.sort_values("diff", ascending=True, kind="stable")["name"]))
        assert "Diff Duration(ms) ▲" in headers_of(app)
        await pilot.press("d")
        # Enter on aten::linear: its matched base/comparison rows.
        position = [r["Operator Name"] for r in shown(app)].index("aten::linear")
        await pilot.press("g", *["j"] * position, "enter")
        ops = pane(app, "operators")
        assert ops.current == "OperatorCompare"
        rows = shown(app)
        want = detail[(detail["base_name"] == "aten::linear") | (detail["comp_name"] == "aten::linear")]
        assert len(rows) == len(want) > 0
        assert all(r["Base Operator Name"] == "aten::linear" for r in rows)
        assert [r["Diff Duration(us)"] for r in rows] == [signed(v) for v in want["diff"]]
        assert "rows of aten::linear" in text_of(ops.query_one("#pane-status", Static))
        # Enter on a matched row: both sides in full, kernels included.
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        base_text = text_of(app.screen.query_one("#drill-base", Static))
        first = want.iloc[0]
        assert "Kernel Details" in base_text
        assert detail_table.value("base_details", int(want.index[0])).splitlines()[0].strip() in base_text
        await pilot.press("escape")
        assert not isinstance(app.screen, DrillScreen)
        await pilot.press("q")  # back to the statistic, on the row drilled from
        assert ops.current == "OperatorCompareStatistic" and app.is_running
        assert frame(app).cursor == position
        await pilot.press("v")
        assert ops.current == "OperatorCompare" and len(shown(app)) == len(detail)


def headers_of(app: PerfCmpApp) -> list[str]:
    return frame(app).header_cells()


@aio
async def test_operators_screen_keeps_operators_when_modules_exist() -> None:
    """With nn.Module frames the workbook holds the module sheets instead of the operator sheets
    (as the reference's does), but the app shows both: operators here, modules on screen 3."""
    made = tables("mixed")
    assert not made["OperatorCompareStatistic"].export and made["ModuleCompareStatistic"].export
    app = make_app("mixed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        ops = pane(app, "operators")
        assert ops.current == "OperatorCompareStatistic"
        assert len(shown(app)) == len(made["OperatorCompareStatistic"].data)
        await pilot.press("3")
        assert pane(app, "modules").current == "ModuleTree"


# -- Modules ------------------------------------------------------------------------------------
@aio
async def test_module_tree_expand_call_stacks_and_drill() -> None:
    tree = tables("npu")["ModuleTree"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        mods = pane(app, "modules")
        assert mods.current == "ModuleTree"
        roots = tree[tree["_parent"] < 0]
        assert same([label(r["Module Name"]) for r in shown(app)], list(roots["module"]))
        await pilot.press("enter")  # expand the first TransformerLM_0
        rows = shown(app)
        kids = tree[tree["_parent"] == roots["_node"].iloc[0]]
        assert [label(r["Module Name"]) for r in rows[1:1 + len(kids)]] == list(kids["module"])
        assert rows[0]["Module Name"].startswith("▾")
        # c: call stacks of the selected node, base and comparison side by side.
        await pilot.press("j", "c")
        assert not mods.query_one("#stacks").has_class("hidden")
        node = kids.iloc[0]
        base_text = text_of(mods.query_one("#stack-base", Static))
        comp_text = text_of(mods.query_one("#stack-comp", Static))
        base_frames = [f.strip() for f in node["_base_stack"].replace(";", "\n").splitlines()
                       if f.strip()]
        assert base_text.splitlines() == ["Base call stack", *base_frames]
        assert comp_text.splitlines()[0] == "Comparison call stack"
        assert comp_text.splitlines()[-1] == node["_comp_stack"].split(";")[-1].strip()
        await pilot.press("j")  # the stack follows the cursor
        assert text_of(mods.query_one("#stack-base", Static)).splitlines()[-1] == \
            kids.iloc[1]["_base_stack"].split(";")[-1].strip()
        await pilot.press("c")
        assert mods.query_one("#stacks").has_class("hidden")
        # Enter on a leaf: the module's rows of the detail sheet.
        await pilot.press("k", "enter")
        assert mods.current == "ModuleCompare"
        detail = tables("npu")["ModuleCompare"].data
        assert len(shown(app)) == int((detail["module_name"] == node["_path"]).sum()) > 0
        await pilot.press("q")
        assert mods.current == "ModuleTree"


@aio
async def test_module_tree_diff_of_the_slower_projection() -> None:
    """fixtures/README.md #1: layer 1 QKV MatMulV3 100 → 130 µs, i.e. Linear_4 +30 µs per step."""
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        view = pane(app, "modules").view
        assert view is not None
        view.expanded = set(view.parent_nodes())  # open everything
        frame(app).refresh_data()
        tree = tables("npu")["ModuleTree"].data
        forward = ~tree.loc[tree["module"] == "Linear_4", "_path"].str.contains("BACKWARD")
        linear4 = [r for r in shown(app) if label(r["Module Name"]) == "Linear_4"]
        assert len(linear4) == len(forward) == 6  # 3 steps, forward and backward
        assert [r["Diff Total(us)"] for r, fwd in zip(linear4, forward) if fwd] == ["+30.00"] * 3


@aio
async def test_total_filter_on_module_statistic() -> None:
    data = tables("npu")["ModuleCompareStatistic"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3", "v")
        assert pane(app, "modules").current == "ModuleCompareStatistic"
        await pilot.press("t")
        rows = shown(app)
        assert len(rows) == int(data["_is_total"].sum())
        assert {r["Operator Name"] for r in rows} == {"[ TOTAL ]"}
        assert "[ TOTAL ] only" in text_of(pane(app, "modules").query_one("#pane-status", Static))
        await pilot.press("t")
        assert len(shown(app)) == len(data)


@aio
async def test_module_screen_says_why_it_is_empty() -> None:
    app = make_app("ms")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        message = text_of(pane(app, "modules").query_one("#message", Static))
        assert "no python_function events" in message and "with_stack=True" in message
        assert "modules" in app.query_one(TabBar).empty
        await pilot.press("2")
        assert pane(app, "operators").current == "OperatorCompareStatistic"


# -- Communication ------------------------------------------------------------------------------
@aio
async def test_communication_rows_expand_into_tasks() -> None:
    data = tables("npu")["CommunicationCompare"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("4")
        rows = shown(app)
        roots = data[data["_parent"] < 0]
        assert [label(r["Base Communication OP Name"]) for r in rows] == list(roots["base_name"])
        # fixtures/README.md #3: first dp all-reduce bucket 300 → 390 µs, 3 calls → +270 µs.
        allreduce = next(r for r in rows if label(r["Base Communication OP Name"]) == "allreduce")
        assert allreduce["Diff Duration(us)"] == "+270.00"
        position = [label(r["Base Communication OP Name"]) for r in rows].index("allreduce")
        await pilot.press(*["j"] * position, "enter")
        rows = shown(app)
        node = roots[roots["base_name"] == "allreduce"]["_node"].iloc[0]
        tasks = data[data["_parent"] == node]
        got = rows[position + 1: position + 1 + len(tasks)]
        assert [r["Comp Task Name"] for r in got] == list(tasks["comp_task"])
        assert [r["Comp Total Duration(us)"] for r in got] == [plain(v) for v in tasks["comp_total"]]
        await pilot.press("space")
        assert len(shown(app)) == len(roots)


# -- Memory -------------------------------------------------------------------------------------
@aio
async def test_memory_statistic_and_detail() -> None:
    stat = tables("npu")["MemoryCompareStatistic"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        assert same([r["Operator Name"] for r in shown(app)], list(stat["name"]))
        rows = {r["Operator Name"]: r for r in shown(app)}
        # fixtures/README.md #2 and #4: +64 MiB per forward Cast (3 steps), FA workspace
        # 8 → 24 MiB in 6 calls.
        assert rows["aten::to"]["Diff Memory(MB)"] == "+192.00"
        assert rows["npu::npu_fusion_attention"]["Diff Memory(MB)"] == "+96.00"
        await pilot.press("v")
        assert pane(app, "memory").current == "MemoryCompare"
        assert len(shown(app)) == len(tables("npu")["MemoryCompare"].data)
        await pilot.press("v")
        assert pane(app, "memory").current == "MemoryCompareStatistic"


# -- Kernels ------------------------------------------------------------------------------------
@aio
async def test_kernel_compare_npu_vs_npu() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("6")
        rows = shown(app)
        assert len(rows) == len(tables("npu")["KernelCompare"].data)
        # fixtures/README.md #1: MatMulV3 "3072;4096,1024;1024,3072" total +90 µs.
        row = next(r for r in rows if r["Kernel"] == "MatMulV3"
                   and fits(r["Input Shape"], "3072;4096,1024;1024,3072"))
        base = float(row["Base Total Duration(us)"].replace(",", ""))
        comp = float(row["Comp Total Duration(us)"].replace(",", ""))
        assert comp - base == pytest.approx(90.0, abs=0.01)
        assert row["Δ% Total"].startswith("▲+")


@aio
async def test_kernel_type_compare() -> None:
    data = tables("npu_types")["KernelTypeCompare"].data
    app = make_app("npu_types")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("6")
        assert pane(app, "kernels").current == "KernelTypeCompare"
        rows = shown(app)
        assert [r["Kernel Type"] for r in rows] == list(data["kernel_type"])
        # fixtures/README.md #2: the Cast exists only in the comparison (6 kernels over 3 steps).
        cast = next(r for r in rows if r["Kernel Type"] == "Cast")
        assert cast["Comp Calls"] == "6" and cast["Δ% Total"] == "▲new"


@aio
async def test_kernels_of_a_gpu_vs_npu_pair_by_class() -> None:
    """No KernelCompare for GPU vs NPU (it needs NPU kernel details on both sides), so the screen
    opens on the kernel classes, and `v` reaches the per-launching-op view."""
    app = make_app("mixed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("6")
        kernels = pane(app, "kernels")
        assert kernels.current == "KernelClassCompare" and not kernels.frame.has_class("hidden")
        assert kernels.names() == ["KernelClassCompare", "KernelOpCompare"]
        assert "KernelCompare needs NPU kernel details on both sides (base is GPU)" in kernels.reasons
        await pilot.press("v")
        assert kernels.current == "KernelOpCompare"


# -- API, Advisor -------------------------------------------------------------------------------
@aio
async def test_api_sort_picker() -> None:
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("7")
        assert same([r["api name"] for r in shown(app)], list(data["name"]))
        await pilot.press("s")
        picker = app.screen
        assert isinstance(picker, SortPicker)
        # Typing narrows the list (text, a|b or a regex, as the filter); ↓ moves, Enter picks.
        await pilot.press(*"calls")
        assert [picker.headers[[c.key for c in picker.columns].index(k)] for k in picker.keys] \
            == [h for h in picker.headers if "calls" in h.lower()]
        await pilot.press("backspace", *"s$|^base t")
        assert [h for h in picker.headers if h.endswith("Calls") or h.startswith("Base T")] \
            == [picker.headers[[c.key for c in picker.columns].index(k)] for k in picker.keys]
        await pilot.press(*["backspace"] * 20, *"comp c")
        position = picker.keys.index("comp_calls")
        await pilot.press(*["down"] * position, "enter")
        rows = shown(app)
        expected = data.sort_values("comp_calls", ascending=False, kind="stable")
        assert same([r["api name"] for r in rows], list(expected["name"]))
        assert [r["Comp Calls"] for r in rows] == [f"{int(v):,}" for v in expected["comp_calls"]]
        await pilot.press("s", "enter")  # the current column again: flipped
        assert same([r["api name"] for r in shown(app)],
                    list(data.sort_values("comp_calls", ascending=True, kind="stable")["name"]))
        await pilot.press("s", "escape")
        assert not isinstance(app.screen, SortPicker)


@aio
async def test_advisor_rows_and_drill() -> None:
    data = tables("npu")["Advisor"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("8")
        rows = shown(app)
        assert [(r["Category"], r["Scope"]) for r in rows] == list(zip(data["category"], data["scope"]))
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen)
        assert data["evidence"].iloc[0].splitlines()[0] in text_of(app.screen.query_one("#drill-other",
                                                                                    Static))
        await pilot.press("q")
        assert app.is_running and not isinstance(app.screen, DrillScreen)


# -- keys ---------------------------------------------------------------------------------------
@aio
async def test_cursor_keys() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("7")
        f = frame(app)
        n = len(tables("npu")["ApiCompare"].data)
        await pilot.press("j", "j", "down")
        assert f.cursor == 3
        await pilot.press("k", "up")
        assert f.cursor == 1
        await pilot.press("G")
        assert f.cursor == n - 1 and f.scroll_offset.y > 0
        await pilot.press("g")
        assert f.cursor == 0 and f.scroll_offset.y == 0
        page = f.body_height - 1  # the rows under the header, less one kept from the last page
        await pilot.press("pagedown")
        assert f.cursor == page
        await pilot.press("pagedown", "pageup")
        assert f.cursor == page
        await pilot.press("end", "home")
        assert f.cursor == 0
        # l / h move the cell cursor by whole columns; the name column stays pinned.
        first = f.row_cells(0)[0]
        drawn = [s.column for s in f.slots()]
        await pilot.press(*["l"] * len(drawn))
        assert f.col == drawn[-1] + 1 and f.col in [s.column for s in f.slots()]
        line = "".join(seg.text for seg in f.render_line(f.header_height))
        assert line.startswith(first)  # the name column stays while the rest scrolls
        assert f.slots()[0].column == 0 and f.slots()[1].column > 1  # scrolled by whole columns
        await pilot.press(*["h"] * len(drawn))
        assert f.col == 0 and [s.column for s in f.slots()] == drawn


@aio
async def test_filter_live_keep_and_revert() -> None:
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("7", "vertical_line")
        box = pane(app, "api").query_one("#filter", Input)
        assert app.focused is box
        await pilot.press(*"MATMUL")
        want = [n for n in data["name"] if "matmul" in n.lower()]
        assert same([r["api name"] for r in shown(app)], want) and want
        await pilot.press("enter")
        assert box.has_class("hidden") and app.focused is frame(app)
        await pilot.press("vertical_line", "backspace", "backspace", "escape")  # revert to "MATMUL"
        assert same([r["api name"] for r in shown(app)], want)
        await pilot.press("vertical_line", *["backspace"] * 6, "enter")
        assert len(shown(app)) == len(data)


@aio
async def test_digits_and_tab_switch_screens() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        bar = app.query_one(TabBar)
        order = ["overall", "operators", "modules", "communication", "memory", "kernels", "api",
                 "advisor"]
        for key, pane_id in zip("12345678", order):
            await pilot.press(key)
            assert app.pane.spec.id == pane_id and bar.active == pane_id
            assert app.focused is app.pane.frame
        await pilot.press("tab")
        assert app.pane.spec.id == "overall"
        await pilot.press("shift+tab", "shift+tab")
        assert app.pane.spec.id == "api"
        await pilot.press("vertical_line", "tab")  # Tab inside the filter box does not switch screens
        assert app.pane.spec.id == "api"


@aio
async def test_export_writes_the_workbook(tmp_path: Path) -> None:
    app = make_app("npu", out_dir=str(tmp_path / "default"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("e")
        dialog = app.screen
        assert isinstance(dialog, ExportDialog)
        box = dialog.query_one("#export-dir", Input)
        assert box.value == str(tmp_path / "default")
        box.value = str(tmp_path / "out")
        await pilot.press("tab")  # Tab moves within the dialog, not between screens
        assert app.focused is dialog.query_one("#export-ok") and app.pane.spec.id == "overall"
        await pilot.press("enter")
        await wait_for(pilot, lambda: any((tmp_path / "out").glob("*.xlsx")))
    (path,) = (tmp_path / "out").glob("performance_comparison_result_*.xlsx")
    sheets = load_workbook(path, read_only=True).sheetnames
    assert {"OverallMetrics", "KernelCompare", "CommunicationCompare"} <= set(sheets)


@aio
async def test_help_lists_every_key() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            assert isinstance(app.screen, HelpScreen)
            rows = []
            for section in ("#help-keys", "#help-reading"):
                grid = app.screen.query_one(section, Static).content
                first, second = (list(c.cells) for c in grid.columns)
                rows += list(zip(first, second))
            # Every key, then how to read the screens (the ratio, Order Id / Top, units …).
            assert rows == [*KEYS, *READING]
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)


@aio
async def test_footer_shows_the_keys() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        shown_keys = {key for key, b in app.screen.active_bindings.items() if b.binding.show}
        assert {"d", "s", "slash", "t", "v", "c", "e", "question_mark", "q", "enter"} <= shown_keys
        line = str(app.query_one(KeyBar).render())
        assert line.startswith("⏎ Open d Diff s Sort / Search t TOTAL"), line
        assert line.endswith("? Help q Quit"), line


@aio
async def test_command_palette_runs_an_action() -> None:
    stat = tables("npu_ops")["OperatorCompareStatistic"].data
    app = make_app("npu_ops")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Sort by Diff")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
        await pilot.pause()
        assert same([r["Operator Name"] for r in shown(app)],
                    list(stat.sort_values("diff", ascending=False, kind="stable")["name"]))


@aio
async def test_sort_keys_need_a_table() -> None:
    app = make_app("mixed_no_kernels")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "j", "6")
        assert app.focused is None  # the Operators table left behind gets no keys
        await pilot.press("d", "t", "c", "slash", "j", "enter")  # Kernels is empty
        assert app.is_running and pane(app, "kernels").current is None
        assert not isinstance(app.screen, DrillScreen)
        assert frame(app).cursor == 0 and pane(app, "operators").frame.cursor == 1
        await pilot.press("1", "t")  # StepTime has no [ TOTAL ] rows
        assert len(shown(app)) == opened_rows(tables("mixed_no_kernels")["StepTime"])


@aio
async def test_q_and_ctrl_q_quit() -> None:
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "q")  # asks once: results are on screen
    assert app.return_code == 0 and app.return_value == 0
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("e", "ctrl+q")  # even from a dialog
    assert app.return_code == 0 and app.return_value == 0


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("is_input,code", [(True, 2), (False, 1)])
@aio
async def test_failure_shows_the_message_and_quits_with_its_code(is_input: bool, code: int) -> None:
    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        yield Planned(("load base", "load comparison"))
        yield Failed("fixtures/x.json: not a profiling result", is_input=is_input)

    app = PerfCmpApp("fixtures/x.json", "fixtures/y.json", source, timings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen))
        await pilot.pause()
        text = text_of(app.screen.query_one("#error-message", Static))
        assert "fixtures/x.json: not a profiling result" in text
        assert ("Cannot read the input" if is_input else "Internal error") in text
        await pilot.press("q")
    assert app.return_code == code and app.return_value == code


@aio
async def test_a_crashing_source_becomes_an_error_screen_and_retry_reruns() -> None:
    calls = []

    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        yield from events("npu")

    base, comp, _ = PAIRS["npu"]
    app = PerfCmpApp(base, comp, source, timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen))
        await pilot.pause()
        assert "RuntimeError: boom" in text_of(app.screen.query_one("#error-message", Static))
        await pilot.press("r")
        await settle(pilot, app)
        assert app.finished and app.failed is None
        assert len(shown(app)) == opened_rows(tables("npu")["StepTime"])
        await pilot.press("Q")
    assert app.return_code == 0 and app.return_value == 0


# -- the real path: a child process streams the events ------------------------------------------
@aio
async def test_child_process_run_fills_every_screen() -> None:
    from perfcmp_core.runner import prepare

    prepare()
    app = build_app(request("npu"))
    app.timings = False
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app, timeout=120)
        assert app.failed is None
        assert len(shown(app)) == opened_rows(tables("npu")["StepTime"])
        for pane_id, name in [("communication", "CommunicationCompare"), ("kernels", "KernelCompare"),
                              ("advisor", "Advisor")]:
            assert pane(app, pane_id).current == name
        await pilot.press("Q")
    assert app.return_code == 0 and app.return_value == 0


@aio
async def test_no_color_keeps_the_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app("npu")
    assert app.no_color and app.ansi_color
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        ratios = [r["Δ%"] for r in shown(app)]
        assert any(r.startswith("▲") for r in ratios)


@aio
async def test_export_while_tables_still_arrive_writes_what_was_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`e` during the run writes the tables that had arrived: the writer works on a snapshot
    while the UI thread keeps adding the tables that arrive meanwhile (it once iterated the
    live dict: "dictionary changed size during iteration", swallowed by the worker)."""
    from perfcmp_core.export import xlsx

    source, gate = gated(events("npu"), "OverallMetrics")
    base, comp, _ = PAIRS["npu"]
    app = PerfCmpApp(base, comp, source, timings=False)
    real = xlsx.write_workbook
    seen: list[int] = []

    def slow_writer(result, folder):  # type: ignore[no-untyped-def]
        gate.set()  # let the rest of the run arrive while this export is under way
        deadline = threading.Event()
        while not app.finished and not deadline.wait(0.02):
            pass
        seen.append(len(app.outcome.tables))
        return real(result, folder)

    monkeypatch.setattr(xlsx, "write_workbook", slow_writer)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pane(app, "overall").current == "OverallMetrics")
        app.export_workbook(str(tmp_path))
        await wait_for(pilot, lambda: any(tmp_path.glob("*.xlsx")), timeout=30)
        await settle(pilot, app)
        messages = [n.message for n in app._notifications]
    assert seen and seen[0] > 1  # the run went on while the workbook was written
    (path,) = tmp_path.glob("performance_comparison_result_*.xlsx")
    assert load_workbook(path, read_only=True).sheetnames == ["OverallMetrics", "README"]
    assert any(m.startswith("workbook written:") and "partial" in m for m in messages), messages


# -- notes --------------------------------------------------------------------------------------
def run_notes(pair: str) -> list[Note]:
    """The run's notes (each with the screens it concerns), straight from the core event stream."""
    done = next(e for e in events(pair) if isinstance(e, Finished))
    return done.notes


@aio
async def test_notes_reach_the_affected_screen_and_the_notes_view() -> None:
    notes = run_notes("npu")
    # fixtures/README.md: 12 kernels per side carry no async_npu flow (linked to no host op).
    unlinked = [n.line for n in notes if "linked to no host op" in n.text]
    assert len(unlinked) == 2 and all(n.screens == ("modules", "operators") for n in notes
                                      if n.line in unlinked)
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        # Only the step explanation's own notes concern the Overall screen.
        overall = lines(app.outcome.notes_for("overall"))
        assert overall == tables("npu")["StepTime"].notes and not set(overall) & set(lines(notes))
        await pilot.press("2")
        line = app.query_one("#pane-operators #notes-line", Static)
        assert not line.has_class("hidden")
        assert text_of(line) == f"note: {unlinked[0]} (+1 more)  · ! lists every note"
        await pilot.press("exclamation_mark")
        assert isinstance(app.screen, NotesScreen)
        body = text_of(app.screen.query_one("#notes-text", Static))
        for note in app.outcome.notes:
            assert f"• {note.line}" in body
        # Each note is listed once, under the first screen it concerns.
        assert body.count(unlinked[0]) == 1 and "Operators (also: Modules)" in body
        await pilot.press("escape")
        assert not isinstance(app.screen, NotesScreen)


@aio
async def test_notes_view_of_a_run_without_notes() -> None:
    app = PerfCmpApp("a", "b", replay((Finished(0.1),)), timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("exclamation_mark")
        assert isinstance(app.screen, NotesScreen)
        assert "no notes" in text_of(app.screen.query_one("#notes-text", Static))


@aio
async def test_c_says_where_the_stacks_are_when_the_profiles_have_them() -> None:
    infos = [e.info for e in events("npu") if isinstance(e, Loaded)]
    assert any(i["with_stack"] for i in infos)  # the fixture was collected with stacks
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("6", "c")  # Kernels: no view of this screen has stacks
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert messages[-1].startswith("this view has no call stacks: the Modules screen (3)")
        assert not any("collect with with_stack" in m for m in messages)


@aio
async def test_advisor_screen_reads_its_findings_first() -> None:
    """fixtures/README.md: with FA the comparison's DiT FA and Vector shares trip their rules;
    the screen's text above the shares names them with what to try and the top operators."""
    advisor = tables("infer")["Advisor"]
    app = make_app("infer")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("8")
        extra = app.query_one("#pane-advisor #extra-box", ExtraBox).text.plain
        assert extra.startswith("Findings")
        assert "comparison: DiT FA share high: 32.93% of stage time > 30%" in extra
        assert "    top: FlashAttentionScore 0.661 ms" in extra
        assert "what grew: DiT FA grew 0.200 ms per step" in extra
        assert extra.strip() == advisor.lead
        # Then the shares: the table itself.
        assert [r["Category"] for r in shown(app)][:2] == list(advisor.data["category"][:2])


# -- pictures -----------------------------------------------------------------------------------
@aio
async def test_overall_bars_and_step_sparkline() -> None:
    """The bars are the OverallMetrics parts on one scale; the sparkline the StepCompare E2E."""
    from perfcmp_core.insight import time_parts
    from perfcmp_tui.widgets.pictures import OverallPicture, cells

    overall = tables("npu")["OverallMetrics"]
    steps = tables("npu")["StepCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        picture = app.query_one("#pane-overall #picture", OverallPicture)
        assert not picture.has_class("hidden")  # 44 rows: shown without asking
        lines = picture.render().plain.splitlines()
        parts = time_parts(overall)
        e2e = overall.data.set_index(overall.data["index"].str.strip())["base_ms"]["E2E Time"]
        assert lines[0].startswith("Base ") and lines[0].endswith(f" {e2e:,.3f} ms")
        bar = lines[0].removeprefix("Base ").rsplit(" ", 2)[0]
        width = picture.size.width - len("Base ") - len(" 00,000.000 ms")
        scale = max(sum(p.base_ms for p in parts), sum(p.comp_ms for p in parts))
        assert len(bar) == sum(cells([p.base_ms for p in parts], scale, width))
        assert "Uncovered Communication 0.60→0.60" in lines[2] + lines[-2]
        spark = lines[-1]
        # One scale for both sides, 6.229 (base step 3) … 6.375 ms (comparison step 1), in 8
        # levels: base 6.340, 6.317, 6.229 → levels 5.3, 4.2, 0 → ▆▅▁; comparison 6.375, 6.353,
        # 6.265 → 7, 5.9, 1.7 → █▇▃ (StepCompare's E2E, rounded here by hand).
        assert steps["base_e2e"].round(3).tolist() == [6.34, 6.317, 6.229]
        assert steps["comp_e2e"].round(3).tolist() == [6.375, 6.353, 6.265]
        assert spark == "E2E per step base ▆▅▁  comp █▇▃  (6.229–6.375 ms)"
        await pilot.press("p")
        assert picture.has_class("hidden")
        await pilot.press("2", "p")
        assert [n.message for n in app._notifications][-1].startswith("pictures are on the Overall")


def test_bar_cells_add_up_and_degrade_to_glyphs() -> None:
    from perfcmp_core.insight import Part
    from perfcmp_tui.widgets.pictures import cells, stacked_bars

    assert cells([1.0, 1.0, 1.0], 3.0, 10) == [3, 4, 3]  # rounded at the ends: 3 + 4 + 3 = 10
    assert sum(cells([0.2, 0.2, 0.6], 2.0, 40)) == 20  # half the scale: half the bar
    parts = [Part("Matmul", 2.0, 3.0), Part("Free", 2.0, 1.0)]
    plain = stacked_bars(parts, 60, colour=False).plain.splitlines()
    # Without colour each segment has its own glyph, named in the legend.
    assert set(plain[0].split()[1]) == {"█", "▓"} and "█ Matmul 2.00→3.00" in plain[2]
    assert "▓ Free 2.00→1.00" in plain[2]
    coloured = stacked_bars(parts, 60, colour=True)
    assert set(coloured.plain.splitlines()[0].split()[1]) == {"█"}


@aio
async def test_advisor_share_bars_follow_the_advisor_table() -> None:
    """Each stage's bars are the Advisor table's category shares of that stage, per side: every
    segment as long as its share of the bar (rounded at the segment ends), base beside comparison,
    without colour one glyph per category."""
    from perfcmp_tui.widgets.pictures import GLYPHS, SHARE_CATEGORIES, AdvisorPicture, cells

    advisor = tables("infer")["Advisor"].data
    app = make_app("infer")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("8")
        picture = app.query_one("#pane-advisor #picture", AdvisorPicture)
        assert not picture.has_class("hidden")  # 44 rows: shown without asking
        lines = picture.render().plain.splitlines()
        assert lines[0] == "Category shares of each stage's busy time"
        assert lines[-1] == "  ".join(f"{g} {c}" for g, c in zip(GLYPHS, SHARE_CATEGORIES))
        width = picture.size.width
        bar_width = (width - len("Other") - len(" base ") - len("  comp ")) // 2
        stages = [line.split()[0] for line in lines[1:-1]]
        assert stages == ["DiT", "VAE", "Other", "All"]  # the table's stages, All last
        for line, stage in zip(lines[1:-1], stages):
            base_bar = line[len("Other") + len(" base "):][:bar_width]
            comp_bar = line[len("Other") + len(" base ") + bar_width + len("  comp "):]
            for side, bar in (("base", base_bar), ("comparison", comp_bar)):
                rows = advisor[(advisor["scope"] == side) & (advisor["stage"] == stage)]
                shares = rows.set_index("category")["share"]
                want = cells([float(shares[c]) for c in SHARE_CATEGORIES], 1.0, bar_width)
                got = [bar.count(GLYPHS[i]) for i in range(len(SHARE_CATEGORIES))]
                assert got == want, (stage, side, bar)
        # DiT by hand, 70 cells a side: base FA 22.96% → 16, FA + MatMul 76.89% → 54 (MatMul
        # 38); comparison FA 32.93% → 23, FA + MatMul 60.94% → 43 (MatMul 20).
        assert bar_width == 70
        base_dit, comp_dit = lines[1][11:81], lines[1][88:]
        assert (base_dit.count("█"), base_dit.count("▓")) == (16, 38)
        assert (comp_dit.count("█"), comp_dit.count("▓")) == (23, 20)
        await pilot.press("p")
        assert picture.has_class("hidden")


def test_share_bars_in_colour_and_without() -> None:
    import pandas as pd

    from perfcmp_core.compare.result import IS_TOTAL
    from perfcmp_tui.widgets.pictures import share_bars

    rows = [(s, "A", c, v, False) for s, vals in (("base", (0.5, 0, 0, 0, 0.5)),
                                                  ("comparison", (0.25, 0, 0, 0.75, 0)))
            for c, v in zip(("FA", "MatMul", "Vector", "Comm", "Other"), vals)]
    data = pd.DataFrame(rows, columns=["scope", "stage", "category", "share", IS_TOTAL])
    plain = share_bars(data, 52, colour=False).plain.splitlines()
    # 52 - 1 - 6 - 7 = 38 cells, 19 per side: base FA 10 (9.5 rounded), Other 9; comp 5 FA, 14 Comm.
    assert plain[1] == "A base " + "█" * 10 + "#" * 9 + "  comp " + "█" * 5 + "░" * 14
    coloured = share_bars(data, 52, colour=True)
    assert set(coloured.plain.splitlines()[1].split()[2]) == {"█"}


# -- steps --------------------------------------------------------------------------------------
def step_source(pair: str, *steps: int) -> Callable[[int | None, int | None],
                                                    Callable[..., Iterator[Event]]]:
    """The app's ``restart``: the pair's comparison cut to one of ``steps`` (or every step),
    computed in this process before the app starts."""
    from dataclasses import replace as with_

    from perfcmp_core.pipeline import comparison_events

    req = request(pair)
    runs = {(None, None): events(pair)}
    for step in steps:
        cut = with_(req, base_opts=with_(req.base_opts, step=step),
                    comp_opts=with_(req.comp_opts, step=step))
        runs[(step, step)] = tuple(comparison_events(cut))
    return lambda base_step, comp_step: replay(runs[(base_step, comp_step)])


@aio
async def test_step_picker_reruns_the_comparison_for_one_step() -> None:
    from perfcmp_tui.screens.step_picker import StepPicker

    steps = tables("npu")["StepCompare"].data
    app = make_app("npu", restart=step_source("npu", 2))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        overall = pane(app, "overall")
        data = tables("npu")["OverallMetrics"].data
        e2e = data.set_index(data["index"].str.strip())["base_ms"]["E2E Time"]
        assert overall._headlines[0].base == f"{e2e:,.3f} ms"
        await pilot.press("S")
        assert isinstance(app.screen, StepPicker)
        labels = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
        assert labels == ["all steps  (now)", "step 1", "step 2", "step 3"]
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        await settle(pilot, app)
        assert app.steps_now == (2, 2)
        # The Overall screen now is step 2 alone: StepCompare's row for step 2.
        assert overall._headlines[0].base == f"{steps['base_e2e'].iloc[1]:,.3f} ms"
        assert overall._headlines[0].comparison == f"{steps['comp_e2e'].iloc[1]:,.3f} ms"
        assert "StepCompare" not in overall.tables  # one step a side: nothing per step
        await pilot.press("S")
        await pilot.press("home", "enter")
        await pilot.pause()
        await settle(pilot, app)
        assert app.steps_now == (None, None) and overall._headlines[0].base == f"{e2e:,.3f} ms"


@aio
async def test_step_picker_without_steps_to_pick() -> None:
    app = make_app("npu")  # no restart: a replayed run cannot be rerun
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("S")
        await pilot.pause()
        assert [n.message for n in app._notifications][-1].startswith("one step on each side")


def _comparison_children() -> set[int | None]:
    """The comparison children of this process not stopped yet (those of every run of ours)."""
    from perfcmp_core import processes

    return {child.pid for child in processes._live if child.name == "perfcmp-compare"}


@aio
async def test_step_picker_reruns_in_a_child_process() -> None:
    """The real app's restart: the next run of the comparison child that made the first one (it
    holds both profiles), on the chosen step (`--base-step 3 --comparison-step 3`), its figures
    StepCompare's row for step 3; when the app ends, the child is gone."""
    from perfcmp_core import runner

    runner.prepare()
    steps = tables("npu")["StepCompare"].data
    app = build_app(request("npu"))
    app.timings = False
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app, timeout=120)
        children = _comparison_children()
        assert len(children) == 1  # the first run's child waits for a step change
        await pilot.press("S", "end", "enter")
        await pilot.pause()
        await settle(pilot, app, timeout=120)
        assert app.failed is None and app.steps_now == (3, 3)
        assert _comparison_children() == children  # the same child ran it
        head = pane(app, "overall")._headlines[0]
        assert head.base == f"{steps['base_e2e'].iloc[2]:,.3f} ms"
        assert app.outcome.loaded["base"]["selected_step"] == 3
        await pilot.press("Q")
    assert app.return_code == 0
    assert not _comparison_children()
    (pid,) = children
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


@aio
async def test_a_step_change_stopped_half_way_ends_its_child() -> None:
    """S, then S again before the first change finished: the run stopped half way ends its
    child (and everything it started), and the next change runs in a new one."""
    from perfcmp_core import runner

    runner.prepare()
    app = build_app(request("npu"))
    app.timings = False
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app, timeout=120)
        (first,) = _comparison_children()
        await pilot.press("S", "end", "enter")  # step 3, at once replaced by step 2
        await pilot.press("S", "home", "down", "down", "enter")
        await pilot.pause()
        await settle(pilot, app, timeout=120)
        assert app.failed is None and app.steps_now == (2, 2)
        assert app.outcome.loaded["base"]["selected_step"] == 2
        now = _comparison_children()
        assert len(now) == 1
        if first not in now:  # the first change was stopped half way: its child is gone
            with pytest.raises(ProcessLookupError):
                os.killpg(first, 0)
        await pilot.press("Q")
    assert not _comparison_children()


# -- kernels of a row ---------------------------------------------------------------------------
@aio
async def test_K_compares_the_kernels_of_an_operator() -> None:
    """fixtures/README.md #1: layer 1's QKV MatMulV3 100 → 130 µs, +90 µs over the run; the
    other kernels of aten::linear do not move, and they add up to the operator's device time."""
    from perfcmp_tui.screens.kernels import KernelScreen

    stat = tables("npu_ops")["OperatorCompareStatistic"].data.set_index("name")
    app = make_app("npu_ops")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        names = [r["Operator Name"] for r in shown(app)]
        await pilot.press(*["j"] * names.index("aten::linear"), "K")
        assert isinstance(app.screen, KernelScreen)
        k = app.screen.table.data.set_index("kernel")
        assert app.screen.table.title == "Kernels of aten::linear"
        assert k.index[0] == "aclnnAddmm_MatMulV3Common_MatMulV3"  # the largest difference first
        assert k["diff_us"].iloc[0] == pytest.approx(90.0, abs=1.5)  # + the 0–499 ns fractions
        assert (k["diff_us"].iloc[1:].abs() < 1e-9).all()
        for side in ("base", "comp"):
            assert k[f"{side}_us"].sum() / 1000 == pytest.approx(stat.loc["aten::linear", f"{side}_ms"],
                                                                 abs=1e-6)
        assert k["base_n"].iloc[0] == 15  # 5 linear layers × 3 steps launch MatMulV3
        body = text_of(app.screen.query_one("#kernels-head", Static))
        assert body.startswith("Kernels of aten::linear: 5 kernel names")
        await pilot.press("escape")
        assert not isinstance(app.screen, KernelScreen)


@aio
async def test_K_at_80_columns_draws_kernel_names_whole() -> None:
    """c10d::allreduce_'s six kernels differ only at their ends (``hcom_allReduce__…_0_1``): at
    80 columns each name folds onto more lines of its column, whole (issue 30 #4: cut in the
    middle, they could not be read whole)."""
    from rich.console import Console

    from perfcmp_tui.screens.kernels import KernelScreen, kernel_text

    app = make_app("npu_ops")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "K")
        assert isinstance(app.screen, KernelScreen)
        table = app.screen.table
    kernels = table.data["kernel"].astype(str).tolist()
    assert table.title == "Kernels of c10d::allreduce_" and len(kernels) == 6
    width = 80 * 96 // 100 - 6  # the box at 80 columns, as the screen sizes it
    rich = kernel_text(table, False, 0, width)
    name_width = rich.columns[0].width
    assert min(map(len, kernels)) > name_width  # too long for one line of the column
    console = Console(width=width, record=True, color_system=None)
    console.print(rich)
    lines = console.export_text().splitlines()
    lines = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Kernel Name")) + 1:]
    names: list[str] = []
    for line in lines:  # a row's first line carries its numbers; the name folds below it
        if line[name_width:].strip():
            names.append("")
        names[-1] += line[:name_width].rstrip()
    assert names == kernels


@aio
async def test_K_on_a_module_row_shows_its_kernels_and_call_stacks() -> None:
    from perfcmp_tui.screens.kernels import KernelScreen

    detail = tables("npu")["ModuleCompare"].data
    app = make_app("npu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("3", "v", "v")
        mods = pane(app, "modules")
        assert mods.current == "ModuleCompare"
        row = int(np.flatnonzero(~detail["_is_total"].to_numpy())[0])  # the first op row
        await pilot.press(*["j"] * list(mods.view.order()).index(row), "K")
        assert isinstance(app.screen, KernelScreen)
        stacks = app.screen.stacks
        assert stacks == (detail["base_stack"].iat[row], detail["comp_stack"].iat[row])
        side = text_of(app.screen.query(".drill-side").first(Static))
        assert side.startswith("Base call stack\n") and detail["base_stack"].iat[row].split(";")[0].strip() in side
        await pilot.press("q")
        await pilot.press("1", "K")
        assert [n.message for n in app._notifications][-1].startswith("this row has no kernels")


# -- the step explanation ------------------------------------------------------------------------
@aio
async def test_overall_opens_on_the_step_explanation_and_enter_drills_to_where_a_cause_happened() -> None:
    """The host-bound pattern pair (hand-computed in tests/test_explain.py): the screen opens on
    StepTime down to the causes, with the "why" sentence above; Enter on the sync cause opens
    its label, Enter on ``aten::item`` opens StepTimeWhere narrowed to it; q comes back."""
    app = make_app("hostbound")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.pane.current == "StepTime"
        extra = app.query_one("#pane-overall #extra-box", ExtraBox).text.plain
        assert "+0.70 ms/step (0.80 → 1.50 ms): device sync in aten::item +0.32" in " ".join(extra.split())
        labels = [label(r["Where the time went"]) for r in shown(app)]
        assert "aten::item" not in labels  # labels start folded under their cause
        sync = labels.index("synchronisation (host waited for the device)")
        assert shown(app)[sync]["Diff(ms)"] == "+0.32"
        for _ in range(sync):
            await pilot.press("j")
        await pilot.press("enter")  # unfold the cause
        labels = [label(r["Where the time went"]) for r in shown(app)]
        assert labels[sync + 1] == "aten::item"
        await pilot.press("j", "enter")  # a label: where it happened
        assert app.pane.current == "StepTimeWhere"
        rows = shown(app)
        assert [(r["Label"], r["Step"], r["Comp Time(ms)"], r["Comp Intervals"]) for r in rows] == \
               [("aten::item", "1", "0.32", "8")]
        await pilot.press("q")
        assert app.pane.current == "StepTime"
        await pilot.press("Q")
    assert app.return_code == 0
