"""`S`: rerun the comparison for one step (or all of them again).

A run's totals can hide that one step was slow; StepCompare (Overall, `v`) shows which, and this
picker reruns the whole comparison on that step alone — every screen then describes that step,
as `--base-step N --comparison-step M` would. Steps are paired by position, as StepCompare pairs
them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from .vim_keys import VIM_BINDINGS, VimKeys

#: A choice: the base and comparison step ids, or (None, None) for every step.
Choice = tuple[int | None, int | None]


def step_choices(base: list[int], comp: list[int]) -> list[tuple[str, Choice]]:
    """(label, choice) for "all steps" and for each pair of steps by position."""
    out: list[tuple[str, Choice]] = [("all steps", (None, None))]
    for b, c in zip(base, comp):
        out.append((f"step {b}" if b == c else f"step {b} of base / {c} of comparison", (b, c)))
    return out


class StepPicker(VimKeys[Choice | None]):
    """Dismisses with the chosen pair of steps, or None (Esc / q)."""

    BINDINGS = [Binding("escape,q", "cancel", "Cancel"), *VIM_BINDINGS]

    def __init__(self, choices: list[tuple[str, Choice]], current: Choice) -> None:
        super().__init__()
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="step-box"):
            yield Static("[b]Compare one step[/b] (reruns the comparison) — Enter picks, "
                         "Esc cancels")
            yield OptionList(*(Option(label + ("  (now)" if c == self.current else ""), id=str(i))
                               for i, (label, c) in enumerate(self.choices)), id="step-options")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        now = [c for _, c in self.choices].index(self.current) if any(
            c == self.current for _, c in self.choices) else 0
        options.highlighted = now
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choices[int(event.option.id or 0)][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
