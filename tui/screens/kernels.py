"""`K`: the kernels of the operator or module under the cursor, base against comparison, with
the row's call stacks below them.

A row cursor (j / k, g / G) picks a kernel: the line under the table names it whole, `f` shows its
row in full, `y` copies its name, `Y` its row and `X` the whole table (the app's keys).

Operator → kernels → call stack in two keys: the table comes from
:func:`perfcmp_core.compare.kernel_drill.op_kernels` (the row's own ``Kernel Details``, grouped by
kernel name); each kernel's two totals are drawn as bars on one scale, so the kernel that grew
stands out before its number is read.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region
from textual.widgets import Static

from perfcmp_core.compare.result import Column, Table, tone
from perfcmp_core.view import display_header, screen_text

from ..widgets.frame_view import ROW_CURSOR_BINDINGS
from ..widgets.pane import stack_text
from ..widgets.pictures import cells, draws_colour
from .drill import DrillScreen
from .vim_keys import VimKeys

def bar_cells(width: int) -> int:
    """Cells of the longest bar: what the numbers leave of the terminal, up to 16; none below
    110 columns (the numbers come first)."""
    return 0 if width < 110 else min(16, (width - 90) // 2)


def kernel_text(table: Table, colour: bool, bar: int, width: int,
                cursor: int | None = None) -> RichTable:
    """The kernel comparison as a Rich table, each side's total also as a bar on one scale
    (``bar`` cells for the largest) in ``width`` cells: numbers are never cut, and a long kernel
    name is never cut either: it folds onto more lines in its column (cut in the middle, two
    kernels that differ only there read the same and the name could not be read whole).
    ``cursor``: the row drawn in reverse (the screen's row cursor)."""
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
        row_style = "reverse" if i == cursor else None
        row = []
        for col in table.columns:
            t = tone(data[col.key].iat[i], col)
            style = ("red" if t > 0 else "green" if t < 0 else "") if colour else ""
            row.append(Text(texts[col.key][i], style=style))
        if not bar:
            out.add_row(*row, style=row_style)
            continue
        b = cells([float(data["base_us"].iat[i])], scale, bar)[0]
        c = cells([float(data["comp_us"].iat[i])], scale, bar)[0]
        bars = Text("█" * b, style="dodger_blue2" if colour else "")
        bars.append(" " * (bar - b) + " ")
        bars.append(("█" if colour else "▒") * c, style="dark_orange" if colour else "")
        row.append(bars)
        out.add_row(*row, style=row_style)
    return out


def row_lines(table: RichTable, console: Console) -> tuple[int, list[int]]:
    """Lines of the header and of each row of a :func:`kernel_text` table (a folded kernel name
    takes more lines): the screen keeps the cursor row in view with them."""
    widths = [c.width or 1 for c in table.columns]
    head = max((len(Text(c.header if isinstance(c.header, str) else str(c.header))
                     .wrap(console, w)) for c, w in zip(table.columns, widths)), default=1)
    names = table.columns[0]
    rows = [max(1, len(Text(str(cell.plain if isinstance(cell, Text) else cell))
                       .wrap(console, widths[0], overflow="fold")))
            for cell in names.cells]
    return head, rows


def _cell(value: object, col: Column) -> str:
    """A cell as the tables show it: the screen text, a ratio with its ▲ / ▼."""
    t = tone(value, col)
    return ("▲" if t > 0 else "▼" if t < 0 else "") + screen_text(value, col)


class KernelScreen(VimKeys[None]):
    BINDINGS = [Binding("escape,q,K", "close", "Close"),
                *ROW_CURSOR_BINDINGS,
                Binding("f,enter", "full", "The kernel's row in full"),
                Binding("y", "copy('name')", "Copy the kernel's name"),
                Binding("Y", "copy('row')", "Copy the kernel's row"),
                Binding("X", "copy('table')", "Copy the kernels")]

    def __init__(self, table: Table, stacks: tuple[str, str] | None) -> None:
        super().__init__()
        self.table = table
        self.stacks = stacks
        self.cursor = 0  # the kernel row under the cursor (the table's order: largest first)
        self._colour = False
        self._bar = self._width = 0
        self.drawn: RichTable | None = None  # the table as drawn now (cursor row reversed)

    def compose(self) -> ComposeResult:
        self._colour = draws_colour(self.app)
        n = len(self.table.data)
        with Vertical(id="kernels-box"):
            yield Static(Text(f"{self.table.title}: {n} kernel name{'s' if n != 1 else ''}, the "
                              "largest difference first  (j / k a kernel, f its row, y / Y / X "
                              "copy its name / row / the table; Esc / q / K closes)",
                              style="bold"),
                         id="kernels-head")
            with VerticalScroll(id="kernels-body"):
                self._width = self.app.size.width * 96 // 100 - 6  # the box, its border, padding
                self._bar = bar_cells(self._width)
                yield Static(self._drawn() if n else Text("no kernel details on this row"),
                             id="kernels-table")
                if self.stacks is not None:
                    with Horizontal(id="kernels-stacks"):
                        for title, stack in zip(("Base call stack", "Comparison call stack"),
                                                self.stacks):
                            text = Text(title + "\n", style="bold")
                            text.append(stack_text(stack))
                            yield Static(text, classes="drill-side")
            yield Static(self._cell_text(), id="kernels-cell")

    def _drawn(self) -> RichTable:
        self.drawn = kernel_text(self.table, self._colour, self._bar, self._width, self.cursor)
        return self.drawn

    def _cell_text(self) -> Text:
        """The cursor kernel's name whole, under the table (as the app's line under a table)."""
        if not len(self.table.data):
            return Text("")
        text = Text("Kernel Name: ", style="bold")
        text.append(str(self.table.data["kernel"].iat[self.cursor]))
        return text

    def action_cursor(self, step: int) -> None:
        self._goto(self.cursor + step)

    def action_jump(self, where: int) -> None:
        self._goto(where if where >= 0 else len(self.table.data) - 1)

    def action_page(self, direction: int) -> None:
        body = self.query_one("#kernels-body", VerticalScroll)
        (body.scroll_page_down if direction > 0 else body.scroll_page_up)(animate=False)

    def _goto(self, row: int) -> None:
        n = len(self.table.data)
        if not n:
            return
        self.cursor = max(0, min(n - 1, row))
        drawn = self._drawn()
        self.query_one("#kernels-table", Static).update(drawn)
        self.query_one("#kernels-cell", Static).update(self._cell_text())
        head, rows = row_lines(drawn, self.app.console)
        top = head + sum(rows[: self.cursor]) if self.cursor else 0  # the first: header too
        self.query_one("#kernels-body", VerticalScroll).scroll_to_region(
            Region(0, top, 1, rows[self.cursor] + (head if not self.cursor else 0)),
            animate=False, immediate=True)

    def action_full(self) -> None:
        """`f` / Enter: the cursor kernel's row in full (name, counts and totals per side)."""
        if len(self.table.data):
            self.app.push_screen(DrillScreen(self.table, self.cursor))

    def action_copy(self, what: str) -> None:
        """`y` the cursor kernel's name, `Y` its row, `X` the kernel table — tab-separated with
        the header, names whole, numbers at full precision (the app's copy: OSC 52, over SSH
        too)."""
        from perfcmp_core.export.view_csv import view_tsv
        from perfcmp_core.view import TableView

        if not len(self.table.data):
            self.app.notify("no kernel to copy", severity="warning", timeout=2)
            return
        if what == "name":
            text, label = str(self.table.data["kernel"].iat[self.cursor]), "kernel name"
        else:
            lines = view_tsv(TableView(self.table)).split("\n")
            rows = lines[1:]
            text = "\n".join([lines[0], rows[self.cursor]] if what == "row" else lines)
            label = "kernel row" if what == "row" else "kernel table"
        self.app.copy_text(text, label)  # type: ignore[attr-defined]

    def action_close(self) -> None:
        self.dismiss(None)
