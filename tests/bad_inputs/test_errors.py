"""The catalogue of bad inputs that must stop the tool cleanly.

Every case goes through ``perfcmp-tui export GOOD BAD -o OUT --json OUT.json`` (and ``info BAD``)
and must end with exit code 2 and one line on stderr that names the file and the problem — no
traceback, nothing on stdout, no workbook, no JSON, no temporary file, no (even empty) output
folder, and not one byte changed in the input folder. Inputs that are odd but usable are in
``test_degraded``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfcmp_core.load import validate
from perfcmp_core.options import CSV_CAP, DB_CAP, JSON_CAP

from .cases import (
    ERROR_PREFIX,
    GPU_BASE,
    GPU_COMP,
    GPU_GZ,
    OUTPUT,
    TEXT_COMP,
    assert_input_error,
    cut_mid_event,
    db_of,
    db_run,
    drop_columns,
    extend_sparse,
    gpu_copy,
    out_file,
    page_size,
    replace_bytes,
    run_cli,
    set_cells,
    snapshot,
    sql,
    tables,
    text_run,
)

EMPTY_TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_patterns" / "empty.pt.trace.json"

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass(frozen=True)
class Bad:
    """A built bad input: what the user passes, what the message must name and say."""

    path: Path
    named: object  # the file (or folder) the message names, as shown (see cases.shown)
    problem: str
    options: tuple[str, ...] = ()  # extra export options
    info_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], Bad]
    marks: tuple[pytest.MarkDecorator, ...] = ()


# -------------------------------------------------------------------------------- the builders


def missing_path(d: Path) -> Bad:
    p = d / "gone" / "run.pt.trace.json"
    return Bad(p, p, "no such file or directory")


def broken_symlink(d: Path) -> Bad:
    link = d / "latest_ascend_pt"
    link.symlink_to(d / "deleted_ascend_pt")
    return Bad(link, link, "is a broken symbolic link")


def empty_json(d: Path) -> Bad:
    p = d / "empty.pt.trace.json"
    p.touch()
    return Bad(p, p, "is empty")


def empty_trace_view(d: Path) -> Bad:
    run = text_run(d)
    tv = out_file(run, "trace_view.json")
    tv.write_bytes(b"")
    return Bad(run, tv, "is not valid JSON")


def empty_db(d: Path) -> Bad:
    run = db_run(d)
    db_of(run).write_bytes(b"")
    return Bad(run, db_of(run), "is empty (0 bytes)")


def trace_without_events(d: Path) -> Bad:
    """A profiler stopped before its first step writes an empty ``traceEvents``."""
    p = Path(shutil.copyfile(EMPTY_TRACE, d / "comp.pt.trace.json"))
    return Bad(p, p, "holds no profiler events")


def _without_events(d: Path, text: str) -> Bad:
    p = d / "comp.pt.trace.json"
    p.write_text(text)
    return Bad(p, p, "holds no profiler events")


def trace_with_metadata_only(d: Path) -> Bad:
    return _without_events(d, '{"traceEvents": [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, '
                              '"args": {"name": "python3"}}, {"name": "Record Window End", "ph": "i", '
                              '"s": "g", "pid": "", "tid": "", "ts": 1}]}')


def json_list_of_numbers(d: Path) -> Bad:
    return _without_events(d, "[1, 2, 3]\n")


def db_without_profiler_tables(d: Path) -> Bad:
    run = db_run(d)
    db = db_of(run)
    sql(db, *[f'DROP TABLE "{t}"' for t in tables(db)], "CREATE TABLE notes (text TEXT)")
    return Bad(run, db, "holds no profiler events (tables absent from the Db")


def db_with_empty_tables(d: Path) -> Bad:
    """Every table present but empty (the reference crashes here, bugs B1/B2)."""
    run = db_run(d)
    db = db_of(run)
    sql(db, *[f'DELETE FROM "{t}"' for t in tables(db)])
    return Bad(run, db, "holds no profiler events")


def text_export_without_events(d: Path) -> Bad:
    run = text_run(d)
    for f in (run / OUTPUT).iterdir():
        f.unlink()
    tv = out_file(run, "trace_view.json")
    tv.write_text("[]")
    return Bad(run, tv, "holds no profiler events")


def gpu_cut_mid_event(d: Path) -> Bad:
    p = d / "comp.pt.trace.json"
    p.write_bytes(cut_mid_event(GPU_COMP.read_bytes()))
    return Bad(p, p, "is not valid JSON (unexpected end of data")


def trace_view_cut_mid_event(d: Path) -> Bad:
    run = text_run(d)
    tv = out_file(run, "trace_view.json")
    tv.write_bytes(cut_mid_event(tv.read_bytes()))
    return Bad(run, tv, "is the file truncated?")


def gzip_cut(d: Path) -> Bad:
    p = d / "comp.pt.trace.json.gz"
    data = GPU_GZ.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    return Bad(p, p, "is truncated (the gzip stream ends early)")


def json_not_a_trace(d: Path) -> Bad:
    p = d / "metrics.json"
    p.write_text('{"model": "resnet50", "epochs": 3, "loss": [0.9, 0.7]}')
    return Bad(p, p, "is not a torch.profiler trace (no traceEvents list)")


def json_scalar(d: Path) -> Bad:
    p = d / "answer.json"
    p.write_text("42\n")
    return Bad(p, p, "is not a profiler trace (expected a JSON object or array)")


def trace_view_is_an_object(d: Path) -> Bad:
    run = text_run(d)
    tv = out_file(run, "trace_view.json")
    tv.write_text('{"traceEvents": []}')
    return Bad(run, tv, "is not an NPU trace_view.json (expected a JSON array of events)")


def gz_not_gzip(d: Path) -> Bad:
    p = d / "comp.pt.trace.json.gz"
    shutil.copyfile(GPU_COMP, p)
    return Bad(p, p, "is not a valid gzip file")


def folder_without_profile(d: Path) -> Bad:
    folder = d / "results"
    (folder / "logs").mkdir(parents=True)
    (folder / "notes.txt").write_text("run 12 crashed")
    return Bad(folder, folder, "holds no profile")


def _two_ranks(d: Path) -> Path:
    job = d / "job_42"
    job.mkdir()
    text_run(job, "rank-0_host_ascend_pt")
    text_run(job, "rank-1_host_ascend_pt")
    return job


def parent_with_several_ranks(d: Path) -> Bad:
    job = _two_ranks(d)
    return Bad(job, job, "holds 2 rank folders (rank-0_host_ascend_pt, rank-1_host_ascend_pt); "
                         "pass --rank N")


def rank_not_among_them(d: Path) -> Bad:
    job = _two_ranks(d)
    return Bad(job, job, "no single rank folder for --rank 5", ("--rank", "5"), ("--rank", "5"))


def output_folder_without_trace_view(d: Path) -> Bad:
    """Without trace_view.json an export still compares from kernel_details.csv or
    step_trace_time.csv (tests/test_incomplete_text.py); with neither it holds no device data."""
    run = text_run(d)
    for name in ("trace_view.json", "kernel_details.csv", "step_trace_time.csv"):
        out_file(run, name).unlink()
    return Bad(run / OUTPUT, run / OUTPUT, "has no trace_view.json, no kernel_details.csv / step_trace_time.csv "
                                           "and no ascend_*_profiler_*.db")


def kernel_details_missing_columns(d: Path) -> Bad:
    run = text_run(d)
    kd = out_file(run, "kernel_details.csv")
    drop_columns(kd, "Start Time(us)", "Duration(us)")
    return Bad(run, kd, "lacks the required column(s) Start Time(us), Duration(us)")


def kernel_details_bad_start_time(d: Path) -> Bad:
    run = text_run(d)
    kd = out_file(run, "kernel_details.csv")
    set_cells(kd, "Start Time(us)", {2: "N/A"})
    return Bad(run, kd, "unparsable Start Time(us) 'N/A' in data row 3 (line 4)")


def csv_not_utf8(d: Path) -> Bad:
    run = text_run(d)
    kd = out_file(run, "kernel_details.csv")
    replace_bytes(kd, b"MatMulV3", b"MatMul\xff\xfe3")
    return Bad(run, kd, "is not UTF-8 text")


def trace_not_utf8(d: Path) -> Bad:
    p = gpu_copy(d)
    replace_bytes(p, b'"name": "aten::addmm"', b'"name": "aten::add\xffmm"')
    return Bad(p, p, "is not valid JSON (str is not valid UTF-8")


def db_not_sqlite(d: Path) -> Bad:
    run = db_run(d)
    db_of(run).write_bytes(b"PK\x03\x04" + b"\0" * 4096)  # a zip someone renamed
    return Bad(run, db_of(run), "is not an SQLite database")


def db_corrupted(d: Path) -> Bad:
    """Header and schema page intact, every table page overwritten: SQLite opens the file and
    fails on the first table read."""
    run = db_run(d)
    db = db_of(run)
    data = bytearray(db.read_bytes())
    size = page_size(db)
    data[size:] = b"\xa5" * (len(data) - size)
    db.write_bytes(bytes(data))
    return Bad(run, db, "is corrupted or unreadable (database disk image is malformed)")


def db_truncated(d: Path) -> Bad:
    run = db_run(d)
    db = db_of(run)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    return Bad(run, db, "database disk image is malformed")


def analysis_db(d: Path) -> Bad:
    p = d / "analysis.db"  # what msprof-analyze writes: a real SQLite file, but not a profile
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE ClusterStepTraceTime (step TEXT)")
    con.commit()
    con.close()
    return Bad(p, p, "is not an Ascend profiler database")


def unsupported_file_type(d: Path) -> Bad:
    p = shutil.copyfile(out_file(TEXT_COMP, "kernel_details.csv"), d / "kernel_details.csv")
    return Bad(Path(p), p, "unsupported file type")


def fifo(d: Path) -> Bad:
    p = d / "live.pt.trace.json"
    os.mkfifo(p)  # opening it would block forever: it must never be read
    return Bad(p, p, "is not a regular file or folder")


def step_missing_on_one_side(d: Path) -> Bad:
    p = gpu_copy(d)
    return Bad(p, p, "has no step 7; available steps: 1, 2, 3",
               ("--comparison-step", "7"), ("--step", "7"))


def csv_over_size_cap(d: Path) -> Bad:
    run = text_run(d)
    kd = extend_sparse(out_file(run, "kernel_details.csv"), CSV_CAP + 1)
    return Bad(run, kd, "over the 5,368,709,120-byte limit for .csv files; pass --force")


def json_over_size_cap(d: Path) -> Bad:
    p = extend_sparse(gpu_copy(d), JSON_CAP + 1)  # starts as a valid trace, so it is detected
    return Bad(p, p, "limit for .json files; pass --force to read it anyway")


def db_over_size_cap(d: Path) -> Bad:
    run = db_run(d)
    db = extend_sparse(db_of(run), DB_CAP + 1)
    return Bad(run, db, "is 8,589,934,593 bytes, over the 8,589,934,592-byte limit for .db files")


def foreign_owner(d: Path) -> Bad:
    run = text_run(d)
    tv = out_file(run, "trace_view.json")
    os.chown(tv, 4242, 4242)
    return Bad(run, tv, "is owned by uid 4242, not by you")


def side_json_truncated(d: Path) -> Bad:
    run = text_run(d)
    comm = out_file(run, "communication.json")
    comm.write_bytes(comm.read_bytes()[:500])
    return Bad(run, comm, "is not valid JSON")


def name_with_newline(d: Path) -> Bad:
    """The message stays one line: the newline of the folder name becomes a space."""
    run = text_run(d, "exp\n2_ascend_pt")
    kd = out_file(run, "kernel_details.csv")
    drop_columns(kd, "Name")
    return Bad(run, kd, "lacks the required column(s) Name")


def very_long_names(d: Path) -> Bad:
    deep = d
    for ch in "abc":
        deep = deep / (ch * 250)  # near NAME_MAX (255) per component, ~770 characters in all
    deep.mkdir(parents=True)
    return Bad(deep, deep, "holds no profile")


def terminal_escape_in_name(d: Path) -> Bad:
    """A planted name with an ANSI escape is shown escaped, never sent raw to the terminal."""
    folder = d / "run\x1b[2J"
    folder.mkdir()
    return Bad(folder, f"{d}/run\\x1b[2J", "holds no profile")


CATALOGUE = [
    Case("missing-path", missing_path),
    Case("broken-symlink", broken_symlink),
    Case("empty-json", empty_json),
    Case("empty-trace-view", empty_trace_view),
    Case("empty-db", empty_db),
    Case("trace-without-events", trace_without_events),
    Case("trace-with-metadata-only", trace_with_metadata_only),
    Case("json-list-of-numbers", json_list_of_numbers),
    Case("db-without-profiler-tables", db_without_profiler_tables),
    Case("db-with-empty-tables", db_with_empty_tables),
    Case("text-export-without-events", text_export_without_events),
    Case("gpu-json-cut-mid-event", gpu_cut_mid_event),
    Case("trace-view-cut-mid-event", trace_view_cut_mid_event),
    Case("gzip-cut", gzip_cut),
    Case("json-not-a-trace", json_not_a_trace),
    Case("json-scalar", json_scalar),
    Case("trace-view-is-an-object", trace_view_is_an_object),
    Case("json-gz-not-gzip", gz_not_gzip),
    Case("folder-without-profile", folder_without_profile),
    Case("parent-with-several-ranks", parent_with_several_ranks),
    Case("rank-not-among-them", rank_not_among_them),
    Case("output-folder-without-trace-view", output_folder_without_trace_view),
    Case("kernel-details-missing-columns", kernel_details_missing_columns),
    Case("kernel-details-bad-start-time", kernel_details_bad_start_time),
    Case("csv-not-utf8", csv_not_utf8),
    Case("trace-not-utf8", trace_not_utf8),
    Case("db-not-sqlite", db_not_sqlite),
    Case("db-corrupted", db_corrupted),
    Case("db-truncated", db_truncated),
    Case("analysis-db", analysis_db),
    Case("unsupported-file-type", unsupported_file_type),
    Case("fifo", fifo),
    Case("step-missing-on-one-side", step_missing_on_one_side),
    Case("csv-over-size-cap", csv_over_size_cap),
    Case("json-over-size-cap", json_over_size_cap),
    Case("db-over-size-cap", db_over_size_cap),
    Case("foreign-owner", foreign_owner,
         (pytest.mark.skipif(not IS_ROOT, reason="giving a file to another user needs root"),)),
    Case("side-json-truncated", side_json_truncated),
    Case("name-with-newline", name_with_newline),
    Case("very-long-names", very_long_names),
    Case("terminal-escape-in-name", terminal_escape_in_name),
]


def _only_inputs_left(tmp_path: Path) -> None:
    """Nothing but the input folder in the test's folder: no workbook, JSON, temp or out dir."""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CATALOGUE])
