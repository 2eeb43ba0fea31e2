"""`s`: choose the column to sort by (descending; the current sort column flips)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from perfcmp_core.compare.result import Column


class SortPicker(ModalScreen[str | None]):
    """Dismisses with the chosen column key, or None (Esc / q)."""

    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    def __init__(self, columns: tuple[Column, ...], headers: list[str], current: str | None) -> None:
        super().__init__()
        self.columns = columns
        self.headers = headers
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="sort-box"):
            yield Static("[b]Sort by[/b] (descending; the current column flips) — Enter picks, "
                         "Esc cancels")
            options = [Option(h + ("  (current)" if c.key == self.current else ""), id=c.key)
                       for c, h in zip(self.columns, self.headers)]
            yield OptionList(*options, id="sort-options")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [c.key for c in self.columns]
        if self.current in keys:
            options.highlighted = keys.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
