"""The footer: the keys that work now, drawn as one line of text.

Textual's Footer rebuilds a widget per key, styles included, whenever the bindings change — on
every focus change, so on every screen switch and every dialog opened or closed; on the real
pair that was about a third of such a key's time. This bar redraws one line instead. Clicking a
key runs it, as in Textual's.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        #: (first cell, end cell, action, the node that binds it) per key drawn, for clicks.
        self._spans: list[tuple[int, int, str, DOMNode]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is self.screen:
            self.refresh()

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="crop")
        self._spans = []
        seen: set[str] = set()
        for node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            if text:
                text.append(" ")
            start = len(text)
            text.append(self.app.get_key_display(binding), style="bold" if enabled else "dim")
            text.append(f" {binding.description}", style="" if enabled else "dim")
            self._spans.append((start, len(text), binding.action, node))
        return text

    async def on_click(self, event: events.Click) -> None:
        for start, end, action, node in self._spans:
            if start <= event.x < end:
                await self.app.run_action(action, node)
                return
