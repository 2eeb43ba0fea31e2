"""Notes: what a run has to say beside its tables, one small record each.

A note is made where what it says is known — a loader about its input (N/A durations, a side
file missing), the profile cache about this machine (it could not be used), a comparison step
about its results (kernels linked to no op), a step that could not run (why its tables are
absent). Its fields, not its text, decide where it is shown: the screens it concerns (the app's
notes line and ``!`` screen), and whether it is said with its side (``base: …``) or once for both
(this machine's). The writers (the workbook's README sheet, ``--json``, the terminal reports)
and the app render :attr:`Note.line`; none of them parses a note's text.

Kept free of imports from the rest of the engine: the model, the loaders, the cache, the events
and the result builder all use it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

#: Made while reading one input (a loader, or the detection of the input's files): about that
#: input only, said with its side once the side is known (:meth:`Note.of_side`).
INPUT = "input"
#: About this machine, not about an input (the profile cache could not be used): the same for
#: both sides, so it is said once and without a side.
MACHINE = "machine"
#: A cluster comparison's own (ranks missing or not compared, the ranks' loader notes by rank):
#: about the whole run.
CLUSTER = "cluster"
#: Why a comparison made no table (a ``Skipped`` event): shown on the screens of those tables.
ABSENT = "absent"
#: Any other origin names what made the note: a comparison step (``"operators"``: what it
#: found beside its tables) or a table (its own notes, shown on its screen).


@dataclass(frozen=True)
class Note:
    """One note: its sentence, what made it, which side's input it is about, where it is shown.

    Picklable and hashable (it crosses from the worker processes in events, and a result says
    each note once)."""

    text: str  # the sentence, without its side
    origin: str = INPUT  # INPUT, MACHINE, CLUSTER, ABSENT, or the name of the step or table that made it
    side: str = ""  # "base" | "comparison" for an input's note once its side is known; else ""
    #: Ids of the screens it concerns (those of the step that made it, or of its absent tables);
    #: empty: every screen (what a loader had to guess concerns every figure).
    screens: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        """The note as every output shows it: ``"<side>: <text>"`` for an input's, else its text."""
        return f"{self.side}: {self.text}" if self.side else self.text

    @property
    def about_machine(self) -> bool:
        return self.origin == MACHINE

    def on(self, screen_id: str) -> bool:
        """Whether it is shown on the screen ``screen_id``."""
        return not self.screens or screen_id in self.screens

    def of_side(self, side: str) -> Note:
        """The note as one side's result lists it: an input's note takes the side; this
        machine's stays without one (so both sides' copies are one note)."""
        return self if self.about_machine or self.side else replace(self, side=side)

    def made_by(self, origin: str, screens: tuple[str, ...]) -> Note:
        """The note stamped with the step that made it and the screens it concerns."""
        return replace(self, origin=origin, screens=screens)


def once(notes: Iterable[Note]) -> list[Note]:
    """Each line once, in order (the first record of a line wins): the same sentence made twice —
    by both sides about this machine, by two steps — is said once."""
    seen: dict[str, Note] = {}
    for note in notes:
        seen.setdefault(note.line, note)
    return list(seen.values())


def lines(notes: Iterable[Note]) -> list[str]:
    """The notes as the outputs print them."""
    return [note.line for note in notes]


def from_plain(data: object) -> Note:
    """A note back from :func:`dataclasses.asdict` (the profile cache keeps the metadata as
    JSON): the screens come back as a list."""
    if not isinstance(data, dict):
        raise ValueError(f"a note is a mapping, not {type(data).__name__}")
    return Note(str(data["text"]), str(data["origin"]), str(data["side"]),
                tuple(str(s) for s in data["screens"]))
