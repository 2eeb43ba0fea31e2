"""The two header lines: each input's path, kind and steps (as loaded; "loading…" until then)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from perfcmp_core.report import middle


class InputsBar(Static):
    def __init__(self, base: str, comp: str, **kwargs: Any) -> None:
        self.paths = {"base": base, "comparison": comp}
        self._loaded: dict[str, dict[str, Any]] = {}
        self._stopped = False
        super().__init__(inputs_text(self.paths, {}), **kwargs)

    def show(self, loaded: dict[str, dict[str, Any]], stopped: bool = False) -> None:
        """What is known of each side (``profile_info`` by side); ``stopped``: the run ended
        before loading the others (failed, cancelled): they are "not loaded", not "loading…"."""
        self._loaded, self._stopped = loaded, stopped
        self.update(inputs_text(self.paths, loaded, stopped, self.size.width or None))

    def on_resize(self) -> None:
        """A path too long for the line is cut in its middle to the new width."""
        self.show(self._loaded, self._stopped)


def inputs_text(paths: dict[str, str], loaded: dict[str, dict[str, Any]],
                stopped: bool = False, width: int | None = None) -> Text:
    """Both header lines; in ``width`` cells a long path is cut in its middle, so its kind and
    steps, at the end of the line, stay (at 80 columns they were cut away)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    for tag, side in (("BASE", "base"), ("COMP", "comparison")):
        info = loaded.get(side, {})
        if info:
            steps = info.get("steps") or []
            sel = info.get("selected_step")
            step = (f"step {sel}" if sel is not None else
                    f"{len(steps)} step{'s' if len(steps) != 1 else ''}" if steps
                    else "no steps")
            detail = f"  · {info.get('label', '?')} · {step}"
        else:
            detail = "  · not loaded" if stopped else "  · loading…"
        path = paths[side]
        if width is not None:
            path = middle(path, max(12, width - len(tag) - 1 - len(detail)))
        text.append(tag, style="bold")
        text.append(f" {path}{detail}" + ("\n" if side == "base" else ""))
    return text
