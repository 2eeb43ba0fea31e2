"""Enter on a row: all of it, the base and comparison entries side by side (with their kernels).

A detail row is wider than any terminal (kernel lists, shapes, call stacks); here every cell is
shown in full, one per line, each side in its own column.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from perfcmp_core.compare.result import Column, Table, screen_header
from perfcmp_core.view import screen_text

from .vim_keys import VIM_BINDINGS, VimKeys


#: How much of one cell is shown at most, in lines and in characters (cut at a line's end): an
#: operator of a long run lists tens of thousands of kernel launches (290,000 characters in one
#: cell of the 8× GPU pair, lines of ≈ 300), which took the screen 3 s to lay out; past this, the
#: rest is counted and the keys that give it whole are named.
MAX_LINES = 100
MAX_CHARS = 4_000


def _shown(value: str) -> tuple[str, int]:
    """The part of ``value`` shown, and how many of its lines are left out."""
    if len(value) <= MAX_CHARS and value.count("\n") < MAX_LINES:
        return value, 0
    lines = value.split("\n")
    keep, size = 0, 0
    while keep < min(len(lines), MAX_LINES) and (keep == 0 or size + len(lines[keep]) + 1 <= MAX_CHARS):
        size += len(lines[keep]) + 1
        keep += 1
    return "\n".join(lines[:keep]), len(lines) - keep


def _cells(table: Table, row: int, columns: list[Column], title: str = "") -> Text:
    """``Header: value`` per column; multi-line values start on their own line."""
    text = Text(title + "\n" if title else "", style="bold underline")
    for i, c in enumerate(columns):
        value = screen_text(table.value(c.key, row), c).replace("\r", "")
        text.append(("\n" if i else "") + screen_header(c), style="bold")
        shown, more = _shown(value)
        text.append(("\n" if "\n" in value else ": ") + (shown or "—"), style="")
        if more:
            text.append(f"\n… {more:,} more lines (Esc, then K lists this row's kernels by name "
                        "and Y copies the row whole)", style="italic")
    return text


class DrillScreen(VimKeys[None]):
    BINDINGS = [Binding("escape,q,enter,space", "close", "Close"), *VIM_BINDINGS]

    def __init__(self, table: Table, row: int) -> None:
        super().__init__()
        self.table = table
        self.row = row

    def compose(self) -> ComposeResult:
        cols = self.table.columns
        shared = [c for c in cols if c.role in ("key", "diff", "ratio")]
        base = [c for c in cols if c.role == "base"]
        comp = [c for c in cols if c.role == "comparison"]
        other = [c for c in cols if c.role == "text"]
        with Vertical(id="drill-box"):
            yield Static(_cells(self.table, self.row, shared,
                                f"{self.table.title or self.table.name}  (Esc / q / Enter closes)"),
                         id="drill-head")
            with VerticalScroll(id="drill-body"):
                if base or comp:
                    with Horizontal(id="drill-sides"):
                        yield Static(_cells(self.table, self.row, base, "Base"),
                                     classes="drill-side", id="drill-base")
                        yield Static(_cells(self.table, self.row, comp, "Comparison"),
                                     classes="drill-side", id="drill-comp")
                if other:
                    yield Static(_cells(self.table, self.row, other), id="drill-other")

    def action_close(self) -> None:
        self.dismiss(None)
