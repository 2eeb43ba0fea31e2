"""What the tool writes, and where: never over an existing file, never half a file, never inside
an input folder, the cache only in the user's cache directory and only for that user — and all
of it as a normal user."""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from perfcmp_core.export import xlsx

from .cases import (
    DB_BASE,
    DB_COMP,
    GPU_BASE,
    GPU_COMP,
    GPU_GZ,
    MS_BASE,
    TEXT_BASE,
    TEXT_COMP,
    WORKBOOK_GLOB,
    Run,
    age,
    assert_input_error,
    db_of,
    db_run,
    run_cli,
    snapshot,
    sql,
)

FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
BOOK = "performance_comparison_result_20260102030405.xlsx"
MS_COMP = MS_BASE.parent / "comp_ascend_ms"
CACHE_NAME = "perfcmp-tui"


def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every workbook of the test gets the same timestamped name, as two runs in one second do."""
    monkeypatch.setattr(xlsx, "_utc", lambda now: FROZEN)


def _ok(run: Run) -> None:
    assert run.code == 0, run.err


# ------------------------------------------------------------------------------ never overwrite


def test_exports_never_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _frozen_clock(monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    (out / BOOK).write_bytes(b"last week's workbook")
    (out / "r.json").write_bytes(b"last week's json")
    for _ in range(2):
        _ok(run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", out, "--json", out / "r.json"))
    assert (out / BOOK).read_bytes() == b"last week's workbook"
    assert (out / "r.json").read_bytes() == b"last week's json"
    written = [BOOK.replace(".xlsx", "_1.xlsx"), BOOK.replace(".xlsx", "_2.xlsx"), "r_1.json",
               "r_2.json", *(BOOK.replace(".xlsx", f"_{n}_timeline.{ext}") for n in (1, 2) for ext in ("txt", "svg"))]
    assert sorted(p.name for p in out.iterdir()) == sorted([BOOK, "r.json", *written])
    for name in written:
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o640  # not world-readable


# ------------------------------------------------------------------------------ atomic


@pytest.mark.parametrize("anonymous", [True, False], ids=["o_tmpfile", "named-temp"])
def test_workbook_name_appears_only_when_complete(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  anonymous: bool) -> None:
    """While the workbook is being written no name exists (an O_TMPFILE file), or only a hidden
    temporary file where the system has no unnamed files; the final name is published (hard link)
    once the content is complete and synced."""
    from perfcmp_core.export import safe_write

    if anonymous and safe_write._anonymous(tmp_path, 0o600) is None:
        pytest.skip("no O_TMPFILE on this file system")
    if not anonymous:
        monkeypatch.setattr(safe_write, "_anonymous", lambda directory, mode: None)
    out = tmp_path / "out"
    seen: list[list[str]] = []
    real = xlsx._assemble

    def watching(skeleton, parts, fh) -> None:  # type: ignore[no-untyped-def]
        real(skeleton, parts, fh)
        seen.append(sorted(p.name for p in out.iterdir()))

    monkeypatch.setattr(xlsx, "_assemble", watching)
    _ok(run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", out))
    [during] = seen
    # the Timeline pictures are written beside the workbook, after it (their own atomic writes)
    final = sorted(p.name for p in out.iterdir() if "_timeline." not in p.name)
    assert len(final) == 1 and re.fullmatch(r"performance_comparison_result_\d{14}\.xlsx", final[0])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [final[0], *(final[0].replace(".xlsx", f"_timeline.{ext}") for ext in ("txt", "svg"))])
    if anonymous:
        assert during == []
    else:
        assert len(during) == 1
        temp = re.fullmatch(r"\.(performance_comparison_result_\d{14}\.xlsx)\.\w+\.part", during[0])
        assert temp is not None, during
        assert final == [temp.group(1)]


def _fail_fsync(monkeypatch: pytest.MonkeyPatch, code: int, text: str) -> None:
    def fsync(fd: int) -> None:
        raise OSError(code, text)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("json_too", [False, True], ids=["workbook", "json"])
def test_disk_full_leaves_nothing_behind(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, json_too: bool) -> None:
    """A full disk while writing is reported like a bad output folder (exit 2, one line) and
    removes the partly written temporary file: the folder is exactly as before."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = snapshot(out)
    _fail_fsync(monkeypatch, errno.ENOSPC, "No space left on device")
    extra = ("--json", out / "r.json") if json_too else ()
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", out, *extra)
    assert_input_error(run, out / "r.json" if json_too else out,
                       "cannot write the result here (No space left on device)", quiet=False)
    assert snapshot(out) == before


def _json_inputs(command: str, out: Path) -> tuple[object, ...]:
    """What ``command`` needs besides ``--json``."""
    return {"advise": (TEXT_COMP,), "export": (TEXT_BASE, TEXT_COMP, "-o", out),
            "check": (TEXT_BASE, TEXT_COMP, "--max", "E2E=+1000%")}[command]


