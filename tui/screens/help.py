"""`?` / F1: every key of the app in one place (also listed in the footer and the palette)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

#: (keys, what they do) — the README's key table is generated from this list by a test.
KEYS: tuple[tuple[str, str], ...] = (
    ("1 … 8, Tab / Shift+Tab",
     "switch screen: Overall, Operators, Modules, Comm, Memory, Kernels, API, Advisor"),
    ("j / k, ↓ / ↑", "move the cursor"),
    ("PgDn / PgUp, g / G", "page down / up, first / last row"),
    ("h / l, ← / →", "scroll wide tables sideways (the name column stays)"),
    ("d", "sort by Diff (descending; again to flip)"),
    ("s", "pick a sort column"),
    ("/", "filter rows by text (live; Enter keeps, Esc reverts, empty clears)"),
    ("t", "toggle [ TOTAL ]-only rows"),
    ("v", "switch view: statistic ↔ detail (and the module tree)"),
    ("Enter / Space",
     "expand a tree node; on a statistic row show its matched rows; else the whole row"),
    ("c", "show / hide the Base and Comparison call stacks"),
    ("e", "export the workbook (xlsx, same layout as msprof-analyze compare)"),
    ("!", "every note of the run (a screen's first note shows above its table)"),
    ("Esc", "close the filter or a dialog; cancel loading"),
    ("? / F1", "this help"),
    ("Ctrl+P", "command palette"),
    ("q", "back from matched rows; cancel loading; else quit"),
    ("Ctrl+Q", "quit"),
)

#: (term, what it means) — how to read what the screens show; docs/tui.md lists the same.
READING: tuple[tuple[str, str], ...] = (
    ("Δ%", "the change, (comparison − base) ÷ base: ▲ +25.0% the comparison takes 25% more "
           "(worse), ▼ −20.0% less (better); the workbook keeps the reference's Diff Ratio"),
    ("Diff", "comparison − base, in the unit its header names"),
    ("Order Id, Top", "the row's place in the workbook (execution order; rank by Diff): the "
                      "last columns, `s` on them restores the workbook's order"),
    ("Cube, Matmul (Cube)", "Matmul (Cube) is matmul work on the Cube unit; Cube is the other "
                            "Cube-unit kernels (neither matmul, flash attention nor conv)"),
    ("Units", "as in the workbook: statistic tables and Overall in ms, the matched rows and "
              "kernels of a drill in µs (the reference's detail sheets); headers name the unit"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Static(Text("perfcmp-tui keys  (Esc / q / ? closes)\n", style="bold"))
            for keys, what in KEYS:
                with Horizontal(classes="help-row"):
                    yield Static(Text(keys, style="bold"), classes="help-keys")
                    yield Static(Text(what), classes="help-what")
            yield Static(Text("\nReading the screens", style="bold"))
            for term, what in READING:
                with Horizontal(classes="help-row"):
                    yield Static(Text(term, style="bold"), classes="help-keys")
                    yield Static(Text(what), classes="help-what")
            yield Static(Text("\nColours only repeat the signs: ▲ worse, ▼ better, + / − on "
                              "differences."))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
