"""The one-line screen bar: `1 Overall  2 Operators …`, the current screen in reverse video.

Textual's Tabs takes two lines and marks the active tab by colour only; this bar takes one line
(80×24 terminals need every row) and marks it by reverse video, which survives 16 colours and
NO_COLOR. Screens with nothing to show are dimmed.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from perfcmp_core.compare.result import Screen


class TabBar(Widget):
    DEFAULT_CSS = "TabBar { height: 1; }"

    active: reactive[str] = reactive("overall")

    class Chosen(Message):
        """A screen was clicked."""

        def __init__(self, pane_id: str) -> None:
            self.pane_id = pane_id
            super().__init__()

    def __init__(self, screens: tuple[Screen, ...], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.screens = screens
        self.set_reactive(TabBar.active, screens[0].id)
        self.empty: set[str] = set()
        self._spans: list[tuple[int, int, str]] = []

    def set_empty(self, pane_id: str, empty: bool) -> None:
        (self.empty.add if empty else self.empty.discard)(pane_id)
        self.refresh()

    def reset(self) -> None:
        """A new run: no screen is known to be empty yet."""
        self.empty.clear()
        self.refresh()

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="crop")
        self._spans = []
        for p in self.screens:
            active = p.id == self.active
            label = f" {p.key} {p.title} " if active else f"{p.key} {p.title}"
            style = "bold reverse" if active else "dim" if p.id in self.empty else ""
            text.append(" ")
            self._spans.append((len(text), len(text) + len(label), p.id))
            text.append(label, style=style)
        return text

    def on_click(self, event: events.Click) -> None:
        for start, end, pane_id in self._spans:
            if start <= event.x < end:
                self.post_message(self.Chosen(pane_id))
