"""Progress events of a comparison run.

The same stream drives the headless ``export`` and the TUI (whose worker forwards each event from
the child process to the screen as it arrives, so the overall view fills in first); both fold it
into one result with :class:`perfcmp_core.collect.ResultBuilder`. Events are small picklable
dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from .notes import Note

if TYPE_CHECKING:  # runtime import would pull in pandas before the TUI's child process starts
    from .compare.result import Table


@dataclass
class Planned:
    """The phases this run will go through, in order (for a determinate progress bar)."""

    phases: tuple[str, ...]


@dataclass
class Phase:
    """A phase started (``done`` False) or finished (``done`` True)."""

    name: str  # "load base", "load comparison", "OverallMetrics", "operators", …
    done: bool = False
    seconds: float = 0.0


@dataclass
class Loaded:
    """One side is loaded; ``info`` is :func:`perfcmp_core.info.profile_info` of it (plain
    data: ``info`` prints it), ``notes`` the loader's notes as records."""

    side: str  # "base" | "comparison"
    info: dict[str, Any]
    notes: tuple[Note, ...] = ()

    def side_notes(self) -> list[Note]:
        """The loader's notes as a result lists them: each with this side, except those about
        this machine (the same for both sides, said once)."""
        return [note.of_side(self.side) for note in self.notes]


@dataclass
class TableReady:
    table: Table


@dataclass
class Skipped:
    """Tables a comparison did not produce, and why: the one carrier of a table's absence
    (shown instead of an empty screen, listed in the notes)."""

    names: tuple[str, ...]  # table names it would have produced
    reason: str


@dataclass
class SummaryReady:
    figures: dict[str, Any]  # terminal "Model Profiling Time Distribution" data
    text: str  # the same, rendered as a plain-text table


@dataclass
class Failed:
    message: str
    is_input: bool  # InputError (user can fix) vs internal error
    detail: str = ""  # traceback for internal errors


@dataclass
class Finished:
    seconds: float
    #: The run's own notes (unlinked kernels …), each with the step that made it and the
    #: screens it concerns (none: the whole run).
    notes: list[Note] = field(default_factory=list)


Event = Union[Planned, Phase, Loaded, TableReady, Skipped, SummaryReady, Failed, Finished]
