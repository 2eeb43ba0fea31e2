"""Issue 30 #8 and #11 (the rest): at 80×24 class names cut as words, the Advisor's findings
reachable from the keyboard, the finish notice off the table; the module tree's columns in one
order on every run."""

from __future__ import annotations

from dataclasses import replace

from perfcmp_core.events import TableReady
from perfcmp_core.pipeline import comparison_events
from perfcmp_tui.app import PerfCmpApp
from perfcmp_tui.widgets.frame_view import shorten
from perfcmp_tui.widgets.pane import ExtraBox
from tui_support import (PAIRS, aio, events, frame, headers, make_app, open_view, replay,
                          request, settle, tables, text_of)

SMALL = (80, 24)


# -- 8: class names -----------------------------------------------------------------------------
def test_words_are_cut_as_words() -> None:
    """The head ends where the cut is, the tail is whole words (``Flash A…ion (Forward)`` showed
    the middle of "Attention"); `` / `` separates words, a ``/`` after a name is a path."""
    assert shorten("Flash Attention (Forward)", 21) == "Flash Atte… (Forward)"
    assert shorten("reduction / softmax / sort", 18) == "reduction… / sort"
    assert shorten("synchronisation (host waited for the device)", 18) == "synchroni… device)"  # 18 − 1 − len(" device)")
    assert shorten("[ BACKWARD ]/ Model/ MLP_1/ Linear_6", 24) == "[ BACKWARD ]/… Linear_6"
    assert shorten("at::native::vectorized_elementwise_kernel", 17) == "at::na…ise_kernel"
    for text in ("Flash Attention (Forward)", "copy / cast / memset", "Uncovered Communication Time"):
        for width in range(8, len(text) + 1):
            cut = shorten(text, width)
            assert len(cut) <= width
            head, _, tail = cut.partition("…")
            assert text.startswith(head) and text.endswith(tail)


@aio
async def test_overall_class_names_at_80_columns_keep_whole_last_words() -> None:
    """Every class, part and cause name of OverallMetrics and StepTime cut at 80×24 ends in
    whole words of its name (StepTime's level 3 are kernel and op names, cut in their middle)."""
    app = make_app("gpu")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        for name in ("OverallMetrics", "StepTime"):
            await open_view(pilot, app, name)
            view = app.pane.view
            view.expand_all(True)
            frame(app).refresh_data()
            data = tables("gpu")[name].data["index"]
            level = tables("gpu")[name].data["_level"]
            cut = 0
            for i, row in enumerate(view.order()):
                if level.iat[int(row)] > 2:
                    continue
                cell = frame(app).row_cells(i)[0].lstrip(" ▾▸")
                full = str(data.iat[int(row)]).strip()
                if "…" not in cell or " " not in full:
                    continue  # whole, or one word (a kernel name: cut in its middle)
                cut += 1
                head, _, tail = cell.partition("…")
                assert full.startswith(head.strip()) and full.endswith(tail), (cell, full)
                assert tail.startswith(" "), (cell, full)  # whole words after the cut
            assert cut > 0
        await pilot.press("Q")


# -- 8: the Advisor's findings --------------------------------------------------------------------
@aio
async def test_the_advisor_findings_scroll_with_brackets_at_80x24() -> None:
    """DiT + VAE pair: the findings run past the panel's share of 24 rows; `]` pages down to the
    last of them and `[` back, the panel's border says so (the panel had a fixed height, later
    findings could not be reached)."""
    app = make_app("infer")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("8")
        await pilot.pause()
        box = app.pane.query_one("#extra-box", ExtraBox)
        lines = box.text.plain.splitlines()
        assert box.max_scroll_y > 0 and box.scroll_y == 0
        assert "[ / ] scroll (1–" in str(box.border_subtitle)
        assert lines[-1].strip() and "driven by" in " ".join(lines[-2:])
        for _ in range(10):
            if box.scroll_y >= box.max_scroll_y:
                break
            await pilot.press("right_square_bracket")
            await pilot.pause()
        assert box.scroll_y == box.max_scroll_y  # the last finding in view
        assert str(box.border_subtitle).endswith(f"of {box.virtual_size.height} lines)")
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert box.scroll_y < box.max_scroll_y
        await pilot.press("Q")


# -- 8: the finish notice -------------------------------------------------------------------------
@aio
async def test_the_finish_time_is_in_the_status_line_not_a_toast_over_the_table() -> None:
    app = make_app("gpu", timings=True)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        assert not any("comparison finished" in n.message for n in app._notifications)
        status = text_of(app.pane.query_one("#pane-status"))
        assert "comparison finished in " in status and status.endswith(" s")
        await pilot.press("Q")


# -- 11: the module tree's column order ----------------------------------------------------------
def _one_step(pair: str) -> tuple:
    req = request(pair)
    return tuple(comparison_events(replace(req, base_opts=replace(req.base_opts, step=1),
                                           comp_opts=replace(req.comp_opts, step=1))))


@aio
async def test_the_module_tree_has_one_column_order_on_every_run() -> None:
    """The GPU pair whole and cut to step 1 (where Step no longer tells rows of one name apart
    and moved after Module Class), and the NPU pair: the same headers in the same order."""
    order = []
    for label, stream in (("gpu", events("gpu")), ("gpu step 1", _one_step("gpu")),
                          ("npu", events("npu"))):
        tree = next(e.table for e in stream if isinstance(e, TableReady) and e.table.name == "ModuleTree")
        assert len(tree.data), label
        base, comp, _ = PAIRS[label.split()[0]]
        app = PerfCmpApp(base, comp, replay(stream), timings=False)
        async with app.run_test(size=(160, 44)) as pilot:
            await settle(pilot, app)
            await pilot.press("3")
            await open_view(pilot, app, "ModuleTree")
            order.append([" ".join(h.split()) for h in headers(app)])
            await pilot.press("Q")
    assert order[0][:4] == ["Module Name", "Step", "Diff Total(us)", "Δ%"]
    assert order[0] == order[1] == order[2]
