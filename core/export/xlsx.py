"""The headless workbook: a drop-in for the reference's ``performance_comparison_result_*.xlsx``.

Every comparison sheet keeps the reference layout (merged ``Base Profiling:`` / ``Comparison
Profiling:`` titles in row 1, headers in row 3, data from row 4, same sheet names, headers and
widths) so scripts that read it with ``pandas.read_excel(path, sheet_name=S, header=2)`` keep
working. On top of that: ratios always use the percent format (the reference switches format for
red cells only), improvements get a green fill, panes are frozen under the header, the header row
has an autofilter, long-text columns wrap, text is never turned into a formula, and a ``README``
sheet (plus ``Advisor`` when given) explains the workbook. A column a table does not export
(:meth:`~perfcmp_core.compare.result.Table.sheet_columns`: ``Matched As``) stays out of its sheet;
the ``Matching`` sheet after the comparison sheets lists the rows it marks instead.

Speed: openpyxl (write-only) builds the workbook skeleton — sheets, styles, column widths, merged
titles, frozen panes, autofilter — but its per-cell XML serialisation costs ~15 µs a cell, about
4 s for a 20k-row sheet. So the ``<sheetData>`` rows are rendered as XML text (:mod:`.sheet_xml`,
a column at a time) with the style ids openpyxl registered (:mod:`.styles`), and spliced into the
saved skeleton while copying it into the output zip (:func:`_assemble`). A sheet's columns
(values, kernel lists, distinct cells, escaping) are made and its rows rendered a chunk of rows
at a time, only when it is written, so memory never holds a whole sheet's XML (300 MB for the
32x92 NPU pair) nor its columns made whole. Making, rendering and
compressing cost about the same per cell, and one sheet holds most cells, so where this process
can fork a child makes the largest sheets and sends each back compressed while this process
writes the others: the workbook then keeps both cores busy (the 32x92 NPU pair's 2.6 s → 1.7 s
on two cores, docs/performance.md). Every member keeps its name, content and place in the zip;
:func:`write_deflated` adds those compressed ahead. Where it cannot fork (the running app has
threads) one process writes every sheet, a second thread compressing the previous chunk while
the next is rendered. The README sheet is :mod:`.readme`; its rows are made last, once the cells
the other sheets cut are counted.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
from openpyxl import Workbook
from openpyxl.utils import get_column_letter
from openpyxl.worksheet._write_only import WriteOnlyWorksheet
from openpyxl.worksheet.filters import AutoFilter

from perfcmp_core.compare import ADVISOR, matching
from perfcmp_core.compare.result import (LEVEL, Column, ComparisonResult, Table, is_ratio,
                                         number_format, ratio_tone)
from perfcmp_core.export.readme import README_SHEET, readme_sheet
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.export.sheet_xml import ColumnRows, DataColumn, SheetXml, WholeColumn
from perfcmp_core.export.styles import (BASE_FILL, COMP_FILL, LEVEL_FILLS, NUMBER_FORMATS,
                                        TONE_FILLS, WRAP_HEADERS, Palette, Style)
from perfcmp_core.export.values import python_values
from perfcmp_core.heap import return_free_memory
from perfcmp_core.processes import Worker, start_method

FILE_PREFIX = "performance_comparison_result_"

TITLE_ROW, HEADER_ROW, FIRST_DATA_ROW = 1, 3, 4
#: Excel's hard row limit, minus the three title/header rows.
MAX_DATA_ROWS = 1_048_576 - (FIRST_DATA_ROW - 1)
#: xlsxwriter (the reference) stores ``width + 0.7109375``; doing the same gives identical columns.
WIDTH_PAD = 0.7109375
_SHEET_DATA = re.compile(rb"<sheetData\s*/>|<sheetData>\s*</sheetData>")


class NothingToWrite(Exception):
    """No comparison produced a row, so there is no workbook to write.

    The reference writes a workbook with one empty ``Sheet1`` in this case; an empty file only
    hides the fact that nothing was compared.
    """


def write_workbook(
    result: ComparisonResult,
    out_dir: str | PathLike[str],
    *,
    advisor: Table | None = None,
    now: datetime | None = None,
) -> Path:
    """Write ``performance_comparison_result_<UTC YYYYmmddHHMMSS>.xlsx`` into ``out_dir``.

    Returns the path written: a ``_N`` suffix is added when the name exists (never overwrites).
    Raises :class:`NothingToWrite` when no table has rows, and ``InputError`` for an unusable
    ``out_dir`` (a full disk included). The advisor's findings come from ``advisor`` or, failing
    that, from the advisor's table in ``result``; either way they go last, before ``README``.
    """
    sheets = [
        (name, t)
        for name, t in result.tables.items()
        if name != ADVISOR.name and _written(t)
    ]
    if not sheets:
        raise NothingToWrite("no comparison produced any rows; no workbook written")
    matched = matching([t for _, t in sheets])  # the Matched As column those sheets cannot hold
    if matched is not None:
        sheets.append((matched.name, matched))
    advisor = advisor if advisor is not None else result.tables.get(ADVISOR.name)
    if advisor is not None and _written(advisor):
        sheets.append((ADVISOR.name, advisor))
    stamp = _utc(now)
    target = Path(out_dir) / f"{FILE_PREFIX}{stamp:%Y%m%d%H%M%S}.xlsx"
    return safe_write(target, lambda fh: _write(fh, result, sheets, stamp), where=out_dir)


def _written(table: Table) -> bool:
    """A table becomes a sheet when it is exported and has rows (and columns)."""
    return table.export and not table.empty and bool(table.columns)


def _utc(now: datetime | None) -> datetime:
    """``now`` in UTC (a naive value is taken as UTC already)."""
    if now is None:
        return datetime.now(timezone.utc)
    return now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)


# ---------------------------------------------------------------------------------- the sheets


def _write(
    fh: BinaryIO, result: ComparisonResult, sheets: list[tuple[str, Table]], stamp: datetime
) -> None:
    """Build the skeleton with openpyxl, render every sheet's rows, and zip them together.

    What the comparison freed goes back to the system first: glibc keeps it mapped (≈ 0.5 GB
    of the 0.78 GB this process holds after the 32x92 NPU Db pair's comparison), and a child
    forked to write the largest sheets (:func:`_assemble`) would share it, each process then
    copying the pages it reuses.
    """
    return_free_memory()
    wb = Workbook(write_only=True)
    palette: Palette | None = None
    bodies: dict[WriteOnlyWorksheet, tuple[SheetXml, int]] = {}
    for name, table in sheets:
        ws = wb.create_sheet(name)
        palette = palette or Palette(ws)
        body = _table_sheet(ws, table, result, palette)
        bodies[ws] = body, body.rows * len(table.sheet_columns())
    assert palette is not None  # write_workbook only calls us with at least one sheet
    written = [(name, table, body) for (name, table), (body, _) in zip(sheets, bodies.values())]
    readme = wb.create_sheet(README_SHEET)
    bodies[readme] = readme_sheet(readme, result, written, stamp, palette), 0
    skeleton = io.BytesIO()
    wb.save(skeleton)
    parts = {ws.path.lstrip("/"): Sheet(body, cells) for ws, (body, cells) in bodies.items()}
    parts[readme.path.lstrip("/")].describes_others = True
    _assemble(skeleton, parts, fh)


def _span_ok(span: tuple[int, int], ncols: int) -> bool:
    return 0 <= span[0] <= span[1] < ncols


def _table_sheet(
    ws: WriteOnlyWorksheet, table: Table, result: ComparisonResult, palette: Palette
) -> SheetXml:
    """Lay out one comparison table: titles, headers, data, widths, panes, filter, merges."""
    columns = table.sheet_columns()
    ncols = len(columns)
    letters = [get_column_letter(i + 1) for i in range(ncols)]
    data = table.data.iloc[:MAX_DATA_ROWS]
    last_row = FIRST_DATA_ROW + len(data) - 1

    for letter, col in zip(letters, columns):
        ws.column_dimensions[letter].width = col.width + WIDTH_PAD
    ws.freeze_panes = f"A{FIRST_DATA_ROW}"
    ws.auto_filter = AutoFilter(ref=f"A{HEADER_ROW}:{letters[-1]}{last_row}")

    spans = [
        (table.base_span, f"Base Profiling: {result.side_title('base')}", BASE_FILL),
        (table.comp_span, f"Comparison Profiling: {result.side_title('comparison')}", COMP_FILL),
    ]
    spans = [s for s in spans if _span_ok(s[0], ncols)]
    if len(spans) == 2 and spans[0][0][1] >= spans[1][0][0] and spans[1][0][1] >= spans[0][0][0]:
        raise ValueError(
            f"{table.name}: base_span {table.base_span} overlaps comp_span {table.comp_span}"
        )
    comp_first, comp_last = table.comp_span if _span_ok(table.comp_span, ncols) else (0, -1)

    xml = SheetXml(rows=len(data))
    title_cells: list[tuple[int, str]] = []
    for (first, last), text, fill in spans:
        sid = palette.id(Style(bold=True, fill=fill))
        for i in range(first, last + 1):
            value = text if i == first else None
            title_cells.append((i, xml.cell(f"{letters[i]}{TITLE_ROW}", value, sid)))
        if last > first:
            ws.merged_cells.add(f"{letters[first]}{TITLE_ROW}:{letters[last]}{TITLE_ROW}")
    rows = []
    if title_cells:
        rows.append(f'<row r="{TITLE_ROW}">{"".join(c for _, c in sorted(title_cells))}</row>')

    headers = []
    for i, (letter, col) in enumerate(zip(letters, columns)):
        fill = COMP_FILL if comp_first <= i <= comp_last else BASE_FILL
        sid = palette.id(Style(bold=True, fill=fill))
        headers.append(xml.cell(f"{letter}{HEADER_ROW}", col.header, sid))
    rows.append(f'<row r="{HEADER_ROW}">{"".join(headers)}</row>')
    xml.add_rows(rows)

    levels = _levels(table, data)
    styles = [  # registered now: the styles part is saved before any row is rendered
        _styles(col, _values(table, data, col.key) if is_ratio(col) else None, len(data),
                levels, i == 0, palette)
        for i, col in enumerate(columns)
    ]
    xml.add_columns(_chunk_columns(table, data, letters, columns, styles), FIRST_DATA_ROW,
                    len(data))
    return xml


def _chunk_columns(
    table: Table, data: pd.DataFrame, letters: list[str], columns: tuple[Column, ...],
    styles: list[np.ndarray],
) -> Callable[[int, int], list[DataColumn | ColumnRows]]:
    """What makes the columns of rows ``start`` … ``stop - 1`` of a sheet
    (:meth:`SheetXml.add_columns`): each made from those rows alone, but float columns, made
    once for the sheet on the first chunk (:class:`~.sheet_xml.WholeColumn`: their values repeat
    across chunks)."""
    floats = {
        i for i, col in enumerate(columns)
        if col.key not in table.children
        and isinstance(data[col.key].dtype, np.dtype) and data[col.key].dtype.kind == "f"
    }
    whole: dict[int, WholeColumn] = {}

    def make(start: int, stop: int) -> list[DataColumn | ColumnRows]:
        out: list[DataColumn | ColumnRows] = []
        for i, (letter, col, ids) in enumerate(zip(letters, columns, styles)):
            if i in floats:
                if i not in whole:
                    whole[i] = WholeColumn(DataColumn(letter, _values(table, data, col.key), ids))
                out.append(whole[i].rows(start, stop))
            else:
                out.append(DataColumn(letter, _values(table, data, col.key, start, stop),
                                      ids[start:stop]))
        return out

    return make


def _values(table: Table, data: pd.DataFrame, key: str, start: int = 0,
            stop: int | None = None) -> pd.Series:
    """Column ``key`` of the rows written (positions ``start`` … ``stop - 1``; all by default):
    a child table's text (the ``Kernel Details`` cells) is rendered here, the one place the
    workbook needs it, a chunk of rows at a time (:meth:`SheetXml.add_columns`)."""
    stop = len(data) if stop is None else stop
    if key in table.children:
        return table.values(key, np.arange(start, stop, dtype="int64"))
    return data[key].iloc[start:stop]


def _levels(table: Table, data: pd.DataFrame) -> np.ndarray | None:
    """Row levels of an outline table (indent and row fill); None for every other sheet."""
    if table.tree != "outline" or LEVEL not in data:
        return None
    levels = pd.to_numeric(data[LEVEL], errors="coerce").fillna(0).astype("int64")
    return levels.clip(lower=0).to_numpy()


def _styles(
    col: Column, series: pd.Series | None, rows: int, levels: np.ndarray | None, indent: bool,
    palette: Palette,
) -> np.ndarray:
    """The style id of every cell of one column of ``rows`` rows (``series``: its values, needed
    for a ratio column only).

    A column has one style, but for the ratio fills (by the cell's tone) and the outline's row
    levels (fill and indent of the first column). Their few distinct (level, tone) pairs are
    registered in the order of their first row, as a cell-by-cell writer would, so the ids and
    the styles part do not depend on how the rows are rendered.
    """
    toned = is_ratio(col)
    base = Style(
        number_format=NUMBER_FORMATS[number_format(col)],
        bold=col.fmt == "bold",
        wrap=col.header in WRAP_HEADERS,
    )
    if levels is None and not toned:  # one id, seen as a row's each (no array of them held)
        return np.broadcast_to(np.int64(palette.id(base)), rows)
    level = levels if levels is not None else np.full(rows, -1)
    shade = _tones(series) if series is not None and toned else np.zeros(rows, np.int64)
    keys, first, inverse = np.unique(
        (level + 1) * 3 + (shade + 1), return_index=True, return_inverse=True
    )
    ids = np.zeros(len(keys), np.int64)
    for k in np.argsort(first, kind="stable"):
        row_level, tone = divmod(int(keys[k]), 3)
        row_level, tone = row_level - 1, tone - 1
        ids[k] = palette.id(
            Style(
                base.number_format,
                base.bold,
                TONE_FILLS.get(tone) or LEVEL_FILLS.get(row_level),
                base.wrap,
                max(row_level, 0) if indent else 0,
            )
        )
    return ids[inverse]


def _tones(series: pd.Series) -> np.ndarray:
    """:func:`ratio_tone` of every cell of a ratio column: 1 worse, -1 better, 0 neither."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iuf":
        values = series.to_numpy()
        return np.where(values > 1, 1, np.where(values < 1, -1, 0))
    return np.array([ratio_tone(v) for v in python_values(series)], dtype=np.int64)


# ------------------------------------------------------------------------------------ zip

#: zlib level of every member. The XML is very repetitive, so level 1 still shrinks it ~9x, at
#: a third of level 6's time (on the 32x92 NPU pair's largest sheet, 200 MB: level 1 1.0 s →
#: 20 MB; 3: 1.4 s → 17 MB; 6: 2.8 s → 14 MB).
ZLIB_LEVEL = 1
#: Sheets handed to a child hold at least this many data cells in all (≈ 0.6 µs of work a cell,
#: against a fork and a pipe): a smaller workbook is written in this process alone.
CHILD_MIN_CELLS = 100_000
#: Threads compressing the chunks of a sheet compressed into memory (one per core of the host
#: this was tuned on; zlib releases the GIL).
DEFLATE_THREADS = 2


@dataclass
class Sheet:
    """A worksheet part to fill: its rows, their data cells (what making them costs), and
    whether its rows describe the other sheets (the README: made after them, never ahead)."""

    body: SheetXml
    cells: int
    describes_others: bool = False


@dataclass
class Deflated:
    """A member compressed ahead of its turn in the zip: its raw deflate data (what a zip entry
    of method 8 holds), the CRC-32 and size of its XML, and the cells its sheet cut."""

    data: bytes
    crc: int
    size: int
    truncated: int


def _assemble(skeleton: io.BytesIO, parts: dict[str, Sheet], fh: BinaryIO) -> None:
    """Copy openpyxl's package into ``fh``, filling each worksheet's empty ``<sheetData>``.

    Making a sheet's columns, rendering its rows and compressing them cost about the same per
    cell, and the largest sheet holds most cells (ModuleCompare: 200 of the 300 MB of sheet XML
    of the 32x92 NPU pair). So where this process can fork
    (:func:`~perfcmp_core.processes.start_method`), a child makes the largest sheets
    (:func:`_for_child`) and sends each back compressed, while this process writes the others:
    the members before the child's as they are made, those after it compressed into memory
    until the child's arrive (the compressed sheet, a tenth of its XML, is held, never the XML).
    Every member keeps its name, content and place in the zip. Elsewhere (the running app has
    threads) every sheet is written here, as it is rendered.

    Memory, on both sides of the fork: each process holds one chunk of rows of the sheet it
    makes (:meth:`SheetXml.add_columns`), the compressed sheets made ahead, and the pages of
    the comparison it touches (copied on write); the freed heap went back before the fork
    (:func:`_write`).
    """
    with zipfile.ZipFile(skeleton) as src:
        members = [(info.filename, src.read(info)) for info in src.infolist()]
    theirs = _for_child(parts) if start_method() == "fork" else set()
    child: Worker[list[Deflated]] | None = None
    if theirs:
        jobs = [(name, xml, parts[name].body) for name, xml in members if name in theirs]
        child = Worker(_deflate_all, jobs, name="perfcmp-xlsx", method="fork")
    try:
        _write_members(members, parts, theirs, child, fh)
    except BaseException:
        if child is not None:
            child.stop()
        raise


def _for_child(parts: dict[str, Sheet]) -> set[str]:
    """The sheets a child makes: the largest, then the next largest while the child's share
    stays under half of the cells; none when that is under :data:`CHILD_MIN_CELLS`. Never one
    that describes the others (its rows wait for theirs)."""
    sheets = {name: sheet.cells for name, sheet in parts.items() if not sheet.describes_others}
    total = sum(sheets.values())
    chosen: set[str] = set()
    share = 0
    for name, cells in sorted(sheets.items(), key=lambda item: -item[1]):
        if not cells or (chosen and share + cells > total / 2):
            break
        chosen.add(name)
        share += cells
    return chosen if share >= CHILD_MIN_CELLS else set()


def _write_members(
    members: list[tuple[str, bytes]],
    parts: dict[str, Sheet],
    theirs: set[str],
    child: Worker[list[Deflated]] | None,
    fh: BinaryIO,
) -> None:
    """Write ``members`` into ``fh`` in order, the child making ``theirs`` (see :func:`_assemble`)."""
    first = next((i for i, (name, _) in enumerate(members) if name in theirs), len(members))
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=ZLIB_LEVEL) as dst, \
            ThreadPoolExecutor(1, thread_name_prefix="xlsx-zip") as zipper:
        for name, xml in members[:first]:
            _write_member(dst, name, xml, parts.get(name), zipper)
        if child is None:
            return
        with ThreadPoolExecutor(DEFLATE_THREADS, thread_name_prefix="xlsx-zip") as pool:
            ahead = {
                name: _deflated(name, xml, parts[name].body, pool)
                for name, xml in members[first:]
                if name in parts and name not in theirs and not parts[name].describes_others
            }
        made = iter(child.result())
        for name, xml in members[first:]:
            if name in theirs:
                member = next(made)
                parts[name].body.truncated = member.truncated  # counted in the child
                write_deflated(dst, name, member)
            elif name in ahead:
                write_deflated(dst, name, ahead.pop(name))
            else:
                _write_member(dst, name, xml, parts.get(name), zipper)


def _write_member(dst: zipfile.ZipFile, name: str, xml: bytes, sheet: Sheet | None,
                  zipper: ThreadPoolExecutor) -> None:
    """Copy one member of the skeleton, a worksheet with its rows rendered as they are written."""
    if sheet is None:
        dst.writestr(name, xml)
        return
    head, tail = _split_sheet_data(xml, name)
    with dst.open(name, "w") as out:
        _pipelined(chain([head], sheet.body.chunks(), [tail]), out.write, zipper)


def _deflate_all(jobs: list[tuple[str, bytes, SheetXml]]) -> list[Deflated]:
    """The child's work: each sheet of ``jobs`` made, rendered and compressed, in order."""
    with ThreadPoolExecutor(DEFLATE_THREADS, thread_name_prefix="xlsx-zip") as pool:
        return [_deflated(name, xml, body, pool) for name, xml, body in jobs]


def _deflated(name: str, xml: bytes, body: SheetXml, pool: ThreadPoolExecutor) -> Deflated:
    """Worksheet ``xml`` with ``body``'s rows, compressed as a zip member, into memory.

    Each rendered chunk is compressed on its own (:func:`_segment`) in ``pool``'s threads while
    the next chunks are rendered, so a sheet made alone (the child's, once this process is
    done with its own) keeps both cores busy: rendering holds the GIL, zlib does not, and
    compressing costs about twice as much. The segments, in order, then the final empty block,
    make one deflate stream (as pigz makes them), 0.1% larger than one compressor's output.
    """
    head, tail = _split_sheet_data(xml, name)
    segments: deque[Future[bytes]] = deque()
    data: list[bytes] = []
    crc = size = 0
    try:
        for piece in chain([head], body.chunks(), [tail]):
            crc, size = zlib.crc32(piece, crc), size + len(piece)
            if len(segments) == DEFLATE_THREADS:  # at most that many chunks wait to be compressed
                data.append(segments.popleft().result())
            segments.append(pool.submit(_segment, piece))
        data += [segment.result() for segment in segments]
    finally:
        wait(segments)  # none is still compressing once this returns or raises
    data.append(_LAST_BLOCK)
    return Deflated(b"".join(data), crc, size, body.truncated)


def _segment(piece: bytes) -> bytes:
    """``piece`` deflated on its own and ended on a byte boundary, with no final block: what
    any number of such segments can be followed by."""
    compressor = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw: no header
    return compressor.compress(piece) + compressor.flush(zlib.Z_SYNC_FLUSH)


#: The empty final block that ends a deflate stream made of :func:`_segment` outputs.
_LAST_BLOCK = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS).flush()


