"""SVG snapshots of every screen at 80×24 and at a wide size (pytest-textual-snapshot).

The app runs on a replayed fixture comparison with timings hidden, and every snapshot is taken
after the run finished, so each picture is reproducible. After an intended change of the screen:
``.venv/bin/python -m pytest tests/test_tui_snapshots.py --snapshot-update`` and review the SVGs
under tests/__snapshots__/test_tui_snapshots/.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from textual.pilot import Pilot

from tui_support import make_app, settle

SCREENS = ["1", "2", "3", "4", "5", "6", "7", "8"]
SIZES = {"80x24": (80, 24), "wide": (160, 44)}


def finished(app: Any) -> Callable[[Pilot], Any]:
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot, app)
    return run_before


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("screen", SCREENS)
def test_screen(snap_compare: Callable[..., bool], screen: str, size: str) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=[screen], terminal_size=SIZES[size], run_before=finished(app))


def test_kernels_gpu_vs_npu(snap_compare: Callable[..., bool]) -> None:
    """GPU vs NPU: no KernelCompare (NPU only), so the screen opens on the kernel classes."""
    app = make_app("mixed")
    assert snap_compare(app, press=["6"], terminal_size=(80, 24), run_before=finished(app))


def test_operators_drilled_into_a_row(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu_ops")
    assert snap_compare(app, press=["2", "d", "j", "enter"], terminal_size=(80, 24),
                        run_before=finished(app))


def test_operator_row_in_full(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu_ops")
    assert snap_compare(app, press=["2", "d", "j", "enter", "enter"], terminal_size=(80, 24),
                        run_before=finished(app))


def test_module_tree_with_call_stacks(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["3", "enter", "j", "j", "j", "c"], terminal_size=(160, 44),
                        run_before=finished(app))


def test_communication_expanded(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["4", "enter"], terminal_size=(80, 24), run_before=finished(app))


def test_help(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["question_mark"], terminal_size=(80, 24),
                        run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_notes_view(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("mixed")
    assert snap_compare(app, press=["2", "exclamation_mark"], terminal_size=SIZES[size],
                        run_before=finished(app))


def test_overall_pictures_asked_for_at_80x24(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["p"], terminal_size=(80, 24), run_before=finished(app))


def test_overall_pictures_without_colour(snap_compare: Callable[..., bool],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app("mixed")
    assert snap_compare(app, terminal_size=(160, 44), run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_step_table(snap_compare: Callable[..., bool], size: str) -> None:
    """StepCompare: Overall's views are StepTime, OverallMetrics, StepTimeSteps, StepCompare."""
    app = make_app("npu")
    assert snap_compare(app, press=["v", "v", "v"], terminal_size=SIZES[size], run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_overall_metrics_view(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["v"], terminal_size=SIZES[size], run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_advisor_findings(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("infer")
    assert snap_compare(app, press=["8"], terminal_size=SIZES[size], run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_advisor_share_bars(snap_compare: Callable[..., bool], size: str,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Category shares per stage, base beside comparison: at 80×24 asked for with `p` (hidden
    there by default) on 16 colours, so one glyph per category; at 44 rows shown without asking,
    on 256 colours, so one colour per category (the 16-colour wide picture is
    test_advisor_findings[wide])."""
    if size == "wide":
        monkeypatch.setenv("TERM", "xterm-256color")
    app = make_app("infer")
    press = ["8", "p"] if size == "80x24" else ["8"]
    assert snap_compare(app, press=press, terminal_size=SIZES[size], run_before=finished(app))


def test_overall_pictures_in_256_colours(snap_compare: Callable[..., bool],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 256-colour terminal the segments are told apart by colour (the legend names each);
    on 16 colours (every other snapshot here: TERM=xterm) and without colour, by glyph."""
    monkeypatch.setenv("TERM", "xterm-256color")
    app = make_app("mixed")
    assert app.console.color_system == "256"
    assert snap_compare(app, terminal_size=(160, 44), run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_step_picker(snap_compare: Callable[..., bool], size: str) -> None:
    from tui_support import events, replay

    app = make_app("npu", restart=lambda b, c: replay(events("npu")))
    assert snap_compare(app, press=["S"], terminal_size=SIZES[size], run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_kernels_of_an_operator(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("npu_ops")
    assert snap_compare(app, press=["2", "K"], terminal_size=SIZES[size], run_before=finished(app))


def test_kernels_of_a_module_row_with_stacks(snap_compare: Callable[..., bool]) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["3", "v", "v", "j", "K"], terminal_size=(160, 44),
                        run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_filter_hint_and_next_match(snap_compare: Callable[..., bool], size: str) -> None:
    """A filter that matched only in the kernel lists says so; `n` puts the cursor on the match."""
    app = make_app("npu_ops")
    assert snap_compare(app, press=["2", "v", "vertical_line", *"memcpy_async", "enter", "n"],
                        terminal_size=SIZES[size], run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_unchanged_rows_and_a_column_hidden(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["7", "u", "l", "minus"], terminal_size=SIZES[size],
                        run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_sort_picker_narrowed(snap_compare: Callable[..., bool], size: str) -> None:
    app = make_app("npu")
    assert snap_compare(app, press=["7", "s", *"calls"], terminal_size=SIZES[size],
                        run_before=finished(app))


@pytest.mark.parametrize("size", list(SIZES))
def test_timeline(snap_compare: Callable[..., bool], size: str) -> None:
    """T on the host-bound pair, the cursor moved onto the base's GEMM (issue 26)."""
    app = make_app("hostbound")
    assert snap_compare(app, press=["T", *["right"] * 8], terminal_size=SIZES[size],
                        run_before=finished(app))
