"""`e`: export the workbook from inside the app, reusing the headless writer."""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from perfcmp_core.compare.result import ComparisonResult


class ExportDialog(ModalScreen[str | None]):
    """Ask for the output folder; returns it (or None when cancelled).

    The folder shows as an absolute path (``.`` says nothing about where the file goes), and a
    folder the workbook cannot be written into is refused here, with the reason under the box
    and the typed path kept for correcting (it used to close, and the path had to be typed
    again)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_dir: str) -> None:
        super().__init__()
        self.default_dir = default_dir

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="export-box"):
            yield Static("[b]Export workbook[/b]\nperformance_comparison_result_<time>.xlsx is "
                         "written into this folder (never overwriting a file):")
            yield Input(value=os.path.abspath(Path(self.default_dir).expanduser()), id="export-dir")
            yield Static("", id="export-problem", classes="hidden")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-dir", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-ok":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        """Close with the folder typed, unless it cannot take the workbook: then say why and
        keep the dialog, and the path, open."""
        from perfcmp_core.errors import InputError
        from perfcmp_core.export.safe_write import check_dir

        folder = os.path.expanduser(self.query_one("#export-dir", Input).value.strip()
                                    or self.default_dir)
        try:
            check_dir(folder)
        except InputError as exc:
            problem = self.query_one("#export-problem", Static)
            problem.update(Text(f"cannot export there: {exc.message}"))
            problem.remove_class("hidden")
            self.query_one("#export-dir", Input).focus()
            return
        self.dismiss(folder)

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
