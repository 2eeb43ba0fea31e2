"""Progress events of a comparison run.

The same stream drives the headless ``export`` and the TUI (whose worker forwards each event from
the child process to the screen as it arrives, so the overall view fills in first); both fold it
into one result with :class:`perfcmp_core.collect.ResultBuilder`. Events are small picklable
dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

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


#: Notes that start with this are about this machine, not about one input (the profile cache
#: could not be used): the same for both sides, so a result shows them once, without a side.
MACHINE_NOTE = "profile cache: "


@dataclass
class Loaded:
    """One side is loaded; ``info`` is :func:`perfcmp_core.info.profile_info` of it."""

    side: str  # "base" | "comparison"
    info: dict[str, Any]

    def notes(self) -> list[str]:
        """The loader's notes as a result lists them: ``"<side>: <note>"``, except
        :data:`MACHINE_NOTE` ones, which stay as they are (callers skip repeats)."""
        return [n if n.startswith(MACHINE_NOTE) else f"{self.side}: {n}"
                for n in self.info.get("notes", ())]


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
    notes: list[str] = field(default_factory=list)  # the run's own notes (unlinked kernels …)
    #: note → ids of the screens it concerns (those of the comparison that made it); a note
    #: not listed concerns the whole run.
    screens: dict[str, tuple[str, ...]] = field(default_factory=dict)


Event = Union[Planned, Phase, Loaded, TableReady, Skipped, SummaryReady, Failed, Finished]
