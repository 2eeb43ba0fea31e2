"""The table widget's own keys and layout (issue 16): Δ%, columns, truncation, search, copy.

Pure layout helpers are checked by hand; every key is driven through a Pilot on the fixture pairs
and compared with the core tables (tests/tui_support.py), never with the app's own formatter.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from perfcmp_core.compare.result import is_ratio
from perfcmp_core.view import Search, TableView, clip_text, display_header
from perfcmp_tui.app import PerfCmpApp
from perfcmp_tui.screens.drill import DrillScreen
from perfcmp_tui.screens.sort_picker import SortPicker
from perfcmp_tui.widgets.frame_view import header_width, shorten, split_header
from tui_support import aio, frame, make_app, same, settle, shown, signed, tables, text_of

SCREENS = "12345678"


def status(app: PerfCmpApp) -> str:
    return text_of(app.pane.query_one("#pane-status"))


def drawn_columns(app: PerfCmpApp) -> list[str]:
    f = frame(app)
    return [f.headers[s.column] for s in f.slots()]


# -- layout helpers, by hand ---------------------------------------------------------------------
def test_shorten_keeps_both_ends_of_a_path() -> None:
    path = "[ BACKWARD ]/ TransformerLM_0/ TransformerLayer_1/ MLP_1/ Linear_6"
    assert shorten(path, 30) == "[ BACKWARD ]/… MLP_1/ Linear_6"
    assert shorten(path, len(path)) == path
    assert shorten("/" + path, 31) == "/[ BACKWARD ]/… MLP_1/ Linear_6"  # a root "/" first
    # Words keep whole last words, up to half the width, after the head cut at its end (issue
    # 30 #8): 25 − 1 − len(" MmBackward0") = 12 cells of head.
    name = "autograd::engine::evaluate_function: MmBackward0"
    assert shorten(name, 25) == "autograd::en… MmBackward0"
    # Other text keeps two fifths of its head and the rest of its tail.
    cut = shorten("autograd::engine::evaluate_function:MmBackward0", 25)
    assert len(cut) == 25 and cut.startswith("autograd:") and cut.endswith(":MmBackward0")
    assert shorten("abc", 1) == "…" and shorten("abc", 0) == ""


def test_headers_split_on_two_lines_and_are_never_cut() -> None:
    assert split_header("Diff Duration(ms)", 30) == ("Diff Duration(ms)", "")
    # Split where the longer line is shortest, counting the sort mark after the second line.
    assert split_header("Device Total Time Diff(ms)", 17) == ("Device Total", "Time Diff(ms)")
    assert header_width("Device Total Time Diff(ms)") == len("Time Diff(ms)") + 2
    assert header_width("Δ%") == 4


def test_clip_text_keeps_head_and_tail_on_one_line() -> None:
    text = "a\r\nb" + "x" * 500 + "END"
    clipped = clip_text(text, 40)
    assert len(clipped) == 40 and clipped.startswith("a⏎b") and clipped.endswith("xEND")
    assert "…" in clipped


def test_search_text_alternatives_and_regex() -> None:
    hits = Search.compile("MatMul|gelu").hits(["aten::matmul", "aten::gelu", "aten::add"])
    assert hits.tolist() == [True, True, False]
    assert Search.compile("aten|").hits(["aten::add", "x"]).tolist() == [True, False]
    regex = Search.compile(r"^aten::(add|mul)$")
    assert regex.is_regex and regex.hits(["aten::add", "aten::addmm", "aten::mul"]).tolist() == \
        [True, False, True]
    broken = Search.compile("aten::add(")  # no valid regex: searched as it stands
    assert not broken.is_regex and broken.hits(["aten::add(x)", "aten::add"]).tolist() == \
        [True, False]


# -- defect 1: one meaning of "%" -----------------------------------------------------------------
@aio
async def test_every_ratio_header_on_every_screen_says_delta_percent() -> None:
    app = make_app("npu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        for key in SCREENS:
            await pilot.press(key)
            f = frame(app)
            if f.view is None:
                continue
            for col, header in zip(f.columns, f.headers):
                assert ("Ratio" in header) == (not is_ratio(col) and "Ratio" in col.header)
                if is_ratio(col):
                    assert header.startswith("Δ%"), header


@aio
async def test_api_ratios_read_as_the_change() -> None:
    """ApiCompare's ratios are bare factors in the workbook (3.49); on screen +249.00%."""
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("7")
        row = next(r for r in shown(app) if r["api name"] == "aten::to")
        ratio = float(data.loc[data["name"] == "aten::to", "total_ratio"].iloc[0])
        assert row["Δ% Total"] == f"▲{(ratio - 1) * 100:+,.2f}%"


# -- defect 3: truncation and the name column ---------------------------------------------------
@aio
async def test_name_column_grows_with_the_terminal_and_resizes_with_keys() -> None:
    widths = {}
    for size in ((80, 24), (200, 50)):
        app = make_app("npu")
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app)
            await pilot.press("2")  # autograd::engine::evaluate_function: … names are long
            f = frame(app)
            widths[size] = f.slots()[0].width
            if size == (80, 24):
                await pilot.press("greater_than_sign")
                assert f.slots()[0].width == widths[size] + 4
                await pilot.press("less_than_sign", "less_than_sign")
                assert f.slots()[0].width == widths[size] - 4
    assert widths[(200, 50)] > widths[(80, 24)] + 20


