"""`e`: export the workbook from inside the app, reusing the headless writer."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


class ExportDialog(ModalScreen[str | None]):
    """Ask for the output folder; returns it (or None when cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_dir: str) -> None:
        super().__init__()
        self.default_dir = default_dir

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="export-box"):
            yield Static("[b]Export workbook[/b]\nperformance_comparison_result_<time>.xlsx is "
                         "written into this folder (never overwriting a file):")
            yield Input(value=str(Path(self.default_dir).expanduser()), id="export-dir")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-dir", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or self.default_dir)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-ok":
            self.dismiss(self.query_one("#export-dir", Input).value.strip() or self.default_dir)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
