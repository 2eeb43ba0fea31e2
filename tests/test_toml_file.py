"""The one TOML reader: values as Python, every failure one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.toml_file import read_toml


def test_reads_tables_and_values(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[gate]\nmax = ["E2E=+5%"]\n[classes.gemm]\nnames = ["nvjet_*", "Cijk_*"]\n', encoding="utf-8")
    assert read_toml(f) == {"gate": {"max": ["E2E=+5%"]}, "classes": {"gemm": {"names": ["nvjet_*", "Cijk_*"]}}}


@pytest.mark.parametrize("content, problem", [
    (b"[gate\nmax = 1\n", "invalid TOML"),
    (b"a = \xff\n", "not UTF-8"),
])
def test_bad_files_are_one_line_naming_the_file(tmp_path: Path, content: bytes, problem: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_toml(f)
    assert str(f) in err.value.message and problem in err.value.message
    assert "\n" not in err.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read configuration"):
        read_toml(tmp_path / "absent.toml")
