"""Read-only, typed access to an SQLite profiler database (torch_npu / MindSpore / msMonitor Db
exports): the SQL half of the Db loader, kept apart from the table building in ``npu_db*.py``.

* **Read-only.** The file is opened through a ``file:…?mode=ro&immutable=1`` URI so a profile is
  never modified (no journal, no WAL checkpoint).
* **Schema-tolerant.** Tables and columns are looked up in ``sqlite_master`` / ``PRAGMA
  table_info`` first; :class:`Select` builds a query only from the columns that exist (an absent
  one reads as -1 / NaN / '').
* **Typed without per-cell Python work.** Integer columns are ``COALESCE``-d in SQL so ns
  timestamps never pass through float64; interned strings come back as ids and are resolved
  against one in-memory copy of ``STRING_IDS``; a query of integers and ids only comes back as
  one text per column that numpy parses (:meth:`Db.int_columns`).
* **Bad files are input errors.** Every SQLite failure becomes an :class:`InputError` naming the
  file.
"""

from __future__ import annotations

import math
import re
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..compat import as_text
from ..errors import InputError
from .detect import SQLITE_MAGIC

#: What the Db writes where an id is invalid (UINT32 max, torch_npu ``DB_INVALID_VALUE``).
INVALID_ID = 4294967295
#: What the exporters write where a text value is absent (level 0 op types, task names).
NA = "N/A"
#: Mask of the low 32 bits (``globalTid`` is ``pid << 32 | tid``).
U32 = 0xFFFFFFFF

#: Kinds of fetched columns: int64 (NULL → -1), float64 (NULL → NaN), an interned string id
#: resolved through STRING_IDS (unknown → ''), plain text (NULL → '').
INT, FLOAT, SID, TEXT = "int", "float", "sid", "text"
#: Rows converted at a time by :meth:`Db._fetch_ints` (32 k rows × 16 columns: 4 MB of int64).
_FETCH_ROWS = 1 << 15


