"""The row in full (Enter / f): a cell of tens of thousands of lines (an operator's kernel list on
a long run) is shown up to ``MAX_LINES`` lines and ``MAX_CHARS`` characters, cut at a line's end,
the rest counted, so the screen opens at once."""

from __future__ import annotations

import pandas as pd

from perfcmp_core.compare.result import Column, Table
from perfcmp_tui.screens.drill import MAX_CHARS, MAX_LINES, _cells


def _table(lines: int, width: int = 0) -> Table:
    kernels = "\n".join(f"kernel_{i}{'x' * width} [duration: {i}.0]" for i in range(lines))
    columns = (Column("name", "Operator", "key", "bold", "", 20),
               Column("base_kernels", "Kernel Details", "base", "text", "", 40))
    return Table("OperatorCompare", columns, pd.DataFrame({"name": ["aten::mm"], "base_kernels": [kernels]}),
                 (1, 1), (1, 1))


def test_a_long_cell_is_cut_at_max_lines_and_the_rest_counted() -> None:
    table = _table(20_000)
    text = _cells(table, 0, list(table.columns[1:])).plain
    shown = [line for line in text.splitlines() if line.startswith("kernel_")]
    assert len(shown) == MAX_LINES and shown[-1] == f"kernel_{MAX_LINES - 1} [duration: {MAX_LINES - 1}.0]"
    assert f"… {20_000 - MAX_LINES:,} more lines" in text


def test_a_cell_within_the_limit_is_shown_whole() -> None:
    table = _table(MAX_LINES)
    text = _cells(table, 0, list(table.columns[1:])).plain
    assert sum(line.startswith("kernel_") for line in text.splitlines()) == MAX_LINES
    assert "more lines" not in text


def test_long_lines_are_cut_by_characters_at_a_line_end() -> None:
    """lines of 300 characters (a real kernel list's shape) reach MAX_CHARS before MAX_LINES: whole lines
    are shown up to it, the rest counted."""
    table = _table(1_000, width=280)
    text = _cells(table, 0, list(table.columns[1:])).plain
    shown = [line for line in text.splitlines() if line.startswith("kernel_")]
    assert 0 < len(shown) < MAX_LINES and all(line.endswith(".0]") for line in shown)
    assert sum(len(line) + 1 for line in shown) <= MAX_CHARS
    assert f"… {1_000 - len(shown):,} more lines" in text
