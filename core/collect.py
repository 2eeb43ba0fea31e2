"""What a run produced, folded from its events: one builder for the app and the headless commands.

The event stream (:mod:`perfcmp_core.events`) says what happened in order; a
:class:`ResultBuilder` keeps what it amounts to — the tables, why the others are absent, what
each side is, the summary figures, the notes — and hands out a :class:`ComparisonResult` snapshot
that the writers can read while more events arrive (the app exports while the run goes on).
"""

from __future__ import annotations

from typing import Any, Iterator

from .compare import screen_of
from .compare.result import ComparisonResult, Table
from .errors import InputError
from .events import Event, Failed, Finished, Loaded, Skipped, SummaryReady, TableReady
from .notes import ABSENT, Note, once


class ResultBuilder:
    """Folds events (:meth:`add`) into the run's results; read it through :meth:`snapshot`."""

    def __init__(self, base_label: str, comp_label: str) -> None:
        self.base_label, self.comp_label = base_label, comp_label
        self.tables: dict[str, Table] = {}
        #: Why a table is absent, by table name: the one source of a screen's empty reason.
        self.absent: dict[str, str] = {}
        self.loaded: dict[str, dict[str, Any]] = {}  # side → profile_info
        self.summary: dict[str, Any] = {}  # {"figures": …, "text": …} once SummaryReady came
        self.failed: Failed | None = None
        self.finished = False
        self._side_notes: list[Note] = []  # what a loader had to guess (every screen)
        self._skip_notes: list[Note] = []  # why a comparison made nothing (its tables' screens)
        self._run_notes: list[Note] = []  # the run's own notes, known when it finished

    def add(self, event: Event) -> None:
        if isinstance(event, Loaded):
            self.loaded[event.side] = event.info
            # N/A durations, absent Db tables, links leading outside the folder …: headless
            # users see them only in the notes (a note about this machine, once for both).
            self._side_notes = once([*self._side_notes, *event.side_notes()])
        elif isinstance(event, TableReady):
            self.tables[event.table.name] = event.table
        elif isinstance(event, Skipped):
            for name in event.names:
                self.absent.setdefault(name, event.reason)
            screens = tuple(dict.fromkeys(screen_of(name) for name in event.names))
            self._skip_notes.append(Note(event.reason, origin=ABSENT, screens=screens))
        elif isinstance(event, SummaryReady):
            self.summary = {"figures": event.figures, "text": event.text}
        elif isinstance(event, Failed):
            self.failed = event
        elif isinstance(event, Finished):
            self.finished = True
            self._run_notes = list(event.notes)

    @property
    def notes(self) -> list[Note]:
        """Each note once: the sides', then why comparisons made nothing, then the run's.

        A reason that is also a run note (the module comparison's "the operators are compared
        instead", which its step says on both its screens) is listed with the run notes.
        """
        run = {note.line for note in self._run_notes}
        skipped = [note for note in self._skip_notes if note.line not in run]
        return once([*self._side_notes, *skipped, *self._run_notes])

    def notes_for(self, screen_id: str) -> list[Note]:
        """The notes shown on one screen, each once: what a loader had to guess (it concerns
        every figure), why a table of this screen is absent, the run's notes made by this
        screen's comparison, then its tables' own notes."""
        own = [Note(text, origin=t.name, screens=(screen_id,))
               for t in self.tables.values() if screen_of(t.name) == screen_id for text in t.notes]
        return once(n for n in [*self._side_notes, *self._skip_notes, *self._run_notes, *own]
                    if n.on(screen_id))

    def snapshot(self) -> ComparisonResult:
        """The results so far, in containers of their own: later events do not change it."""
        steps = {side: info.get("selected_step") for side, info in self.loaded.items()}
        return ComparisonResult(self.base_label, self.comp_label, tables=dict(self.tables),
                                summary=dict(self.summary), notes=self.notes,
                                base_step=steps.get("base"), comp_step=steps.get("comparison"))


def collect(events: Iterator[Event], base: str, comp: str) -> ComparisonResult:
    """Consume a whole event stream (headless use); a failure becomes an ``InputError``."""
    builder = ResultBuilder(base, comp)
    for event in events:
        builder.add(event)
        if builder.failed is not None:
            raise InputError(None, builder.failed.message)
    return builder.snapshot()
