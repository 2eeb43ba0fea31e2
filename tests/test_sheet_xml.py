"""The column-at-a-time cell writer against the one-cell-at-a-time rule it replaces.

``SheetXml.cell`` is the rule for one value (its exact output is pinned in
test_export_xlsx.py::test_cell_renders_every_kind_of_value); the workbook's data rows are
rendered by ``DataColumn`` a whole column at a time, each distinct value once. Whatever the
values, both must give the same bytes and count the same cut cells: tricky values by hand here,
random columns of every dtype the tables hold by hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcmp_core.compat import PANDAS_VERSION
from perfcmp_core.export import sheet_xml
from perfcmp_core.export.sheet_xml import CELL_CHARS, DataColumn, SheetXml
from perfcmp_core.export.values import python_values

#: pandas' "str" text dtype (pandas 2: object), Python-backed: with pyarrow installed pandas 3
#: would back it with Arrow, which cannot hold the lone surrogates of TEXTS at all.
STR = pd.StringDtype("python", na_value=np.nan) if PANDAS_VERSION >= (3, 0) else "str"

FIRST_ROW = 4


def per_cell(columns: list[tuple[str, pd.Series, np.ndarray]]) -> tuple[bytes, int]:
    """The rows as a cell-by-cell writer makes them: ``SheetXml.cell`` on every value."""
    xml = SheetXml()
    values = [python_values(series) for _, series, _ in columns]
    rows = []
    for i in range(len(values[0])):
        r = FIRST_ROW + i
        cells = "".join(
            xml.cell(f"{letter}{r}", vals[i], int(styles[i]))
            for (letter, _, styles), vals in zip(columns, values)
        )
        rows.append(f'<row r="{r}">{cells}</row>')
    return "".join(rows).encode("utf-8", "replace"), xml.truncated


def by_column(columns: list[tuple[str, pd.Series, np.ndarray]]) -> tuple[bytes, int]:
    """The same rows from :class:`DataColumn` (what the workbook writer uses)."""
    xml = SheetXml()
    xml.add_columns(
        lambda start, stop: [DataColumn(letter, series.iloc[start:stop], styles[start:stop])
                             for letter, series, styles in columns],
        FIRST_ROW, len(columns[0][1]))
    return b"".join(xml.chunks()), xml.truncated


@contextmanager
def chunks_of(rows: int) -> Iterator[None]:
    """Small chunks, so that every test crosses chunk boundaries."""
    saved = sheet_xml.ROWS_PER_CHUNK
    sheet_xml.ROWS_PER_CHUNK = rows
    try:
        yield
    finally:
        sheet_xml.ROWS_PER_CHUNK = saved


def assert_same(*series: pd.Series, styles: list[np.ndarray] | None = None) -> None:
    n = len(series[0])
    styles = styles or [np.full(n, 3 + i) for i in range(len(series))]
    columns = [(chr(ord("A") + i), s, st_) for i, (s, st_) in enumerate(zip(series, styles))]
    with chunks_of(3):
        got, want = by_column(columns), per_cell(columns)
    assert got[0].decode() == want[0].decode()
    assert got == want


FLOATS = [1.5, 0.1 + 0.2, -0.0, 0.0, 1e-7, 1e16, 1e22, 123456789.125, 5e-324,
          1.7976931348623157e308, -2.5, np.nan, np.inf, -np.inf, 1.0, 0.999999, 1.0000001]
LONG = 16_384  # the first length that may not fit (two UTF-16 units a character)
TEXTS = ["=cmd|' /C calc'!A0", "+aten::add", "-neg", "@at", "=1+1", "plain", "", " ",
         "a<b>&c\"'", "tab\tlf\ncr\r", "nul\x00", "ctl\x01\x08\x0b\x0c\x0e\x1f", "\ud800lone",
         "bad\ufffe\uffff", "é€😀", "&amp;", "k" * (LONG - 1), "k" * LONG, "😀" * LONG,
         "😀" * (LONG - 1) + "k", "<&>" * 12_000, "\x00" * 20_000, "k" * 40_000 + "\ud800",
         "é" * 33_000]


def test_tricky_floats() -> None:
    values = FLOATS * 2  # repeated: each distinct value is rendered once, then reused
    with np.errstate(over="ignore"):  # the largest ones are inf in the narrower types
        narrow = [pd.Series(np.array(values, t)) for t in (np.float32, np.float16)]
    assert_same(pd.Series(values), *narrow)


def test_tricky_ints_and_bools() -> None:
    assert_same(pd.Series([0, -1, 2**63 - 1, -(2**63), 7, 7], dtype="int64"),
                pd.Series([0, 2**64 - 1, 1, 1, 2**63, 0], dtype="uint64"),
                pd.Series([3, None, 0, 1, 0, None], dtype="Int64"),
                pd.Series([True, False, True, True, False, False]),
                pd.Series([1, 2, 3, 4, 5, 6], dtype="int8"))


def test_tricky_texts_and_their_cuts() -> None:
    texts = TEXTS + TEXTS[::-1]
    series = [pd.Series(texts, dtype=object), pd.Series(texts, dtype=STR),
              pd.Series([*texts[:-1], None], dtype=STR)]
    assert_same(*series)
    cut = sum(sheet_xml.fit(t) is not t for t in texts)
    # Over 32,767 UTF-16 units: "😀"*LONG, "<&>"*12000, "k"*40000 + "\ud800", "é"*33000, each
    # twice ("\x00"*20000 is 20,000 units once made legal; "😀"*(LONG-1) + "k" exactly fits).
    assert cut == 8
    assert by_column([("B", series[0], np.full(len(texts), 5))])[1] == cut


def test_mixed_objects_keep_their_own_form() -> None:
    """Equal values that read differently (1, 1.0, True; 0.0 and -0.0) are never merged."""
    mixed = [1, 1.0, True, "1", None, np.nan, pd.NA, np.int64(3), np.float64(2.5), np.str_("np"),
             np.bool_(False), 2**70, float("inf"), -0.0, 0.0, Decimal("1.10"), b"raw",
             pd.Timestamp("2024-01-02 03:04:05"), ("a", 1), "x" * 40_000]
    assert_same(pd.Series(mixed, dtype=object))
    assert_same(pd.Series([0.0, -0.0, 0.0, -0.0]), pd.Series([-0.0, 0.0, 1.0, -0.0], dtype=object))


def test_other_dtypes() -> None:
    assert_same(pd.Series([1.5, None, np.nan, 2.0], dtype="Float64"),
                pd.Series([True, None, False, True], dtype="boolean"),
                pd.Series(["b", "a", None, "b"], dtype="category"),
                pd.Series(pd.to_datetime(["2024-01-02", None, "2024-01-03", "2024-01-02"])),
                pd.Series([1 + 2j, 0j, np.nan, 1 + 2j]))


def test_per_row_styles() -> None:
    """Ratio fills and outline levels give a column several styles, row by row."""
    values = pd.Series([1.5, 0.5, 1.5, np.nan, 1.5, 0.5, -0.0])
    assert_same(values, values, styles=[np.array([7, 9, 7, 7, 8, 9, 7]), np.full(7, 2)])


def test_one_row_and_empty_column() -> None:
    assert_same(pd.Series(["<only>"], dtype=STR), pd.Series([np.nan]), pd.Series([None]))


# --------------------------------------------------------------------------------- property

_TRICKY_CHARS = list("&<>\"'\r\n\t\x00\x01\x0b\x1f\ufffe\uffff\ud800\udfff=+-@é€😀")
TEXT = st.text(st.one_of(st.characters(), st.sampled_from(_TRICKY_CHARS)), max_size=12)
FLOAT = st.one_of(st.floats(), st.sampled_from(FLOATS))
SCALAR = st.one_of(st.none(), FLOAT, st.integers(-(2**80), 2**80), st.booleans(), TEXT,
                   st.sampled_from(TEXTS[-8:]))


@st.composite
def frames(draw: st.DrawFn) -> list[pd.Series]:
    n = draw(st.integers(1, 12))
    pick = st.sampled_from(["float", "float32", "int", "bool", "str", "object", "Int64"])
    columns = []
    for kind in draw(st.lists(pick, min_size=1, max_size=5)):
        if kind in ("float", "float32"):
            dtype = np.float64 if kind == "float" else np.float32
            values = draw(st.lists(FLOAT, min_size=n, max_size=n))
            with np.errstate(over="ignore"):
                columns.append(pd.Series(np.array(values, np.float64).astype(dtype)))
        elif kind == "int":
            ints = st.integers(-(2**63), 2**63 - 1)
            columns.append(pd.Series(draw(st.lists(ints, min_size=n, max_size=n)), dtype="int64"))
        elif kind == "bool":
            columns.append(pd.Series(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        elif kind == "str":
            texts = st.one_of(st.none(), TEXT, st.sampled_from(TEXTS))
            columns.append(pd.Series(draw(st.lists(texts, min_size=n, max_size=n)), dtype=STR))
        elif kind == "Int64":
            ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
            columns.append(pd.Series(draw(st.lists(ints, min_size=n, max_size=n)), dtype="Int64"))
        else:
            values = draw(st.lists(SCALAR, min_size=n, max_size=n))
            series = pd.Series([None] * n, dtype=object)
            series[:] = values
            columns.append(series)
    return columns


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.data())
def test_columns_equal_cell_by_cell(columns: list[pd.Series], data: st.DataObject) -> None:
    n = len(columns[0])
    styles = [np.array(data.draw(st.lists(st.sampled_from([2, 5, 11]), min_size=n, max_size=n)))
              for _ in columns]
    assert_same(*columns, styles=styles)


@pytest.mark.parametrize("text", ["k" * CELL_CHARS, "k" * (CELL_CHARS + 1), "😀" * LONG])
def test_cut_is_counted_per_cell(text: str) -> None:
    """A long text repeated in many rows is fitted once but counted in every row it fills."""
    series = pd.Series([text, "short", text, text], dtype=STR)
    got = by_column([("C", series, np.full(4, 1))])
    assert got == per_cell([("C", series, np.full(4, 1))])
    assert got[1] == (0 if sheet_xml.fit(text) is text else 3)


def test_rows_are_made_one_chunk_at_a_time() -> None:
    """``add_columns`` makes a chunk's columns only when the previous chunk has been taken, so a
    sheet's rows are never all made (or rendered) at once — and the bytes are the per-cell
    rule's whatever the chunk size."""
    n = 10
    values = pd.Series([f"<r{i % 4}>" for i in range(n)], dtype=STR)
    numbers = pd.Series(np.arange(n) * 0.5)
    styles = np.broadcast_to(np.int64(3), n)  # one style: a view, no array per row
    asked: list[tuple[int, int]] = []

    def make(start: int, stop: int) -> list[DataColumn]:
        asked.append((start, stop))
        return [DataColumn("A", values.iloc[start:stop], styles[start:stop]),
                DataColumn("B", numbers.iloc[start:stop], styles[start:stop])]

    xml = SheetXml()
    xml.add_columns(make, FIRST_ROW, n)
    assert asked == []  # nothing made before the rows are asked for
    with chunks_of(4):
        chunks = xml.chunks()
        first = next(chunks)
        assert asked == [(0, 4)]
        assert first.startswith(b'<row r="4">') and first.endswith(b'</row>')
        assert first.count(b"<row ") == 4
        rest = list(chunks)
    assert asked == [(0, 4), (4, 8), (8, 10)]
    want, _ = per_cell([("A", values, np.full(n, 3)), ("B", numbers, np.full(n, 3))])
    assert b"".join([first, *rest]) == want


def test_a_whole_column_read_by_chunks() -> None:
    """A float column made once for the sheet (``WholeColumn``) and read a chunk at a time gives
    the per-cell rule's bytes, per-row styles included."""
    n = 11
    ratios = pd.Series([1.5, 0.5, -0.0, np.nan, np.inf, 1.5, 0.5, 0.0, 2.0, 1.5, 0.1 + 0.2])
    styles = np.array([7, 9, 7, 7, 8, 9, 7, 7, 8, 9, 7])
    names = pd.Series([f"n{i % 3}" for i in range(n)], dtype=STR)
    whole = sheet_xml.WholeColumn(DataColumn("B", ratios, styles))
    xml = SheetXml()
    xml.add_columns(lambda start, stop: [
        DataColumn("A", names.iloc[start:stop], np.full(stop - start, 2)),
        whole.rows(start, stop)], FIRST_ROW, n)
    with chunks_of(4):
        got = b"".join(xml.chunks())
    assert got == per_cell([("A", names, np.full(n, 2)), ("B", ratios, styles)])[0]
