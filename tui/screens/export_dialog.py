"""`e`: export the workbook from inside the app, reusing the headless writer."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from perfcmp_core.compare.result import ComparisonResult


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


def write_in_background(app: App[object], result: ComparisonResult, folder: str,
                        partial: str = "") -> None:
    """Write the workbook of ``result`` into ``folder`` in a thread; a notification says where
    it went (``partial`` is appended) or why it could not be written."""

    def write() -> None:
        from perfcmp_core.errors import InputError
        from perfcmp_core.export.xlsx import NothingToWrite, write_workbook

        try:
            path = write_workbook(result, folder)
        except (InputError, NothingToWrite) as exc:
            message = exc.message if isinstance(exc, InputError) else str(exc)
            app.call_from_thread(app.notify, f"export failed: {message}", severity="error",
                                 timeout=8, markup=False)
            return
        app.call_from_thread(app.notify, f"workbook written: {path}{partial}", timeout=8,
                             markup=False)

    app.run_worker(write, thread=True, exclusive=False, exit_on_error=False, group="export")
