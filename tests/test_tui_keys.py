"""Keys that arrive in one burst (a paste without bracketed mode, keys bunched by a laggy SSH
link): each goes where it would have gone typed one by one (issue 15).

Textual hands a key to the focused widget at once but runs its binding only when the key has
bubbled back up to the app, so without care the keys behind ``/`` reached the table (``t``
toggled TOTAL, ``e`` opened the export dialog) instead of the filter that ``/`` opens. Here a
burst is what the terminal driver produces: every key posted to the app before any is handled.
The same in a real terminal (tmux ``send-keys``): tests/test_tui_lifetime.py.
"""

from __future__ import annotations

import asyncio

from textual import events
from textual.widgets import Input

from tests.tui_support import aio, make_app, operators_named, settle, shown

NAMES = {"/": "slash", "|": "vertical_line", "\r": "enter", "\x1b": "escape", "\x7f": "backspace", "\t": "tab",
         "?": "question_mark", "!": "exclamation_mark"}


def burst(app, text: str) -> None:  # type: ignore[no-untyped-def]
    for ch in text:
        app.post_message(events.Key(NAMES.get(ch, ch), ch if ch.isprintable() else None))


async def operators(pilot, app):  # type: ignore[no-untyped-def]
    await settle(pilot, app)
    await pilot.press("2")
    await pilot.pause()
    return app.pane


def box(app) -> Input:  # type: ignore[no-untyped-def]
    return app.pane.query_one("#filter", Input)


def box_value(app) -> str | None:  # type: ignore[no-untyped-def]
    """The filter box's text; None before it first opens (it is mounted then)."""
    found = app.pane.query("#filter")
    return found.first(Input).value if found else None


async def until(pilot, done, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Let the app work until ``done()`` holds (a loaded host may take a while to redraw), then
    settle; the assertions after it say what must hold."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not done() and loop.time() < end:
        await pilot.pause(0.05)
    await pilot.pause(0.2)


@aio
async def test_keys_after_slash_go_into_the_filter() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "|aten")
        await until(pilot, lambda: box_value(app) == "aten")
        assert app.focused is box(app) and box(app).value == "aten"
        assert pane.view.filter_text == "aten" and not pane.view.totals_only
        assert type(app.screen).__name__ == "Screen"  # no export dialog


@aio
async def test_editing_keys_and_enter_in_a_burst() -> None:
    """Backspace edits in order; Enter keeps the filter and the key behind it sorts the table."""
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "|atx\x7fen\rd")
        await until(pilot, lambda: pane.view.sort_key is not None)
        assert pane.view.filter_text == "aten" and app.focused is pane.frame
        assert pane.view.sort_key == pane.view.diff_key()
        rows = shown(app)
        assert len(rows) == operators_named("npu", "aten") > 0
        assert all("aten" in r["Operator Name"] for r in rows)


@aio
async def test_escape_in_a_burst_reverts_and_the_next_key_is_a_command() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "|aten\x1bd")
        await until(pilot, lambda: pane.view.sort_key is not None)
        assert pane.view.filter_text == "" and app.focused is pane.frame
        assert pane.view.sort_key == pane.view.diff_key()


@aio
async def test_keys_before_slash_keep_their_order() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "jj|at")
        await until(pilot, lambda: box_value(app) == "at")
        assert pane.frame.cursor == 2 and box(app).value == "at"


@aio
async def test_paste_on_the_table_filters_and_typing_continues_it() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        app.post_message(events.Paste("aten::lin"))
        burst(app, "ear")
        await until(pilot, lambda: (box_value(app) or "").endswith("ear"))
        assert box(app).value == "aten::linear" and pane.view.filter_text == "aten::linear"
        assert len(pane.view) == 1


@aio
async def test_paste_right_after_slash_goes_into_the_filter() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "|")
        app.post_message(events.Paste("aten::to"))
        burst(app, "\r")
        await until(pilot, lambda: app.focused is pane.frame)
        assert pane.view.filter_text == "aten::to" and app.focused is pane.frame


# -- keys behind a key that opens a screen belong to that screen ------------------------------
@aio
async def test_q_right_after_help_closes_the_help_not_the_app() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "?q")
        await until(pilot, lambda: type(app.screen).__name__ == "Screen")
        await pilot.pause(0.3)
        assert app.is_running and app.return_code is None  # `q` closed the help only
        assert type(app.screen).__name__ == "Screen" and app.pane is pane


@aio
async def test_keys_after_e_go_into_the_export_dialog() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        burst(app, "e\x1bd")  # open the dialog, cancel it, then sort the table by Diff
        await until(pilot, lambda: pane.view.sort_key is not None)
        assert type(app.screen).__name__ == "Screen" and pane.view.sort_key == pane.view.diff_key()
        burst(app, "exd")
        await until(pilot, lambda: type(app.screen).__name__ == "ExportDialog")
        await pilot.pause(0.3)
        folder = app.screen.query_one("#export-dir", Input)
        assert folder.value.endswith("xd")  # typed into the folder, not run on the table
        assert pane.view.sort_key == pane.view.diff_key() and pane.view.descending  # `d` not run again


@aio
async def test_sort_picker_takes_the_keys_typed_behind_s() -> None:
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await operators(pilot, app)
        before = pane.view.sort_key
        burst(app, "snumber\r")
        await until(pilot, lambda: type(app.screen).__name__ == "Screen" and pane.view.sort_key != before)
        key = pane.view.sort_key
        assert key is not None and key != before
        header = next(h for c, h in zip(pane.frame.columns, pane.frame.headers) if c.key == key)
        assert "number" in header.lower()  # the first column whose header holds the typed text