def test_bad_input_is_one_clean_line(case: Case, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 and one line for both ``export`` (the bad profile as COMP, loaded in a worker
    process) and ``info``; nothing written anywhere, the inputs untouched."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    bad = case.build(inputs)
    before = snapshot(inputs)

    run = run_cli(capsys, "export", GPU_BASE, bad.path, "-o", tmp_path / "out",
                  "--json", tmp_path / "result.json", *bad.options)
    assert_input_error(run, bad.named, bad.problem)
    run = run_cli(capsys, "info", bad.path, *bad.info_options)
    assert_input_error(run, bad.named, bad.problem)

    assert snapshot(inputs) == before
    _only_inputs_left(tmp_path)


def test_catalogue_is_complete() -> None:
    """The issue asks for at least 25 bad inputs; each id is unique."""
    ids = [c.id for c in CATALOGUE]
    assert len(ids) >= 25 and len(set(ids)) == len(ids)


def test_both_bad_sides_are_named_base_first(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Both sides load in parallel worker processes; the error still arrives as the one line
    (not as a broken process pool), names the base first, as the reference does, and then the
    comparison (issue 30: fixing one and running again must not be how the other is found)."""
    base, comp = tmp_path / "base.pt.trace.json", tmp_path / "comp.pt.trace.json"
    base.write_bytes(cut_mid_event(GPU_BASE.read_bytes()))
    comp.write_text("[1, 2")
    run = run_cli(capsys, "export", base, comp, "-o", tmp_path / "out")
    assert_input_error(run, base, "is not valid JSON")
    first, second = run.err.split("; and ")
    assert str(base) in first and second.startswith(f"{comp}: is not valid JSON")


# -------------------------------------------------------------------------------- the output side


def test_output_path_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "report.xlsx"
    taken.write_bytes(b"someone's workbook")
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", taken)
    assert_input_error(run, taken, "output path is a file, not a directory")
    assert taken.read_bytes() == b"someone's workbook"
    assert [p.name for p in tmp_path.iterdir()] == ["report.xlsx"]


def test_output_folder_under_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trigger that works for root too: no one can create a folder inside a file."""
    blocker = tmp_path / "results"
    blocker.write_text("x")
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", blocker / "today")
    assert_input_error(run, blocker / "today", f"cannot create output directory ({blocker} is a file)")
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_json_path_under_a_file_fails_before_any_work(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("x")
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", tmp_path / "out",
                  "--json", blocker / "r.json")
    assert_input_error(run, blocker, "is a file")
    assert [p.name for p in tmp_path.iterdir()] == ["results"]  # no workbook either


def test_output_folder_not_writable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Permission bits do not stop root, so the access check itself is made to answer "no"
    (the same check a normal user's read-only folder fails)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked
                        else real_access(p, mode, **kw))
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", locked)
    assert_input_error(run, locked, "output directory is not writable")
    run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", locked / "new")
    assert_input_error(run, locked / "new", f"cannot create output directory ({locked} is not writable)")
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(IS_ROOT, reason="root can write into a read-only folder")
def test_output_folder_read_only_for_a_normal_user(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        run = run_cli(capsys, "export", GPU_BASE, GPU_COMP, "-o", locked)
        assert_input_error(run, locked, "output directory is not writable")
    finally:
        locked.chmod(0o700)


# -------------------------------------------------------------------------------- --force


def test_force_skips_the_size_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A real 5 GB CSV is too slow for a test, so the cap is lowered to 1000 bytes."""
    run = text_run(tmp_path)
    monkeypatch.setitem(validate._CAPS, ".csv", 1000)
    assert_input_error(run_cli(capsys, "info", run), out_file(run, "kernel_details.csv"),
                       "limit for .csv files; pass --force to read it anyway")
    done = run_cli(capsys, "info", run, "--force")
    assert done.code == 0 and done.err == "" and "NPU Text" in done.out


def test_gzip_is_held_to_the_json_cap_once_decompressed(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap checked before reading sees the compressed size; a small ``.gz`` that expands
    past the cap (a gzip bomb) is stopped while decompressing. The 475 kB fixture trace stands in
    for a 10 GB one: the cap is lowered to 100,000 bytes (its gzip is ~40 kB)."""
    from perfcmp_core.load import gpu_read as gpu

    monkeypatch.setattr(gpu, "JSON_CAP", 100_000)
    p = tmp_path / "bomb.pt.trace.json.gz"
    p.write_bytes(GPU_GZ.read_bytes())
    assert p.stat().st_size < 100_000
    assert_input_error(run_cli(capsys, "info", p), p,
                       "decompresses to more than 100,000 bytes, the limit for .json traces; "
                       "pass --force to read it anyway")
    done = run_cli(capsys, "info", p, "--force")
    assert done.code == 0 and "GPU" in done.out


@pytest.mark.skipif(not IS_ROOT, reason="giving a file to another user needs root")
def test_force_skips_the_owner_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = gpu_copy(tmp_path)
    os.chown(p, 4242, 4242)
    assert_input_error(run_cli(capsys, "info", p), p, "is owned by uid 4242")
    done = run_cli(capsys, "info", p, "--force")
    assert done.code == 0 and "GPU" in done.out


# -------------------------------------------------------------------------------- the console script


def _console_script() -> str:
    exe = shutil.which("perfcmp-tui", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("console script not installed")
    return exe


@pytest.mark.parametrize("build", [gpu_cut_mid_event, db_corrupted, json_over_size_cap, fifo,
                                   name_with_newline], ids=lambda b: b.__name__)
def test_console_script_reports_one_line(build: Callable[[Path], Bad], tmp_path: Path) -> None:
    """The installed entry point, in a real process with a strict UTF-8 stdout."""
    bad = build(tmp_path)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONIOENCODING": "utf-8:strict"}
    done = subprocess.run([_console_script(), "export", str(GPU_BASE), str(bad.path),
                           "-o", str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(ERROR_PREFIX) and bad.problem in done.stderr
    assert not (tmp_path / "out").exists()


def test_gzip_of_a_trace_view_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "trace_view.json.gz"
    p.write_bytes(gzip.compress(out_file(TEXT_COMP, "trace_view.json").read_bytes()))
    assert_input_error(run_cli(capsys, "info", p), p, "compressed trace_view.json is not supported")


def test_db_with_null_ids_in_step_table_and_missing_step(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """STEP_TIME rows with NULL ids are not steps; asking for one of them is a missing step."""
    run = db_run(tmp_path)
    sql(db_of(run), "UPDATE STEP_TIME SET id = NULL WHERE id = 2")
    assert_input_error(run_cli(capsys, "info", run, "--step", "2"), run,
                       "has no step 2; available steps: 1, 3")
