"""The Timeline screen (`T`, issue 26) in Pilot, on the hand-timed host-bound pair
(fixtures/README.md: one step each, 800 µs vs 1500 µs; tests/test_lanes.py checks its cells).

What the screen draws comes from perfcmp_core.lanes; here: the keys change the view as they
say, the cursor names what lies under it on both sides, Enter leads to the op's rows on the
Operators screen, and the table keys keep their meaning outside the Timeline.
"""

from __future__ import annotations

import pytest

from tests.tui_support import ROOT, aio, make_app, settle, shown, text_of

US = 1000


def _strips(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.text for s in app.screen.view._strips]


async def _opened(pilot, app):  # type: ignore[no-untyped-def]
    """The Timeline opened with T once the comparison finished; its view."""
    from perfcmp_tui.screens.timeline import TimelineScreen

    await settle(pilot, app)
    await pilot.press("T")
    await pilot.pause()
    assert isinstance(app.screen, TimelineScreen)
    return app.screen.view


@aio
async def test_T_draws_both_steps_and_the_keys_move_the_view() -> None:
    from perfcmp_tui.screens.timeline import TimelineScreen

    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(pilot, app)
        lines = _strips(app)
        assert lines[0].startswith("BASE step 1 · 0.800 ms · showing 0.000 ms … 1.500 ms")
        titles = [line[:16].strip() for line in lines]
        assert titles[2:5] == ["compute s7", "host t19392", "idle"]
        assert lines[5].startswith("COMPARISON step 1 · 1.500 ms")
        assert view.cells == 80 - 16 - 1  # titles take a fifth of the width
        # common scale: the base's 800 µs end just past the middle, its lanes blank after
        end = int(0.8 / 1.5 * view.cells) + 1
        assert lines[2][17 + end:].strip() == "" and lines[2][17:17 + end].strip() != ""
        await pilot.press("o")  # each step on its own length
        assert view.side_views() == ((0.0, 800 * US), (0.0, 1500 * US))
        assert _strips(app)[0].startswith("BASE step 1 · 0.800 ms · showing 0.000 ms … 0.800 ms")
        await pilot.press("o", "plus")  # zoom in twice around the cursor: the middle of cell 0 stays put
        f0 = 0.5 / view.cells - 0.5 * 0.5 / view.cells
        assert (view.f0, view.f1) == pytest.approx((f0, f0 + 0.5))
        await pilot.press("l")  # pan a quarter of the width
        assert view.f0 == pytest.approx(f0 + 0.5 * (view.cells // 4) / view.cells)
        await pilot.press("h", "minus")
        assert (view.f0, view.f1) == (0.0, 1.0)
        await pilot.press("plus", "plus", "0")
        assert (view.f0, view.f1) == (0.0, 1.0)
        await pilot.press("a")  # no backward op in these steps: nothing to align
        assert not view.anchored
        assert any("nothing to align" in str(n.message) for n in app._notifications)
        head = text_of(app.screen.query_one("#timeline-head"))
        assert head.startswith("Timeline · common scale · a cell is 0.024 ms")  # 1.5 ms / 63
        await pilot.press("q")
        assert not isinstance(app.screen, TimelineScreen)


@aio
async def test_cursor_names_both_sides_and_enter_opens_the_op() -> None:
    from perfcmp_tui.screens.timeline import TimelineScreen

    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(pilot, app)
        # cell 8 of 63 over 1.5 ms: 202.4 µs — base: gemm (115–415 µs, launched by aten::linear)
        # under aten::add (190–230); comparison: still the load_batch frame (host work, 2–298 µs)
        await pilot.press(*["right"] * 8)
        assert view.cursor == 8 and view.cursor_times()[0] == pytest.approx(8.5 * 1500 / 63 * US)
        under = text_of(app.screen.query_one("#timeline-under")).splitlines()
        assert under[0].startswith("base +0.202 ms: compute s7: compute gemm_kernel · stream 7 · op aten::linear"
                                   " · 0.300 ms at +0.115 ms; host t19392: aten::add · 0.040 ms at +0.190 ms")
        assert under[1].startswith("comparison +0.202 ms: idle: idle, host work: train.py(12): load_batch")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, TimelineScreen)
        assert app.pane.spec.id == "operators"
        names = {r["Operator Name"] for r in shown(app)}
        assert names == {"aten::linear"}


@aio
async def test_table_keys_keep_their_meaning_outside_the_timeline() -> None:
    """`-` / `+` hide and show a column on a table, `0` is no key without clusters; on the
    Timeline they zoom and fit. S with one step per side says there is nothing to pick."""
    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "l", "minus")
        assert len(app.pane.view.hidden) == 1
        await pilot.press("plus")
        assert not app.pane.view.hidden
        await pilot.press("T", "S")
        await pilot.pause()
        assert app.screen.__class__.__name__ != "TimelineScreen"
        assert any("one step on each side" in str(n.message) for n in app._notifications)


