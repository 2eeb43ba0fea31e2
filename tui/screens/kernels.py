"""`K`: the kernels of the operator or module under the cursor, base against comparison, with
the row's call stacks beside them.

Operator → kernels → call stack in two keys: the table comes from
:func:`perfcmp_core.compare.kernel_drill.op_kernels` (the row's own ``Kernel Details``, grouped by
kernel name); each kernel's two totals are drawn as bars on one scale, so the kernel that grew
stands out before its number is read.
"""

from __future__ import annotations

from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from perfcmp_core.compare.result import Column, Table, tone
from perfcmp_core.view import display_header, screen_text

from ..widgets.pane import stack_text
from ..widgets.pictures import cells, draws_colour
from .vim_keys import VIM_BINDINGS, VimKeys

def bar_cells(width: int) -> int:
    """Cells of the longest bar: what the numbers leave of the terminal, up to 16; none below
    110 columns (the numbers come first)."""
    return 0 if width < 110 else min(16, (width - 90) // 2)


def kernel_text(table: Table, colour: bool, bar: int, width: int) -> RichTable:
    """The kernel comparison as a Rich table, each side's total also as a bar on one scale
    (``bar`` cells for the largest) in ``width`` cells: numbers are never cut, and a long kernel
    name is never cut either: it folds onto more lines in its column (cut in the middle, two
    kernels that differ only there read the same and the name could not be read whole)."""
    data = table.data
    out = RichTable(box=None, pad_edge=False, show_edge=False, header_style="bold")
    texts = {col.key: [_cell(data[col.key].iat[i], col) for i in range(len(data))]
             for col in table.columns}
    # A number column is as wide as its widest cell or header word (the header wraps there).
    numbers = {c.key: max([len(t) for t in texts[c.key]]
                          + [len(w) for w in display_header(c, table).split()])
               for c in table.columns if c.key != "kernel"}
    rest = sum(w + 2 for w in numbers.values()) + (2 * bar + 3 if bar else 0)
    name_width = max(12, width - rest)
    for col in table.columns:
        if col.key == "kernel":
            out.add_column(display_header(col, table), width=name_width, overflow="fold")
        else:  # a number is never cut: its column is as wide as its widest cell
            out.add_column(display_header(col, table), justify="right", width=numbers[col.key])
    if bar:
        out.add_column("Base | Comp", justify="left", no_wrap=True)
    scale = float(max(data["base_us"].max(), data["comp_us"].max())) if len(data) else 0.0
    for i in range(len(data)):
        row = []
        for col in table.columns:
            t = tone(data[col.key].iat[i], col)
            style = ("red" if t > 0 else "green" if t < 0 else "") if colour else ""
            row.append(Text(texts[col.key][i], style=style))
        if not bar:
            out.add_row(*row)
            continue
        b = cells([float(data["base_us"].iat[i])], scale, bar)[0]
        c = cells([float(data["comp_us"].iat[i])], scale, bar)[0]
        bars = Text("█" * b, style="dodger_blue2" if colour else "")
        bars.append(" " * (bar - b) + " ")
        bars.append(("█" if colour else "▒") * c, style="dark_orange" if colour else "")
        row.append(bars)
        out.add_row(*row)
    return out


def _cell(value: object, col: Column) -> str:
    """A cell as the tables show it: the screen text, a ratio with its ▲ / ▼."""
    t = tone(value, col)
    return ("▲" if t > 0 else "▼" if t < 0 else "") + screen_text(value, col)


class KernelScreen(VimKeys[None]):
    BINDINGS = [Binding("escape,q,K", "close", "Close"),
                Binding("y", "copy", "Copy the kernels"), *VIM_BINDINGS]

    def __init__(self, table: Table, stacks: tuple[str, str] | None) -> None:
        super().__init__()
        self.table = table
        self.stacks = stacks

    def compose(self) -> ComposeResult:
        colour = draws_colour(self.app)
        n = len(self.table.data)
        with Vertical(id="kernels-box"):
            yield Static(Text(f"{self.table.title}: {n} kernel name{'s' if n != 1 else ''}, the "
                              "largest difference first  (y copies it; Esc / q / K closes)",
                              style="bold"),
                         id="kernels-head")
            with VerticalScroll(id="kernels-body"):
                width = self.app.size.width * 96 // 100 - 6  # the box, its border and padding
                yield Static(kernel_text(self.table, colour, bar_cells(width), width) if n else
                             Text("no kernel details on this row"), id="kernels-table")
                if self.stacks is not None:
                    with Horizontal(id="kernels-stacks"):
                        for title, stack in zip(("Base call stack", "Comparison call stack"),
                                                self.stacks):
                            text = Text(title + "\n", style="bold")
                            text.append(stack_text(stack))
                            yield Static(text, classes="drill-side")

    def action_copy(self) -> None:
        """`y`: the kernel table, tab-separated with its header, names whole (the app's copy:
        OSC 52, over SSH too)."""
        from perfcmp_core.export.view_csv import view_tsv
        from perfcmp_core.view import TableView

        text = view_tsv(TableView(self.table))
        self.app.copy_text(text, "kernel table")  # type: ignore[attr-defined]

    def action_close(self) -> None:
        self.dismiss(None)

