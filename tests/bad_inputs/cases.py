"""Builders of bad inputs, and the helpers every bad-input test shares.

Each builder starts from a copy of a committed fixture and damages it in one precise way, the way
profiles arrive from half-finished runs, copied folders and other people's machines. The helpers
run the real CLI entry point in-process, check the one-line error contract, and snapshot folders
to prove that nothing was written where it must not be.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfcmp_tui.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
GPU_BASE = FIX / "gpu" / "base.pt.trace.json"
GPU_COMP = FIX / "gpu" / "comp.pt.trace.json"
GPU_GZ = FIX / "gpu" / "base.pt.trace.json.gz"
TEXT_BASE = FIX / "npu_text" / "base_ascend_pt"
TEXT_COMP = FIX / "npu_text" / "comp_ascend_pt"
DB_BASE = FIX / "npu_db" / "base_ascend_pt"
DB_COMP = FIX / "npu_db" / "comp_ascend_pt"
MS_BASE = FIX / "npu_ms" / "base_ascend_ms"
OUTPUT = "ASCEND_PROFILER_OUTPUT"
DB_FILE = "ascend_pytorch_profiler_0.db"
WORKBOOK_GLOB = "performance_comparison_result_*.xlsx"
ERROR_PREFIX = "perfcmp-tui: error: "


# ------------------------------------------------------------------------------ running the CLI


@dataclass(frozen=True)
class Run:
    """One CLI invocation: exit code and what it printed."""

    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> Run:
    """``perfcmp-tui ARGS`` in-process (the console script's own entry point)."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def shown(text: object) -> str:
    """How a path or name appears inside the one-line error: line breaks become spaces."""
    return " ".join(str(text).splitlines())


def assert_input_error(run: Run, named: object, problem: str, *, quiet: bool = True) -> None:
    """Exit code 2, exactly one line on stderr naming ``named`` and stating ``problem``, no
    traceback anywhere, and (``quiet``: the error came before any result) nothing on stdout."""
    assert run.code == 2, f"exit {run.code}: {run.err}"
    assert run.err.startswith(ERROR_PREFIX), run.err
    assert run.err.count("\n") == 1 and run.err.endswith("\n"), repr(run.err)
    assert "Traceback" not in run.err + run.out
    assert run.out == "" or not quiet, run.out
    assert shown(named) in run.err, f"{shown(named)!r} not named in {run.err!r}"
    assert problem in run.err, f"{problem!r} not in {run.err!r}"


# ------------------------------------------------------------------------------ copies of fixtures


def text_run(parent: Path, name: str = "copy_ascend_pt", src: Path = TEXT_COMP) -> Path:
    """A copy of an NPU Text run folder."""
    return Path(shutil.copytree(src, parent / name))


def db_run(parent: Path, name: str = "copy_ascend_pt", src: Path = DB_COMP) -> Path:
    """A copy of an NPU Db run folder (its database: :func:`db_of`)."""
    return Path(shutil.copytree(src, parent / name))


def db_of(run: Path) -> Path:
    return run / OUTPUT / DB_FILE


def out_file(run: Path, name: str) -> Path:
    """A file of the run's ASCEND_PROFILER_OUTPUT folder."""
    return run / OUTPUT / name


def gpu_copy(parent: Path, name: str = "comp.pt.trace.json", src: Path = GPU_COMP) -> Path:
    return Path(shutil.copyfile(src, parent / name))


def cut_mid_event(data: bytes, marker: bytes = b'"ph": "X"') -> bytes:
    """``data`` cut inside an event object near its middle, as a killed writer leaves it."""
    at = data.index(marker, len(data) // 2)
    return data[: at + len(marker) // 2]


def replace_bytes(path: Path, old: bytes, new: bytes) -> int:
    """Replace every ``old`` by ``new`` in the file; returns how many were replaced."""
    data = path.read_bytes()
    count = data.count(old)
    assert count, f"{old!r} not in {path}"
    path.write_bytes(data.replace(old, new))
    return count


def extend_sparse(path: Path, size: int) -> Path:
    """Grow ``path`` to ``size`` bytes without writing them (a sparse file: costs no disk)."""
    with path.open("r+b") as fh:
        fh.truncate(size)
    return path


# ------------------------------------------------------------------------------ CSV edits


def read_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline="")))


def write_rows(path: Path, rows: list[list[str]]) -> None:
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def drop_columns(path: Path, *names: str) -> None:
    rows = read_rows(path)
    keep = [i for i, h in enumerate(rows[0]) if h.strip() not in names]
    assert len(keep) == len(rows[0]) - len(names), f"{names} not all in {path}"
    write_rows(path, [[r[i] for i in keep] for r in rows])


def set_cells(path: Path, column: str, values: dict[int, str]) -> None:
    """Overwrite cells of ``column`` by data-row index (0 = first row under the header)."""
    rows = read_rows(path)
    col = [h.strip() for h in rows[0]].index(column)
    for i, value in values.items():
        rows[1 + i][col] = value
    write_rows(path, rows)


# ------------------------------------------------------------------------------ Db edits


def sql(db: Path, *statements: str) -> None:
    """Run statements on a copy's database (never on a fixture)."""
    assert FIX not in db.parents, "edit copies only"
    con = sqlite3.connect(db)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def tables(db: Path) -> list[str]:
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    finally:
        con.close()


def page_size(db: Path) -> int:
    """SQLite page size from the header (bytes 16-17, big endian; 1 means 65536)."""
    raw = int.from_bytes(db.read_bytes()[16:18], "big")
    return 65536 if raw == 1 else raw


# ------------------------------------------------------------------------------ folder state


Snapshot = dict[str, tuple[int, int, int]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root``: relative name → (file type, size, mtime ns); links not followed.

    Comparing two snapshots proves that nothing was created, removed, grown or touched.
    """
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def age(root: Path, seconds: float = 3600.0) -> None:
    """Date every file under ``root`` back: profiles users open are not being written, and the
    cache deliberately skips inputs modified within the last seconds."""
    t = time.time_ns() - int(seconds * 1e9)
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.utime(Path(dirpath) / name, ns=(t, t), follow_symlinks=False)

