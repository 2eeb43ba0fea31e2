"""The XML of worksheet cells, rendered as text: numbers as numbers, anything else as an inline
string, never a formula.

openpyxl's per-cell serialisation costs ~15 µs a cell (about 4 s for a 20k-row sheet), so the
workbook writer renders ``<row>``/``<c>`` elements here, with the style ids openpyxl registered,
and splices them into the package openpyxl saved. Text is made legal for XML 1.0 and cut to
Excel's cell limit with a visible marker.

A large export holds millions of cells (3.9 M in the workbook of the 32-layer × 92-step NPU Db
pair), and one Python call per cell cost seconds. So data rows are rendered a column at a time
(:class:`DataColumn`): each column's values become their texts in one pass per kind (``repr``
mapped over the floats, text escaped in one regular-expression pass over the join of a whole
chunk), and the rows are the join of one grid of fixed pieces. :func:`cell` renders one value
(titles, headers, the README) and is the rule the column path follows byte for byte — the
tests hold them equal.

Data rows are made and rendered :data:`ROWS_PER_CHUNK` at a time, and only while the package is
being zipped (perhaps in a child process, :mod:`.xlsx`): a chunk's columns (its values, their
distinct cells and the XML of each) are made from that chunk's rows alone, rendered, handed on
and freed before the next chunk's are made. Memory holds one chunk of a sheet, never the sheet:
made for the whole sheet at once, the distinct cells' XML, the rows' indexes and the rendered
kernel lists of the 32x92 NPU Db pair's largest sheet were ≈ 200 MB, as much again as the
sheet's table (docs/performance.md). Per chunk, a value repeated across chunks is rendered once
per chunk instead of once: a few hundred thousand more ``repr`` / escapes on that sheet, a
few percent of its time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from ..compat import factorize_text

#: Excel's cell text limit, in UTF-16 code units.
CELL_CHARS = 32_767
#: Text of at most this many characters always fits (a character is at most two UTF-16 units).
_FITS_ANYWAY = CELL_CHARS // 2
#: XML 1.0 forbids these characters; Excel refuses files containing them.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NEEDS_ESCAPE = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: The characters of ``_ILLEGAL_XML`` that ASCII text can hold (C0 controls but tab, LF, CR).
_ILLEGAL_ASCII = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])
_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("\r", "&#13;"))
_MARKER = "…[truncated {} chars]"
#: Joins a chunk's texts to escape them in one pass. XML forbids NUL, so no escaped text holds
#: one; a chunk whose text does is escaped text by text. The patterns below leave it alone.
_SEP = "\x00"
_ILLEGAL_BUT_SEP = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPE_BUT_SEP = re.compile("[&<>\r\x01-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ILLEGAL_ASCII_BUT_SEP = _ILLEGAL_ASCII.replace(b"\x00", b"")
_ESCAPED_ASCII = _ILLEGAL_ASCII_BUT_SEP + b"&<>\r"
#: Data rows made and rendered into one encoded chunk: what bounds the writer's memory (a chunk
#: of the 32x92 NPU pair's largest sheet is ≈ 6.5 MB of XML). Its chunks are also the segments
#: the writer compresses apart (:mod:`.xlsx`), so changing it changes the workbook's bytes.
ROWS_PER_CHUNK = 5000

# A cell is ``<c r="{ref}" s="{style}`` + OPEN[kind] + its text + CLOSE[kind].
NUMBER, EMPTY, BOOL, TEXT = 0, 1, 2, 3
OPEN = ('"><v>', '"/>', '" t="b"><v>', '" t="inlineStr"><is><t xml:space="preserve">')
CLOSE = ("</v></c>", "", "</v></c>", "</t></is></c>")
_CLOSE = np.array(CLOSE, dtype=object)
_BOOL_TEXT = np.array(["0", "1"], dtype=object)


def kind_text(value: object) -> tuple[int, str]:
    """How one value is written: its kind of cell and its text, not yet escaped.

    Finite floats and ints are numbers (``repr``: the shortest text that reads back the same
    float), None and NaN empty cells, bools booleans, ±inf the text ``INF`` / ``-INF``, anything
    else its ``str`` as an inline string, so no text ever becomes a formula."""
    if value is None:
        return EMPTY, ""
    if isinstance(value, bool):
        return BOOL, str(int(value))
    if isinstance(value, int):
        return NUMBER, int.__repr__(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return NUMBER, float.__repr__(value)
        if math.isnan(value):
            return EMPTY, ""
        return TEXT, "INF" if value > 0 else "-INF"
    return TEXT, value if isinstance(value, str) else str(value)


def escape(value: str) -> str:
    """``value`` made legal for XML and its ``& < > CR`` written as entities."""
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    value = legal(value)
    for char, entity in _ENTITIES:
        value = value.replace(char, entity)
    return value


def fit(value: str) -> str:
    """``value`` cut to Excel's limit, ending with a visible ``…[truncated N chars]`` marker;
    ``value`` itself (the same object) when it fits.

    Excel counts UTF-16 units, so the cut is made on the UTF-16 form (a pair split in two is
    dropped whole). The marker's length depends on N, hence the loop on its digit count.

    Only the head that can be kept is looked at: every character is at least one unit, so
    the first ``CELL_CHARS + 1`` characters decide. Operator kernel details on a large trace
    run to megabytes per cell, and scanning or encoding all of them cost more than the rest
    of the workbook. Characters XML forbids become U+FFFD here (one unit each, like the
    character they replace), so that lone surrogates can be encoded.
    """
    if len(value) <= _FITS_ANYWAY:
        return value
    units = legal(value[: CELL_CHARS + 1]).encode("utf-16-le")
    if len(units) <= 2 * CELL_CHARS:
        return value
    digits = 1
    while True:
        room = CELL_CHARS - len(_MARKER.format(0)) + 1 - digits
        kept = units[: 2 * room].decode("utf-16-le", "ignore")
        cut = len(value) - len(kept)
        if len(str(cut)) <= digits:
            return kept + _MARKER.format(cut)
        digits = len(str(cut))


def legal(value: str) -> str:
    """``value`` with every character XML 1.0 forbids replaced by U+FFFD.

    Most cells are ASCII and hold none: for those one ``bytes.translate`` that drops the C0
    controls tells so ~8x faster than the regular expression (kernel-detail cells of a large
    trace are 32k characters each, and hundreds of them need ``&``/``<`` escaping).
    """
    if value.isascii() and len(value.encode("ascii").translate(None, _ILLEGAL_ASCII)) == len(value):
        return value
    return _ILLEGAL_XML.sub("\ufffd", value)


# ------------------------------------------------------------------------------ one column


class DataColumn:
    """The data cells of one column over one chunk of rows: their values, the column's letter
    and the style id of every row.

    Values are read as :func:`~perfcmp_core.export.values.python_values` reads them (NaN, None
    and NA empty, numpy scalars as Python ones) and written as :func:`kind_text` says, each
    distinct value once: a large sheet repeats its durations, names and call stacks thousands of
    times, so a column is the XML of its few distinct (style, value) cells, and each row an
    index into them. It is made for one chunk (:meth:`SheetXml.add_columns`), so what it holds
    is bounded by the chunk, whatever the sheet's size.
    """

    def __init__(self, letter: str, series: pd.Series, styles: np.ndarray) -> None:
        self.prefix = f'<c r="{letter}'
        value_of_row, kinds, texts = _distinct(series)
        # Fit and escape each distinct text once; cuts are counted per cell, before writing:
        # the README, written after this sheet, reports them.
        uses = np.bincount(value_of_row[value_of_row >= 0], minlength=len(texts))
        self.truncated = _fit_and_escape(texts, np.flatnonzero(kinds == TEXT), uses)
        # The texts and kinds end with the empty cell, which a missing value (index -1) takes.
        self._texts = np.append(texts, np.array([""], dtype=object))
        self._kinds = np.append(kinds, np.int8(EMPTY))
        self._value_of_row = np.where(value_of_row < 0, len(texts), value_of_row)
        self._ids, self._style_of_row = _distinct_styles(np.asarray(styles))

    def cells(self, after: str) -> tuple[np.ndarray, np.ndarray]:
        """Each row's index into the XML of the column's distinct cells, and that XML.

        A cell's XML is all of ``<c …>…</c>`` after its row number (``" s="5"><v>1.5</v></c>``),
        followed by ``after``: the next cell's ``<c r="`` and letter, or ``</row>``."""
        if len(self._ids) == 1:  # one style: a cell per distinct value
            cell_of_row, value = self._value_of_row, np.arange(len(self._texts))
            style = np.zeros(len(value), np.int64)
        else:
            assert self._style_of_row is not None  # more than one id: each row's is known
            pair = self._style_of_row.astype(np.int64) * len(self._texts) + self._value_of_row
            cell_of_row, pairs = pd.factorize(pair)
            style, value = np.divmod(pairs, len(self._texts))
        kinds = self._kinds[value]
        opens = np.array([[f'" s="{i}{o}' for o in OPEN] for i in self._ids.tolist()], object)
        closes = np.array([c + after for c in CLOSE], dtype=object)
        return cell_of_row, opens[style, kinds] + self._texts[value] + closes[kinds]


