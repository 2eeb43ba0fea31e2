"""The workbook written by two processes: the largest sheets made, rendered and compressed in a
forked child while this process writes the others (``perfcmp_core.export.xlsx._assemble``).

Whichever process makes a sheet, the package must be the same: every member with the same name,
place and content as the single-process writer gives, a zip that :mod:`zipfile` (which openpyxl
reads with) tests clean, ZIP64 where a size or an offset needs it, and a failure on either side
reported with no file and no process left behind.
"""

from __future__ import annotations

import errno
import io
import multiprocessing as mp
import os
import signal
import struct
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import openpyxl
import pandas as pd
import pytest

from perfcmp_core.collect import collect
from perfcmp_core.compare import ADVISOR, matching
from perfcmp_core.compare.result import ComparisonResult, Table
from perfcmp_core.errors import InputError
from perfcmp_core.export import sheet_xml, xlsx
from perfcmp_core.export.sheet_xml import SheetXml
from perfcmp_core.export.xlsx import Deflated, Sheet, write_deflated, write_workbook
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.processes import start_method
from perfcmp_core.request import RunRequest
from test_export_xlsx import OP_STAT_COLUMNS, make_result  # the writer's own test tables

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
LONG = "k" * 40_000  # past Excel's 32,767-character cell limit: the sheet cuts it

pytestmark = pytest.mark.skipif(start_method() != "fork", reason="needs a process that can fork")


@pytest.fixture(scope="module")
def result() -> ComparisonResult:
    """The Db fixture pair's comparison (14 sheets), with one over-long cell in its largest
    sheet, so that the README reports a cut made where that sheet is made."""
    base, comp = FIX / "npu_db" / "base_ascend_pt", FIX / "npu_db" / "comp_ascend_pt"
    opts = LoadOptions(use_cache=False)
    result = collect(comparison_events(RunRequest.read(str(base), str(comp), opts, opts,
                                                       CompareOptions())), str(base), str(comp))
    largest = max((t for t in result.tables.values() if xlsx._written(t)), key=lambda t: t.data.size)
    text = next(c.key for c in largest.sheet_columns()
                if c.key not in largest.children
                and pd.api.types.is_string_dtype(largest.data[c.key]))
    data = largest.data.copy()
    data.loc[data.index[0], text] = LONG
    largest.data = data
    return result


def _parts(book: Path) -> list[tuple[str, bytes]]:
    """Every member in order, name and content, but openpyxl's timestamps (docProps/core.xml)."""
    with zipfile.ZipFile(book) as z:
        assert z.testzip() is None
        return [(i.filename, z.read(i)) for i in z.infolist() if i.filename != "docProps/core.xml"]


class Spy:
    """Records what each child was asked to make (the jobs of ``_deflate_all``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[list[str]] = []
        real = xlsx.Worker

        def worker(fn: Any, jobs: list[tuple[str, bytes, SheetXml]], **kw: Any) -> Any:
            self.made.append([name for name, _, _ in jobs])
            return real(fn, jobs, **kw)

        monkeypatch.setattr(xlsx, "Worker", worker)


def test_child_and_single_process_write_the_same_workbook(
    result: ComparisonResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    monkeypatch.setattr(xlsx, "start_method", lambda: "spawn")  # as in the running app
    single = write_workbook(result, tmp_path / "single", now=NOW)
    assert spy.made == []
    monkeypatch.setattr(xlsx, "start_method", lambda: "fork")
    monkeypatch.setattr(xlsx, "CHILD_MIN_CELLS", 1)
    two = write_workbook(result, tmp_path / "two", now=NOW)
    assert len(spy.made) == 1 and spy.made[0]  # the child made the largest sheet(s)
    assert "xl/worksheets/sheet1.xml" not in spy.made[0]  # not everything: OverallMetrics is small
    assert _parts(two) == _parts(single)
    assert mp.active_children() == []

    book = openpyxl.load_workbook(two, read_only=True)
    largest = max((t for t in result.tables.values() if xlsx._written(t)), key=lambda t: t.data.size)
    readme = [c.value for row in book["README"].iter_rows() for c in row]
    assert f"{largest.name}: 1 cell(s) cut to Excel's 32,767-character limit" in readme
    rows = list(book[largest.name].iter_rows(min_row=4, values_only=True))
    assert len(rows) == len(largest.data)
    assert any(isinstance(v, str) and v.endswith("…[truncated 7256 chars]") for v in rows[0])


def test_sheets_are_made_a_chunk_of_rows_at_a_time(
    result: ComparisonResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sheet's data columns — values, the kernel lists rendered from child tables, their
    distinct cells — are made for one chunk of rows at a time, never for a whole sheet, but float
    columns (made once a sheet: their values repeat across chunks), and the workbook's content
    does not depend on the chunk size, in one process or with the child."""
    monkeypatch.setattr(xlsx, "start_method", lambda: "spawn")  # made here, so seen here
    default = _parts(write_workbook(result, tmp_path / "default", now=NOW))
    chunk = 7
    monkeypatch.setattr(sheet_xml, "ROWS_PER_CHUNK", chunk)
    made: list[int] = []  # rows of each DataColumn made, but the float columns'
    floats: list[int] = []  # rows of each float DataColumn made
    rendered: list[int] = []  # rows of each child-table column (kernel lists) rendered
    real_column, real_values = xlsx.DataColumn, Table.values

    def column(letter: str, series: pd.Series, styles: np.ndarray) -> sheet_xml.DataColumn:
        (floats if series.dtype.kind == "f" else made).append(len(series))
        return real_column(letter, series, styles)

    def values(self: Table, key: str, rows: np.ndarray | None = None) -> pd.Series:
        if key in self.children:
            rendered.append(len(self.data) if rows is None else len(rows))
        return real_values(self, key, rows)

    monkeypatch.setattr(xlsx, "DataColumn", column)
    monkeypatch.setattr(Table, "values", values)
    small = _parts(write_workbook(result, tmp_path / "small", now=NOW))
    sheets = [t for n, t in result.tables.items() if n != ADVISOR.name and xlsx._written(t)]
    sheets += [t for t in (matching(sheets), result.tables.get(ADVISOR.name))
               if t is not None and xlsx._written(t)]
    assert max(len(t.data) for t in sheets) > 10 * chunk  # so that it is many chunks
    assert made and max(made) == chunk and rendered and max(rendered) == chunk
    # Every cell of every sheet made exactly once; each float column of a sheet once, whole.
    assert sum(made) + sum(floats) == sum(len(t.data) * len(t.sheet_columns()) for t in sheets)
    assert sorted(floats) == sorted(
        len(t.data) for t in sheets for c in t.sheet_columns()
        if c.key not in t.children and t.data[c.key].dtype.kind == "f")
    assert small == default
    monkeypatch.undo()
    monkeypatch.setattr(sheet_xml, "ROWS_PER_CHUNK", chunk)
    monkeypatch.setattr(xlsx, "CHILD_MIN_CELLS", 1)
    assert start_method() == "fork"
    assert _parts(write_workbook(result, tmp_path / "child", now=NOW)) == default