def table(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """The fetched columns as a table, texts as ``object`` columns: from a dict of arrays pandas 3
    would infer its ``str`` dtype, whose comparisons and missing-value checks cost a Python call
    per cell (≈ 1.5 s of CPU of a 150 MB Db side) and whose results are the same."""
    return pd.DataFrame({name: pd.Series(values, dtype=object) if values.dtype == object else values
                         for name, values in columns.items()}, copy=False)


class Db:
    """A read-only SQLite connection that knows which tables and columns exist, fetches typed
    columns without pandas' per-cell object conversion, and turns every SQLite failure into an
    :class:`InputError` naming the file.

    Interned strings are fetched as integer ids and resolved against one in-memory copy of
    ``STRING_IDS`` (a hash lookup per column): sqlite3 builds a Python object per cell, and an int
    is about half the cost of a decoded ``str``, which is what dominates loading a large Db.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # ``immutable=1`` on top of ``mode=ro``: without it SQLite creates ``-shm``/``-wal`` files
        # next to a WAL-mode database even for a read-only connection, i.e. writes into the
        # user's input folder. The price: changes still sitting in an existing ``-wal`` file are
        # not seen (reported by :attr:`unmerged_wal`).
        try:
            self.unmerged_wal = path.with_name(path.name + "-wal").stat().st_size > 0
        except OSError:
            self.unmerged_wal = False
        self.bad_text = False  # some TEXT cells were not UTF-8 (decoded with replacement)
        self.ends_before_start: dict[str, int] = {}  # table → rows read with duration 0
        try:
            self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            # UnicodeDecodeError: SQLite's own message quotes the damaged schema bytes, and
            # Python fails to decode the message itself.
            raise InputError(path, f"cannot be read as an SQLite database ({exc})") from None
        self.tables = {str(r[0]) for r in rows}
        self._columns: dict[str, set[str]] = {}
        self._string_ids: pd.Index | None = None
        self._strings = np.array([""], dtype=object)
        self._arrow: Any = None  # the Arrow connection of :meth:`scan_columns` (False: none to be had)

    def close(self) -> None:
        self.conn.close()
        if self._arrow:
            self._arrow.close()

    def _execute(self, sql: str) -> list[tuple[object, ...]]:
        try:
            return self.conn.execute(sql).fetchall()
        except sqlite3.OperationalError as exc:
            # One non-UTF-8 string (a name copied from another machine) must not make the whole
            # profile unreadable: decode leniently from then on (only on this failure path, the
            # default decoder is the fast one).
            if not str(exc).startswith("Could not decode to UTF-8") or self.bad_text:
                raise InputError(self.path, f"is corrupted or unreadable ({exc})") from None
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # see __init__ for the decode error
            raise InputError(self.path, f"is corrupted or unreadable ({exc})") from None
        self.bad_text = True
        self.conn.text_factory = _lenient_text
        return self._execute(sql)

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        """The rows of ``sql`` as Python tuples (SQLite failures as :class:`InputError`)."""
        return self._execute(sql)

    def columns(self, table: str) -> set[str]:
        if table not in self.tables:
            return set()
        if table not in self._columns:
            self._columns[table] = {str(r[1]) for r in self._execute(f'PRAGMA table_info("{table}")')}
        return self._columns[table]

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and set(cols) <= self.columns(table)

    def any_rows(self, table: str) -> bool:
        return table in self.tables and bool(self._execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')[0][0])

    def fetch(self, sql: str, kinds: dict[str, str], scan: bool = False) -> pd.DataFrame:
        """Run ``sql`` and return its columns (named and typed by ``kinds``, in SELECT order);
        ``scan``: the query reads one table, no join (see :meth:`scan_columns`)."""
        if all(kind in (INT, SID) for kind in kinds.values()):
            ints = (self.scan_columns if scan else self.int_columns)(sql, list(kinds))
            if ints is None:
                matrix = self._fetch_ints(sql, len(kinds))
                ints = None if matrix is None else dict(zip(kinds, matrix.T))
            if ints is not None:
                return table({name: ints[name] if kind == INT else self.texts(ints[name])
                               for name, kind in kinds.items()})
        rows = self._execute(sql)
        cells = np.empty((len(rows), len(kinds)), dtype=object)
        if rows:
            cells[:] = rows
        return table({name: self._convert(cells[:, j], kind) for j, (name, kind) in enumerate(kinds.items())})

    def int_columns(self, sql: str, names: list[str]) -> dict[str, np.ndarray] | None:
        """The columns of a query whose cells are all integers (ids included), each fetched as
        one comma-separated text built by SQLite (``group_concat``) and parsed by numpy; None
        when a cell is not an integer (NULL, text, a real) or anything fails (:meth:`_fetch_ints`
        then reads the query, and :meth:`fetch`'s general path reports errors).

        Why: sqlite3 builds a Python int and a tuple slot per cell, and that was 60 % of loading
        a large Db (3.7 s of 6.2 s for one side of the 32×92 pair). SQLite writes the same cells
        as text in C and ``np.fromstring`` reads them back in C: 2.0 s for the same cells, exact
        for every 64-bit integer. The aggregates of one SELECT see the rows in one order, the
        order of the query itself (a subquery with ORDER BY is not flattened into an aggregate),
        so the columns stay aligned. A NULL, which ``group_concat`` skips, shows as a short
        column; a cell that is not an integer does not parse to the end.
        """
        aggregates = ", ".join(f'group_concat("{name}")' for name in names)
        try:
            row = list(self.conn.execute(f"SELECT count(*), {aggregates} FROM ({sql})").fetchone())
        except (sqlite3.Error, UnicodeDecodeError):  # also: a column's text beyond SQLite's limit
            return None
        count, out = row[0], {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # numpy's word for "stopped early"
            for j, name in enumerate(names, start=1):
                text, row[j] = row[j], None  # each text is freed once parsed
                if not isinstance(text, str) and not (text is None and count == 0):
                    return None
                try:
                    values = np.fromstring(text or "", dtype=np.int64, sep=",")
                except (DeprecationWarning, ValueError):
                    return None
                if len(values) != count:
                    return None
                out[name] = values
        return out

    def scan_columns(self, sql: str, names: list[str]) -> dict[str, np.ndarray] | None:
        """:meth:`int_columns` of a query that reads one table (no join): through Arrow when
        ``adbc-driver-sqlite`` is installed, else (or when Arrow refuses it) as text per column.

        Why: the Arrow driver hands SQLite's integers over as int64 buffers without writing and
        parsing them as text, ≈ 30 % less CPU for the ``PYTORCH_API`` and ``TASK`` scans of a
        large Db (0.69 → 0.49 s and 0.39 → 0.27 s for one side of the 32×92 pair). Only scans
        of one table: the driver brings its own SQLite, and the order of a join's rows is that
        library's choice, while a scan reads the table in its stored order in any version. A
        column whose cells are not all integers (a NULL, a real, a text) is refused, as
        :meth:`int_columns` refuses it, so either path gives the same columns or none.
        """
        got = self._arrow_int_columns(sql, names)
        return got if got is not None else self.int_columns(sql, names)

    def _arrow_int_columns(self, sql: str, names: list[str]) -> dict[str, np.ndarray] | None:
        if self._arrow is None:
            self._arrow = _arrow_connection(self.path)
        if not self._arrow:
            return None
        try:
            cursor = self._arrow.cursor()
            try:
                cursor.execute(sql)
                table = cursor.fetch_arrow_table()
            finally:
                cursor.close()
        except Exception:  # noqa: BLE001 - the driver's type mismatches and errors: the text path decides
            return None
        if table.num_columns != len(names):
            return None
        out = {}
        for name, column in zip(names, table.columns):
            if str(column.type) != "int64" or column.null_count:
                return None
            values = column.to_numpy()
            out[name] = values if values.flags.writeable else values.copy()
        return out

    def _fetch_ints(self, sql: str, width: int) -> np.ndarray | None:
        """The rows of a query whose columns are all integers (ids included) as one int64 matrix,
        built ``_FETCH_ROWS`` rows at a time; None when a cell is not an integer or anything
        fails (the general path of :meth:`fetch` then reads the query and reports errors).

        Why: the list of row tuples of a whole table held 7 M Python objects for the 730 k
        ``PYTORCH_API`` rows of a 42-step run (≈ 300 MB), and converting it through an object
        matrix cost a quarter of the fetch; a block converted by one ``np.array`` call is freed
        before the next is read.
        """
        try:
            cursor = self.conn.execute(sql)
            blocks = []
            while rows := cursor.fetchmany(_FETCH_ROWS):
                block = np.array(rows, dtype=np.int64)
                if block.shape != (len(rows), width):  # pragma: no cover - sqlite rows are uniform
                    return None
                blocks.append(block)
        except (sqlite3.Error, TypeError, ValueError, OverflowError):
            return None
        return np.concatenate(blocks) if blocks else np.empty((0, width), dtype=np.int64)

    def _convert(self, values: np.ndarray, kind: str) -> np.ndarray:
        if kind == INT:
            try:
                return values.astype(np.int64)
            except (TypeError, ValueError, OverflowError):
                return _in_int64(values)[0]
        if kind == FLOAT:
            return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)
        if kind == SID:
            return self.texts(values)
        return np.where(pd.isna(values), "", values)

    def texts(self, values: np.ndarray) -> np.ndarray:
        """Interned ids → their text; text stored inline (older exports) is kept as is."""
        try:
            codes, inline = values.astype(np.int64), None
        except (TypeError, ValueError, OverflowError):
            codes, numeric = _in_int64(values)
            inline = ~numeric & pd.notna(values)
        positions = self._string_index().get_indexer(codes)
        out = self._strings[positions]  # -1 (unknown id) picks the trailing ''
        if inline is not None and inline.any():
            out[inline] = [_cell_text(v) for v in values[inline]]
        return out

    def _string_index(self) -> pd.Index:
        if self._string_ids is None:
            ids, values = np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
            if self.has("STRING_IDS", "id", "value"):
                rows = self._execute("SELECT COALESCE(CAST(id AS INTEGER), -1), value FROM STRING_IDS ORDER BY rowid")
                df = pd.DataFrame(rows, columns=["id", "value"]).drop_duplicates("id")
                ids, values = df["id"].to_numpy(np.int64), self._plain_texts(df["value"])
            self._string_ids = pd.Index(ids)
            self._strings = np.append(values, "").astype(object)
        return self._string_ids

    def _plain_texts(self, cells: pd.Series) -> np.ndarray:
        """Cells of a TEXT column as ``str``; a value stored as a BLOB (a damaged or hand-edited
        Db) is decoded leniently and flagged in :attr:`bad_text` rather than failing the load."""
        try:
            return as_text(cells).to_numpy(object)
        except UnicodeDecodeError:
            self.bad_text = True
            return np.array(["" if v is None else _cell_text(v) for v in cells.tolist()], dtype=object)

    def string_ids(self, texts: list[str]) -> list[int]:
        """Ids under which ``texts`` are interned."""
        index = self._string_index()
        return [int(i) for i in index[np.isin(self._strings[:-1], texts)]]

    def string_ids_matching(self, pattern: re.Pattern[str]) -> list[int]:
        """Ids of the interned texts ``pattern`` matches (from their start)."""
        index = self._string_index()
        hit = pd.Series(self._strings[:-1], dtype=object).str.match(pattern).to_numpy(dtype=bool)
        return [int(i) for i in index[hit]]


def _arrow_connection(path: Path) -> Any:
    """A read-only Arrow (ADBC) connection to the Db, as immutable as :class:`Db`'s own; False
    when ``adbc-driver-sqlite`` is not installed or cannot open it."""
    try:
        from adbc_driver_sqlite import dbapi
    except ImportError:
        return False
    try:
        return dbapi.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1")
    except Exception:  # noqa: BLE001 - any failure of an optional reader: the sqlite3 path stays
        return False


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _in_int64(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 of SQLite cells (-1 where absent) and the mask of cells that are numbers.

    Only reached when a column mixes numbers with something else (a damaged Db), so one Python
    step per cell is affordable; going through float64 instead would round every ns timestamp
    of the column to 256 ns. Text, BLOBs, infinities and values beyond int64 read as absent
    (never wrapped around).
    """
    out = np.full(len(values), -1, dtype=np.int64)
    ok = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values.tolist()):
        n = _exact_int(v)
        if n is not None:
            out[i], ok[i] = n, True
    return out, ok


def _exact_int(value: object) -> int | None:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) and abs(value) < 2.0**63 else None
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return None


