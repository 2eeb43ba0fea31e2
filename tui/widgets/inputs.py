"""The two header lines: each input's path, kind and steps (as loaded; "loading…" until then)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static


class InputsBar(Static):
    def __init__(self, base: str, comp: str, **kwargs: Any) -> None:
        self.paths = {"base": base, "comparison": comp}
        super().__init__(inputs_text(self.paths, {}), **kwargs)

    def show(self, loaded: dict[str, dict[str, Any]], stopped: bool = False) -> None:
        """What is known of each side (``profile_info`` by side); ``stopped``: the run ended
        before loading the others (failed, cancelled): they are "not loaded", not "loading…"."""
        self.update(inputs_text(self.paths, loaded, stopped))


def inputs_text(paths: dict[str, str], loaded: dict[str, dict[str, Any]],
                stopped: bool = False) -> Text:
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
        text.append(tag, style="bold")
        text.append(f" {paths[side]}{detail}" + ("\n" if side == "base" else ""))
    return text