def _distinct_styles(styles: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct style ids of a column's rows, and each row's index into them (None where
    there is one id): a column of one style gives its one id as a view of every row
    (:func:`~.xlsx._styles`), which needs no sort of its rows."""
    if len(styles) and styles.strides == (0,):
        return styles[:1].copy(), None
    return np.unique(styles, return_inverse=True)


class WholeColumn:
    """A column made once for a whole sheet, read a chunk of rows at a time (:meth:`rows`).

    For float columns: a sheet's durations repeat across its chunks (the 32x92 NPU pair's
    ModuleCompare: 13.5 k distinct values in each 152 k-row duration column, thousands in each
    chunk), and made per chunk their ``repr`` was most of the sheet's extra cost (0.06 → 0.19 s
    for six such columns). What it holds grows with the sheet's rows, not with its texts: two
    row indexes and the XML of its distinct cells (≈ 3 MB for such a column).
    """

    def __init__(self, column: DataColumn) -> None:
        self.column = column
        self._cells: tuple[str, tuple[np.ndarray, np.ndarray]] | None = None

    def rows(self, start: int, stop: int) -> ColumnRows:
        return ColumnRows(self, start, stop)

    def cells(self, after: str) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`DataColumn.cells` of the whole column, made once."""
        if self._cells is None or self._cells[0] != after:
            self._cells = after, self.column.cells(after)
        return self._cells[1]