def _pipelined(pieces: Iterable[bytes], take: Callable[[bytes], object],
               zipper: ThreadPoolExecutor) -> None:
    """``take`` each piece in ``zipper``'s thread while the next one is made in this one.

    zlib, CRC-32 and file writes release the GIL, so compressing (1.1 s for the 300 MB of sheet
    XML of the 32x92 NPU pair) overlaps rendering (0.5 s). One piece is made while at most one
    is being taken.
    """
    taking: Future[object] | None = None
    try:
        for piece in pieces:
            if taking is not None:
                taking.result()  # its error, if any, is raised here
            taking = zipper.submit(take, piece)
        if taking is not None:
            taking.result()
    finally:
        if taking is not None:
            wait([taking])  # a member is never closed while the other thread writes it


def write_deflated(dst: zipfile.ZipFile, name: str, member: Deflated) -> None:
    """Add ``member``, compressed already, to ``dst`` as entry ``name`` (deflated).

    :mod:`zipfile` compresses what it is given and has no public way to add compressed data,
    so this does what ``dst.open(name, "w")`` and closing it do, with the CRC and sizes known
    up front (so no data descriptor and no seeking back, on a stream too): the local header
    (ZIP64 when a size needs it; the central directory, written by ``dst.close()``, handles
    offsets past 4 GiB), the data, and the entry in ``dst``'s list. The tests read back what it
    writes with :mod:`zipfile` and openpyxl, ZIP64 included; the internals it uses are the same
    from CPython 3.10 to 3.13 (each checked with a member between two ordinary ones, on a file
    and on a stream).
    """
    info = zipfile.ZipInfo(name)  # what dst.open(name, "w") makes: no date (1980), mode 0600
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o600 << 16
    info.CRC, info.file_size, info.compress_size = member.crc, member.size, len(member.data)
    zip64 = max(info.file_size, info.compress_size) > zipfile.ZIP64_LIMIT
    with dst._lock:  # noqa: SLF001 - see the docstring
        if dst._writing:  # noqa: SLF001
            raise ValueError(f"{name}: another member of the zip is being written")
        if dst._seekable:  # noqa: SLF001
            dst.fp.seek(dst.start_dir)
        info.header_offset = dst.fp.tell()
        dst._writecheck(info)  # noqa: SLF001 - ZIP64 allowed, name not yet written
        dst._didModify = True  # noqa: SLF001
        dst.fp.write(info.FileHeader(zip64))
        dst.fp.write(member.data)
        dst.start_dir = dst.fp.tell()
        dst.filelist.append(info)
        dst.NameToInfo[name] = info


def _split_sheet_data(xml: bytes, part: str) -> tuple[bytes, bytes]:
    """Split a worksheet part around its empty ``<sheetData>`` element."""
    matches = list(_SHEET_DATA.finditer(xml))
    if len(matches) != 1:
        raise RuntimeError(
            f"{part}: expected one empty <sheetData> from openpyxl, found {len(matches)}"
        )
    m = matches[0]
    return xml[: m.start()] + b"<sheetData>", b"</sheetData>" + xml[m.end():]
