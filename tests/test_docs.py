"""Keep docs/model.md true to the code: every table and column of the model is documented."""

from __future__ import annotations

from pathlib import Path

from perfcmp_core import model

ROOT = Path(__file__).resolve().parents[1]


def test_model_doc_lists_every_column() -> None:
    text = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    for table, schema in model.SCHEMAS.items():
        section = text.split(f"### `{table}`", 1)
        assert len(section) == 2, f"docs/model.md lacks a section for {table}"
        body = section[1].split("### `", 1)[0]
        for col, dtype in schema.items():
            assert f"| `{col}` | {dtype} |" in body, f"docs/model.md: {table}.{col} ({dtype}) missing"

