"""Issue 30: the app as a new user met it — each item reproduced as the review describes it.

Pilot tests on the fixture pairs (tests/tui_support.py replays core's events); every expected
figure comes from core's own tables or is worked out here.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import OptionList

from perfcmp_tui.screens.help import HelpScreen
from perfcmp_tui.screens.step_picker import StepPicker
from test_tui_app import step_source
from tui_support import aio, make_app, settle

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