class ColumnRows:
    """Rows ``start`` … ``stop - 1`` of a :class:`WholeColumn`: what :func:`_render` reads of a
    :class:`DataColumn` (its cut cells counted with its first chunk)."""

    def __init__(self, whole: WholeColumn, start: int, stop: int) -> None:
        self.whole, self.start, self.stop = whole, start, stop
        self.prefix = whole.column.prefix
        self.truncated = whole.column.truncated if start == 0 else 0

    def cells(self, after: str) -> tuple[np.ndarray, np.ndarray]:
        cell_of_row, xml = self.whole.cells(after)
        return cell_of_row[self.start:self.stop], xml


def _fit_and_escape(texts: np.ndarray, text: np.ndarray, uses: np.ndarray) -> int:
    """:func:`escape` of :func:`fit` of ``texts[text]``, in place: the long ones one by one,
    the rest at once. Returns the number of cells cut (``uses``: the cells of each text)."""
    lengths = np.fromiter(map(len, texts[text]), np.int64, len(text))
    long, short = text[lengths > _FITS_ANYWAY], text[lengths <= _FITS_ANYWAY]
    fitted = [fit(t) for t in texts[long]]
    cut = long[[f is not t for f, t in zip(fitted, texts[long])]]
    texts[long] = [escape(f) for f in fitted]
    texts[short] = _escaped_short(texts[short].tolist())
    return int(uses[cut].sum())