@aio
async def test_backward_rows_keep_their_direction_and_leaf() -> None:
    """`[ BACKWARD ]/ TransformerLM_0/ …/ Linear_6` cut at 80 columns still says both (the
    module statistic names each module by its whole path)."""
    table = tables("npu")["ModuleCompareStatistic"]
    key = next(c.key for c in table.columns if c.header == "Module Name")
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("3", "v")
        f = frame(app)
        assert f.view is not None and f.view.table.name == table.name
        label = f.headers.index("Module Name")
        checked = 0
        for i, row in enumerate(f.view.order().tolist()):
            full = str(table.data[key].iloc[row])
            cell = f.row_cells(i)[label].strip()
            full = full.removeprefix("/")  # the statistic's paths start at the root, "/"
            cell = cell.removeprefix("/")
            if not full.startswith("[ BACKWARD ]") or "/" not in full or cell == full:
                continue
            leaf = full.rsplit("/", 1)[1]
            # The direction in full, then the leaf (or, when even it is too long, its end).
            end = cell.split("…")[-1]
            assert cell.startswith("[ BACKWARD ]/"), (cell, full)
            assert leaf.endswith(end) and len(end) >= min(len(leaf), 8), (cell, full)
            checked += 1
        assert checked > 0


@aio
async def test_headers_are_never_cut_at_80_columns() -> None:
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        for key in SCREENS:
            await pilot.press(key)
            f = frame(app)
            if f.view is None:
                continue
            for header, drawn in zip(f.headers, f.header_cells()):
                assert drawn.removesuffix(" ▼").removesuffix(" ▲") == header


@aio
async def test_cell_line_shows_the_cursor_cell_in_full() -> None:
    data = tables("npu")["ModuleTree"].data
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("3", "G")
        f = frame(app)
        row = f.current_row
        assert row is not None
        line = text_of(app.pane.query_one("#cell-line"))
        assert line == f"Module Name: {data['module'].iloc[row]}"
        await pilot.press("f")
        assert isinstance(app.screen, DrillScreen)


# -- defect 4: columns ----------------------------------------------------------------------------
@aio
async def test_l_moves_by_whole_columns_and_the_frozen_label_stays_on_comm() -> None:
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("4")
        f = frame(app)
        label = f.row_cells(0)[0]
        n = len(f.columns)
        await pilot.press(*["l"] * (n - 1))
        assert f.col == n - 1 and f.col in [s.column for s in f.slots()]
        line = "".join(seg.text for seg in f.render_line(f.header_height))
        assert line.startswith(label)
        # Every drawn column is whole: its header and its cells fit the width it is drawn at.
        for slot in f.slots():
            assert slot.width == f._widths[slot.column]
        # Expanded, a task row's pinned label names its task (the sheet writes "|" there).
        data = tables("npu")["CommunicationCompare"].data
        await pilot.press("g", "enter")
        order = f.view.order()
        assert data["base_name"].iloc[order[1]] == "|"
        task = data["base_task"].iloc[order[1]] or data["comp_task"].iloc[order[1]]
        assert f.row_cells(1)[0].strip() == task


@aio
async def test_base_and_comparison_of_one_quantity_are_adjacent() -> None:
    app = make_app("npu")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        for key in "2347":
            await pilot.press(key)
            headers = frame(app).headers
            for i, h in enumerate(headers):
                if h.startswith("Base ") and "Comp " + h[5:] in headers:
                    assert headers[i + 1] == "Comp " + h[5:], (key, h)


@aio
async def test_operators_at_120_columns_show_both_sides() -> None:
    app = make_app("npu_ops")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        drawn = drawn_columns(app)
        assert "Base Device Duration(ms)" in drawn and "Comp Device Duration(ms)" in drawn


@aio
async def test_hide_and_show_columns() -> None:
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("7", "l")
        f = frame(app)
        hidden = f.headers[f.col]
        await pilot.press("minus")
        assert hidden not in drawn_columns(app) and "1 hidden column (+)" in status(app)
        await pilot.press("minus")
        assert "2 hidden columns (+)" in status(app)
        await pilot.press("h", "h", "minus")  # the name column stays
        assert f.col == 0 and "2 hidden columns (+)" in status(app)
        await pilot.press("plus")
        assert hidden in f.headers and "hidden" not in status(app)
        assert [f.headers[s.column] for s in f.slots()][1] == hidden


@aio
async def test_sorting_brings_the_column_into_view() -> None:
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("7")
        assert "Comp Calls" not in drawn_columns(app)
        await pilot.press("s", *"comp calls", "enter")
        assert not isinstance(app.screen, SortPicker)
        assert "Comp Calls" in drawn_columns(app) and frame(app).headers[frame(app).col] == "Comp Calls"
        expected = data.sort_values("comp_calls", ascending=False, kind="stable")
        assert same([r["api name"] for r in shown(app)], list(expected["name"]))


