"""`?` / F1: every key of the app in one place (also listed in the footer and the palette)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from .vim_keys import VIM_BINDINGS, VimKeys

#: (keys, what they do) — the README's key table is generated from this list by a test.
KEYS: tuple[tuple[str, str], ...] = (
    ("0 … 8, Tab / Shift+Tab",
     "switch screen: Ranks (clusters), Overall, Operators, Modules, Comm, Memory, Kernels, API, "
     "Advisor"),
    ("j / k, ↓ / ↑", "move the cursor (in a dialog: the highlight, or scroll its text)"),
    ("PgDn / PgUp, g / G", "page down / up, first / last row"),
    ("h / l, ← / →", "cell cursor one column left / right; wide tables scroll by whole "
                     "columns (the name column stays)"),
    ("< / >", "narrower / wider name column"),
    ("- / +", "hide the cursor column / show the hidden columns again"),
    ("d", "sort by Diff (descending; again to flip); Kernels, API: by the total's Diff"),
    ("s", "pick a sort column (type to narrow the list; the column comes into view)"),
    ("/", "search in place: the rows stay, the cursor goes to the first match (text, "
          "alternatives or a regular expression; Enter keeps, Esc ends); the status counts "
          "\"match i/n\""),
    ("|", "filter rows: text, alternatives or a regular expression (live; Enter keeps, Esc "
          "reverts, empty clears)"),
    ("n / N", "next / previous row the search matched; without a search, the next / previous "
              "cell the filter matched (kernel lists and hidden columns too)"),
    ("t", "toggle [ TOTAL ]-only rows"),
    ("u", "hide / show the unchanged rows (Diff 0, Δ% 0)"),
    ("v", "switch view: statistic ↔ detail (and the module tree)"),
    ("Enter / Space",
     "expand a tree node; on a statistic row show its matched rows; on an OverallMetrics class or "
     "a kernel class / launching op row what is behind it (as o); on a rank compare that rank "
     "pair; else the whole row"),
    ("o", "what is behind the row, on the screen that breaks it down: an Overall kernel class → "
          "its launching ops and kernels (Kernels), a collective → its ops (Comm), an idle cause "
          "→ its ops (Operators); a kernel class → its launching ops; a launching op → its "
          "operator rows (q / Backspace: back to the row)"),
    ("E / C", "expand / collapse every node of a tree (the cursor stays on its row or its root)"),
    ("P", "jump to the parent of the cursor row in a tree"),
    ("Backspace", "back: out of the matched rows or the rows o opened, else to the screen left "
                  "last (on its row)"),
    ("[ / ]", "scroll the panel above the table (headline figures, the advisor's findings) a "
              "page up / down, when it holds more than it shows"),
    ("c", "show / hide the Base and Comparison call stacks"),
    ("y / Y", "copy the cell / the row (tab-separated; numbers at full precision) to the "
              "clipboard (OSC 52: over SSH too)"),
    ("f", "the cursor row in full (the line under the table shows the cursor cell in full)"),
    ("e", "export the workbook (xlsx, same layout as msprof-analyze compare)"),
    ("x / X", "the view on screen (filtered, sorted, shown columns) as CSV in the export folder "
              "/ tab-separated to the clipboard"),
    ("K", "the kernels of the operator / module row, base vs comparison, with its call stacks "
          "below (j / k a kernel: its name whole under the table; f its row, y / Y / X copy its "
          "name / its row / the table)"),
    ("p", "pictures on / off: Overall's E2E bars per side and E2E per step, Advisor's "
           "category shares per stage (on from 36 rows)"),
    ("S", "compare one step: rerun the comparison on the steps picked, any base step against "
          "any comparison step (or on all again)"),
    ("T", "Timeline: one step of each side as lanes, base above comparison; on an op or module-tree row, "
          "where that op or module runs (its own keys: + / - zoom, h / l pan, ← / → cursor, 0 fit, o scale, "
          "a / A anchor (backward pass, top-level modules), Enter the op, S step, q close)"),
    ("!", "every note of the run (a screen's first note shows above its table)"),
    ("Esc", "close the filter or a dialog; cancel loading"),
    ("? / F1", "this help"),
    ("Ctrl+P", "command palette"),
    ("q", "back from matched rows or the rows o opened; cancel loading; else quit (with results "
          "on screen, q twice)"),
    ("Q, Ctrl+Q", "quit at once"),
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
    ("Decimals", "two; a non-zero number that would read 0.00 shows three significant digits "
                 "(0.000698); `y` copies every digit"),
    ("Units", "as in the workbook: statistic tables and Overall in ms, the matched rows and "
              "kernels of a drill in µs (the reference's detail sheets); headers name the unit"),
)


def _grid(rows: tuple[tuple[str, str], ...]) -> Table:
    """Two columns, the first bold: one renderable for a whole section (a widget per row made
    opening the help cost a third of a second)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", width=22, no_wrap=False)
    grid.add_column(ratio=1)
    for first, second in rows:
        grid.add_row(first, second)
    return grid


class HelpScreen(VimKeys[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close"), *VIM_BINDINGS]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Static(Text("perfcmp-tui keys  (Esc / q / ? closes)\n", style="bold"))
            yield Static(_grid(KEYS), id="help-keys")
            yield Static(Text("\nReading the screens", style="bold"))
            yield Static(_grid(READING), id="help-reading")
            yield Static(Text("\nColours only repeat the signs: ▲ worse, ▼ better, + / − on "
                              "differences."))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