def _distinct(series: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's index into the column's distinct values (-1: missing), and their
    :func:`kind_text` (texts not yet escaped), one vectorised pass per kind of column."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iubf":
        values = series.to_numpy()
        # Floats are told apart by their bits: 0.0 equals -0.0, but they read differently.
        keys = values.view(f"i{values.itemsize}") if dtype.kind == "f" else values
        codes, distinct = pd.factorize(keys)
        kinds, texts = _number_texts(np.asarray(distinct, dtype=keys.dtype).view(dtype))
        return codes, kinds, texts
    values = series.to_numpy(dtype=object)
    # Numbered first, missing cells -1, and the distinct values' types looked at: a text column
    # (nearly every such column) is then done; only a mixed one looks at every cell. Testing
    # every cell for missing and for its type first cost as much as the numbering.
    codes, distinct = factorize_text(values)  # exact for texts holding NUL
    if infer_dtype(distinct, skipna=False) in ("string", "empty"):
        return codes, np.full(len(distinct), TEXT, np.int8), np.asarray(distinct, dtype=object)
    # Mixed objects: 1, 1.0 and True are equal yet read differently, so each cell is its own.
    present = ~series.isna().to_numpy()
    codes = np.full(len(values), -1, np.intp)
    shown = values[present]
    codes[present] = np.arange(len(shown))
    pairs = [kind_text(v.item() if isinstance(v, np.generic) else v) for v in shown]
    texts = np.empty(len(pairs), dtype=object)
    texts[:] = [t for _, t in pairs]
    return codes, np.array([k for k, _ in pairs], np.int8), texts


def _number_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kind_text` of an array of numbers or bools: kinds and texts."""
    n = len(values)
    texts = np.full(n, "", dtype=object)
    if values.dtype.kind == "b":
        texts[:] = _BOOL_TEXT[values.view(np.uint8)]
        return np.full(n, BOOL, np.int8), texts
    if values.dtype.kind in "iu":
        texts[:] = list(map(int.__repr__, values.tolist()))
        return np.full(n, NUMBER, np.int8), texts
    finite = np.isfinite(values)
    texts[finite] = list(map(float.__repr__, values[finite].tolist()))
    texts[values == np.inf] = "INF"
    texts[values == -np.inf] = "-INF"
    kinds = np.where(finite, NUMBER, np.where(np.isnan(values), EMPTY, TEXT))
    return kinds.astype(np.int8), texts


def _escaped_short(texts: list[str]) -> list[str]:
    """:func:`escape` of every text, by one pass over their join (the cells of most columns
    need none, and a call per cell cost more than everything else in a large sheet)."""
    joined = _SEP.join(texts)
    if joined.count(_SEP) != len(texts) - 1:  # a text holds NUL (or there are none)
        return [escape(t) for t in texts]
    if joined.isascii():  # as in :func:`legal`: bytes.translate tells ~3x faster than a search
        raw = joined.encode("ascii")
        if len(raw.translate(None, _ESCAPED_ASCII)) == len(raw):
            return texts
        if len(raw.translate(None, _ILLEGAL_ASCII_BUT_SEP)) != len(raw):
            joined = _ILLEGAL_BUT_SEP.sub("\ufffd", joined)
    elif _ESCAPE_BUT_SEP.search(joined) is None:
        return texts
    else:
        joined = _ILLEGAL_BUT_SEP.sub("\ufffd", joined)
    for char, entity in _ENTITIES:
        joined = joined.replace(char, entity)
    return joined.split(_SEP)


# ------------------------------------------------------------------------------- the sheet


@dataclass
class SheetXml:
    """The ``<row>`` elements of one worksheet, as UTF-8 chunks, plus what had to be cut."""

    truncated: int = 0  # cells cut to Excel's text limit
    rows: int = 0  # data rows written (a sheet holds at most Excel's row limit)
    _parts: list[Iterable[bytes]] = field(default_factory=list)

    def chunks(self) -> Iterator[bytes]:
        """The rows in order; data rows are rendered only now, one chunk at a time."""
        for part in self._parts:
            yield from part

    def add_rows(self, rows: Iterable[str]) -> None:
        """Rows rendered already (with :meth:`cell`)."""
        self._parts.append(["".join(rows).encode("utf-8", "replace")])

    def add_columns(
        self, columns: Callable[[int, int], list[DataColumn | ColumnRows]], first_row: int,
        rows: int
    ) -> None:
        """Data rows ``first_row`` … (``rows`` of them), made and rendered only when
        :meth:`chunks` gets there (in the process that writes this sheet: making the columns of
        a large sheet, its distinct values and their escaping, costs as much as rendering), one
        chunk at a time: ``columns(start, stop)`` makes the columns of the rows at positions
        ``start`` … ``stop - 1`` (at most :data:`ROWS_PER_CHUNK` of them), which are rendered
        and dropped before the next chunk's are made. :attr:`truncated` counts their cut cells
        from then on."""
        self._parts.append(self._rendered(columns, first_row, rows))

    def add_later(self, rows: Callable[[], Iterable[str]]) -> None:
        """Rows rendered with :meth:`cell` when :meth:`chunks` gets there: the README's rows
        report what the other sheets cut, known once those are written."""
        self._parts.append(self._later(rows))

    def _later(self, rows: Callable[[], Iterable[str]]) -> Iterator[bytes]:
        yield "".join(rows()).encode("utf-8", "replace")

    def _rendered(
        self, make: Callable[[int, int], list[DataColumn | ColumnRows]], first_row: int,
        rows: int
    ) -> Iterator[bytes]:
        for start in range(0, rows, ROWS_PER_CHUNK):
            stop = min(start + ROWS_PER_CHUNK, rows)
            columns = make(start, stop)
            self.truncated += sum(c.truncated for c in columns)
            chunk = _render(columns, first_row + start, stop - start)
            del columns  # freed before the chunk is taken and the next one made
            yield chunk

    def cell(self, ref: str, value: object, style: int) -> str:
        """One ``<c>``: numbers as numbers, anything else as an inline string, never a formula."""
        kind, text = kind_text(value)
        if kind == TEXT:
            fitted = fit(text)
            self.truncated += fitted is not text
            text = escape(fitted)
        return f'<c r="{ref}" s="{style}{OPEN[kind]}{text}{CLOSE[kind]}'


def _render(columns: list[DataColumn | ColumnRows], first_row: int, rows: int) -> bytes:
    """The ``<row>`` elements of ``columns`` (``rows`` rows from row ``first_row``): a grid of
    pieces, joined row by row.

    A row is ``<row r="`` N ``"><c r="A`` then per cell: N and the XML of its cell, which ends
    with the next cell's ``<c r="`` and letter (or ``</row>``) — two pieces a cell."""
    after = [c.prefix for c in columns[1:]] + ["</row>"]
    numbers = np.array(list(map(str, range(first_row, first_row + rows))), object)
    grid = np.empty((rows, 3 + 2 * len(columns)), dtype=object)
    grid[:, 0], grid[:, 1], grid[:, 2] = '<row r="', numbers, '">' + columns[0].prefix
    for i, (column, end) in enumerate(zip(columns, after)):
        cell_of_row, xml = column.cells(end)
        grid[:, 3 + 2 * i] = numbers
        grid[:, 4 + 2 * i] = xml[cell_of_row]
    return "".join(grid.ravel().tolist()).encode("utf-8", "replace")
