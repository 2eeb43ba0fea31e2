"""The progress panel under the screens: a bar over the run's phases, the phase now, and every
phase with its state (· to come, ▶ running, ✓ done with its seconds, ✗ failed or cancelled)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import ProgressBar, Static

from perfcmp_core.events import Phase


class RunProgress(Vertical):
    """``timings=False`` leaves the seconds off (reproducible snapshots)."""

    def __init__(self, timings: bool = True, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.timings = timings
        self.phases: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="progress-head"):
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="bar")
            yield Static("starting…  (Esc / q cancels)", id="phase-now")
        yield Static("", id="phases")

    def plan(self, phases: tuple[str, ...]) -> None:
        self.query_one("#bar", ProgressBar).update(total=len(phases), progress=0)
        self.phases = {p: f"· {p}" for p in phases}
        self._show()

    def phase(self, event: Phase) -> None:
        if event.done:
            took = f" {event.seconds:.2f} s" if self.timings else ""
            self.phases[event.name] = f"✓ {event.name}{took}"
            self.query_one("#bar", ProgressBar).advance(1)
        else:
            self.phases[event.name] = f"▶ {event.name}"
            done = sum(v.startswith("✓") for v in self.phases.values())
            self._now(f"{event.name} …  ({done + 1}/{len(self.phases)})  Esc / q cancels")
        self._show()

    def count(self, done: int, total: int, what: str) -> None:
        """Progress inside the phase now, ``done`` of ``total`` items (a cluster's ranks): the bar
        spans the items and the phases after them."""
        after = sum(not v.startswith("✓") for v in self.phases.values())
        self.query_one("#bar", ProgressBar).update(total=total + after, progress=done)
        self._now(f"{what} {done}/{total} …  Esc / q cancels")

    def failed(self, message: str) -> None:
        self.phases["error"] = f"✗ {message}"
        self._now("failed")
        self._show()

    def cancelled(self) -> None:
        self.phases["cancel"] = "✗ cancelled"
        self._now("cancelled — q quits")
        self._show()

    def _now(self, text: str) -> None:
        self.query_one("#phase-now", Static).update(Text(text))

    def _show(self) -> None:
        self.query_one("#phases", Static).update(Text("   ".join(self.phases.values())))
