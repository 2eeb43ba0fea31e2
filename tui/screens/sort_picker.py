"""`s`: choose the column to sort by (descending; the current sort column flips).

Typing narrows the list, as the filter narrows rows (text, ``a|b`` or a regular expression):
``s`` ``calls`` ⏎ sorts by the first column whose header holds "calls".
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from perfcmp_core.compare.result import Column
from perfcmp_core.view import Search


class SortPicker(ModalScreen[str | None]):
    """Dismisses with the chosen column key, or None (Esc)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "move(1)", "Next", show=False, priority=True),
        Binding("up", "move(-1)", "Previous", show=False, priority=True),
    ]

    def __init__(self, columns: tuple[Column, ...], headers: list[str], current: str | None) -> None:
        super().__init__()
        self.columns = columns
        self.headers = headers
        self.current = current
        #: The column keys listed now, in order (all of them until something is typed).
        self.keys: list[str] = [c.key for c in columns]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="sort-box"):
            yield Static("[b]Sort by[/b] (descending; the current column flips) — type to narrow, "
                         "↑/↓ choose, Enter picks, Esc cancels")
            yield Input(placeholder="column: text, a|b or a regex", id="sort-filter")
            yield OptionList(id="sort-options")

    def on_mount(self) -> None:
        self._fill("")
        if self.current in self.keys:
            self.query_one(OptionList).highlighted = self.keys.index(self.current)
        self.query_one(Input).focus()

    def _fill(self, text: str) -> None:
        """List the columns whose header matches ``text`` (all for an empty text)."""
        search = Search.compile(text) if text.strip() else None
        picked = [(c, h) for c, h in zip(self.columns, self.headers)
                  if search is None or search.hits([h.lower()])[0]]
        self.keys = [c.key for c, _ in picked]
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(h + ("  (current)" if c.key == self.current else ""), id=c.key)
                             for c, h in picked])
        if picked:
            options.highlighted = 0

    @on(Input.Changed, "#sort-filter")
    def _narrow(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#sort-filter")
    def _pick_highlighted(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None and self.keys:
            self.dismiss(self.keys[options.highlighted])

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if self.keys:
            now = options.highlighted if options.highlighted is not None else 0
            options.highlighted = max(0, min(now + step, len(self.keys) - 1))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
