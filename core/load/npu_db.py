"""Ascend NPU Db export (``ascend_pytorch_profiler*.db``, ``ascend_mindspore_profiler*.db``,
``msmonitor*.db``; SQLite) → :class:`~perfcmp_core.model.Profile`.

Why this module looks the way it does:

* **Read-only, set-based.** The file is opened through a ``file:…?mode=ro`` URI so a profile is
  never modified (no journal, no WAL checkpoint). Every table is read with one ``SELECT`` (tables
  joined in SQL); interned strings come back as ids and are resolved against one in-memory copy of
  ``STRING_IDS`` (see :class:`_Db`); all later work is pandas/numpy, so a Db with a million tasks
  loads in seconds of CPU.
* **Degrade, never crash.** The schema differs between torch_npu / MindSpore / msMonitor and
  between versions, so every table and every column is looked up in ``sqlite_master`` /
  ``PRAGMA table_info`` first: a missing table leaves its part of the profile empty (listed in
  ``meta.notes``), a missing column reads as absent. NULL ids (e.g. ``TASK.connectionId``, which
  crashes the reference, bug B4) and the Db's "invalid id" marker ``4294967295`` become ``-1``;
  empty tables give empty frames (bugs B1/B2 of the reference cannot occur). Integer columns are
  ``COALESCE``-d in SQL so ns timestamps never pass through float64 (which would lose precision at
  epoch magnitudes).
* **Bad files are input errors.** A file that is empty, not SQLite, encrypted, truncated or
  corrupted raises :class:`InputError` naming the file.

Table mapping (schema: torch_npu ``TableColumnsManager`` / msprof export headers; names follow the
reference's ``Constant.TABLE_*``):

* KERNELS — ``TASK`` ⟕ ``COMPUTE_TASK_INFO`` (``has_details``) ⟕ ``TASK_PMU_INFO`` pivoted by metric
  name (values are ns like the reference assumes; stored as µs = value / 1000). Tasks referenced by
  ``COMMUNICATION_TASK_INFO`` are ``is_comm`` and named by their task type (``Notify_Wait`` …); other
  tasks without compute info are named by ``TASK.taskType`` (``EVENT_WAIT_SQE``, ``C_CORE_SQE`` …).
  ``COMMUNICATION_OP`` rows are appended as well (``is_comm`` True, ``task_type`` "", stream -1,
  like the Text loader's HCCL-op kernels) so operator comparison attributes HCCL ops to the torch
  op that launched them. Communication *tasks* keep ``op_row`` -1 so that an op's device time
  does not count both an HCCL op and its tasks.
* OPS / QUEUE / PYFUNCS — ``PYTORCH_API`` rows of ``ENUM_API_TYPE`` ``op`` / ``queue`` / ``trace``.
  ``PYTORCH_API.connectionId`` points at a *list* in ``CONNECTION_IDS``: an op keeps one row (its
  ``link`` is the first id of the list) and kernels are attached through the whole list.
  ``globalTid`` is ``pid << 32 | tid``; nesting is per ``globalTid``. Call stacks come from
  ``PYTORCH_CALLCHAINS`` when present.
* FWDBWD — connection ids shared by exactly two torch ops (forward → backward), as the reference.
* COMM_OPS / COMM_TASKS — ``COMMUNICATION_OP`` and ``COMMUNICATION_TASK_INFO`` ⋈ ``TASK``; a task
  belongs to the op with the same ``opId`` (and group).
* MEMORY / OP_MEMORY — ``MEMORY_RECORD`` / ``OP_MEMORY``; ``cann::`` allocations are re-timed to the
  enqueue of the dequeue that covers them, like the Text loader does.
* STEPS — ``STEP_TIME`` (falling back to ``ProfilerStep#N`` ops when the table is absent or empty).
* OP_STATISTIC — compute tasks grouped by (op type, core type), within the selected step.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
from ..model import (
    COMM_OPS,
    COMM_TASKS,
    FWDBWD,
    KERNELS,
    MEMORY,
    OP_MEMORY,
    OP_STATISTIC,
    OPS,
    PYFUNCS,
    QUEUE,
    STEPS,
    Profile,
    ProfileMeta,
    empty,
    frame,
)
from ..options import LoadOptions
from ..timeline import nest
from .common import assign_step, is_step_name, steps_from_ops
from .detect import SQLITE_MAGIC, Source

#: What the Db writes where an id is invalid (UINT32 max, torch_npu ``DB_INVALID_VALUE``).
INVALID_ID = 4294967295
#: ``TASK_PMU_INFO`` metric name → KERNELS column.
PMU_COLUMNS = {
    "aic_total_time": "aicore_us",
    "aic_mac_time": "mac_us",
    "aic_mte2_time": "mte2_us",
    "aiv_time": "aiv_us",
}
_PMU_NS_PER_US = 1000.0
_U32 = 0xFFFFFFFF

#: Kinds of fetched columns: int64 (NULL → -1), float64 (NULL → NaN), an interned string id
#: resolved through STRING_IDS (unknown → ''), plain text (NULL → '').
INT, FLOAT, SID, TEXT = "int", "float", "sid", "text"


class _Db:
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
        except sqlite3.Error as exc:
            raise InputError(path, f"cannot be read as an SQLite database ({exc})") from None
        self.tables = {str(r[0]) for r in rows}
        self._columns: dict[str, set[str]] = {}
        self._string_ids: pd.Index | None = None
        self._strings = np.array([""], dtype=object)

    def close(self) -> None:
        self.conn.close()

    def _execute(self, sql: str) -> list[tuple[object, ...]]:
        try:
            return self.conn.execute(sql).fetchall()
        except sqlite3.OperationalError as exc:
            # One non-UTF-8 string (a name copied from another machine) must not make the whole
            # profile unreadable: decode leniently from then on (only on this failure path, the
            # default decoder is the fast one).
            if not str(exc).startswith("Could not decode to UTF-8") or self.bad_text:
                raise InputError(self.path, f"is corrupted or unreadable ({exc})") from None
        except sqlite3.Error as exc:
            raise InputError(self.path, f"is corrupted or unreadable ({exc})") from None
        self.bad_text = True
        self.conn.text_factory = _lenient_text
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

    def fetch(self, sql: str, kinds: dict[str, str]) -> pd.DataFrame:
        """Run ``sql`` and return its columns (named and typed by ``kinds``, in SELECT order)."""
        rows = self._execute(sql)
        cells = np.empty((len(rows), len(kinds)), dtype=object)
        if rows:
            cells[:] = rows
        return pd.DataFrame({name: self._convert(cells[:, j], kind) for j, (name, kind) in enumerate(kinds.items())})

    def _convert(self, values: np.ndarray, kind: str) -> np.ndarray:
        if kind == INT:
            try:
                return values.astype(np.int64)
            except (TypeError, ValueError, OverflowError):
                return _in_int64(values)[0]
        if kind == FLOAT:
            return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)
        if kind == SID:
            return self._texts(values)
        return np.where(pd.isna(values), "", values)

    def _texts(self, values: np.ndarray) -> np.ndarray:
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
                ids, values = df["id"].to_numpy(np.int64), df["value"].fillna("").astype(str).to_numpy(object)
            self._string_ids = pd.Index(ids)
            self._strings = np.append(values, "").astype(object)
        return self._string_ids

    def string_ids(self, texts: list[str]) -> list[int]:
        """Ids under which ``texts`` are interned."""
        index = self._string_index()
        return [int(i) for i in index[np.isin(self._strings[:-1], texts)]]


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


class _Select:
    """One SELECT built only from the columns that exist (absent ones read as -1 / NaN / '')."""

    def __init__(self, db: _Db) -> None:
        self.db = db
        self.items: list[str] = []
        self.kinds: dict[str, str] = {}

    def col(self, alias: str, table: str, column: str, out: str, kind: str) -> _Select:
        if column not in self.db.columns(table):
            return self.expr({INT: "-1", SID: "-1"}.get(kind, "NULL"), out, kind)
        ref = f"{alias}.{column}"
        sql = {INT: f"COALESCE(CAST({ref} AS INTEGER), -1)", FLOAT: f"CAST({ref} AS REAL)",
               SID: f"COALESCE({ref}, -1)"}.get(kind, ref)
        return self.expr(sql, out, kind)

    def expr(self, sql: str, out: str, kind: str) -> _Select:
        self.items.append(f"{sql} AS {out}")
        self.kinds[out] = kind
        return self

    def fetch(self, tail: str) -> pd.DataFrame:
        """Run ``SELECT <items> <tail>`` (``tail`` = FROM/JOIN/WHERE/ORDER clauses)."""
        return self.db.fetch(f"SELECT {', '.join(self.items)} {tail}", self.kinds)


def load_npu_db(src: Source, opts: LoadOptions) -> Profile:
    """Read an NPU Db export into the profile model (see the module docstring for the mapping)."""
    assert src.db is not None, "an npu_db Source always names its database"
    path = src.db
    _check_header(path)
    db = _Db(path)
    try:
        return _load(db, src, opts)
    finally:
        db.close()


def _check_header(path: Path) -> None:
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


def _load(db: _Db, src: Source, opts: LoadOptions) -> Profile:
    notes = list(src.notes)
    wanted = ["TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "STEP_TIME"]
    if src.framework == "pytorch":
        wanted.append("PYTORCH_API")
    if opts.load_memory:
        wanted += ["MEMORY_RECORD", "OP_MEMORY"]
    absent = [t for t in wanted if t not in db.tables]
    if absent:
        notes.append(f"tables absent from the Db (their parts are empty): {', '.join(absent)}")

    apis = _read_apis(db, notes)
    conn_ids = _read_connection_ids(db)
    ops, op_conns = _ops(apis, conn_ids)
    pyfuncs = _pyfuncs(apis)
    queue = _queue(apis, conn_ids)

    steps = _steps(db, ops, notes)
    comm_ops = _comm_ops(db, steps)
    kernels = _kernels(db, comm_ops, op_conns, steps)
    comm_tasks = _comm_tasks(db, comm_ops, steps)
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    fwdbwd = _fwdbwd(ops, op_conns, kernels["link"].to_numpy())

    memory = _memory(db) if opts.load_memory else empty(MEMORY)
    op_memory = _op_memory(db, queue, notes) if opts.load_memory else empty(OP_MEMORY)

    has_pmu = db.any_rows("TASK_PMU_INFO")
    if not has_pmu and kernels["has_details"].any():
        notes.append("no TASK_PMU_INFO rows: Cube/Vector split falls back to the task type (Level0 export?)")
    rank, device = _rank_device(db, src.rank)
    meta = ProfileMeta(
        kind="npu_db",
        source=src.given,
        framework=src.framework,
        export="db",
        level=src.level,
        rank=rank,
        device=device,
        files_used=[str(db.path)],
        notes=notes,
        has_pmu=has_pmu,
        group_names=_group_names(db, notes),
        backward_tid=int(fwdbwd["end_tid"].iloc[0]) if len(fwdbwd) else -1,
    )
    if db.unmerged_wal:
        notes.append(f"{db.path.name}-wal holds changes not merged into the database (was the profiler "
                     "still running?); they are not read, the file is left untouched")
    reversed_rows = [f"{table} {n}" for table, n in db.ends_before_start.items() if n]
    if reversed_rows:
        notes.append(f"rows that end before they start are counted as 0 ns: {', '.join(reversed_rows)}")
    if db.bad_text:  # checked last: any query above may have met the first bad cell
        notes.append("some text in the Db is not valid UTF-8; shown with U+FFFD replacement characters")
    return Profile(
        meta=meta,
        kernels=kernels,
        ops=ops.drop(columns=["conn_ref"]),
        pyfuncs=pyfuncs,
        fwdbwd=fwdbwd,
        comm_ops=comm_ops.drop(columns=["op_id"]),
        comm_tasks=comm_tasks,
        memory=memory,
        op_memory=op_memory,
        queue=queue,
        op_statistic=_op_statistic(kernels, steps, opts.step),
        steps=steps,
    )


# ------------------------------------------------------------------------------------------ host


_API_INT = ("start_ns", "end_ns", "gtid", "conn_ref", "chain")
_API_TEXT = ("name", "input_dims", "input_types", "api_type", "call_stack")


def _no_apis() -> pd.DataFrame:
    return pd.DataFrame({**{c: pd.Series(dtype="int64") for c in _API_INT},
                         **{c: pd.Series(dtype=object) for c in _API_TEXT}})


def _read_apis(db: _Db, notes: list[str]) -> pd.DataFrame:
    """All ``PYTORCH_API`` rows with their API type name (no rows when the table is absent)."""
    if not db.has("PYTORCH_API", "startNs", "endNs", "type"):
        return _no_apis()
    if not db.has("ENUM_API_TYPE", "id", "name"):
        notes.append("PYTORCH_API present but ENUM_API_TYPE absent: host ops cannot be told apart, skipped")
        return _no_apis()
    api = "PYTORCH_API"
    apis = (_Select(db)
            .col("A", api, "startNs", "start_ns", INT).col("A", api, "endNs", "end_ns", INT)
            .col("A", api, "globalTid", "gtid", INT).col("A", api, "connectionId", "conn_ref", INT)
            .col("A", api, "name", "name", SID).col("A", api, "inputShapes", "input_dims", SID)
            .col("A", api, "inputDtypes", "input_types", SID).col("A", api, "callchainId", "chain", INT)
            .expr("E.name", "api_type", TEXT)
            .fetch("FROM PYTORCH_API AS A LEFT JOIN ENUM_API_TYPE AS E ON E.id = A.type "
                   "WHERE A.startNs IS NOT NULL AND A.endNs IS NOT NULL"))
    apis["call_stack"] = _call_stacks(db, apis["chain"])
    return apis


def _call_stacks(db: _Db, chain: pd.Series) -> pd.Series:
    """``PYTORCH_CALLCHAINS`` frames joined outermost-last with ';\\n' (as trace ``Call stack``)."""
    if chain.empty or not db.has("PYTORCH_CALLCHAINS", "id", "stack"):
        return pd.Series([""] * len(chain), index=chain.index, dtype=object)
    order = "C.id, C.stackDepth" if "stackDepth" in db.columns("PYTORCH_CALLCHAINS") else "C.id, C.rowid"
    frames = (_Select(db).col("C", "PYTORCH_CALLCHAINS", "id", "chain", INT)
              .col("C", "PYTORCH_CALLCHAINS", "stack", "frame", SID)
              .fetch(f"FROM PYTORCH_CALLCHAINS AS C ORDER BY {order}"))
    stacks = frames.groupby("chain", sort=False)["frame"].agg(";\n".join)
    return chain.map(stacks).fillna("")


def _read_connection_ids(db: _Db) -> pd.DataFrame | None:
    """``CONNECTION_IDS`` (list id → connection id) in table order; None when the table is absent,
    in which case ``PYTORCH_API.connectionId`` is taken as the connection id itself."""
    if not db.has("CONNECTION_IDS", "id", "connectionId"):
        return None
    df = (_Select(db).col("L", "CONNECTION_IDS", "id", "ref", INT)
          .col("L", "CONNECTION_IDS", "connectionId", "conn", INT)
          .fetch("FROM CONNECTION_IDS AS L ORDER BY L.rowid"))
    return df[(df["ref"] >= 0) & (df["conn"] >= 0) & (df["conn"] != INVALID_ID)].reset_index(drop=True)


def _first_conn(refs: pd.Series, conn_ids: pd.DataFrame | None) -> np.ndarray:
    """The first connection id of each list reference (-1 when none)."""
    refs = refs.where(refs != INVALID_ID, -1)
    if conn_ids is None:
        return refs.to_numpy(dtype="int64")
    first = conn_ids.groupby("ref", sort=False)["conn"].first()
    # An index lookup, not ``map``: a miss would turn the ids into float64 (rounding ids past
    # 2**53, and ids near 2**63 cannot come back to int64 at all).
    pos = first.index.get_indexer(refs.to_numpy(dtype="int64"))
    ids = first.to_numpy(dtype="int64")
    out = np.full(len(refs), -1, dtype="int64")
    out[pos >= 0] = ids[pos[pos >= 0]]
    return out


def _host_rows(apis: pd.DataFrame, api_type: str) -> pd.DataFrame:
    """Rows of one API type sorted by (start, longer first), with pid/tid and per-thread nesting."""
    df = apis[apis["api_type"] == api_type]
    df = df.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    gtid = df["gtid"].to_numpy(dtype="int64")
    df["pid"] = np.where(gtid >= 0, gtid >> 32, -1)
    df["tid"] = np.where(gtid >= 0, gtid & _U32, -1)
    df["parent"], df["depth"] = nest(gtid, df["start_ns"].to_numpy(), df["end_ns"].to_numpy())
    return df


def _ops(apis: pd.DataFrame, conn_ids: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OPS (plus a ``conn_ref`` helper column) and the (op_row, conn) pairs of every op."""
    df = _host_rows(apis, "op")
    ops = frame(OPS, {
        "name": df["name"], "cat": pd.Series(["op"] * len(df), dtype=object), "pid": df["pid"], "tid": df["tid"],
        "start_ns": df["start_ns"], "end_ns": df["end_ns"], "input_dims": df["input_dims"],
        "input_types": df["input_types"], "call_stack": df["call_stack"],
        "link": _first_conn(df["conn_ref"], conn_ids), "parent": df["parent"], "depth": df["depth"],
        "is_step": is_step_name(df["name"].astype(str)),
    }, n=len(df))
    ops["conn_ref"] = df["conn_ref"].to_numpy(dtype="int64")
    rows = pd.DataFrame({"op_row": np.arange(len(df), dtype="int64"), "ref": ops["conn_ref"]})
    rows = rows[(rows["ref"] >= 0) & (rows["ref"] != INVALID_ID)]
    if conn_ids is None:
        pairs = rows.rename(columns={"ref": "conn"})
    else:
        pairs = rows.merge(conn_ids, on="ref", how="inner")[["op_row", "conn"]]
    return ops, pairs.reset_index(drop=True)