@aio
async def test_T_on_an_operator_row_marks_where_that_op_runs() -> None:
    """`T` on Operators' aten::mul row: the marks row holds ▾ wherever aten::mul (the host op,
    or a kernel it launched) covers most of a cell, on both sides; the cursor starts at its
    first cell on the base side (240 µs of 1.5 ms in 63 cells: cell 10)."""
    from perfcmp_core.lanes.picture import FOCUS, draw, marks

    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        names = [r["Operator Name"] for r in shown(app)]
        await pilot.press(*["j"] * names.index("aten::mul"), "T")
        await pilot.pause()
        view = app.screen.view
        assert view.op == "aten::mul" and view.cursor == int(240 / 1500 * view.cells) == 10
        lines = _strips(app)
        marked = [line[17:] for line in lines if line.startswith("marks")]
        assert len(marked) == 2
        for side, (t0, t1), row in zip(view.sides, view.side_views(), marked):
            expect = marks(side, [draw(lane, t0, t1, view.cells) for lane in side.lanes], set(), "aten::mul")
            assert row == expect and FOCUS in row
        # base: the host op 240–390 µs and its kernel 620–720 µs
        cells = [i for i, c in enumerate(marked[0]) if c == FOCUS]
        assert cells[0] == 10 and cells[-1] == int(720 / 1500 * 63)
        legend = text_of(app.screen.query_one("#timeline-legend"))
        assert "▾ aten::mul runs" in legend


@aio
async def test_no_color_draws_the_same_glyphs_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(pilot, app)
        assert not view.colour
        colours = {seg.style.color for strip in view._strips for seg in strip if seg.style}
        assert colours <= {None}
        assert "▂" in _strips(app)[2] and "H" in _strips(app)[4]


H200 = ROOT.parent / "shared" / "data" / "gpu-real" / "h200"
REAL_PAIR = (H200 / "gpt2_train_bf16_base.pt.trace.json.gz", H200 / "gpt2_train_bf16_hostbound.pt.trace.json.gz")


@pytest.mark.skipif(not REAL_PAIR[0].exists(), reason="../shared/data absent")
def test_timeline_in_a_real_terminal_on_a_real_pair() -> None:
    """The installed command in tmux on the real host-bound GPT-2 pair: T draws both median
    steps, → moves the cursor by one cell of the longer step, q closes the Timeline."""
    import shutil

    from perfcmp_core.explain import explain_profile
    from perfcmp_core.lanes.build import median_step
    from perfcmp_core.load import load_profile
    from tests.test_tui_e2e import EXE, READY, Terminal, app_command

    if shutil.which("tmux") is None or not EXE.exists():
        pytest.skip("tmux or the installed command is missing")
    windows = []
    for path in REAL_PAIR:
        ex = explain_profile(load_profile(str(path)))
        w = ex.windows.set_index("step")
        step = median_step(ex)
        windows.append((step, int(w.at[step, "end_ns"] - w.at[step, "start_ns"])))
    cell = max(n for _, n in windows) / (120 - 22 - 1)  # 120 columns: titles 22, a space
    term = Terminal(app_command(*map(str, REAL_PAIR)), (120, 40))
    try:
        term.wait(READY, absent="Esc / q cancels", timeout=180)
        term.keys("T")
        screen = term.wait("BASE step", "COMPARISON step", "idle by cause")
        for (step, n), side in zip(windows, ("BASE", "COMPARISON")):
            assert f"{side} step {step} · {n / 1e6:,.3f} ms" in screen
        assert f"base +{0.5 * cell / 1e6:,.3f} ms:" in screen
        term.keys("Right", "Right", "Right")
        screen = term.wait(f"base +{3.5 * cell / 1e6:,.3f} ms:")
        assert f"comparison +{3.5 * cell / 1e6:,.3f} ms:" in screen  # one scale: the same time
        term.keys("q")
        term.wait(READY, absent="BASE step")
        term.keys("Q")  # q on loaded results asks first; Q quits at once
        term.wait("EXIT:0")
    finally:
        term.close()