def _cell_text(value: object) -> str:
    """Text of a cell stored inline (a BLOB is decoded leniently, not shown as ``b'…'``)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Select:
    """One SELECT built only from the columns that exist (absent ones read as -1 / NaN / '')."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.items: list[str] = []
        self.kinds: dict[str, str] = {}

    def col(self, alias: str, table: str, column: str, out: str, kind: str) -> Select:
        if column not in self.db.columns(table):
            return self.expr({INT: "-1", SID: "-1"}.get(kind, "NULL"), out, kind)
        ref = f"{alias}.{column}"
        sql = {INT: f"COALESCE(CAST({ref} AS INTEGER), -1)", FLOAT: f"CAST({ref} AS REAL)",
               SID: f"COALESCE({ref}, -1)"}.get(kind, ref)
        return self.expr(sql, out, kind)

    def expr(self, sql: str, out: str, kind: str) -> Select:
        self.items.append(f"{sql} AS {out}")
        self.kinds[out] = kind
        return self

    def fetch(self, tail: str, scan: bool = False) -> pd.DataFrame:
        """Run ``SELECT <items> <tail>`` (``tail`` = FROM/JOIN/WHERE/ORDER clauses; ``scan``: it
        reads one table, no join, see :meth:`Db.scan_columns`)."""
        return self.db.fetch(f"SELECT {', '.join(self.items)} {tail}", self.kinds, scan)


def check_header(path: Path) -> None:
    """Reject what SQLite itself would silently accept (a 0-byte file opens as an empty database)
    or report cryptically (encrypted / foreign files)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    if not head:
        raise InputError(path, "is empty (0 bytes), not a profiler database")
    if head != SQLITE_MAGIC:
        raise InputError(path, "is not an SQLite database (encrypted or not a Db export?)")
