"""j / k / g / G in the app's dialogs, as on its tables (VisiData's habits).

A dialog is either a list to pick from (an ``OptionList``: the keys move its highlight) or text to
read (a ``VerticalScroll``: the keys scroll it). One set of bindings serves both, so every dialog
answers the same keys the tables do.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, ScreenResultType
from textual.widgets import OptionList

#: The keys, on the dialog screen (not on the focused widget: a dialog's text box keeps typing).
VIM_BINDINGS = [
    Binding("j", "vim('down')", "Down", show=False),
    Binding("k", "vim('up')", "Up", show=False),
    Binding("g", "vim('home')", "Top", show=False),
    Binding("G", "vim('end')", "Bottom", show=False),
]

_LIST = {"down": "cursor_down", "up": "cursor_up", "home": "first", "end": "last"}
_SCROLL = {"down": "scroll_down", "up": "scroll_up", "home": "scroll_home", "end": "scroll_end"}


class VimKeys(ModalScreen[ScreenResultType]):
    """A dialog whose first option list, or else its first scrolling box, follows j / k / g / G
    (subclasses add :data:`VIM_BINDINGS` to their own)."""

    def action_vim(self, move: str) -> None:
        lists = self.query(OptionList)
        if lists:  # the focused list, else the first
            target = self.focused if isinstance(self.focused, OptionList) else lists.first()
            getattr(target, f"action_{_LIST[move]}")()
            return
        boxes = self.query(VerticalScroll)
        if boxes:
            getattr(boxes.first(), _SCROLL[move])(animate=False)