def _pyfuncs(apis: pd.DataFrame) -> pd.DataFrame:
    df = _host_rows(apis, "trace")
    names = df["name"].astype(str)
    return frame(PYFUNCS, {
        "name": names, "pid": df["pid"], "tid": df["tid"], "start_ns": df["start_ns"], "end_ns": df["end_ns"],
        "is_module": names.str.lower().str.startswith("nn.module:"), "parent": df["parent"], "depth": df["depth"],
    }, n=len(df))


def _queue(apis: pd.DataFrame, conn_ids: pd.DataFrame | None) -> pd.DataFrame:
    """Enqueue/Dequeue rows; the correlation is the first connection id of the row's list, which
    is what torch_npu pairs an enqueue with its dequeue by."""
    df = apis[apis["api_type"] == "queue"].sort_values("start_ns", kind="stable")
    names = df["name"].astype(str)
    kind = np.select([names.str.startswith("Enqueue"), names.str.startswith("Dequeue")], ["enqueue", "dequeue"], "")
    df, kind = df[kind != ""], kind[kind != ""]
    return frame(QUEUE, {"kind": pd.Series(kind, dtype=object), "correlation": _first_conn(df["conn_ref"], conn_ids),
                         "start_ns": df["start_ns"], "end_ns": df["end_ns"]}, n=len(df))


