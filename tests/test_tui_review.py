"""Issue 30: the app as a new user met it — each item reproduced as the review describes it.

Pilot tests on the fixture pairs (tests/tui_support.py replays core's events); every expected
figure comes from core's own tables or is worked out here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from perfcmp_core import report  # before insight: compare and insight import each other
from perfcmp_core.insight import ABSENT, figure
from perfcmp_tui.screens.help import HelpScreen
from perfcmp_tui.screens.step_picker import StepPicker
from test_tui_app import step_source
from tui_support import (PAIRS, ROOT, aio, change, events, fits, make_app, open_view,
                          operators_named, plain, replay, request, settle, shown, signed,
                          tables, text_of)

SMALL = (80, 24)


# -- 2: j / k in dialogs ------------------------------------------------------------------------
@aio
async def test_j_and_k_move_the_step_pickers_highlight() -> None:
    """`S j j Enter` picks step 2 (it used to keep "all steps": j did nothing)."""
    app = make_app("npu", restart=step_source("npu", 2))
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("S")
        assert isinstance(app.screen, StepPicker)
        options = app.screen.query_one(OptionList)
        await pilot.press("j", "j", "j", "k")
        assert options.highlighted == 2
        await pilot.press("G")
        assert options.highlighted == options.option_count - 1
        await pilot.press("g", "j", "j", "enter")
        await pilot.pause()
        await settle(pilot, app)
        assert app.steps_now == (2, 2)


@aio
async def test_j_and_k_scroll_the_help() -> None:
    app = make_app("npu")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one(VerticalScroll)
        assert box.max_scroll_y > 3  # the help is taller than 24 rows
        await pilot.press("j", "j", "j")
        await pilot.pause()
        assert box.scroll_y == 3
        await pilot.press("k")
        await pilot.pause()
        assert box.scroll_y == 2
        await pilot.press("G")
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y
        await pilot.press("g")
        await pilot.pause()
        assert box.scroll_y == 0


# -- 6: summary oddities -----------------------------------------------------------------------
REAL_NPU = ROOT.parent / "shared" / "data" / "npu-real-runs"
H200 = ROOT.parent / "shared" / "data" / "gpu-real" / "h200"


def test_zero_against_zero_is_not_new() -> None:
    """A wait of 0 against 0.1 µs prints 0.000 ms both sides: no change, not "new"; a real
    appearance (0 → 2.676 ms) still is "new"."""
    tiny = figure("of which wait", {"unit": "s", "base": 0.0, "comparison": 1e-7})
    assert (tiny.base, tiny.comparison, tiny.change) == ("0.000 ms", "0.000 ms", "")
    grew = figure("of which wait", {"unit": "s", "base": 0.0, "comparison": 0.002676})
    assert (grew.comparison, grew.change) == ("2.676 ms", "new")
    both_tiny = figure("x", {"unit": "s", "base": 2e-7, "comparison": 4e-7})
    assert both_tiny.change == ""  # 0.000 → 0.000 is not "+100.0%"
    # The summary leaves out a wait row that prints 0 on both sides.
    rows = report.summary_rows({"Uncovered Communication Time(Wait Time)": {
        "unit": "s", "base": 0.1, "comparison": 0.1, "base_wait": 0.0, "comparison_wait": 1e-7}})
    assert [r[0] for r in rows] == ["Uncovered Communication Time"]


def test_a_figure_one_side_lacks_is_absent_not_zero() -> None:
    absent = figure("SDMA Bandwidth", {"unit": "GB/s", "base": 15.654, "comparison": None})
    assert (absent.base, absent.comparison, absent.diff, absent.change) == (
        "15.65 GB/s", ABSENT, "", "")


@pytest.mark.skipif(not REAL_NPU.is_dir(), reason="real NPU runs absent (../shared/data)")
def test_summary_of_text_against_db_prints_the_dbs_bandwidth_as_absent(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The real rank 0, Text against Db: the Db export has no communication.json, so its SDMA
    bandwidth is absent — the summary used to print 15.65 → 0.00 GB/s −100.0%. The reference's
    own table (the golden) still reads 0.000GB/s there."""
    from perfcmp_tui.cli import main

    base, comp = REAL_NPU / "text/level1/rank0_ascend_pt", REAL_NPU / "db/level1/rank0_ascend_pt"
    assert main(["summary", str(base), str(comp), "--no-cache"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("SDMA Bandwidth")]
    assert line.split()[2:] == ["15.65", "GB/s", ABSENT]  # base figure, then absent; no diff
    assert "-100.0%" not in line


# -- 5: the biggest operator regressions --------------------------------------------------------
def result_of(pair: str):  # type: ignore[no-untyped-def]
    """The pair's whole ComparisonResult, folded from core's events as the app folds them."""
    from perfcmp_core.collect import ResultBuilder

    base, comp, _ = PAIRS[pair]
    builder = ResultBuilder(base, comp)
    for event in events(pair):
        builder.add(event)
    return builder.snapshot()


def test_top_regressions_list_operators_too_with_the_apps_change() -> None:
    """The module rows hold their ops, so the operator that grew most never showed: each table
    that ranks regressions gets its block, its change printed as the screens print Δ%."""
    text = report.top_regressions(result_of("npu"))
    blocks = {b.splitlines()[0].split(" (")[1].split(",")[0]: b.splitlines()[1:]
              for b in text.split("\n\n")}
    assert list(blocks) == ["ModuleCompareStatistic", "OperatorCompareStatistic"]
    ops = tables("npu")["OperatorCompareStatistic"].data
    ops = ops.sort_values("diff", ascending=False, kind="stable").head(10)
    assert len(blocks["OperatorCompareStatistic"]) == len(ops)
    for line, (_, row) in zip(blocks["OperatorCompareStatistic"], ops.iterrows()):
        name, diff, unit, ratio = line.split(". ", 1)[1].rsplit(None, 3)
        assert row["name"].startswith(name.rstrip("…").split("…")[0])
        assert (diff, unit) == (signed(row["diff"]), "ms") and ratio == f"({change(row['ratio'])})"


@pytest.mark.skipif(not (H200 / "gpt2_train_fp32_eager.pt.trace.json.gz").is_file(),
                    reason="real H200 traces absent (../shared/data)")
def test_summary_names_the_operators_that_grew_most_on_gpt2(
        capsys: pytest.CaptureFixture[str]) -> None:
    """fp32 eager → bf16 SDPA: the backward of the casts (ToCopyBackward0, +2.37 ms) and the
    casts (aten::to, +1.17 ms) grew most; the module list's top row reads +26.29% as the app does
    (it printed the workbook's ratio, 126.29%)."""
    from perfcmp_tui.cli import main

    code = main(["summary", str(H200 / "gpt2_train_fp32_eager.pt.trace.json.gz"),
                 str(H200 / "gpt2_train_bf16_sdpa_fusedadamw.pt.trace.json.gz"), "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Top 10 regressions (Operator"))
    assert lines[at + 1].split()[1:] == ["autograd::engine::evaluate_function:", "ToCopyBackward0",
                                         "+2.37", "ms", "(new)"]
    assert lines[at + 2].split()[1:4] == ["aten::to", "+1.17", "ms"]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Top 10 regressions (Module"))
    assert lines[at + 1].endswith("+0.56 ms  (+26.29%)")


def python_frames_around(trace: Path, pid: int, tid: int, start_ns: int) -> list[str]:
    """The non-module python_function frames of ``trace`` on that thread strictly holding
    ``start_ns``, outermost first — read from the raw JSON, independently of the loaders."""
    raw = json.loads(trace.read_text())["traceEvents"]
    held = [e for e in raw if e.get("cat") == "python_function" and e["pid"] == pid
            and e["tid"] == tid and e["ts"] * 1000 < start_ns < (e["ts"] + e["dur"]) * 1000
            and not e["name"].startswith("nn.Module:")]
    return [e["name"] for e in sorted(held, key=lambda e: (e["ts"], -e["dur"]))]


@aio
async def test_c_on_operators_shows_the_pairs_call_stacks() -> None:
    """`c` on OperatorCompare shows the Python frames around each op of the cursor pair (it said
    "this view has no call stacks"); on the statistic view it names the view that has them."""
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import LoadOptions

    base_trace = ROOT / PAIRS["gpu"][0]
    ops = load_profile(str(base_trace), LoadOptions(use_cache=False)).ops
    app = make_app("gpu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.press("c")
        await pilot.pause()
        assert [n.message for n in app._notifications][-1].startswith(
            "this view has no call stacks: OperatorCompare (v, or Enter")
        await open_view(pilot, app, "OperatorCompare")
        data = app.pane.view.table.data
        for _ in range(40):  # down to a pair whose base op runs inside a function of the model
            row = app.pane.frame.current_row
            if len(python_frames_around(base_trace, *ops.loc[data["_base_row"].iat[row],
                                        ["pid", "tid", "start_ns"]])) > 2:
                break
            await pilot.press("j")
        op = ops.loc[data["_base_row"].iat[row]]
        expected = python_frames_around(base_trace, int(op["pid"]), int(op["tid"]), int(op["start_ns"]))
        assert len(expected) > 2
        await pilot.press("c")
        await pilot.pause()
        panel = text_of(app.pane.query_one("#stack-base")).splitlines()
        assert panel == ["Base call stack", *expected]


# -- 1: a workbook of one step says which -------------------------------------------------------
@aio
async def test_workbook_exported_after_picking_a_step_names_it(tmp_path: Path) -> None:
    import openpyxl

    from perfcmp_core.export.xlsx import write_workbook

    app = make_app("npu", restart=step_source("npu", 2))
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("S", "j", "j", "enter")
        await pilot.pause()
        await settle(pilot, app)
        result = app.export_result()  # what `e` writes
    wb = openpyxl.load_workbook(write_workbook(result, tmp_path))
    base, comp, _ = PAIRS["npu"]
    titles = [c.value for c in wb["ModuleCompareStatistic"][1] if c.value]
    assert titles == [f"Base Profiling: {base} (step 2)", f"Comparison Profiling: {comp} (step 2)"]
    readme = {r[0].value: r[1].value for r in wb["README"].iter_rows() if len(r) > 1}
    assert readme["Steps compared"] == "step 2 of each side"


# -- 3: any base step against any comparison step -----------------------------------------------
@aio
async def test_step_picker_pairs_base_step_5_with_comparison_step_10() -> None:
    """5 steps against 12: comparison steps 7–12 could not be chosen, nor base step 5 against
    comparison step 10 (the command line allows both)."""
    app = make_app("npu")
    chosen: list[object] = []
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot, app)
        app.push_screen(StepPicker(list(range(1, 6)), list(range(1, 13)), (None, None)),
                        chosen.append)
        await pilot.pause()
        base, comp = (app.screen.query_one(f"#steps-{s}", OptionList) for s in ("base", "comparison"))
        assert comp.option_count == 13  # all steps + 12: every comparison step is there
        await pilot.press("G")  # base step 5; the comparison list follows: step 5
        await pilot.pause()
        assert (base.highlighted, comp.highlighted) == (5, 5)
        await pilot.press("l", "j", "j", "j", "j", "j", "enter")
        await pilot.pause()
    assert chosen == [(5, 10)]


@aio
async def test_step_picker_reruns_base_step_1_against_comparison_step_3() -> None:
    from dataclasses import replace as with_

    from perfcmp_core.pipeline import comparison_events

    req = request("npu")  # the run of base step 1 against comparison step 3, before the app
    cut = with_(req, base_opts=with_(req.base_opts, step=1), comp_opts=with_(req.comp_opts, step=3))
    runs = {(1, 3): tuple(comparison_events(cut))}

    def restart(b: int | None, c: int | None):  # type: ignore[no-untyped-def]
        return replay(runs[(b, c)])

    steps = tables("npu")["StepCompare"].data
    app = make_app("npu", restart=restart)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("S", "j", "l", "j", "j", "enter")
        await pilot.pause()
        await settle(pilot, app)
        assert app.steps_now == (1, 3)
        assert (app.outcome.loaded["base"]["selected_step"],
                app.outcome.loaded["comparison"]["selected_step"]) == (1, 3)
        head = app.pane._headlines[0]  # E2E: base step 1's, comparison step 3's (StepCompare)
        assert head.base == f"{steps['base_e2e'].iloc[0]:,.3f} ms"
        assert head.comparison == f"{steps['comp_e2e'].iloc[2]:,.3f} ms"


# -- 9: load failures ---------------------------------------------------------------------------
def bad_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A truncated gzip (the fixture GPU trace, its gzip cut in half) and a JSON that is not a
    trace (an object without events)."""
    import gzip

    packed = gzip.compress((ROOT / PAIRS["gpu"][0]).read_bytes())
    truncated = tmp_path / "cut.pt.trace.json.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    not_trace = tmp_path / "config.json"
    not_trace.write_text('{"model": "gpt2", "layers": 12}')
    return truncated, not_trace


def test_bad_inputs_are_reported_before_the_screen_both_of_them(tmp_path: Path) -> None:
    """In a real terminal: one line naming both files and exit code 2, no screen (it opened the
    app, then said "Cannot read the input" about the first only)."""
    from test_tui_e2e import Terminal, app_command

    truncated, not_trace = bad_inputs(tmp_path)
    term = Terminal(app_command(str(truncated), str(not_trace)), size=(200, 24), limit=60)
    try:
        term.wait("EXIT:", timeout=60)
        screen = term.tmux("capture-pane", "-p", "-J", "-t", "e")  # wrapped lines joined
    finally:
        term.close()
    lines = [ln.rstrip() for ln in screen.splitlines() if ln.strip()]
    assert lines[-1] == "EXIT:2" and len(lines) == 2, screen  # one line, then the exit status
    error = lines[0]
    assert error.startswith("perfcmp-tui: error: ") and "Cannot read" not in error
    assert f"{truncated}: is truncated" in error
    assert f"{not_trace}:" in error.split("; and ", 1)[1]


def test_both_bad_inputs_are_named_by_the_load_too(tmp_path: Path) -> None:
    """A pair too big to read before the screen fails in its load: both inputs are named there
    too, in one message (the comparison side's load is awaited)."""
    from perfcmp_core.errors import InputError
    from perfcmp_core.options import LoadOptions
    from perfcmp_core.pair import iter_pair

    truncated, not_trace = bad_inputs(tmp_path)
    opts = LoadOptions(use_cache=False)
    for parallel in (True, False):
        with pytest.raises(InputError) as caught:
            list(iter_pair(str(truncated), str(not_trace), opts, opts, parallel=parallel))
        base, comp = caught.value.message.split("; and ")
        assert base.startswith(f"{truncated}: is truncated") and comp.startswith(f"{not_trace}:")


@aio
async def test_after_a_failed_load_nothing_says_loading(tmp_path: Path) -> None:
    """Esc on the error: the screens say why they are empty and the header says "not loaded"
    (it kept "Overall: waiting for results…" and "loading…")."""
    from perfcmp_core.events import Failed, Planned
    from perfcmp_tui.app import PerfCmpApp
    from perfcmp_tui.screens.error import ErrorScreen
    from perfcmp_tui.widgets.inputs import InputsBar

    def source(should_stop):  # type: ignore[no-untyped-def]
        yield Planned(("load base", "load comparison"))
        yield Failed("cut.pt.trace.json.gz: is truncated (the gzip stream ends early)", is_input=True)

    app = PerfCmpApp("cut.pt.trace.json.gz", "config.json", source, timings=False)
    async with app.run_test(size=SMALL) as pilot:
        while not isinstance(app.screen, ErrorScreen):
            await pilot.pause(0.05)
        await pilot.press("escape")
        await pilot.pause()
        message = text_of(app.pane.query_one("#message"))
        assert "waiting for results" not in message
        assert message.startswith(f"{app.pane.spec.title}: nothing to show — the inputs could not "
                                  "be read (r on the error retries): cut.pt.trace.json.gz: is "
                                  "truncated")
        header = text_of(app.query_one(InputsBar))
        assert "loading…" not in header and header.count("· not loaded") == 2


# -- 10: the export dialog ----------------------------------------------------------------------
@aio
async def test_export_dialog_shows_the_absolute_folder_and_keeps_the_path_on_failure(
        tmp_path: Path) -> None:
    import os

    from textual.widgets import Input

    from perfcmp_tui.screens.export_dialog import ExportDialog

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("mine")
    app = make_app("npu")  # out_dir "."
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("e")
        await pilot.pause()
        box = app.screen.query_one("#export-dir", Input)
        assert box.value == os.getcwd()  # it showed "."
        box.value = str(blocker / "out")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ExportDialog)  # still open, the path kept
        assert box.value == str(blocker / "out")
        problem = text_of(app.screen.query_one("#export-problem"))
        assert problem.startswith("cannot export there: ") and "is a file" in problem
        box.value = str(tmp_path / "out")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ExportDialog)
        for _ in range(200):
            if list((tmp_path / "out").glob("*.xlsx")):
                break
            await pilot.pause(0.1)
    assert len(list((tmp_path / "out").glob("performance_comparison_result_*.xlsx"))) == 1
    assert blocker.read_text() == "mine"


# -- 7: rounding --------------------------------------------------------------------------------
@aio
async def test_a_small_difference_does_not_read_zero_and_y_copies_it_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators of the mixed pair: nine operators moved by less than 0.005 ms; they read
    ``+0.00 ▲+20.74%`` and `y` copied "+0.00". Now three significant digits, and the full value."""
    stat = tables("mixed")["OperatorCompareStatistic"].data
    small = stat[(stat["diff"] != 0) & (stat["diff"].abs() < 0.005)]
    assert len(small) == 9
    app = make_app("mixed")
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        f = app.pane.frame
        rows = shown(app)
        diff_header = next(h for c, h in zip(f.columns, f.headers) if c.key == "diff")
        by_name = {r[f.headers[0]]: r[diff_header] for r in rows}
        for name, value in zip(small["name"], small["diff"]):
            cell = next(v for k, v in by_name.items() if fits(k, name))
            assert cell == signed(value) and cell not in ("+0.00", "-0.00", "0.00")
        # `y` on the first small row's Diff cell: the value as stored.
        target = small["name"].iloc[0]
        await pilot.press("g")
        for _ in range(len(rows)):
            if fits(f.row_cells(f.cursor)[0], target):
                break
            await pilot.press("j")
        while f.columns[f.col].key != "diff":
            await pilot.press("l")
        await pilot.press("y")
        await pilot.pause()
    assert copied and float(copied[-1]) == pytest.approx(small["diff"].iloc[0], rel=1e-14)
    assert len(copied[-1].lstrip("+-")) > len(signed(small["diff"].iloc[0]).lstrip("+-"))


# -- 13: tree habits, back, quit ----------------------------------------------------------------
@aio
async def test_tree_expand_all_collapse_all_and_parent() -> None:
    """Modules' tree: E opens every node (every row of the tree shows), C closes them all (the
    roots only, the cursor on the root above it), P jumps to the node holding the cursor row."""
    tree = tables("npu")["ModuleTree"].data
    roots = tree[tree["_parent"] < 0]
    app = make_app("npu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        assert app.pane.current == "ModuleTree"
        await pilot.press("E")
        await pilot.pause()
        assert len(shown(app)) == len(tree)
        # Down to a row two levels deep, then P, P: its parent, then the root above.
        f = app.pane.frame
        data = app.pane.view.table.data
        depth = {}
        for row in range(len(data)):
            p = app.pane.view.parent_row(row)
            depth[row] = 0 if p is None else depth[p] + 1
        target = next(r for r in range(len(data)) if depth[r] == 2)
        f.goto_row(target)
        await pilot.pause()
        await pilot.press("P")
        await pilot.pause()
        parent_node = data["_parent"].iat[target]
        assert data["_node"].iat[f.current_row] == parent_node
        await pilot.press("P")
        await pilot.pause()
        assert data["_parent"].iat[f.current_row] < 0  # a root
        root = f.current_row
        f.goto_row(target)
        await pilot.press("C")
        await pilot.pause()
        assert len(shown(app)) == len(roots)
        assert f.current_row == root  # folded away: the cursor went up to its root
        await pilot.press("P")  # at a root: nothing above
        await pilot.pause()
        assert [n.message for n in app._notifications][-1].startswith("no parent")


@aio
async def test_backspace_returns_to_the_previous_screen_and_row() -> None:
    app = make_app("npu")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "j", "j", "j")
        row = app.pane.frame.current_row
        await pilot.press("6", "j", "7")
        assert app.pane.spec.id == "api"
        await pilot.press("backspace")
        assert app.pane.spec.id == "kernels"
        await pilot.press("backspace")
        assert app.pane.spec.id == "operators" and app.pane.frame.current_row == row
        # From a drill, Backspace leaves the drill first (as q does).
        await pilot.press("enter")
        assert app.pane.current == "OperatorCompare"
        await pilot.press("backspace")
        assert app.pane.current == "OperatorCompareStatistic"


@aio
async def test_q_asks_once_on_a_loaded_comparison_and_Q_quits_at_once() -> None:
    app = make_app("npu")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and app.return_code is None
        assert [n.message for n in app._notifications][-1] == "q again quits (Q quits at once)"
        await pilot.press("j", "q")  # another key in between: asks again
        await pilot.pause()
        assert app.is_running and app.return_code is None
        await pilot.press("q")
    assert app.return_code == 0
    app = make_app("npu")
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot, app)
        await pilot.press("Q")
    assert app.return_code == 0


# -- 12: search in place ------------------------------------------------------------------------
@aio
async def test_slash_searches_in_place_n_and_N_step_through_the_matches() -> None:
    """`/aten` keeps every row and puts the cursor on the first match; n / N step through the
    matches (wrapping) and the status counts them, "match i/n"; Esc ends the search with the
    cursor back; `|` still filters."""
    stat = tables("npu")["OperatorCompareStatistic"].data
    app = make_app("npu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        total = len(shown(app))
        names = [r[app.pane.frame.headers[0]] for r in shown(app)]
        matches = [i for i, n in enumerate(names) if "aten" in n.lower()]
        assert len(matches) == operators_named("npu", "aten") >= 3
        await pilot.press("slash", *"aten", "enter")
        await pilot.pause()
        f = app.pane.frame
        status = lambda: text_of(app.pane.query_one("#pane-status"))  # noqa: E731
        assert len(shown(app)) == total and f.cursor == matches[0]  # rows kept
        assert f"search “aten” match 1/{len(matches)}" in status()
        await pilot.press("n", "n")
        assert f.cursor == matches[2] and f"match 3/{len(matches)}" in status()
        await pilot.press("N")
        assert f.cursor == matches[1] and f"match 2/{len(matches)}" in status()
        await pilot.press("N", "N")  # wraps to the last
        assert f.cursor == matches[-1] and f"match {len(matches)}/{len(matches)}" in status()
        # Esc in the box ends the search, the cursor back where `/` was pressed.
        await pilot.press("g", "j", "slash", *"aten")
        await pilot.press("escape")
        await pilot.pause()
        assert f.cursor == 1 and "search" not in status() and not app.pane.view.find_text
        # The filter is its own key.
        await pilot.press("vertical_line", *"aten", "enter")
        await pilot.pause()
        assert len(shown(app)) == len(matches) < total
    assert len(stat) == total


# -- 11: smaller --------------------------------------------------------------------------------
def test_a_mistyped_option_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    from perfcmp_tui.cli import main

    for command in (["summary"], []):
        assert main([*command, "a", "b", "--rnak", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unrecognized arguments: --rnak 1 (did you mean --rank?)" in err


def test_help_points_to_nothing_an_installed_package_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` named docs/cluster.md and docs/matching.md: an install from the package has no
    docs/ folder. And every package folder must be installed (perfcmp_core.explain was not)."""
    from perfcmp_core.toml_file import read_toml
    from perfcmp_tui.cli import SUBCOMMANDS, main

    for command in (*SUBCOMMANDS, None):
        with pytest.raises(SystemExit):
            main([command, "--help"] if command else ["--help"])
        assert "docs/" not in capsys.readouterr().out, command
    config = read_toml(ROOT / "pyproject.toml")["tool"]["setuptools"]
    dirs = {name: ROOT / path for name, path in config["package-dir"].items()}
    on_disk = {f"{top}{'.' + '.'.join(p.parent.relative_to(d).parts) if p.parent != d else ''}"
               for top, d in dirs.items() for p in d.rglob("__init__.py")}
    assert on_disk == set(config["packages"])


