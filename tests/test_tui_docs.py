"""docs/tui.md stays true to the app: its key table is the help screen's, its pictures the snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcmp_tui.screens.help import KEYS, READING

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "docs" / "tui.md", ROOT / "README.md")
SNAPSHOTS = ROOT / "tests" / "__snapshots__" / "test_tui_snapshots"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_key_table_lists_every_key_of_the_help_screen(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and " | " in line]
    # A key that is a pipe is escaped in Markdown (`\|`), or it would end the cell.
    rows = [f"| {keys.replace('|', chr(92) + '|')} | {what} |" for keys, what in KEYS]
    missing = [row for row in rows if row not in table]
    assert not missing, f"{doc.name} lacks key rows: {missing}"
    first = table.index(rows[0])
    assert table[first:first + len(rows)] == rows, f"{doc.name}: key table is out of order"


def test_reading_table_is_the_help_screens() -> None:
    """docs/tui.md's "Reading the screens" table lists the help's terms, in its order."""
    text = (ROOT / "docs" / "tui.md").read_text(encoding="utf-8")
    rows = [f"| {term} | {what} |" for term, what in READING]
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] in table, "docs/tui.md lacks the Reading the screens table"
    first = table.index(rows[0])
    assert table[first:first + len(rows)] == rows


@pytest.mark.parametrize("picture,snapshot", [
    ("tui-overall.svg", "test_screen[1-wide].svg"),
    ("tui-module-tree.svg", "test_module_tree_with_call_stacks.svg"),
])
def test_screenshots_are_the_current_snapshots(picture: str, snapshot: str) -> None:
    """After `pytest tests/test_tui_snapshots.py --snapshot-update`, copy the SVG to docs/img."""
    assert (ROOT / "docs" / "img" / picture).read_bytes() == (SNAPSHOTS / snapshot).read_bytes()
