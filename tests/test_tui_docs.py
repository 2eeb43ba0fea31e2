"""docs/tui.md stays true to the app: its key table is the help screen's, its pictures the snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcmp_tui.screens.help import KEYS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tui.md"
SNAPSHOTS = ROOT / "tests" / "__snapshots__" / "test_tui_snapshots"


def test_key_table_lists_every_key_of_the_help_screen() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and " | " in line]
    rows = [f"| {keys} | {what} |" for keys, what in KEYS]
    missing = [row for row in rows if row not in table]
    assert not missing, f"docs/tui.md lacks key rows: {missing}"
    first = table.index(rows[0])
    assert table[first:first + len(rows)] == rows, "docs/tui.md key table is out of order"


@pytest.mark.parametrize("picture,snapshot", [
    ("tui-overall.svg", "test_screen[1-wide].svg"),
    ("tui-module-tree.svg", "test_module_tree_with_call_stacks.svg"),
])
def test_screenshots_are_the_current_snapshots(picture: str, snapshot: str) -> None:
    """After `pytest tests/test_tui_snapshots.py --snapshot-update`, copy the SVG to docs/img."""
    assert (ROOT / "docs" / "img" / picture).read_bytes() == (SNAPSHOTS / snapshot).read_bytes()