# -- 16: export the current view ----------------------------------------------------------------
@aio
async def test_x_writes_the_view_as_csv_and_X_copies_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators filtered to "aten", sorted by Diff, a column hidden: `x` writes those rows in
    that order with those columns, numbers as stored; `X` copies the same, tab-separated."""
    import csv

    stat = tables("npu")["OperatorCompareStatistic"]
    data = stat.data
    text = data[["name", "matched_as"]].astype(str)
    hit = text["name"].str.lower().str.contains("aten") | text["matched_as"].str.lower().str.contains("aten")
    want = data[hit].sort_values("diff", ascending=False, kind="stable")
    app = make_app("npu", out_dir=str(tmp_path / "views"))
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "vertical_line", *"aten", "enter", "d")
        await pilot.press("l", "l", "minus")  # hide the third column
        await pilot.pause()
        hidden = app.pane.view.hidden
        assert len(hidden) == 1
        await pilot.press("x")
        for _ in range(200):
            if list((tmp_path / "views").glob("*.csv")):
                break
            await pilot.pause(0.05)
        await pilot.press("X")
        await pilot.pause()
    (path,) = (tmp_path / "views").glob("OperatorCompareStatistic_*.csv")
    rows = list(csv.reader(path.open(encoding="utf-8", newline="")))
    columns = [c for c in stat.columns if c.key not in hidden]
    assert rows[0] == [c.header for c in columns]
    assert [r[[c.key for c in columns].index("name")] for r in rows[1:]] == list(want["name"])
    diffs = [float(r[[c.key for c in columns].index("diff")]) for r in rows[1:]]
    assert diffs == list(want["diff"])  # as stored, not as rounded on screen
    lines = copied[-1].split("\n")
    assert lines[0].split("\t") == rows[0] and len(lines) == len(rows)


def test_view_csv_never_writes_a_formula() -> None:
    from perfcmp_core.export.view_csv import _cell

    assert [_cell(v) for v in ("=cmd|' /C calc'!A0", "+1", "-x", "@SUM(A1)", "aten::add")] == [
        "'=cmd|' /C calc'!A0", "'+1", "'-x", "'@SUM(A1)", "aten::add"]
    assert [_cell(v) for v in (-1.5, float("inf"), float("nan"))] == [-1.5, "INF", ""]


# -- 15: per-step variance ----------------------------------------------------------------------
def test_step_statistics_mean_std_and_a_warm_up_step_flagged() -> None:
    """Five steps, the first a slow warm-up (100 ms against ≈ 50): it is the base's outlier,
    50 ms above the median; the comparison's steady steps have none. Mean and sample standard
    deviation worked out here."""
    import numpy as np
    import pandas as pd

    from perfcmp_core.compare.steps import COLUMNS, step_statistics
    from perfcmp_core.compare.result import Table

    base = [100.0, 50.0, 51.0, 49.0, 50.0]
    comp = [40.0, 41.0, 39.0, 40.0, 40.5]
    data = pd.DataFrame({"step": [str(i) for i in range(1, 6)]})
    for key in ("e2e", "computing", "uncovered", "free"):
        data[f"base_{key}"], data[f"comp_{key}"] = base, comp
    data.insert(1, "diff_e2e", 0.0)
    data.insert(2, "ratio_e2e", 1.0)
    stats = step_statistics(Table("StepCompare", COLUMNS, data, (3, 3), (4, 4))).data
    e2e = stats.iloc[0]
    assert e2e["quantity"] == "E2E Time"
    assert e2e["base_mean"] == pytest.approx(60.0)  # 300 / 5
    assert e2e["base_std"] == pytest.approx(np.sqrt((40**2 + 10**2 + 9**2 + 11**2 + 10**2) / 4))
    assert e2e["base_outliers"] == "1 (+50.00)"  # median 50; MAD 1 → 3 × 1.4826 ≈ 4.4 ms
    assert e2e["comp_outliers"] == "" and e2e["comp_mean"] == pytest.approx(40.1)
    assert e2e["diff_mean"] == pytest.approx(-19.9)


@aio
async def test_overall_shows_the_step_statistics_view() -> None:
    steps = tables("npu")["StepCompare"].data
    app = make_app("npu")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await open_view(pilot, app, "StepStatistics")
        rows = shown(app)
        assert [r["Per step"] for r in rows] == ["E2E Time", "Computing Time",
                                                 "Uncovered Communication Time", "Free Time"]
        mean = steps["base_e2e"].mean()
        assert rows[0]["Base Mean(ms)"] == plain(mean)
        assert rows[0]["Base Std Dev(ms)"] == plain(steps["base_e2e"].std(ddof=1))


# -- 4: K, an op's kernels ----------------------------------------------------------------------
@aio
async def test_K_on_an_operator_shows_its_call_stacks_names_whole_and_y_copies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU pair (recorded with Python frames): K on an Operators statistic row shows the call
    stacks of its matched call that moved most (none were shown), the kernel names whole, and
    `y` copies the kernel table."""
    from perfcmp_tui.screens.kernels import KernelScreen

    pairs = tables("gpu")["OperatorCompare"]
    detail = pairs.data.assign(base_details=pairs.values("base_details"))
    app = make_app("gpu")
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(120, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        stat = app.pane.view.table.data
        for _ in range(len(stat)):  # down to an operator whose calls have Python frames
            name = stat["name"].iat[app.pane.frame.current_row]
            calls = detail[(detail["base_name"] == name) | (detail["comp_name"] == name)]
            if (calls["_base_stack"] != "").any() and calls["base_details"].astype(bool).any():
                break
            await pilot.press("j")
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, KernelScreen)
        moved = calls.iloc[int(calls["diff"].abs().where(
            (calls["_base_stack"] != "") | (calls["_comp_stack"] != ""), -1).to_numpy().argmax())]
        assert app.screen.stacks == (moved["_base_stack"], moved["_comp_stack"])
        sides = [text_of(s) for s in app.screen.query(".drill-side")]
        assert sides[0].splitlines() == ["Base call stack", *moved["_base_stack"].split(";\n")]
        await pilot.press("X")
        await pilot.pause()
        lines = copied[-1].split("\n")
        kernels = app.screen.table.data
        assert len(lines) == len(kernels) + 1
        assert [ln.split("\t")[0] for ln in lines[1:]] == list(kernels["kernel"])  # whole names