@pytest.mark.parametrize("command", ["advise", "export", "check"])
def test_disk_full_json_is_an_input_error_for_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    """``advise --json`` onto a full disk exits 2 naming the file, like ``export`` (it exited 1):
    every writer goes through the one mapping of write errors in ``safe_write``."""
    out = tmp_path / "out"
    out.mkdir()
    _fail_fsync(monkeypatch, errno.ENOSPC, "No space left on device")
    inputs = _json_inputs(command, out)
    run = run_cli(capsys, command, *inputs, "--no-cache", "--json", out / "r.json")
    assert_input_error(run, out / "r.json", "cannot write the result here (No space left on device)",
                       quiet=False)
    assert list(out.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["advise", "export", "check"])
def test_json_onto_dev_full(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            command: str) -> None:
    """A device is written into, not replaced: /dev/full answers ENOSPC, reported as exit 2
    (as root the old code instead published a new file ``/dev/full_1``)."""
    before = set(os.listdir("/dev"))
    inputs = _json_inputs(command, tmp_path)
    run = run_cli(capsys, command, *inputs, "--no-cache", "--json", "/dev/full")
    assert_input_error(run, "/dev/full", "cannot write the result here (No space left on device)",
                       quiet=False)
    assert set(os.listdir("/dev")) == before