def test_the_child_takes_the_largest_sheets_up_to_half() -> None:
    def sheets(**cells: int) -> dict[str, Sheet]:
        return {name: Sheet(SheetXml(), n) for name, n in cells.items()}

    big = xlsx.CHILD_MIN_CELLS
    assert xlsx._for_child(sheets(a=10 * big, b=5 * big, c=big)) == {"a"}  # 10 of 16: alone
    assert xlsx._for_child(sheets(a=3 * big, b=2 * big, c=2 * big, d=2 * big, e=big)) == {"a", "b"}
    assert xlsx._for_child(sheets(a=big - 1, b=big // 2)) == set()  # too small to be worth a fork
    parts = sheets(readme=100 * big, a=2 * big, b=big)
    parts["readme"].describes_others = True  # made after the sheets it reports on, never ahead
    assert xlsx._for_child(parts) == {"a"}


def _local_header(raw: bytes, info: zipfile.ZipInfo) -> tuple[int, bytes]:
    """Version needed to extract and extra field of ``info``'s local header in ``raw``."""
    at = info.header_offset
    sig, version, _, _, _, _, _, _, _, name_len, extra_len = struct.unpack(
        "<IHHHHHIIIHH", raw[at:at + 30])
    assert sig == 0x04034B50
    return version, raw[at + 30 + name_len:at + 30 + name_len + extra_len]


def _deflated(data: bytes) -> Deflated:
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15)
    return Deflated(compressor.compress(data) + compressor.flush(), zlib.crc32(data), len(data), 0)


class Stream(io.RawIOBase):
    """A pipe-like destination: written to, never sought or told."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


@pytest.mark.parametrize("seekable", [True, False], ids=["file", "stream"])
def test_compressed_members_with_zip64(seekable: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed member with its sizes known is written without data descriptor or seek,
    beside members zipfile writes itself; past the ZIP64 limit (made small here, instead of a
    4 GiB file) its local header carries the ZIP64 sizes and the central directory its offset."""
    big = b"<row>" + os.urandom(3000).hex().encode() + b"</row>"
    out: Any = io.BytesIO() if seekable else Stream()
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        dst.writestr("small.xml", b"<a/>")
        write_deflated(dst, "big.xml", _deflated(big))
        with dst.open("streamed.xml", "w") as member:  # after the limit: a ZIP64 offset
            member.write(b"<b/>")
        write_deflated(dst, "last.xml", _deflated(b"<c/>"))
    monkeypatch.undo()
    raw = bytes(out.getvalue() if seekable else out.data)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        assert z.testzip() is None
        assert [i.filename for i in z.infolist()] == ["small.xml", "big.xml", "streamed.xml", "last.xml"]
        assert z.read("big.xml") == big and z.read("last.xml") == b"<c/>"
        info = z.getinfo("big.xml")
        version, extra = _local_header(raw, info)
        assert version >= zipfile.ZIP64_VERSION and extra[:2] == b"\x01\x00"  # ZIP64 sizes
        assert info.flag_bits & 0x08 == 0  # sizes in the header: no data descriptor
        assert z.getinfo("last.xml").header_offset > 1000
        assert (info.file_size, info.compress_size) == (len(big), len(_deflated(big).data))


def test_openpyxl_reads_a_workbook_of_compressed_members_past_the_zip64_limit(
    result: ComparisonResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = write_workbook(result, tmp_path, now=NOW)
    parts = _parts(book)
    repacked = tmp_path / "zip64.xlsx"
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 4096)  # every sheet and most offsets past it
    with zipfile.ZipFile(repacked, "w") as dst:
        for name, data in parts:
            write_deflated(dst, name, _deflated(data))
    monkeypatch.undo()
    assert _parts(repacked) == parts
    want, got = openpyxl.load_workbook(book), openpyxl.load_workbook(repacked)
    assert got.sheetnames == want.sheetnames
    for name in want.sheetnames:
        assert list(got[name].values) == list(want[name].values)


def test_segments_make_one_deflate_stream() -> None:
    """What a sheet compressed into memory holds: chunks deflated apart, then the last block."""
    xml = b"".join(f'<row r="{i}"><c r="A{i}"><v>{i * 0.5}</v></c></row>'.encode() for i in range(9000))
    body = SheetXml()
    body.add_rows([xml.decode()])
    with xlsx.ThreadPoolExecutor(2) as pool:
        member = xlsx._deflated("s.xml", b"<worksheet><sheetData/></worksheet>", body, pool)
    whole = b"<worksheet><sheetData>" + xml + b"</sheetData></worksheet>"
    assert zlib.decompress(member.data, -15) == whole
    assert (member.crc, member.size) == (zlib.crc32(whole), len(whole))


def _fails_in_child(jobs: list[tuple[str, bytes, SheetXml]]) -> list[Deflated]:
    raise RuntimeError(f"sheet making failed in process {os.getpid()}")


def _killed_in_child(jobs: list[tuple[str, bytes, SheetXml]]) -> list[Deflated]:
    os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("child", "message"), [
    (_fails_in_child, r"sheet making failed in process \d+"),
    (_killed_in_child, r"perfcmp-xlsx process ended before sending its result \(exit code -9\)"),
], ids=["raises", "killed"])
def test_a_failing_child_is_reported_and_leaves_nothing(
    child: Any, message: str, result: ComparisonResult, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(xlsx, "start_method", lambda: "fork")
    monkeypatch.setattr(xlsx, "CHILD_MIN_CELLS", 1)
    monkeypatch.setattr(xlsx, "_deflate_all", child)
    with pytest.raises(RuntimeError, match=message) as failed:
        write_workbook(result, tmp_path, now=NOW)
    assert str(os.getpid()) not in str(failed.value)  # it happened in the child, reported here
    assert list(tmp_path.iterdir()) == []  # neither the workbook nor a temporary file
    assert mp.active_children() == []


def test_a_full_disk_stops_the_child(
    result: ComparisonResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = Spy(monkeypatch)
    real = xlsx._write_member

    def full(dst: zipfile.ZipFile, name: str, *args: Any) -> None:
        if name.startswith("xl/worksheets/"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(dst, name, *args)

    monkeypatch.setattr(xlsx, "start_method", lambda: "fork")
    monkeypatch.setattr(xlsx, "CHILD_MIN_CELLS", 1)
    monkeypatch.setattr(xlsx, "_write_member", full)
    with pytest.raises(InputError, match="No space left on device"):
        write_workbook(result, tmp_path / "out", now=NOW)
    assert started.made  # the child was running
    assert list((tmp_path / "out").iterdir()) == []
    assert mp.active_children() == []


def test_numbers_survive_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sheet made only in the child: its values as a single-process write gives them."""
    n = 30_000
    rng = np.random.default_rng(3)
    b, c = rng.random(n) * 100, rng.random(n) * 100
    data = pd.DataFrame({"top": np.arange(1, n + 1), "name": [f"=op_{i % 97}" for i in range(n)],
                         "b_ms": b, "b_n": np.ones(n, dtype=int), "c_ms": c,
                         "c_n": np.ones(n, dtype=int), "d_ms": c - b, "ratio": c / b})
    table = Table("OperatorCompareStatistic", OP_STAT_COLUMNS, data, (2, 3), (4, 5))
    monkeypatch.setattr(xlsx, "CHILD_MIN_CELLS", 1)
    spy = Spy(monkeypatch)
    path = write_workbook(make_result(table), tmp_path, now=NOW)
    assert spy.made == [["xl/worksheets/sheet1.xml"]]
    back = pd.read_excel(path, sheet_name="OperatorCompareStatistic", header=2)
    assert len(back) == n and back["Operator Name"].iloc[-1] == f"=op_{(n - 1) % 97}"
    assert np.array_equal(back["Diff Ratio"].to_numpy(), c / b)