@aio
async def test_K_has_a_row_cursor_and_f_y_Y_work_inside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80×16 on c10d::allreduce_'s six long kernel names (they differ at their ends): j / G
    move a row cursor (drawn reversed, kept in view), the line under the table names the cursor
    kernel whole, `f` opens its row in full, `y` copies its name, `Y` its row (nothing did
    anything inside K, and there was no cursor)."""
    from rich.console import Console

    from perfcmp_tui.screens.drill import DrillScreen
    from perfcmp_tui.screens.kernels import KernelScreen

    app = make_app("npu_ops")
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(80, 16)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "K")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, KernelScreen)
        kernels = screen.table.data["kernel"].astype(str).tolist()
        assert len(kernels) == 6
        cell = screen.query_one("#kernels-cell")
        assert text_of(cell) == f"Kernel Name: {kernels[0]}"
        await pilot.press("j", "j")
        await pilot.pause()
        assert screen.cursor == 2 and text_of(cell) == f"Kernel Name: {kernels[2]}"
        assert [row.style for row in screen.drawn.rows] == [None, None, "reverse", None, None, None]
        await pilot.press("y")
        await pilot.pause()
        assert copied[-1] == kernels[2]
        await pilot.press("Y")
        await pilot.pause()
        header, row = copied[-1].split("\n")
        assert header.startswith("Kernel Name\t") and row.split("\t")[0] == kernels[2]
        await pilot.press("G")
        await pilot.pause()
        body = screen.query_one("#kernels-body")
        assert screen.cursor == 5 and body.max_scroll_y > 0 and body.scroll_y == body.max_scroll_y
        await pilot.press("g")
        await pilot.pause()
        assert screen.cursor == 0 and body.scroll_y == 0  # the header in view too
        await pilot.press("G")
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, DrillScreen) and app.screen.row == 5
        assert kernels[5] in text_of(app.screen.query_one("#drill-head"))
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert not isinstance(app.screen, (DrillScreen, KernelScreen))


# -- 11: the empty Modules screen says where the rows are ---------------------------------------
@aio
async def test_modules_without_stacks_points_to_the_operators_screen() -> None:
    """Base without python_function events: Modules said "— showing operators instead" above
    an empty screen; it names the screen that shows them, and that screen has them."""
    app = make_app("hostbound")
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        message = text_of(app.pane.query_one("#message"))
        assert "showing operators instead" not in message
        assert message.endswith("the operators are compared instead (Operators screen, 2)")
        await pilot.press("2")
        await pilot.pause()
        assert len(shown(app)) == len(tables("hostbound")["OperatorCompareStatistic"].data) > 0


# -- 8: at 80×24 --------------------------------------------------------------------------------
@aio
async def test_at_80_columns_the_header_keeps_kind_and_steps(tmp_path: Path) -> None:
    """A long path was cut at its end, and the kind and steps with it; now its middle goes."""
    from perfcmp_tui.app import PerfCmpApp
    from perfcmp_tui.widgets.inputs import InputsBar

    base, comp, _ = PAIRS["npu"]
    long_base = "/very/long/folder/of/profiles/collected/on/the/cluster/" + base
    app = PerfCmpApp(long_base, comp, replay(events("npu")), timings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        lines = text_of(app.query_one(InputsBar)).splitlines()
    assert lines[0].endswith("  · NPU Text · 3 steps") and len(lines[0]) <= 80
    assert lines[0].startswith("BASE /very/") and "…" in lines[0]
    assert lines[0].split("…")[1].split("  · ")[0] in long_base  # the path's end is kept
    assert lines[1] == f"COMP {comp}  · NPU Text · 3 steps"
