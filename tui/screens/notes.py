"""`!`: every note of the run in one place — what a loader had to guess, why a table is absent,
what a comparison could not link — each under the screens it concerns.

The headless commands print these notes after their tables; in the app a screen shows the first
of its own on one line above its table, and this view lists them all, in full.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from perfcmp_core.notes import Note

from .vim_keys import VIM_BINDINGS, VimKeys


def notes_text(by_screen: list[tuple[str, list[Note]]]) -> Text:
    """``by_screen``: (screen title, the notes shown on it) in screen order; a note shown on
    several screens is listed under the first and named again as ``(also: …)`` (one line is
    said once, whichever records made it: a step's note and its table's own)."""
    text = Text("Notes of this run  (Esc / q / ! closes)\n", style="bold")
    seen: dict[str, list[str]] = {}
    for title, notes in by_screen:
        for note in notes:
            seen.setdefault(note.line, []).append(title)
    if not seen:
        text.append("\nno notes: every figure was computed from what the profiles hold")
        return text
    for note, titles in seen.items():
        text.append("\n• ", style="bold")
        text.append(note)
        text.append(f"\n  {titles[0]}" + (f" (also: {', '.join(titles[1:])})"
                                           if len(titles) > 1 else ""), style="dim")
    return text


class NotesScreen(VimKeys[None]):
    BINDINGS = [Binding("escape,q,exclamation_mark", "close", "Close"), *VIM_BINDINGS]

    def __init__(self, by_screen: list[tuple[str, list[Note]]]) -> None:
        super().__init__()
        self.by_screen = by_screen

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notes-box", classes="dialog"):
            yield Static(notes_text(self.by_screen), id="notes-text")

    def action_close(self) -> None:
        self.dismiss(None)
