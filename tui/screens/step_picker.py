"""`S`: rerun the comparison for one step of each side (or all of them again).

A run's totals can hide that one step was slow; StepCompare (Overall, `v`) shows which, and this
picker reruns the whole comparison on the steps picked — every screen then describes them, as
`--base-step N --comparison-step M` would. Any base step goes with any comparison step (5 steps
against 12: base step 5 against comparison step 10): one list per side. Moving in the base list
moves the comparison list to the step at the same position (StepCompare's pairing), so `j j
Enter` compares the second step of each; `l` / Tab then picks another comparison step.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from .vim_keys import VIM_BINDINGS, VimKeys

#: A choice: the base and comparison step ids (None: every step of that side).
Choice = tuple[int | None, int | None]
ALL = "all steps"


def step_options(steps: list[int], current: int | None) -> list[str]:
    """The labels of one side's list: every step, then each step; the one compared now marked."""
    labels = [ALL, *(f"step {s}" for s in steps)]
    now = 0 if current is None else 1 + steps.index(current) if current in steps else -1
    return [label + ("  (now)" if i == now else "") for i, label in enumerate(labels)]


class StepPicker(VimKeys[Choice | None]):
    """Dismisses with the chosen pair of steps, or None (Esc / q)."""

    BINDINGS = [
        Binding("escape,q", "cancel", "Cancel"),
        Binding("enter", "pick", "Compare", priority=True),
        Binding("h,left", "side('base')", "Base list", show=False),
        Binding("l,right", "side('comparison')", "Comparison list", show=False),
        *VIM_BINDINGS,
    ]

    def __init__(self, base: list[int], comp: list[int], current: Choice) -> None:
        super().__init__()
        self.steps = {"base": base, "comparison": comp}
        self.current = current
        self._base_at = -1  # the base list's highlight the comparison list last followed

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="step-box"):
            yield Static("[b]Compare one step[/b] (reruns the comparison) — j / k choose, "
                         "h / l or Tab switch side, Enter compares, Esc cancels")
            with Horizontal(id="step-lists"):
                for side, now in zip(self.steps, self.current):
                    with Vertical(classes="step-side"):
                        yield Static(f"[b]{side.capitalize()}[/b]")
                        yield OptionList(*(Option(label) for label in
                                           step_options(self.steps[side], now)),
                                         id=f"steps-{side}")

    def on_mount(self) -> None:
        for side, now in zip(self.steps, self.current):
            steps = self.steps[side]
            self._list(side).highlighted = 1 + steps.index(now) if now in steps else 0
        self._base_at = self._list("base").highlighted or 0  # the pair compared now stays
        self._list("base").focus()

    def _list(self, side: str) -> OptionList:
        return self.query_one(f"#steps-{side}", OptionList)

    def choice(self) -> Choice:
        """The pair highlighted now."""
        picked = []
        for side in self.steps:
            i = self._list(side).highlighted or 0
            picked.append(self.steps[side][i - 1] if i > 0 else None)
        return picked[0], picked[1]

    @on(OptionList.OptionHighlighted, "#steps-base")
    def _follow(self, event: OptionList.OptionHighlighted) -> None:
        """The comparison list follows the base list by position (StepCompare's pairing)."""
        if event.option_index != self._base_at:
            self._base_at = event.option_index
            comp = self._list("comparison")
            comp.highlighted = min(event.option_index, comp.option_count - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choice())  # a click on a step

    def action_pick(self) -> None:
        self.dismiss(self.choice())

    def action_side(self, side: str) -> None:
        self._list(side).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)
