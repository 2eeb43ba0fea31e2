"""The Textual app: `perfcmp-tui BASE COMP`.

The app renders what :mod:`perfcmp_core` computes and nothing else. A thread worker drives the
comparison, which runs in a child process (parsing holds the GIL, so a thread alone would freeze
the screen), and posts each event to the UI as it arrives: the progress panel advances per phase
and every screen fills in as soon as its tables exist, the overall view first.
"""

from __future__ import annotations

import os
import re
import traceback
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input
from textual.worker import get_current_worker

from perfcmp_core.collect import ResultBuilder
from perfcmp_core.compare import SCREENS, screen_of
from perfcmp_core.compare.behind import behind, enter_opens
from perfcmp_core.compare.result import ComparisonResult, Screen as ScreenSpec
from perfcmp_core.events import (Event, Failed, Finished, Loaded, Phase, Planned, Skipped,
                                 SummaryReady, TableReady)
from perfcmp_core.gcpause import collect_again, keep_out_of_collections
from perfcmp_core.insight import headlines
from perfcmp_core.lanes import TIMELINE, SideLanes, sides_of
from perfcmp_core.lanes.picture import runs
from perfcmp_core.request import RunRequest
from perfcmp_core.runner import ChildRun
from perfcmp_core.view import TableView

from .screens.drill import DrillScreen
from .screens.error import ErrorScreen
from .screens.export_dialog import ExportDialog, write_in_background
from .screens.help import HelpScreen
from .screens.kernels import KernelScreen
from .screens.notes import NotesScreen
from .screens.sort_picker import SortPicker
from .screens.step_picker import Choice, StepPicker
from .screens.timeline import PICK_STEPS, TimelineScreen, row_op
from .terminal import Guard
from .widgets.frame_view import FrameView
from .widgets.inputs import InputsBar
from .widgets.key_bar import KeyBar
from .widgets.pane import TablePane
from .widgets.progress import RunProgress
from .widgets.tab_bar import TabBar

#: ``source(should_stop)`` yields the events of one comparison run; ``should_stop`` turns True
#: when the user cancels (the real source polls it and kills its child process).
EventSource = Callable[[Callable[[], bool]], Iterator[Event]]
#: ``restart(base_step, comp_step)``: the source of the same comparison cut to those steps
#: (None: every step).
Restart = Callable[[int | None, int | None], EventSource]
#: Longest wait for a held key to come back up (see :meth:`PerfCmpApp.on_event`): a safety net
#: for a key dropped on its way (its widget removed meanwhile). It normally takes milliseconds,
#: but redrawing a big table on a loaded host can take a few hundred, so the net is wide.
HOLD_S = 2.0
#: The app's actions that open a screen over the table (a dialog, the help, a picker): the keys
#: typed behind theirs in one burst belong to that screen (``?q`` closes the help, it does not
#: quit), so they are held until it is drawn.
OPENS_SCREEN = frozenset({"export", "sort_pick", "help", "pick_step", "notes", "kernels", "full_row",
                          "timeline"})


class PerfCmpApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "perfcmp-tui"
    BINDINGS = [
        *[Binding(p.key, f"pane('{p.id}')", p.title, show=False) for p in SCREENS],
        Binding("tab", "next_pane(1)", "Next screen", show=False, priority=True),
        Binding("shift+tab", "next_pane(-1)", "Previous screen", show=False, priority=True),
        Binding("d", "sort_diff", "Diff"),
        Binding("s", "sort_pick", "Sort"),
        Binding("slash", "search", "Search"),
        # Not in the footer (full at 80 columns): the help and the search box's hint name it.
        Binding("vertical_line", "filter", "Filter", show=False),
        Binding("t", "totals", "TOTAL"),
        # The table's own keys (issue 16): unchanged rows, matches, copy, columns, the full row.
        Binding("u", "unchanged", "Unchanged", show=False),
        Binding("n", "next_match(1)", "Next match", show=False),
        Binding("N", "next_match(-1)", "Previous match", show=False),
        Binding("y", "copy_cell", "Copy", show=False),
        Binding("Y", "copy_row", "Copy row", show=False),
        Binding("minus", "hide_column", "Hide column", show=False),
        Binding("plus", "unhide_columns", "Show columns", show=False),
        Binding("f", "full_row", "Full row", show=False),
        Binding("v", "cycle_view", "View"),
        Binding("c", "stacks", "Stacks"),
        Binding("e", "export", "Export"),
        Binding("x", "export_view", "View as CSV", show=False),
        Binding("X", "copy_view", "Copy view", show=False),
        Binding("p", "pictures", "Pictures", show=False),
        Binding("S", "pick_step", "Steps", show=False),
        Binding("K", "kernels", "Kernels of row", show=False),
        Binding("o", "behind", "What is behind the row", show=False),
        Binding("left_square_bracket", "scroll_extra(-1)", "Panel up", show=False),
        Binding("right_square_bracket", "scroll_extra(1)", "Panel down", show=False),
        Binding("T", "timeline", "Timeline", show=False),
        # Not in the footer (full at 80 columns): the notes line names the key.
        Binding("exclamation_mark", "notes", "Notes", show=False),
        Binding("question_mark,f1", "help", "Help"),
        Binding("escape", "cancel", "Cancel", show=False),
        Binding("E", "expand_all(True)", "Expand all", show=False),
        Binding("C", "expand_all(False)", "Collapse all", show=False),
        Binding("P", "parent", "Parent", show=False),
        Binding("backspace", "previous", "Back", show=False),
        Binding("q", "back", "Quit"),
        Binding("Q", "quit", "Quit now", show=False),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        # Over SSH people press Ctrl+C to get out; it quits too (and kills a running comparison).
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    class Arrived(Message):
        """One event of the comparison run, posted from the worker thread; a table comes with
        its view, prepared there (search text, clipped cells, sort keys) so no key pays for it."""

        def __init__(self, event: Event, view: TableView | None = None, run: int = 0) -> None:
            self.event = event
            self.view = view
            self.run = run  # which run of the app it belongs to (see PerfCmpApp.run_number)
            super().__init__()

    def __init__(
        self,
        base: str,
        comp: str,
        source: EventSource,
        *,
        out_dir: str = ".",
        timings: bool = True,
        restart: Restart | None = None,
        screens: tuple[ScreenSpec, ...] = SCREENS,
        release: Callable[[], None] | None = None,
    ) -> None:
        """``timings=False`` leaves elapsed seconds off the screen (reproducible snapshots).
        ``release``: called when the app ends, to stop the processes its sources keep between
        runs (a comparison child that serves step changes).

        Under NO_COLOR the app draws with the terminal's own default colours and attributes only
        (bold, reverse): Textual alone would still paint grey tones.
        """
        super().__init__(ansi_color="NO_COLOR" in os.environ)
        self.base_path, self.comp_path = base, comp
        self.source = source
        self.restart = restart
        self.release = release
        #: The steps of each side as the first full run found them (a rerun on one step loads
        #: that step alone), and the steps compared now.
        self.all_steps: dict[str, list[int]] = {}
        self.steps_now: Choice = (None, None)
        #: Counts the runs: events still queued from a run the user replaced are dropped.
        self.run_number = 0
        self.screens = screens  # the first is shown at start (a cluster's adds its Ranks)
        self.out_dir = out_dir
        self.timings = timings
        self.animation_level = "none"
        #: What the run produced so far (the same builder the headless commands use).
        self.outcome = ResultBuilder(base, comp)
        self.running = False
        self._held: events.Key | events.Paste | None = None  # see on_event
        self._waiting: deque[events.Event] = deque()
        self._hold_timer: Timer | None = None
        #: The keys whose binding opens a screen (:data:`OPENS_SCREEN`), from the bindings.
        self._opener_keys = frozenset(key.strip() for b in self.BINDINGS if isinstance(b, Binding)
                                      and b.action in OPENS_SCREEN for key in b.key.split(","))
        self._held_on: Screen[object] | None = None  # the screen the held key was typed on
        #: The Timeline table's lanes, by id of the table (indexed in the worker, see T)
        self.timeline_sides: dict[int, tuple[SideLanes, SideLanes]] = {}
        #: `q` asked "q again quits" (any other key forgets it).
        self._quit_asked = False
        #: The screens left by a screen key, for Backspace (the last one last).
        self._screen_history: list[str] = []

    @property
    def finished(self) -> bool:
        return self.outcome.finished

    @property
    def failed(self) -> Failed | None:
        return self.outcome.failed

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.inputs_bar()
        yield TabBar(self.screens, id="tabs")
        with ContentSwitcher(initial=f"pane-{self.screens[0].id}", id="panes"):
            for p in self.screens:
                yield TablePane(p)
        yield RunProgress(self.timings, id="progress")
        yield KeyBar(id="keys")

    def inputs_bar(self) -> InputsBar:
        """The header naming both inputs."""
        return InputsBar(self.base_path, self.comp_path, id="inputs")

    def on_mount(self) -> None:
        self.running = True
        self.run_comparison()

    # -- key routing --------------------------------------------------------------------------
    # Textual sends each key to the focused widget's queue at once, but runs the key's binding
    # only when the key has bubbled back up to the app: by then the keys behind it, from the same
    # paste or burst, already went to the old focus. `/aten` in one burst thus opened an empty
    # filter while `t` toggled TOTAL and `e` opened the export dialog. So a key whose binding
    # moves the focus or edits the focused box (`/` on a screen, a non-printable key in a text
    # box), a key that opens a screen (`e`, `s`, `?` …: the keys behind it are for that screen,
    # once it is drawn) and a paste on a table (it opens the filter) are *held*: the keys and
    # pastes behind them wait, in order, until they were handled (HOLD_S at most).
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
            if self._held is not None or self._waiting:
                self._waiting.append(event)
            else:
                await self._route(event)
            return
        await super().on_event(event)

    async def _route(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and event.key != "q":
            self._quit_asked = False
        if isinstance(event, (events.Key, events.Paste)) and self._must_hold(event):
            self._held, self._held_on = event, self.screen
            self._hold_timer = self.set_timer(HOLD_S, self._release)
        await super().on_event(event)
        if self._held is event and not event.is_forwarded:
            self._unhold()  # a priority binding took it: it will not come back up

    def _unhold(self) -> None:
        self._held, self._held_on = None, None
        if self._hold_timer is not None:
            self._hold_timer.stop()
            self._hold_timer = None

    def _must_hold(self, event: events.Key | events.Paste) -> bool:
        if isinstance(self.focused, Input):
            return isinstance(event, events.Key) and not event.is_printable
        if isinstance(self.screen, ModalScreen):
            return False
        # `/` opens the filter; a paste on a table opens it holding the text.
        return isinstance(event, events.Paste) or event.key in ("slash", "vertical_line",
                                                                 *self._opener_keys)

    def on_key(self, event: events.Key) -> None:
        """A held key came back up to the app: release the keys behind it once its bindings
        ran (they run after this handler, in the same dispatch) and, when they opened a screen,
        once that screen is drawn (its ``on_mount`` has focused its input)."""
        if event is self._held:
            self.call_later(self._release_after_binding)

    def _release_after_binding(self) -> None:
        if self.screen is self._held_on:  # nothing opened (e.g. "nothing to export yet")
            self.call_later(self._release)
        else:
            self.call_after_refresh(self._release)

    def on_paste(self, event: events.Paste) -> None:
        """A held paste came back up (the screen it landed on handled it): release."""
        if event is self._held:
            self.call_later(self._release)

    async def _release(self) -> None:
        self._unhold()
        if not self._screens_alive():  # the app is closing: the keys have nowhere to go
            self._waiting.clear()
            return
        while self._waiting and self._held is None:
            await self._route(self._waiting.popleft())

    # -- the worker ---------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def run_comparison(self) -> None:
        """Forward the run's events to the UI; never blocks on the UI (post_message queues)."""
        worker = get_current_worker()
        run = self.run_number
        try:
            for event in self.source(lambda: worker.is_cancelled):
                if worker.is_cancelled:
                    return
                view = None
                if isinstance(event, TableReady) and event.table.name == TIMELINE:
                    # the Timeline's lanes indexed here, as a table's view is: T costs no key this
                    self.timeline_sides[id(event.table)] = sides_of(event.table)
                elif isinstance(event, TableReady):
                    view = TableView(event.table).prepare()
                self.post_message(self.Arrived(event, view, run))
        except Exception as exc:  # noqa: BLE001 - shown in the app, never a crash
            if not worker.is_cancelled:
                self.post_message(self.Arrived(Failed(f"{type(exc).__name__}: {exc}",
                                                      is_input=False,
                                                      detail=traceback.format_exc()), run=run))

    def on_perf_cmp_app_arrived(self, message: Arrived) -> None:
        if not self._screens_alive() or message.run != self.run_number:
            return  # the app is closing, or the run was replaced: the event has nowhere to go
        try:
            self.handle_event(message.event, message.view)
        except Exception as exc:  # noqa: BLE001 - a rendering bug must not kill the session
            self.handle_event(Failed(f"{type(exc).__name__}: {exc}", is_input=False,
                                     detail=traceback.format_exc()))

    def _screens_alive(self) -> bool:
        try:
            return bool(self.query("#panes"))
        except Exception:  # noqa: BLE001 - no screen stack any more (shutting down)
            return False

    def handle_event(self, event: Event, view: TableView | None = None) -> None:
        """Fold the event into the run's results, then show what changed (``view``: a table's
        prepared view)."""
        self.outcome.add(event)
        if isinstance(event, Planned):
            self.query_one(RunProgress).plan(event.phases)
        elif isinstance(event, Phase):
            self.query_one(RunProgress).phase(event)
        elif isinstance(event, Loaded):
            self.query_one(InputsBar).show(self.outcome.loaded)
            if event.info.get("selected_step") is None:
                self.all_steps[event.side] = [int(s["step"]) for s in event.info.get("steps", ())]
        elif isinstance(event, TableReady):
            self._add_table(event, view)
        elif isinstance(event, Skipped):
            for pane_id in {screen_of(name) for name in event.names} & self._tabbed():
                self._pane(pane_id).add_reason(event.reason)
        elif isinstance(event, SummaryReady):
            for pane in self.query(TablePane):
                if pane.spec.headlines:
                    pane.set_headlines(headlines(event.figures))
        if isinstance(event, (Loaded, TableReady, Skipped, Finished)):
            self._show_notes()
        if isinstance(event, Failed):
            self._failed(event)
        elif isinstance(event, Finished):
            self._finished(event)

    def _add_table(self, event: TableReady, view: TableView | None) -> None:
        table = event.table
        pane_id = screen_of(table.name)
        if pane_id not in self._tabbed():  # drawn by its own screen (the Timeline, T)
            return
        self._pane(pane_id).add_table(table, view)
        self.query_one(TabBar).set_empty(pane_id, False)
        if self.focused is None and self.pane.current is not None:
            self.pane.frame.focus()

    def _show_notes(self) -> None:
        for pane in self.query(TablePane):
            notes = self.outcome.notes_for(pane.spec.id)
            if notes != pane.notes:
                pane.set_notes(notes)

    def action_kernels(self) -> None:
        if self._no_table():
            return
        found = self.pane.row_kernels()
        if found is None:
            self.notify("this row has no kernels: K works on operator and module rows",
                        severity="warning", timeout=3)
            return
        self.push_screen(KernelScreen(*found))

    def _tabbed(self) -> set[str]:
        """The screens with a table pane (the others are opened by their key)."""
        return {p.id for p in self.screens}

    def action_timeline(self) -> None:
        """T: one step of each side as lanes (:mod:`perfcmp_core.lanes`)."""
        table = self.outcome.tables.get(TIMELINE)
        if table is None:
            why = self.outcome.absent.get(TIMELINE) or (
                "the timeline is not drawn yet" if self.running else "no timeline in this run")
            self.notify(why, severity="warning", timeout=3)
            return
        sides = self.timeline_sides.get(id(table)) or sides_of(table)
        view = self.pane.view
        op = row_op(self.pane.spec.id, view.table if view else None, self.pane.frame.current_row)
        if op and not runs(sides, op):
            self.notify(f"{op} does not run as an outermost op, a kernel or a module in these steps",
                        timeout=3, markup=False)
            op = ""
        self.push_screen(TimelineScreen(sides, op), self._timeline_closed)

    def _timeline_closed(self, choice: str | None) -> None:
        """Enter on the timeline: the op's rows on the Operators screen; S: pick a step."""
        if choice == PICK_STEPS:
            self.action_pick_step()
        elif choice:
            self.action_pane("operators")
            pane = self.pane
            if pane.view is not None:
                pane.apply_filter("^" + re.escape(choice) + "$")

    def action_pictures(self) -> None:
        if not self.pane.toggle_pictures():
            self.notify("pictures are on the Overall screen (1): E2E bars per side and a "
                        "sparkline per step; and on the Advisor screen (8): category shares "
                        "per stage", timeout=3)

    def action_notes(self) -> None:
        self.push_screen(NotesScreen([(p.title, self.outcome.notes_for(p.id)) for p in self.screens]))

    def _failed(self, event: Failed) -> None:
        self.running = False
        self.query_one(RunProgress).failed(event.message)
        what = "the inputs could not be read" if event.is_input else "the run failed"
        self._stop_waiting(f"{what} (r on the error retries): {event.message}")
        self.push_screen(ErrorScreen(event.message, event.detail, event.is_input),
                         self._after_error)

    def _finished(self, event: Finished) -> None:
        self.running = False
        for pane in self.query(TablePane):
            pane.mark_finished()
            if pane.current is None:
                self.query_one(TabBar).set_empty(pane.spec.id, True)
        self.query_one("#progress").add_class("hidden")
        if self.timings:  # in each screen's status line: a toast covered the Diff column at 80×24
            for pane in self.query(TablePane):
                pane.set_finished_in(event.seconds)
        keep_out_of_collections()  # the results stay: full collections need not scan them

    def on_unmount(self) -> None:
        if self.release is not None:
            self.release()
        collect_again()

    def _rerun(self) -> None:
        """Start the run again from nothing (a retry, or other steps)."""
        self.run_number += 1
        collect_again()  # the old results go: their cycles with them
        self.outcome = ResultBuilder(self.base_path, self.comp_path)
        self.query_one(InputsBar).show(self.outcome.loaded)
        for pane in self.query(TablePane):
            pane.reset()
        self.query_one(TabBar).reset()
        self.query_one("#progress").remove_class("hidden")
        self.running = True
        self.run_comparison()

    def action_pick_step(self) -> None:
        base, comp = self.all_steps.get("base", []), self.all_steps.get("comparison", [])
        if self.restart is None or len(base) < 2 and len(comp) < 2:
            self.notify("one step on each side: there is no other step to pick",
                        severity="warning", timeout=3)
            return
        self.push_screen(StepPicker(base, comp, self.steps_now), self._steps_chosen)

    def _steps_chosen(self, choice: Choice | None) -> None:
        if choice is None or choice == self.steps_now or self.restart is None:
            return
        self.workers.cancel_group(self, "compare")  # the run under way is dropped
        self.steps_now = choice
        self.source = self.restart(*choice)
        self._rerun()
        what = "every step" if choice == (None, None) else (
            f"step {choice[0]}" if choice[0] == choice[1] else
            f"base step {choice[0]}, comparison step {choice[1]}")
        self.notify(f"comparing {what}", timeout=3)

    def _after_error(self, choice: str | None) -> None:
        if choice == "retry":
            self._rerun()
        elif choice == "quit":
            self.quit_with_code()

    def exit_code_now(self) -> int:
        """0, or 2 after a bad input, or 1 after an internal error (the CLI's exit codes)."""
        if self.failed is None:
            return 0
        return 2 if self.failed.is_input else 1

    # -- panes --------------------------------------------------------------------------------
    def _pane(self, pane_id: str) -> TablePane:
        return self.query_one(f"#pane-{pane_id}", TablePane)

    @property
    def pane(self) -> TablePane:
        current = self.query_one("#panes", ContentSwitcher).current or f"pane-{self.screens[0].id}"
        return self.query_one(f"#{current}", TablePane)

    def action_pane(self, pane_id: str, remember: bool = True) -> None:
        if remember and pane_id != self.pane.spec.id:
            self._screen_history.append(self.pane.spec.id)
        self.query_one("#panes", ContentSwitcher).current = f"pane-{pane_id}"
        self.query_one(TabBar).active = pane_id
        self.pane.activate()
        if self.pane.current is not None:
            self.pane.frame.focus()
        else:  # keys must not reach the table of the screen left behind
            self.set_focus(None)

    def on_tab_bar_chosen(self, message: TabBar.Chosen) -> None:
        self.action_pane(message.pane_id)

    def action_next_pane(self, step: int) -> None:
        ids = [p.id for p in self.screens]
        self.action_pane(ids[(ids.index(self.pane.spec.id) + step) % len(ids)])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Tab switches screens only on the main screen, outside the filter box."""
        if action == "next_pane" and (isinstance(self.screen, ModalScreen)
                                      or isinstance(self.focused, Input)):
            return False
        return True

    # -- table actions ------------------------------------------------------------------------
    def _no_table(self) -> bool:
        if self.pane.view is None:
            self.notify(f"{self.pane.spec.title}: no table here yet", severity="warning",
                        timeout=2)
            return True
        return False

    def action_sort_diff(self) -> None:
        if not self._no_table() and not self.pane.sort_diff():
            self.notify("this view has no Diff column to sort by", severity="warning", timeout=2)

    def action_sort_pick(self) -> None:
        if self._no_table():
            return
        pane = self.pane
        frame = pane.frame

        def chosen(key: str | None) -> None:
            if key:
                pane.sort_column(key)

        assert pane.view is not None
        self.push_screen(SortPicker(frame.columns, frame.headers, pane.view.sort_key), chosen)

    def action_filter(self) -> None:
        if not self._no_table():
            self.pane.open_filter()

    def action_search(self) -> None:
        if not self._no_table():
            self.pane.open_search()

    def action_totals(self) -> None:
        if not self._no_table() and not self.pane.toggle_totals():
            self.notify("this view has no [ TOTAL ] rows", severity="warning", timeout=2,
                        markup=False)

    def action_cycle_view(self) -> None:
        if not self._no_table() and not self.pane.cycle_view():
            self.notify("this screen has a single view", timeout=2)

    def action_stacks(self) -> None:
        if not self._no_table() and not self.pane.toggle_stacks():
            self.notify(self._no_stacks_message(), severity="warning", timeout=3)

    def _no_stacks_message(self) -> str:
        """Why `c` shows nothing here: this view has no stack columns (the profiles do), or
        neither profile was collected with stacks."""
        if any(info.get("with_stack") for info in self.outcome.loaded.values()):
            here = [n for n in self.pane.names() if self.pane.tables[n].stacks is not None]
            if here:  # a statistic row groups many ops: the stacks are on its matched rows
                return (f"this view has no call stacks: {' / '.join(here)} (v, or Enter on a "
                        "row for its matched rows) shows them")
            return ("this view has no call stacks: the Modules screen (3) shows them, and "
                    "ModuleCompare / ModuleCompareStatistic there (v)")
        return "no call stacks in these profiles: collect with with_stack=True"

    def action_unchanged(self) -> None:
        if not self._no_table() and not self.pane.toggle_unchanged():
            self.notify("this view has no Diff column: no row is unchanged", severity="warning",
                        timeout=2)

    def action_next_match(self, step: int) -> None:
        if self._no_table():
            return
        if not self.pane.next_match(step):
            self.notify("no match to go to (/ searches, | filters)", severity="warning",
                        timeout=2)

    def action_copy_cell(self) -> None:
        if not self._no_table():
            self.copy_text(self.pane.frame.cell_full_text(), "cell")

    def action_copy_row(self) -> None:
        if not self._no_table():
            self.copy_text(self.pane.frame.row_full_text(), "row")

    def copy_text(self, text: str, what: str) -> None:
        """To the local clipboard through the terminal (OSC 52: works over SSH; tmux needs
        ``set -g set-clipboard on``)."""
        if not text:
            self.notify(f"nothing to copy in this {what}", severity="warning", timeout=2)
            return
        self.copy_to_clipboard(text)
        shown = text if len(text) <= 60 else text[:57] + "…"
        self.notify(f"copied {what} ({len(text):,} characters): {shown}", timeout=2,
                    markup=False)

    def action_hide_column(self) -> None:
        if self._no_table():
            return
        header = self.pane.hide_column()
        if header is None:
            self.notify("the name column stays (move with h / l to another column)",
                        severity="warning", timeout=2)

    def action_unhide_columns(self) -> None:
        if not self._no_table() and not self.pane.unhide_columns():
            self.notify("no column is hidden (- hides the cursor column)", timeout=2)

    def action_full_row(self) -> None:
        if self._no_table():
            return
        view, row = self.pane.view, self.pane.frame.current_row
        if view is not None and row is not None:
            self.push_screen(DrillScreen(view.table, row))

    def action_behind(self) -> None:
        """`o`: the rows behind the cursor row, on the screen that breaks it down (Overall's
        classes → kernels and their launching ops, collectives, the ops of an idle cause; a
        kernel class → its launching ops; a launching op → its operator rows)."""
        if not self._no_table() and self.pane.frame.current_row is not None:
            self.open_behind(self.pane.frame.current_row)

    def open_behind(self, row: int, quiet: bool = False) -> bool:
        """Show what :func:`perfcmp_core.compare.behind.behind` finds behind ``row`` of the
        current view; False (with the reason unless ``quiet``) when nothing is."""
        pane = self.pane
        assert pane.view is not None
        found = behind(self.outcome.tables, pane.view.table.name, row)
        target = None if isinstance(found, str) else self._pane(screen_of(found.table))
        if isinstance(found, str) or target is None or found.table not in target.views:
            if not quiet:
                why = found if isinstance(found, str) else f"{found.table} has not arrived yet"
                self.notify(why, severity="warning", timeout=3, markup=False)
            return False
        if target is pane:
            pane.open_rows(found.table, found.rows, found.label, None)
        else:
            target.open_rows(found.table, found.rows, found.label, pane.spec.id)
            self.action_pane(target.spec.id)
        return True

    def _leave_behind(self) -> bool:
        """Back from rows `o` opened on this screen to the screen and row they came from."""
        origin = self.pane.leave_rows()
        if origin is None:
            return False
        if self._screen_history and self._screen_history[-1] == origin:
            self._screen_history.pop()
        self.action_pane(origin, remember=False)
        return True

    def on_frame_view_activated(self, event: FrameView.Activated) -> None:
        pane = self.pane
        if event.frame_view is not pane.frame or pane.drill(event.row):
            return
        view = event.frame_view.view
        if (view is not None and enter_opens(view.table, event.row)
                and self.open_behind(event.row, quiet=True)):
            return
        if view is not None:
            self.push_screen(DrillScreen(view.table, event.row))

    # -- export, help, cancel, quit -----------------------------------------------------------
    def action_export(self) -> None:
        if not any(not t.empty for t in self.outcome.tables.values()):
            self.notify("nothing to export yet", severity="warning", timeout=3)
            return
        self.push_screen(ExportDialog(self.out_dir), self._export_to)

    def _export_to(self, folder: str | None) -> None:
        if folder:
            self.out_dir = folder
            self.export_workbook(folder)

    def export_workbook(self, folder: str) -> None:
        """Write the workbook of what arrived so far (the same file as ``perfcmp-tui export``),
        from a snapshot taken here, on the UI thread: tables that arrive meanwhile change the
        app, not the workbook being written."""
        partial = " (partial: the comparison is still running)" if self.running else ""
        write_in_background(self, self.export_result(), folder, partial)

    def export_result(self) -> ComparisonResult:
        """What ``e`` writes: a snapshot of everything that arrived (taken on the UI thread)."""
        return self.outcome.snapshot()

    def action_export_view(self) -> None:
        """`x`: the view on screen (filtered, sorted, shown columns) as CSV in the export folder."""
        if self._no_table():
            return
        view, folder = self.pane.view, self.out_dir
        assert view is not None

        def write() -> None:
            from perfcmp_core.errors import InputError
            from perfcmp_core.export.view_csv import write_view_csv

            try:
                path = write_view_csv(view, folder)
            except InputError as exc:
                self.call_from_thread(self.notify, f"CSV not written: {exc.message}",
                                      severity="error", timeout=8, markup=False)
                return
            self.call_from_thread(self.notify, f"{len(view):,} rows written: {path}", timeout=8,
                                  markup=False)

        self.run_worker(write, thread=True, exclusive=False, exit_on_error=False, group="export")

    def action_copy_view(self) -> None:
        """`X`: the view on screen, tab-separated with its header, to the clipboard."""
        if not self._no_table():
            from perfcmp_core.export.view_csv import view_tsv

            assert self.pane.view is not None
            self.copy_text(view_tsv(self.pane.view), "view")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def cancel_run(self) -> bool:
        """Stop loading (the child process is killed); what already arrived stays on screen."""
        if not self.running:
            return False
        self.workers.cancel_group(self, "compare")
        self.running = False
        self.query_one(RunProgress).cancelled()
        self._stop_waiting("loading was cancelled before this comparison ran")
        self.notify("comparison cancelled", timeout=3)
        return True

    def _stop_waiting(self, reason: str) -> None:
        """The run ended early (cancelled, failed): no screen still says "waiting for results…"
        and no side of the header still says "loading…"; each says why instead."""
        for pane in self.query(TablePane):
            if pane.current is None:
                pane.add_reason(reason)
                self.query_one(TabBar).set_empty(pane.spec.id, True)
        self.query_one(InputsBar).show(self.outcome.loaded, stopped=True)

    def action_cancel(self) -> None:
        """Esc: close the filter box, else cancel loading, else leave a drill-down."""
        if self.pane.close_filter() or self.cancel_run():
            return
        if not self.pane.go_back():
            self._leave_behind()

    def action_back(self) -> None:
        """q: leave a drill-down, else cancel loading, else quit — asking once when results are
        on screen (a stray q must not throw a loaded comparison away; Q quits at once)."""
        if self.pane.go_back() or self._leave_behind() or self.cancel_run():
            return
        if not self._quit_asked and any(not t.empty for t in self.outcome.tables.values()):
            self._quit_asked = True
            self.notify("q again quits (Q quits at once)", timeout=3)
            return
        self.quit_with_code()

    def action_previous(self) -> None:
        """Backspace: leave a drill-down, else back to the screen left last (on its row: each
        screen keeps its cursor)."""
        if self.pane.go_back() or self._leave_behind():
            return
        if self._screen_history:
            self.action_pane(self._screen_history.pop(), remember=False)
        else:
            self.notify("no screen to go back to", timeout=2)

    def action_scroll_extra(self, direction: int) -> None:
        if not self.pane.scroll_extra(direction):
            self.notify("the panel above the table shows all it holds", timeout=2)

    def action_expand_all(self, expand: bool) -> None:
        if not self._no_table() and not self.pane.expand_all(expand):
            self.notify("this view is no tree (or a filter shows it flat)", severity="warning",
                        timeout=2)

    def action_parent(self) -> None:
        if not self._no_table() and not self.pane.go_parent():
            self.notify("no parent: a top-level row, or no tree here", timeout=2)

    def action_quit(self) -> None:  # type: ignore[override]
        self.quit_with_code()

    def quit_with_code(self) -> None:
        """Stop the run and leave; the code is both the app's result and its process exit code."""
        self.workers.cancel_group(self, "compare")
        code = self.exit_code_now()
        self.exit(code, return_code=code)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own "Keys" panel repeats the key bar; "Keys (?)" below is the app's help.
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        for p in self.screens:
            yield SystemCommand(f"Screen: {p.title} ({p.key})", f"show the {p.title} screen",
                                lambda p=p: self.action_pane(p.id))
        for title, help_text, action in PALETTE:
            yield SystemCommand(title, help_text, getattr(self, f"action_{action}"))


#: The command palette's entries besides the screens: (title, help, action name).
PALETTE: tuple[tuple[str, str, str], ...] = (
    ("Sort by Diff (d)", "sort the table by Diff; again to flip", "sort_diff"),
    ("Sort by column… (s)", "pick a sort column", "sort_pick"),
    ("Search… (/)", "jump between the rows that match (n / N), rows kept", "search"),
    ("Filter rows… (|)", "filter the table by text", "filter"),
    ("Toggle TOTAL rows (t)", "show only the [ TOTAL ] rows", "totals"),
    ("Switch view (v)", "statistic ↔ detail ↔ tree", "cycle_view"),
    ("Call stacks (c)", "show or hide the call stacks", "stacks"),
    ("Export workbook… (e)", "write the xlsx", "export"),
    ("Timeline (T)", "one step of each side as lanes, base above comparison", "timeline"),
    ("Keys (?)", "every key of the app", "help"),
)


def build_app(
    request: RunRequest,
    *,
    out_dir: str = ".",
    first_run: ChildRun | None = None,
) -> PerfCmpApp:
    """The app wired to a comparison in a child process (call ``runner.prepare()`` first).

    ``first_run``: a run of ``request`` the caller already started (so it overlaps the app's
    start-up); a retry after an error starts a fresh one of the same request.
    """
    from perfcmp_core.runner import start_comparison

    pending = [first_run] if first_run is not None else []
    #: The child of the latest run: it serves (it stays after a finished run, holding both
    #: profiles), so a step change is its next run, not a new child reading them again.
    serving = [first_run] if first_run is not None else []

    def begin(wanted: RunRequest) -> ChildRun:
        if serving and serving[0].again(request=wanted):
            return serving[0]
        # None waits (the first run, a run stopped, failed or still going): a new child. One
        # still going is closed by the worker thread reading it, once cancelled.
        serving[:] = [start_comparison(wanted, serve=True)]
        return serving[0]

    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        run = pending.pop() if pending else begin(request)
        return run.events(should_stop)

    def restart(base_step: int | None, comp_step: int | None) -> EventSource:
        """The same comparison on other steps (the app reads the first run at once, on mount,
        so no run of the old steps is left pending)."""
        cut = replace(request, base_opts=replace(request.base_opts, step=base_step),
                      comp_opts=replace(request.comp_opts, step=comp_step))
        return lambda should_stop: begin(cut).events(should_stop)

    def release() -> None:
        for run in serving:
            run.close()

    return PerfCmpApp(request.base, request.comp, source, out_dir=str(Path(out_dir)),
                      restart=restart, release=release)


def run_app(
    request: RunRequest,
    *,
    out_dir: str = ".",
    mouse: bool = True,
    first_run: ChildRun | None = None,
) -> int:
    """Run the app in this terminal; returns the exit code (0, 1 internal error, 2 bad input)."""
    return run_in_terminal(lambda: build_app(request, out_dir=out_dir, first_run=first_run), mouse)


def run_in_terminal(build: Callable[[], PerfCmpApp], mouse: bool) -> int:
    """Build an app and run it in this terminal; its exit code."""
    from perfcmp_core.runner import prepare

    prepare()
    # Textual sizes the screen with shutil.get_terminal_size(), which prefers COLUMNS/LINES from
    # the environment: a stale exported value would pin the app to it and ignore every resize.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
    app = build()
    with Guard(app) as guard:  # SIGHUP / SIGTERM / a hung-up terminal end everything at once
        app.run(mouse=mouse)
    if guard.exit_code is not None:
        return guard.exit_code
    return int(app.return_code or 0)  # 1 when the app itself crashed (Textual sets it)
