"""A failed load or comparison: the message, and a way out (retry or quit)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from .vim_keys import VIM_BINDINGS, VimKeys


class ErrorScreen(VimKeys[str | None]):
    """Dismisses with "retry", "quit" or None (close and look at what did load)."""

    BINDINGS = [
        Binding("r", "choose('retry')", "Retry"),
        Binding("q", "choose('quit')", "Quit"),
        Binding("escape,enter", "choose('close')", "Close"),
        *VIM_BINDINGS,
    ]

    def __init__(self, message: str, detail: str, is_input: bool) -> None:
        super().__init__()
        self.message = message
        self.detail = detail
        self.is_input = is_input

    def compose(self) -> ComposeResult:
        kind = "Cannot read the input" if self.is_input else "Internal error"
        with Vertical(classes="dialog", id="error-box"):
            text = Text(kind, style="bold")
            text.append(f"\n\n{self.message}\n\n")
            text.append("r retry · Esc close · q quit", style="italic")
            yield Static(text, id="error-message")
            if self.detail:
                with VerticalScroll(id="error-detail"):
                    yield Static(Text(self.detail))

    def action_choose(self, choice: str) -> None:
        self.dismiss(None if choice == "close" else choice)