def test_json_into_a_pipe_is_streamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` naming a FIFO (``/dev/stdout`` in a pipeline) writes the document into it."""
    import json
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    run = run_cli(capsys, "advise", TEXT_COMP, "--no-cache", "--json", fifo)
    reader.join(timeout=30)
    _ok(run)
    assert json.loads(got[0])["command"] == "advise" and f"JSON written: {fifo}" in run.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_internal_error_mid_write_leaves_nothing_behind(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()

    def half_then_crash(skeleton, parts, fh) -> None:  # type: ignore[no-untyped-def]
        fh.write(b"PK\x03\x04 half a zip")
        raise RuntimeError("writer bug")

    monkeypatch.setattr(xlsx, "_assemble", half_then_crash)
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", out)
    assert run.code == 1 and "internal error: RuntimeError: writer bug" in run.err
    assert list(out.iterdir()) == []


def test_failed_export_creates_no_output_folder(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The output folder is checked before the comparison but created only when a result is
    written, so a run that fails on its input leaves no empty folder behind."""
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text("{")
    run = run_cli(capsys, "export", GPU_BASE, bad, "-o", tmp_path / "a" / "b")
    assert run.code == 2 and not (tmp_path / "a").exists()


# ------------------------------------------------------------------------------ input folders


PAIRS = {
    "gpu": (GPU_BASE, GPU_COMP),
    "npu_text": (TEXT_BASE, TEXT_COMP),
    "npu_db": (DB_BASE, DB_COMP),
    "npu_ms": (MS_BASE, MS_COMP),
}


def _copy_inputs(kind: str, root: Path) -> tuple[Path, Path]:
    """Both sides of a fixture pair under ``root``, dated an hour back (so the cache stores them)."""
    copies = []
    for side, src in zip(("base", "comp"), PAIRS[kind]):
        dest = root / side
        if src.is_dir():
            shutil.copytree(src, dest / src.name)
            copies.append(dest / src.name)
        else:
            dest.mkdir(parents=True)
            shutil.copyfile(src, dest / src.name)
            if kind == "gpu" and side == "base":
                shutil.copyfile(GPU_GZ, dest / GPU_GZ.name)  # read too, below
            copies.append(dest / src.name)
    age(root)
    return copies[0], copies[1]


@pytest.mark.parametrize("kind", sorted(PAIRS))
def test_nothing_is_written_inside_input_folders(kind: str, tmp_path: Path, user_cache: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """info, export (workbook + JSON), summary and advise, run from inside the input folder and
    with the cache on: every input entry keeps its name, size and mtime, and nothing is added."""
    inputs = tmp_path / "in"
    base, comp = _copy_inputs(kind, inputs)
    before = snapshot(inputs)
    monkeypatch.chdir(comp.parent)  # a relative path must not lead to writing here
    out = tmp_path / "out"
    _ok(run_cli(capsys, "info", base))
    _ok(run_cli(capsys, "info", comp.name, "--json"))
    if kind == "gpu":
        _ok(run_cli(capsys, "info", base.parent / GPU_GZ.name))
    _ok(run_cli(capsys, "export", base, comp.name, "-o", out, "--json", out / "r.json"))
    _ok(run_cli(capsys, "summary", base, comp.name))
    _ok(run_cli(capsys, "advise", comp.name, "--json", out / "advice.json"))
    assert snapshot(inputs) == before
    assert len(list(out.glob(WORKBOOK_GLOB))) == 1 and (out / "r.json").is_file()
    if _cache_module() is not None:  # the cache was really used, and only in its own folder
        entries = list((user_cache / CACHE_NAME).iterdir())
        assert len(entries) >= 2


def test_db_in_wal_mode_is_left_untouched(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only SQLite connection still creates ``-shm``/``-wal`` files next to a WAL-mode
    database; the Db is opened immutable instead. Changes still pending in a ``-wal`` file (a
    profiler that was still writing) cannot be read without writing, so they are reported."""
    run = db_run(tmp_path)
    db = db_of(run)
    sql(db, "PRAGMA journal_mode = WAL")
    before = snapshot(run)
    first = run_cli(capsys, "info", run, "--json")
    assert first.code == 0 and snapshot(run) == before
    assert "wal holds changes" not in first.out

    writer = sqlite3.connect(db)  # a profiler still writing: its commits sit in the -wal file
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE LATE (x)")
        writer.commit()
        pending = snapshot(run)
        second = run_cli(capsys, "info", run, "--json")
        assert second.code == 0 and snapshot(run) == pending
        assert (f"{db.name}-wal holds changes not merged into the database (was the profiler still "
                "running?); they are not read, the file is left untouched") in second.out
    finally:
        writer.close()


# ------------------------------------------------------------------------------ the cache


def _cache_module() -> object | None:
    try:
        from perfcmp_core import cache
    except ImportError:
        return None
    return cache


@pytest.fixture
def cache_module() -> object:
    module = _cache_module()
    if module is None:
        pytest.skip("perfcmp_core.cache is not part of this build")
    return module


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.lstat().st_mode) for p in folder.iterdir()}


def test_cache_lives_in_the_user_cache_dir_user_only(tmp_path: Path, user_cache: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     cache_module: object) -> None:
    """Under ``$XDG_CACHE_HOME/perfcmp-tui``: folder 0700, entries 0600 even with umask 000,
    and the input folder untouched."""
    base, comp = _copy_inputs("npu_text", tmp_path / "in")
    before = snapshot(tmp_path / "in")
    old = os.umask(0)
    try:
        _ok(run_cli(capsys, "info", base))
        _ok(run_cli(capsys, "info", comp))
    finally:
        os.umask(old)
    folder = user_cache / CACHE_NAME
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    modes = _modes(folder)
    assert len([n for n in modes if n.endswith(cache_module.SUFFIX)]) == 2  # beside each: its empty lock
    assert set(modes.values()) == {0o600}
    assert snapshot(tmp_path / "in") == before


def test_cache_falls_back_to_home_never_to_a_relative_path(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           cache_module: object) -> None:
    """A relative ``XDG_CACHE_HOME`` is ignored (XDG rule): run from inside the input folder it
    would otherwise put the cache there. ``~/.cache/perfcmp-tui`` is used instead."""
    base, _ = _copy_inputs("gpu", tmp_path / "in")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", "cache")
    monkeypatch.chdir(base.parent)
    before = snapshot(tmp_path / "in")
    _ok(run_cli(capsys, "info", base.name))
    assert snapshot(tmp_path / "in") == before
    assert set(_modes(home / ".cache" / CACHE_NAME).values()) == {0o600}


def test_loose_cache_folder_is_tightened(tmp_path: Path, user_cache: Path,
                                         capsys: pytest.CaptureFixture[str],
                                         cache_module: object) -> None:
    folder = user_cache / CACHE_NAME
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    base, _ = _copy_inputs("gpu", tmp_path / "in")
    _ok(run_cli(capsys, "info", base))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert len([n for n in _modes(folder) if n.endswith(cache_module.SUFFIX)]) == 1


def test_no_cache_writes_no_cache(tmp_path: Path, user_cache: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    base, comp = _copy_inputs("npu_db", tmp_path / "in")
    _ok(run_cli(capsys, "info", base, "--no-cache"))
    _ok(run_cli(capsys, "summary", base, comp, "--no-cache"))
    assert list(user_cache.iterdir()) == []


# ------------------------------------------------------------------------------ no root needed


NOBODY = 65534


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A folder a dropped-privilege child can reach (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="perfcmp-nobody-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _as_user(uid: int, work: Callable[[], int]) -> int:
    """Exit code of ``work()`` run in a forked child with uid/gid ``uid`` (root only)."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 99
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            code = work()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_runs_as_a_normal_user(world_dir: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """info and export work without root: inputs owned by the user, the cache and the workbook
    created in folders the user owns. Under root (CI containers) the commands run in a child
    that dropped to ``nobody``; a normal user runs them directly."""
    base, comp = _copy_inputs("npu_text", world_dir / "in")
    out, cache = world_dir / "out", world_dir / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("HOME", str(world_dir))
    commands = [["info", base], ["export", base, comp, "-o", out]]

    def work() -> int:
        codes = [run_cli(capsys, *c).code for c in commands]
        return max(codes)

    if os.geteuid() != 0:
        assert work() == 0
        return
    for c in commands:  # as root first: every module the commands import is loaded before the
        _ok(run_cli(capsys, *c))  # child loses access to root-only install paths
    shutil.rmtree(out)
    shutil.rmtree(cache)
    for dirpath, dirnames, filenames in os.walk(world_dir):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.chown(name, NOBODY, NOBODY)
    assert _as_user(NOBODY, work) == 0
    [book] = out.glob(WORKBOOK_GLOB)
    assert book.stat().st_uid == NOBODY and (cache / CACHE_NAME).stat().st_uid == NOBODY