@aio
async def test_a_aligns_the_backward_passes() -> None:
    """The GPU training pair (fixtures/README.md): `a` shifts the comparison's view by how much
    later its first backward op starts; `A` undoes it."""
    from perfcmp_core.lanes.picture import anchor_ns

    app = make_app("gpu")
    async with app.run_test(size=(120, 40)) as pilot:
        view = await _opened(pilot, app)
        shift = anchor_ns(view.sides[1]) - anchor_ns(view.sides[0])
        before = view.side_views()
        await pilot.press("a")
        assert view.anchored and view.side_views() == (before[0], (before[1][0] + shift, before[1][1] + shift))
        assert "to align the first backward op (anchor 1 of 7)" in text_of(app.screen.query_one("#timeline-head"))
        await pilot.press("A")
        assert not view.anchored and view.side_views() == before


@aio
async def test_a_steps_through_the_top_level_modules() -> None:
    """After the backward pass, `a` anchors at the start of each module directly under the GPU
    fixture's TransformerLM_0 (tests/test_lanes.py reads them from the trace): zoomed in, the
    cursor lands on TransformerLayer_1's first cell, which names that layer on both sides; the
    comparison is shifted by how much later its layer 1 starts; `A` steps back to layer 0 (no
    shift); past the last module `a` turns the anchor off."""
    app = make_app("gpu")
    async with app.run_test(size=(120, 40)) as pilot:
        view = await _opened(pilot, app)
        layer = [next(lane for lane in side.lanes if lane.title == "modules L1") for side in view.sides]
        starts = [float(lane.index.start[list(lane.name).index("TransformerLayer_1")]) for lane in layer]
        await pilot.press("plus", "plus", "plus", "plus", *["a"] * 5)
        assert view.anchor is not None and view.anchor.label == "module TransformerLayer_1"
        (b0, b1), (c0, c1) = view.side_views()
        assert (c0 - b0, c1 - b1) == pytest.approx((starts[1] - starts[0],) * 2) and starts[1] > starts[0]
        cell = (b1 - b0) / view.cells
        assert b0 + view.cursor * cell == pytest.approx(starts[0])  # the cursor's cell starts there
        under = text_of(app.screen.query_one("#timeline-under")).splitlines()
        assert all("modules L1: TransformerLayer_1 · " in line for line in under)
        head = text_of(app.screen.query_one("#timeline-head"))
        shift_ms = f"{(starts[1] - starts[0]) / 1e6:,.3f} ms"
        assert f"comparison shifted {shift_ms} to align module TransformerLayer_1 (anchor 5 of 7)" in head
        await pilot.press("A")
        assert view.anchor.label == "module TransformerLayer_0" and view.anchor.shift == 0
        await pilot.press("a", "a", "a", "a")  # layer 1, RMSNorm_0, Linear_8, none
        assert not view.anchored
        (b0, _), (c0, _) = view.side_views()
        assert b0 == c0