def _fwdbwd(ops: pd.DataFrame, op_conns: pd.DataFrame, launch_ids: np.ndarray) -> pd.DataFrame:
    """Forward→backward pairs: a connection id carried by exactly two torch ops (the earlier one
    is the forward op), as the reference pairs them; ids that device tasks carry are launches,
    never forward→backward flows, whatever the number of ops holding them."""
    pairs = op_conns.drop_duplicates()
    pairs = pairs[~pairs["conn"].isin(launch_ids)]
    pairs = pairs[pairs.groupby("conn")["op_row"].transform("size") == 2]
    if pairs.empty:
        return empty(FWDBWD)
    start = ops["start_ns"].to_numpy()
    pairs = pairs.assign(start=start[pairs["op_row"].to_numpy()]).sort_values(["conn", "start"], kind="stable")
    fwd, bwd = pairs.groupby("conn").nth(0), pairs.groupby("conn").nth(1)
    f_rows, b_rows = fwd["op_row"].to_numpy(), bwd["op_row"].to_numpy()
    out = frame(FWDBWD, {
        "id": fwd["conn"], "start_ts_ns": start[f_rows], "start_tid": ops["tid"].to_numpy()[f_rows],
        "end_ts_ns": start[b_rows], "end_pid": ops["pid"].to_numpy()[b_rows], "end_tid": ops["tid"].to_numpy()[b_rows],
    })
    return out.sort_values(["start_ts_ns", "id"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------- device


def _steps(db: _Db, ops: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    if db.has("STEP_TIME", "id", "startNs", "endNs"):
        df = (_Select(db).col("S", "STEP_TIME", "id", "step", INT).col("S", "STEP_TIME", "startNs", "start_ns", INT)
              .col("S", "STEP_TIME", "endNs", "end_ns", INT).fetch("FROM STEP_TIME AS S ORDER BY S.startNs, S.id"))
        df = df[(df["step"] >= 0) & (df["start_ns"] >= 0)]
        if len(df):
            return frame(STEPS, {c: df[c] for c in STEPS})
    if ops["is_step"].any():
        notes.append("STEP_TIME absent or empty: steps taken from ProfilerStep#N ops")
        return steps_from_ops(ops["name"], ops["start_ns"], ops["end_ns"])
    return empty(STEPS)


def _kernels(db: _Db, comm_ops: pd.DataFrame, op_conns: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """TASK rows (with compute info, PMU and communication membership) plus the HCCL ops."""
    parts = _read_tasks(db)
    if len(comm_ops):  # HCCL ops are kernels too, so that host ops own the HCCL ops they launch
        parts = pd.concat([parts, pd.DataFrame({
            "name": comm_ops["name"], "op_type": comm_ops["op_type"], "task_type": "", "core": "", "stream": -1,
            "start_ns": comm_ops["start_ns"], "dur_ns": comm_ops["dur_ns"], "input_shapes": "", "input_dtypes": "",
            "link": comm_ops["link"], "is_comm": True, "in_trace": True, "has_details": False, "task_id": "",
            "comm_task": False,
        })], ignore_index=True)
    parts = parts.sort_values("start_ns", kind="stable").reset_index(drop=True)
    kernels = frame(KERNELS, {c: parts[c] for c in KERNELS if c in parts.columns}, n=len(parts))
    # Link to the launching op; with several candidates the latest-starting (innermost) op wins
    # (op rows are in start order, so that is the highest row).
    if len(op_conns) and len(kernels):
        by_conn = op_conns.sort_values("op_row", kind="stable").drop_duplicates("conn", keep="last")
        op_row = kernels["link"].map(by_conn.set_index("conn")["op_row"]).fillna(-1).astype("int64")
        kernels["op_row"] = op_row.where(~parts["comm_task"].to_numpy(dtype=bool), -1).to_numpy()
    kernels["step"] = assign_step(kernels["start_ns"].to_numpy(), steps)
    return kernels


def _read_tasks(db: _Db) -> pd.DataFrame:
    if not db.has("TASK", "globalTaskId", "startNs", "endNs"):
        return empty(KERNELS).drop(columns=["step", "op_row"]).assign(comm_task=pd.Series(dtype=bool))
    q = (_Select(db).col("T", "TASK", "globalTaskId", "gid", INT)
         .expr("T.startNs", "start_ns", INT).expr("T.endNs", "end_ns", INT)
         .col("T", "TASK", "streamId", "stream", INT).col("T", "TASK", "connectionId", "link", INT)
         .col("T", "TASK", "taskType", "task_type", SID))
    joins: list[str] = []
    if db.has("COMPUTE_TASK_INFO", "globalTaskId"):
        joins.append("LEFT JOIN COMPUTE_TASK_INFO AS C ON C.globalTaskId = T.globalTaskId")
        info = "COMPUTE_TASK_INFO"
        (q.expr("C.globalTaskId IS NOT NULL", "has_details", INT).col("C", info, "name", "compute_name", SID)
         .col("C", info, "opType", "op_type", SID).col("C", info, "taskType", "core", SID)
         .col("C", info, "inputShapes", "input_shapes", SID).col("C", info, "inputDataTypes", "input_dtypes", SID))
    else:
        q.expr("0", "has_details", INT)
        for out in ("compute_name", "op_type", "core", "input_shapes", "input_dtypes"):
            q.expr("-1", out, SID)
    if db.has("COMMUNICATION_TASK_INFO", "globalTaskId"):
        task_type = "MIN(taskType)" if "taskType" in db.columns("COMMUNICATION_TASK_INFO") else "NULL"
        joins.append(f"LEFT JOIN (SELECT globalTaskId, {task_type} AS taskType FROM COMMUNICATION_TASK_INFO "
                     "GROUP BY globalTaskId) AS M ON M.globalTaskId = T.globalTaskId")
        q.expr("M.globalTaskId IS NOT NULL", "is_comm", INT).expr("COALESCE(M.taskType, -1)", "comm_name", SID)
    else:
        q.expr("0", "is_comm", INT).expr("-1", "comm_name", SID)
    df = _durations(db, "TASK", q.fetch(f"FROM TASK AS T {' '.join(joins)} "
                                        "WHERE T.startNs IS NOT NULL AND T.endNs IS NOT NULL"))
    name = df["compute_name"].where(df["compute_name"] != "", df["comm_name"])
    df["name"] = name.where(name != "", df["task_type"])
    df["link"] = df["link"].where(df["link"] != INVALID_ID, -1)
    df["has_details"] = df["has_details"].astype(bool)
    df["is_comm"] = df["is_comm"].astype(bool)
    df["comm_task"] = df["is_comm"]  # dropped by frame(); keeps HCCL tasks off their op (see _kernels)
    df["in_trace"] = True
    gid = df["gid"].to_numpy(dtype="int64")
    df["task_id"] = np.where(gid >= 0, gid.astype(str), "")
    pmu = _pmu(db)
    if pmu is not None:
        aligned = pmu.reindex(gid)
        for col in pmu.columns:
            df[col] = aligned[col].to_numpy() / _PMU_NS_PER_US
    return df.drop(columns=["gid", "compute_name", "comm_name"])


def _durations(db: _Db, table: str, df: pd.DataFrame) -> pd.DataFrame:
    """``start_ns``/``end_ns`` → ``start_ns``/``dur_ns``. A time that is not an integer (text,
    a BLOB, beyond int64) drops the row, as NULL does; an end before the start gives duration 0
    and is counted per table for a note (the first read of a table counts it)."""
    df = df[(df["start_ns"] >= 0) & (df["end_ns"] >= 0)].reset_index(drop=True)
    dur = df["end_ns"].to_numpy() - df["start_ns"].to_numpy()
    db.ends_before_start.setdefault(table, int((dur < 0).sum()))
    df["dur_ns"] = np.maximum(dur, 0)
    return df.drop(columns=["end_ns"])


def _pmu(db: _Db) -> pd.DataFrame | None:
    """``TASK_PMU_INFO`` pivoted in SQL to one row per task (index globalTaskId, KERNELS column
    names, raw values); None when the table is absent. Metric names are matched by their interned
    ids (or inline text), so the pivot needs no per-row STRING_IDS look-up."""
    if not db.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        return None
    q = _Select(db).col("P", "TASK_PMU_INFO", "globalTaskId", "gid", INT)
    for name, col in PMU_COLUMNS.items():
        keys = ", ".join([str(i) for i in db.string_ids([name])] + [f"'{name}'"])
        q.expr(f"MAX(CASE WHEN P.name IN ({keys}) THEN CAST(P.value AS REAL) END)", col, FLOAT)
    wide = q.fetch("FROM TASK_PMU_INFO AS P GROUP BY P.globalTaskId")
    return wide.set_index("gid")


def _comm_ops(db: _Db, steps: pd.DataFrame) -> pd.DataFrame:
    """COMM_OPS plus an ``op_id`` helper column (used to attach tasks)."""
    if not db.has("COMMUNICATION_OP", "startNs", "endNs"):
        out = empty(COMM_OPS)
        out["op_id"] = pd.Series(dtype="int64")
        return out
    op = "COMMUNICATION_OP"
    df = (_Select(db).col("O", op, "opName", "name", SID).col("O", op, "opType", "op_type", SID)
          .col("O", op, "groupName", "grp", SID).col("O", op, "opId", "op_id", INT)
          .col("O", op, "connectionId", "link", INT)
          .expr("O.startNs", "start_ns", INT).expr("O.endNs", "end_ns", INT)
          .fetch("FROM COMMUNICATION_OP AS O WHERE O.startNs IS NOT NULL AND O.endNs IS NOT NULL ORDER BY O.rowid"))
    df = _durations(db, op, df).sort_values("start_ns", kind="stable").reset_index(drop=True)
    df["link"] = df["link"].where(df["link"] != INVALID_ID, -1)
    out = frame(COMM_OPS, {
        "name": df["name"], "op_type": df["op_type"], "group": df["grp"], "start_ns": df["start_ns"],
        "dur_ns": df["dur_ns"], "link": df["link"], "step": assign_step(df["start_ns"].to_numpy(), steps),
    }, n=len(df))
    out["op_id"] = df["op_id"].to_numpy(dtype="int64")
    return out


def _comm_tasks(db: _Db, comm_ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    if not (db.has("COMMUNICATION_TASK_INFO", "globalTaskId") and db.has("TASK", "globalTaskId", "startNs", "endNs")):
        return empty(COMM_TASKS)
    info = "COMMUNICATION_TASK_INFO"
    df = (_Select(db).col("I", info, "taskType", "name", SID).col("I", info, "groupName", "grp", SID)
          .col("I", info, "planeId", "plane_order", INT).col("I", info, "opId", "op_id", INT)
          .expr("T.startNs", "start_ns", INT).expr("T.endNs", "end_ns", INT)
          .fetch("FROM COMMUNICATION_TASK_INFO AS I JOIN TASK AS T ON T.globalTaskId = I.globalTaskId "
                 "WHERE T.startNs IS NOT NULL AND T.endNs IS NOT NULL"))
    df = _durations(db, "TASK", df).sort_values("start_ns", kind="stable").reset_index(drop=True)
    plane = df["plane_order"].astype(str).where(df["plane_order"] >= 0, "")
    return frame(COMM_TASKS, {
        "name": df["name"], "group": df["grp"], "plane": plane, "plane_order": df["plane_order"],
        "start_ns": df["start_ns"], "dur_ns": df["dur_ns"], "op_row": _task_op_rows(df, comm_ops),
        "step": assign_step(df["start_ns"].to_numpy(), steps),
    }, n=len(df))


def _task_op_rows(tasks: pd.DataFrame, comm_ops: pd.DataFrame) -> np.ndarray:
    """Row of the comm op each task belongs to: same (opId, group); failing that, the only op with
    that opId (groups can be spelt differently on ops and tasks in some exports)."""
    out = np.full(len(tasks), -1, dtype="int64")
    if tasks.empty or comm_ops.empty:
        return out
    ops = pd.DataFrame({"op_id": comm_ops["op_id"].to_numpy(), "grp": comm_ops["group"].astype(str).to_numpy(),
                        "row": np.arange(len(comm_ops), dtype="int64")})
    ops = ops[ops["op_id"] >= 0]
    keys = pd.DataFrame({"op_id": tasks["op_id"].to_numpy(), "grp": tasks["grp"].astype(str).to_numpy()})
    exact = keys.merge(ops.drop_duplicates(["op_id", "grp"]), on=["op_id", "grp"], how="left")["row"]
    unique = ops[~ops["op_id"].duplicated(keep=False)].set_index("op_id")["row"]
    by_id = keys["op_id"].map(unique)
    return exact.fillna(by_id).fillna(-1).to_numpy(dtype="int64")


# ---------------------------------------------------------------------------------------- memory


def _memory(db: _Db) -> pd.DataFrame:
    if not db.has("MEMORY_RECORD", "timestamp", "totalReserved"):
        return empty(MEMORY)
    rec = "MEMORY_RECORD"
    df = (_Select(db).expr("M.timestamp", "ts_ns", INT).col("M", rec, "component", "component", SID)
          .col("M", rec, "deviceId", "device", INT).col("M", rec, "totalReserved", "total_reserved_bytes", INT)
          .col("M", rec, "totalAllocated", "total_allocated_bytes", INT)
          .fetch("FROM MEMORY_RECORD AS M WHERE M.timestamp IS NOT NULL ORDER BY M.timestamp, M.rowid"))
    return frame(MEMORY, {c: df[c] for c in MEMORY}, n=len(df))


def _op_memory(db: _Db, queue: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """OP_MEMORY rows, as the Text loader reads operator_memory.csv: ``cann::`` allocations happen
    on the device-side dequeue thread, so they are placed at the enqueue (host side) of the dequeue
    covering their allocation time and keep their name; other records are placed at their
    allocation and take the name of the op they land in (name ''). Rows without an allocation
    time cannot be placed and are dropped."""
    if not db.has("OP_MEMORY", "size", "allocationTime"):
        return empty(OP_MEMORY)
    mem = "OP_MEMORY"
    df = (_Select(db).col("O", mem, "name", "name", SID).col("O", mem, "size", "size_bytes", INT)
          .col("O", mem, "allocationTime", "alloc_ns", INT).col("O", mem, "releaseTime", "release_ns", INT)
          .fetch("FROM OP_MEMORY AS O ORDER BY O.rowid"))
    unplaced = int((df["alloc_ns"] <= 0).sum())
    df = df[df["alloc_ns"] > 0].sort_values("alloc_ns", kind="stable").reset_index(drop=True)
    df["release_ns"] = df["release_ns"].where(df["release_ns"] > 0, -1)
    place = df["alloc_ns"].to_numpy(dtype="int64").copy()
    cann = df["name"].astype(str).str.contains("cann::", regex=False).to_numpy()
    if cann.any():
        placed, ok = _enqueue_time(queue, place[cann])
        place[cann] = placed
        keep = np.ones(len(df), dtype=bool)
        keep[np.flatnonzero(cann)[~ok]] = False
        unplaced += int((~ok).sum())
        df, place = df[keep].reset_index(drop=True), place[keep]
    if unplaced:
        notes.append(f"{unplaced} OP_MEMORY rows dropped: no allocation time, or a cann:: allocation "
                     "outside every Dequeue")
    names = df["name"].where(df["name"].astype(str).str.contains("cann::", regex=False), "")
    return frame(OP_MEMORY, {"name": names, "size_bytes": df["size_bytes"], "place_ns": place,
                             "alloc_ns": df["alloc_ns"], "release_ns": df["release_ns"]}, n=len(df))


def _enqueue_time(queue: pd.DataFrame, alloc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Enqueue start of the dequeue that starts last at or before each time and still covers it;
    returns (times, found mask). Only enqueue/dequeue pairs sharing a correlation count."""
    enq = queue[queue["kind"] == "enqueue"].drop_duplicates("correlation")
    deq = queue[queue["kind"] == "dequeue"].drop_duplicates("correlation")
    pairs = deq.merge(enq[["correlation", "start_ns"]], on="correlation", suffixes=("", "_enq"))
    pairs = pairs.sort_values("start_ns", kind="stable")
    starts, ends = pairs["start_ns"].to_numpy(), pairs["end_ns"].to_numpy()
    idx = np.searchsorted(starts, alloc, side="right") - 1
    ok = idx >= 0
    ok[ok] = alloc[ok] <= ends[idx[ok]]
    out = np.full(len(alloc), -1, dtype="int64")
    out[ok] = pairs["start_ns_enq"].to_numpy()[idx[ok]]
    return out, ok


# ------------------------------------------------------------------------------------ statistics


def _op_statistic(kernels: pd.DataFrame, steps: pd.DataFrame, step: int | None) -> pd.DataFrame:
    """Compute tasks grouped by (op type, core type), like the reference's Db KernelTypeCompare:
    unlike ``op_statistic.csv`` of a Text export, the Db statistic honours the selected step."""
    k = kernels[kernels["has_details"]]
    if step is not None:
        window = steps[steps["step"] == step]
        if len(window):  # an unknown step is reported by the step filter itself
            lo, hi = int(window["start_ns"].iloc[0]), int(window["end_ns"].iloc[0])
            k = k[(k["start_ns"] >= lo) & (k["start_ns"] <= hi)]
    if k.empty:
        return empty(OP_STATISTIC)
    dur_us = (k["dur_ns"] / 1000.0).rename("dur")
    g = dur_us.groupby([k["op_type"].astype(str), k["core"].astype(str)], sort=False)
    stats = g.agg(["size", "sum", "mean", "max", "min"]).reset_index()
    stats.columns = ["op_type", "core_type", "count", "total_us", "avg_us", "max_us", "min_us"]
    return frame(OP_STATISTIC, {c: stats[c] for c in OP_STATISTIC})


# ------------------------------------------------------------------------------------------ meta


def _rank_device(db: _Db, rank_from_name: int | None) -> tuple[int | None, int | None]:
    """Rank and device: ``RANK_DEVICE_MAP`` when present (rank -1 there means "not distributed"),
    else the rank in the file name and the device of the first task."""
    rank, device = rank_from_name, None
    if db.has("RANK_DEVICE_MAP", "rankId", "deviceId"):
        row = (_Select(db).col("R", "RANK_DEVICE_MAP", "rankId", "rank", INT)
               .col("R", "RANK_DEVICE_MAP", "deviceId", "device", INT).fetch("FROM RANK_DEVICE_MAP AS R LIMIT 1"))
        if len(row):
            r, d = int(row["rank"].iloc[0]), int(row["device"].iloc[0])
            rank = r if r >= 0 else rank
            device = d if d >= 0 else None
    if device is None and db.has("TASK", "deviceId"):
        row = _Select(db).col("T", "TASK", "deviceId", "device", INT).fetch("FROM TASK AS T LIMIT 1")
        if len(row) and int(row["device"].iloc[0]) >= 0:
            device = int(row["device"].iloc[0])
    return rank, device


def group_hash(group_id: str) -> str:
    """The name HCCL gives a communication group in Db exports: two 32-bit polynomial string
    hashes (bases 29 and 131) packed into one 64-bit number, in decimal."""
    high = low = 0
    for ch in group_id:
        high = (high * 29 + ord(ch)) & _U32
        low = (low * 131 + ord(ch)) & _U32
    return str(high << 32 | low)


def _group_names(db: _Db, notes: list[str]) -> dict[str, str]:
    """Process-group names (dp, tp …) from ``META_DATA.parallel_group_info``, keyed by the group id
    and by its hashed form (the spelling ``COMMUNICATION_OP.groupName`` uses)."""
    if not db.has("META_DATA", "name", "value"):
        return {}
    rows = _Select(db).col("D", "META_DATA", "value", "value", TEXT).fetch(
        "FROM META_DATA AS D WHERE D.name = 'parallel_group_info'")
    if rows.empty:
        return {}
    try:
        info = orjson.loads(str(rows["value"].iloc[0]))
    except orjson.JSONDecodeError:
        notes.append("META_DATA parallel_group_info is not valid JSON: group names unknown")
        return {}
    out: dict[str, str] = {}
    if isinstance(info, dict):
        for group_id, item in info.items():
            pg = item.get("group_name") if isinstance(item, dict) else None
            if isinstance(pg, str) and pg:
                out[str(group_id)] = pg
                out[group_hash(str(group_id))] = pg
    return out


def step_ids(path: Path) -> list[int] | None:
    """The step ids the loader will find in ``STEP_TIME`` (one cheap query, no table loaded), or
    None when the steps come from elsewhere (no ``STEP_TIME`` rows: ``ProfilerStep#N`` ops).

    Lets a requested ``--base-step`` / ``--comparison-step`` fail before the app's screen opens.
    """
    _check_header(path)
    db = _Db(path)
    try:
        if not db.has("STEP_TIME", "id", "startNs", "endNs"):
            return None
        rows = db._execute('SELECT DISTINCT id FROM STEP_TIME WHERE id >= 0 AND startNs >= 0 ORDER BY id')
        ids = [i for (i,) in rows if isinstance(i, int)]
        return ids or None
    finally:
        db.close()