# -- add 3: search, n / N, u ----------------------------------------------------------------------
@aio
async def test_filter_alternatives_and_regex() -> None:
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("7", "vertical_line", *"gelu|LAYER_norm", "enter")
        want = [n for n in data["name"] if "gelu" in n.lower() or "layer_norm" in n.lower()]
        assert [r["api name"] for r in shown(app)] == want and want
        await pilot.press("vertical_line", *["backspace"] * 20, *r"^aten::(add|mul)$", "enter")
        want = [n for n in data["name"] if re.fullmatch(r"aten::(add|mul)", n, re.IGNORECASE)]
        assert [r["api name"] for r in shown(app)] == want and want
        assert "regex" in status(app)


@aio
async def test_match_in_hidden_kernel_text_is_hinted_and_n_goes_there() -> None:
    """MEMCPY_ASYNC is a kernel of aten::to: it is in the Kernel Details columns only."""
    data = tables("npu_ops")["OperatorCompare"].visible()
    app = make_app("npu_ops")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "v", "vertical_line", *"memcpy_async", "enter")
        f = frame(app)
        hits = data["base_details"].str.lower().str.contains("memcpy_async") | \
            data["comp_details"].str.lower().str.contains("memcpy_async")
        assert len(f.view) == int(hits.sum()) > 0
        assert "only in Base Kernel Details, Comp Kernel Details" in status(app)
        await pilot.press("n")
        assert f.headers[f.col] == "Base Kernel Details" and f.cursor == 0
        await pilot.press("n")
        assert f.headers[f.col] == "Comp Kernel Details" and f.cursor == 0
        await pilot.press("n")
        assert f.cursor == (1 if len(f.view) > 1 else 0)
        await pilot.press("N", "N")
        assert f.headers[f.col] == "Base Kernel Details" and f.cursor == 0
        assert f.col in [s.column for s in f.slots()]


@aio
async def test_u_hides_unchanged_rows() -> None:
    stat = tables("npu_ops")["OperatorCompareStatistic"].data
    app = make_app("npu_ops")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "u")
        changed = stat[(stat["diff"] != 0) | (stat["ratio"] != 1)]
        assert [r["Operator Name"] for r in shown(app)] == list(changed["name"])
        assert 0 < len(changed) < len(stat) and "unchanged hidden (u)" in status(app)
        await pilot.press("u")
        assert len(shown(app)) == len(stat)


def test_u_on_a_tree_keeps_the_path_to_each_change() -> None:
    table = tables("npu")["ModuleTree"]
    view = TableView(table)
    view.expanded = set(view.parent_nodes())
    view.toggle_unchanged()
    df = table.data
    shown_rows = set(view.order().tolist())
    changed = set(np.flatnonzero((df["diff_total"].to_numpy() != 0)
                                 | (df["ratio"].to_numpy() != 1)).tolist())
    assert changed and changed <= shown_rows
    node_row = {int(n): i for i, n in enumerate(df["_node"])}
    for row in shown_rows:  # each shown row changed or leads to a change below it
        parent = int(df["_parent"].iloc[row])
        assert parent < 0 or node_row[parent] in shown_rows


# -- add 4: copy -----------------------------------------------------------------------------------
@aio
async def test_y_copies_the_cell_and_Y_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    data = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("7", "y")
        assert copied == [data["name"].iloc[0]]
        await pilot.press("l", "y")
        f = frame(app)
        # A number is copied at its stored precision (issue 30 #7: the screen rounds it).
        assert float(copied[-1]) == pytest.approx(data[f.columns[f.col].key].iloc[0], rel=1e-14)
        await pilot.press("Y")
        cells = copied[-1].split("\t")
        assert len(cells) == len(f.columns) and cells[0] == data["name"].iloc[0]
        row = data.iloc[0]
        base = f.headers.index("Base Total Duration(ms)")
        assert float(cells[base]) == pytest.approx(row["base_total"], rel=1e-14)


# -- add 5: absolute diffs on Kernels and API ------------------------------------------------------
@aio
async def test_kernels_and_api_show_absolute_diffs_and_d_sorts_by_them() -> None:
    kernels = tables("npu")["KernelCompare"].data
    api = tables("npu")["ApiCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        for key, data, label, header in (
                ("6", kernels, "Kernel", "Diff Total Duration(us)"),
                ("7", api, "api name", "Diff Total Duration(ms)")):
            await pilot.press(key, "d")
            diff = data["comp_total"] - data["base_total"]
            order = np.argsort(-diff.to_numpy(), kind="stable")
            rows = shown(app)
            assert [r[header] for r in rows] == [signed(v) for v in diff.to_numpy()[order]]
            name = "kernel" if key == "6" else "name"
            assert same([r[label] for r in rows], list(data[name].to_numpy()[order]))
            assert display_header(app.pane.view.table.column(
                app.pane.view.diff_key()), app.pane.view.table) == header