@aio
async def test_T_on_a_row_naming_nothing_that_runs_marks_nothing() -> None:
    """An API row naming a call made inside ops (cudaLaunchKernel: never an outermost op, nor a
    kernel): the Timeline opens unmarked and says why; a kernel class row (Kernels) names no op
    at all, and opens it unmarked too."""
    from perfcmp_tui.screens.timeline import TimelineScreen

    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("7")
        names = [r["API Name"] if "API Name" in r else next(iter(r.values())) for r in shown(app)]
        await pilot.press(*["j"] * names.index("cudaLaunchKernel"), "T")
        await pilot.pause()
        assert app.screen.view.op == "" and not any(line.startswith("marks") for line in _strips(app))
        assert any("cudaLaunchKernel does not run as an outermost op, a kernel or a module" in str(n.message)
                   for n in app._notifications)
        await pilot.press("q", "6", "T")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen) and app.screen.view.op == ""


@aio
async def test_finished_results_are_kept_out_of_full_collections() -> None:
    """Once the comparison finished, its tables are out of the collector's full scans (they
    cost a key 110–200 ms on the 0.9 GB NPU Text pair, docs/performance.md); a rerun (`S`) and
    closing the app hand them back, so cycles among them can still go."""
    import gc

    app = make_app("hostbound")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        table = app.outcome.tables["Timeline"]
        assert gc.get_freeze_count() > 0 and not any(o is table for o in gc.get_objects())
        app._rerun()
        assert gc.get_freeze_count() == 0 and any(o is table for o in gc.get_objects())
        await settle(pilot, app)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


@aio
async def test_T_on_a_module_tree_row_marks_that_modules_span() -> None:
    """`T` on the Modules tree's TransformerLM_0 row (the GPU training fixture's model, the root
    of the tree, on no module lane) and on its TransformerLayer_1 row: the marks row holds ▾ over
    every cell the module's frame overlaps on each side — worked out here from the frame's
    bounds in the step — and the cursor starts on its first cell."""
    import math

    from perfcmp_core.lanes.picture import FOCUS

    app = make_app("gpu")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        assert app.pane.view.table.name == "ModuleTree"
        for module in ("TransformerLM_0", "TransformerLayer_1"):
            names = [r["Module Name"].strip("▸▾ ") for r in shown(app)]
            await pilot.press("g", *["j"] * names.index(module), "T")
            await pilot.pause()
            view = app.screen.view
            assert view.op == module
            marked = [line[23:] for line in _strips(app) if line.startswith("marks")]
            assert len(marked) == 2
            for side, (t0, t1), row in zip(view.sides, view.side_views(), marked):
                frames = [(s, e) for n, s, e in zip(side.spans.name, side.spans.start, side.spans.end) if n == module]
                assert len(frames) == 1  # once per step
                (s, e), cell = frames[0], (t1 - t0) / view.cells
                expect = [math.floor((s - t0) / cell) <= i < math.ceil((e - t0) / cell) for i in range(view.cells)]
                assert [c == FOCUS for c in row] == expect and any(expect)
            first = min(s for n, s in zip(view.sides[0].spans.name, view.sides[0].spans.start) if n == module)
            assert view.cursor == int(first / view.side_views()[0][1] * view.cells)
            assert f"▾ {module} runs" in text_of(app.screen.query_one("#timeline-legend"))
            await pilot.press("q", "g", "enter")  # back on the tree: open the model's node
            await pilot.pause()
        # the model is on no lane (one frame at its level per step); layer 1 is on "modules L1"
        assert not any("TransformerLM_0" in set(lane.name) for side in view.sides for lane in side.lanes)
        # a backward pseudo-module's row is no frame, though named like the forward module it ran for
        from perfcmp_tui.screens.timeline import row_op

        data = app.pane.view.table.data
        back = data["_path"].astype(str).str.contains("BACKWARD", regex=False).to_numpy()
        named = (data["module"] == "LayerNorm_3").to_numpy()
        assert back[named].any() and (~back[named]).any()
        assert {row_op("modules", app.pane.view.table, int(r)) for r in named.nonzero()[0]} == {"", "LayerNorm_3"}
        assert all(row_op("modules", app.pane.view.table, int(r)) == "" for r in (named & back).nonzero()[0])
