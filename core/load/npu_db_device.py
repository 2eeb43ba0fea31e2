"""Db export, device side: ``TASK`` ⟕ ``COMPUTE_TASK_INFO`` ⟕ ``TASK_PMU_INFO``, ``COMMUNICATION_OP`` and
``COMMUNICATION_TASK_INFO`` → KERNELS, COMM_OPS, COMM_TASKS and OP_STATISTIC tables."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import as_text, one_text
from ..model import COMM_OPS, COMM_TASKS, KERNELS, OP_STATISTIC, empty, frame
from ..text_codes import among
from .common import assign_step, hccl_op_types
from .npu_db_launch import launching_ops
from .npu_db_sql import FLOAT, INT, INVALID_ID, NA, SID, Db, Select, table
from .shapes import normalise_shapes

#: ``TASK_PMU_INFO`` metric name → KERNELS column.
PMU_COLUMNS = {
    "aic_total_time": "aicore_us",
    "aic_mac_time": "mac_us",
    "aic_mte2_time": "mte2_us",
    "aiv_time": "aiv_us",
}
_PMU_NS_PER_US = 1000.0


@dataclass
class TaskRows:
    """The ``TASK`` rows as read, before any row is dropped, with their compute info and
    communication membership (:func:`read_task_rows`); and ``COMMUNICATION_TASK_INFO`` joined
    with them as COMM_TASKS reads it, where one scan of that table read it (None:
    :func:`communication_tasks` joins in SQL).

    Read once for both tables that need them: KERNELS (:func:`device_kernels`) takes the TASK
    rows (:meth:`take`) so that they are freed once cut (≈ 60 MB for the 486k tasks of one side
    of the 32×92 Db pair); only the joined columns wait for COMM_TASKS."""

    table: pd.DataFrame | None  # None: TASK lacks its id or times
    comm: dict[str, np.ndarray] | None = None

    def take(self) -> pd.DataFrame | None:
        """The TASK rows, which this no longer holds."""
        table, self.table = self.table, None
        return table


def read_task_rows(db: Db) -> TaskRows:
    """The :class:`TaskRows` of the Db: joined in numpy where :func:`_tasks_joined_here` can,
    else by SQLite."""
    if not db.has("TASK", "globalTaskId", "startNs", "endNs"):
        return TaskRows(None)
    q = (Select(db).col("T", "TASK", "globalTaskId", "gid", INT)
         .expr("T.startNs", "start_ns", INT).expr("T.endNs", "end_ns", INT)
         .col("T", "TASK", "streamId", "stream", INT).col("T", "TASK", "connectionId", "link", INT)
         .col("T", "TASK", "taskType", "task_type", SID).col("T", "TASK", "taskId", "hw_task", INT)
         .col("T", "TASK", "contextId", "context", INT))
    here = _tasks_joined_here(db, q)
    if here is None:
        return TaskRows(_tasks_joined_in_sql(db, q))
    tasks, info = here
    return TaskRows(tasks, None if info is None else _comm_joined(tasks, info))


def device_kernels(db: Db, tasks: TaskRows, comm_ops: pd.DataFrame, ops: pd.DataFrame, op_conns: pd.DataFrame,
                   queue: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """TASK rows (with compute info, PMU and communication membership) plus the HCCL ops, each
    linked to the op that launched it (:func:`~.npu_db_launch.launching_ops`)."""
    parts = _read_tasks(db, tasks.take())
    if len(comm_ops):  # HCCL ops are kernels too, so that host ops own the HCCL ops they launch
        parts = pd.concat([parts, pd.DataFrame({
            "name": comm_ops["name"], "op_type": comm_ops["op_type"], "task_type": "", "core": "", "stream": -1,
            "start_ns": comm_ops["start_ns"], "dur_ns": comm_ops["dur_ns"], "input_shapes": "", "input_dtypes": "",
            "link": comm_ops["link"], "is_comm": True, "in_trace": True, "has_details": False, "task_id": -1,
            "comm_task": False,
        })], ignore_index=True)
    parts = parts.sort_values("start_ns", kind="stable").reset_index(drop=True)
    kernels = frame(KERNELS, {c: parts[c] for c in KERNELS if c in parts.columns}, n=len(parts))
    # HCCL tasks stay off their op: it owns them through their COMMUNICATION_OP row.
    eligible = ~parts["comm_task"].to_numpy(dtype=bool)
    kernels["op_row"] = launching_ops(db, kernels, eligible, ops, op_conns, queue)
    kernels["step"] = assign_step(kernels["start_ns"].to_numpy(), steps)
    return kernels


def _read_tasks(db: Db, df: pd.DataFrame | None) -> pd.DataFrame:
    if df is None:
        return empty(KERNELS).drop(columns=["step", "op_row"]).assign(comm_task=pd.Series(dtype=bool))
    df = durations(db, "TASK", df)
    df = df[~_containers(df)].reset_index(drop=True)
    df["input_shapes"] = normalise_shapes(df["input_shapes"])
    for col in ("op_type", "core", "input_dtypes"):  # level 0 writes N/A; the model keeps "" (as Text)
        df[col] = df[col].where(~_is(df[col], NA), "")
    comm_name = df["comm_name"].where(~_is(df["comm_name"], NA), "")  # level 0 writes no task names
    name = df["compute_name"].where(~_is(df["compute_name"], ""), comm_name)
    df["name"] = name.where(~_is(name, ""), df["task_type"])
    df["link"] = df["link"].where(df["link"] != INVALID_ID, -1)
    df["has_details"] = df["has_details"].astype(bool)
    df["is_comm"] = df["is_comm"].astype(bool)
    df["comm_task"] = df["is_comm"]  # dropped by frame(); keeps HCCL tasks off their op (see device_kernels)
    df["in_trace"] = True
    gid = df["gid"].to_numpy(dtype="int64")
    df["task_id"] = np.where(gid >= 0, gid, -1)
    pmu = _pmu(db)
    if pmu is not None:
        aligned = pmu.reindex(gid)
        for col in pmu.columns:
            df[col] = aligned[col].to_numpy() / _PMU_NS_PER_US
    return df.drop(columns=["gid", "compute_name", "comm_name", "hw_task", "context"])


#: The ``COMPUTE_TASK_INFO`` columns of a task: (Db column, fetched name).
_COMPUTE_COLUMNS = (("name", "compute_name"), ("opType", "op_type"), ("taskType", "core"),
                    ("inputShapes", "input_shapes"), ("inputDataTypes", "input_dtypes"))
_TASKS_WHERE = "WHERE T.startNs IS NOT NULL AND T.endNs IS NOT NULL"


def _comm_task_type(db: Db) -> str:
    """A communication task's type as the task query reads it (the least of its rows')."""
    return "MIN(taskType)" if "taskType" in db.columns("COMMUNICATION_TASK_INFO") else "NULL"


def _tasks_joined_in_sql(db: Db, q: Select) -> pd.DataFrame:
    """The TASK rows with their compute info and communication membership, joined by SQLite
    (any Db: the reference for :func:`_tasks_joined_here`)."""
    joins: list[str] = []
    if db.has("COMPUTE_TASK_INFO", "globalTaskId"):
        joins.append("LEFT JOIN COMPUTE_TASK_INFO AS C ON C.globalTaskId = T.globalTaskId")
        q.expr("C.globalTaskId IS NOT NULL", "has_details", INT)
        for column, out in _COMPUTE_COLUMNS:
            q.col("C", "COMPUTE_TASK_INFO", column, out, SID)
    else:
        q.expr("0", "has_details", INT)
        for _, out in _COMPUTE_COLUMNS:
            q.expr("-1", out, SID)
    if db.has("COMMUNICATION_TASK_INFO", "globalTaskId"):
        joins.append(f"LEFT JOIN (SELECT globalTaskId, {_comm_task_type(db)} AS taskType FROM COMMUNICATION_TASK_INFO "
                     "GROUP BY globalTaskId) AS M ON M.globalTaskId = T.globalTaskId")
        q.expr("M.globalTaskId IS NOT NULL", "is_comm", INT).expr("COALESCE(M.taskType, -1)", "comm_name", SID)
    else:
        q.expr("0", "is_comm", INT).expr("-1", "comm_name", SID)
    return q.fetch(f"FROM TASK AS T {' '.join(joins)} {_TASKS_WHERE}")


def _tasks_joined_here(db: Db, q: Select) -> tuple[pd.DataFrame, CommScan | None] | None:
    """What :func:`_tasks_joined_in_sql` gives, from three queries of one table each joined on
    their integer task ids in numpy, with the scan of ``COMMUNICATION_TASK_INFO`` when it was
    one (:func:`_comm_info`); None (the SQL join then runs) unless every id and id-typed cell
    read is an integer and the compute rows' task ids are distinct.

    Why: SQLite's two joins were two thirds of the task query (1.4 s of CPU for the 486k tasks of
    one side of the 32×92 Db pair; the three tables alone 0.6 s). The conditions make the result
    the same as the SQL join's: with integers on both sides SQLite's ``=`` is integer equality,
    and distinct compute ids mean a task matches at most one compute row, as the left join would
    (the communication rows are grouped by id in SQL, as before). The task rows come in the order
    of one scan of ``TASK``, as in the joined query, whose outer loop ``TASK`` is.
    """
    # The task id as stored (not cast): a NULL, text or real one refuses the integer fetch.
    tasks = db.scan_columns(f"SELECT T.globalTaskId AS gid, {', '.join(q.items[1:])} FROM TASK AS T {_TASKS_WHERE}",
                           list(q.kinds))
    if tasks is None:
        return None
    gid = tasks["gid"]
    out: dict[str, np.ndarray] = {name: values if q.kinds[name] == INT else db.texts(values)
                                  for name, values in tasks.items()}
    absent = db.texts(np.array([-1], dtype=np.int64))[0]  # what an unmatched id reads as (COALESCE … -1)
    if db.has("COMPUTE_TASK_INFO", "globalTaskId"):
        c = Select(db)
        for column, name in _COMPUTE_COLUMNS:
            c.col("C", "COMPUTE_TASK_INFO", column, name, SID)
        info = db.scan_columns(f"SELECT C.globalTaskId AS gid, {', '.join(c.items)} FROM COMPUTE_TASK_INFO AS C",
                              ["gid", *c.kinds])
        if info is None:
            return None
        index = pd.Index(info["gid"])
        if not index.is_unique:
            return None
        pos = index.get_indexer(gid)
        out["has_details"] = (pos >= 0).astype(np.int64)
        for _, name in _COMPUTE_COLUMNS:
            out[name] = np.append(db.texts(info[name]), absent)[pos]
    else:
        out["has_details"] = np.zeros(len(gid), dtype=np.int64)
        for _, name in _COMPUTE_COLUMNS:
            out[name] = np.full(len(gid), one_text(absent))
    info = None
    if db.has("COMMUNICATION_TASK_INFO", "globalTaskId"):
        info = _comm_info(db)
        comm = _least_type_per_task(info.columns) if info is not None else db.int_columns(
            f"SELECT globalTaskId AS gid, COALESCE({_comm_task_type(db)}, -1) AS comm_name "
            "FROM COMMUNICATION_TASK_INFO GROUP BY globalTaskId", ["gid", "comm_name"])
        if comm is None:
            return None
        pos = pd.Index(comm["gid"]).get_indexer(gid)
        out["is_comm"] = (pos >= 0).astype(np.int64)
        out["comm_name"] = np.append(db.texts(comm["comm_name"]), absent)[pos]
    else:
        out["is_comm"] = np.zeros(len(gid), dtype=np.int64)
        out["comm_name"] = np.full(len(gid), one_text(absent))
    return table(out), info


#: ``COMMUNICATION_TASK_INFO``'s columns as :func:`communication_tasks` reads them: (Db column,
#: name); an absent column reads as -1, as :class:`Select` reads it.
_COMM_INFO_COLUMNS = (("globalTaskId", "gid"), ("taskType", "name"), ("groupName", "grp"),
                      ("planeId", "plane_order"), ("opId", "op_id"))


@dataclass(frozen=True)
class CommScan:
    """The columns of ``COMMUNICATION_TASK_INFO`` that the tasks' communication membership and
    COMM_TASKS read (:data:`_COMM_INFO_COLUMNS`), from one scan of the table, as stored."""

    columns: dict[str, np.ndarray]
    order: str  # the order SQLite's join of the table with TASK gives its rows (:func:`_join_order`)


def _comm_info(db: Db) -> CommScan | None:
    """The :class:`CommScan` of the Db: None when a cell is not an integer (a NULL among them)
    or the SQL join's order is not one :func:`_comm_joined` can give.

    Why: the table was read twice, grouped by task id and joined with ``TASK`` (a B-tree search
    per row): 0.43 s of CPU for the 357k rows of one side of the 32×92 Db pair, against 0.16 s
    for one scan."""
    order = _join_order(db)
    if order is None:
        return None
    have = db.columns("COMMUNICATION_TASK_INFO")
    items = ", ".join(f"I.{column} AS {name}" if column in have else f"-1 AS {name}"
                      for column, name in _COMM_INFO_COLUMNS)
    info = db.scan_columns(f"SELECT {items} FROM COMMUNICATION_TASK_INFO AS I",
                           [name for _, name in _COMM_INFO_COLUMNS])
    return None if info is None else CommScan(info, order)


def _join_order(db: Db) -> str | None:
    """The order of the SQL join's rows (:func:`_comm_join`), read from SQLite's plan for it:
    ``"I"`` where it scans ``COMMUNICATION_TASK_INFO`` and looks each row's task up by the
    ``TASK`` row id (an INTEGER PRIMARY KEY task id: the project's generated Dbs), ``"T"``
    where it scans ``TASK`` and looks each task's rows up in an index of the task id alone
    (torch_npu's ``CommunicationTaskIndex``: rows of one task in their table order); None for
    any other plan."""
    plan = [str(row[-1]) for row in db.rows(f"EXPLAIN QUERY PLAN {_comm_join(db)}")]
    if len(plan) != 2:
        return None
    if plan[0] in ("SCAN I", "SCAN TABLE COMMUNICATION_TASK_INFO AS I") \
            and plan[1].startswith("SEARCH T USING INTEGER PRIMARY KEY"):
        return "I"
    searched = re.fullmatch(r"SEARCH (?:TABLE COMMUNICATION_TASK_INFO AS )?I USING (?:COVERING )?INDEX (\w+) "
                            r"\(globalTaskId=\?\)", plan[1])
    if plan[0] in ("SCAN T", "SCAN TABLE TASK AS T") and searched:
        keys = [str(row[2]) for row in db.rows(f'PRAGMA index_info("{searched.group(1)}")')]
        return "T" if keys == ["globalTaskId"] else None
    return None


def _least_type_per_task(info: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``SELECT globalTaskId, MIN(taskType) … GROUP BY globalTaskId`` of the scanned rows (all
    integers, so SQLite's MIN is the integers' least)."""
    order = np.lexsort((info["name"], info["gid"]))
    gid = info["gid"][order]
    first = np.ones(len(gid), dtype=bool)
    first[1:] = gid[1:] != gid[:-1]
    return {"gid": gid[first], "comm_name": info["name"][order][first]}


def _is(column: pd.Series, *texts: str) -> np.ndarray:
    """Which cells of a fetched text column are one of ``texts``: tested once per distinct
    object (:func:`~perfcmp_core.text_codes.among`; the Db's texts are one object per interned
    string), where comparing every cell of a 486k-row column took 25 ms."""
    return among(column.to_numpy(dtype=object), frozenset(texts))


def _containers(tasks: pd.DataFrame) -> np.ndarray:
    """Mask of the TASK rows that only frame other rows: a task without a context id whose
    (stream, task id) is shared by tasks *with* a context id that start inside its span.

    An FFTS+ / mixed-core launch (``MIX_AIV`` ReduceSum: a 22.9 µs ``AI_CORE`` row around its
    20.4 µs sub-task) and every HCCL op (an ``AI_CORE`` row of the op's full duration around its
    Notify/SDMA/Write tasks, carrying the op's connection id) are recorded this way. The frame
    is no work of its own: its sub-tasks and the ``COMMUNICATION_OP`` row already hold that time,
    and the Text export of the same run has no such row. Counting it doubled every HCCL op in its
    launching op's device time (AccumulateGrad 204 ms on the real level-1 Db, 106 ms in Text).
    Task ids wrap around, hence the time test rather than the (stream, task id) key alone.
    """
    ctx = tasks["context"].to_numpy()
    framed = (ctx >= 0) & (ctx != INVALID_ID)
    out = np.zeros(len(tasks), dtype=bool)
    if not framed.any():
        return out
    start, end = tasks["start_ns"].to_numpy(), tasks["start_ns"].to_numpy() + tasks["dur_ns"].to_numpy()
    keys = ["stream", "hw_task"]
    frames = tasks.loc[~framed, keys].assign(start_ns=start[~framed], row=np.flatnonzero(~framed))
    inner = tasks.loc[framed, keys].assign(start_ns=start[framed])
    # The latest frame of the same (stream, task id) starting at or before each sub-task; only
    # row numbers travel through the as-of join (a miss makes a column float64).
    hit = pd.merge_asof(inner.sort_values("start_ns", kind="stable"), frames.sort_values("start_ns", kind="stable"),
                        on="start_ns", by=keys, direction="backward")
    hit = hit[hit["row"].notna()]
    rows = hit["row"].to_numpy(dtype="int64")
    out[rows[hit["start_ns"].to_numpy(dtype="int64") <= end[rows]]] = True
    return out


def durations(db: Db, table: str, df: pd.DataFrame) -> pd.DataFrame:
    """``start_ns``/``end_ns`` → ``start_ns``/``dur_ns``. A time that is not an integer (text,
    a BLOB, beyond int64) drops the row, as NULL does; an end before the start gives duration 0
    and is counted per table for a note (the first read of a table counts it)."""
    df = df[(df["start_ns"] >= 0) & (df["end_ns"] >= 0)].reset_index(drop=True)
    dur = df["end_ns"].to_numpy() - df["start_ns"].to_numpy()
    db.ends_before_start.setdefault(table, int((dur < 0).sum()))
    df["dur_ns"] = np.maximum(dur, 0)
    return df.drop(columns=["end_ns"])


def _pmu(db: Db) -> pd.DataFrame | None:
    """``TASK_PMU_INFO`` pivoted to one row per task (index globalTaskId, KERNELS column names,
    raw values); None when the table is absent. Metric names are matched by their interned ids
    (or inline text), so the pivot needs no per-row STRING_IDS look-up."""
    if not db.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        return None
    ids = {name: db.string_ids([name]) for name in PMU_COLUMNS}
    wide = _pmu_pivoted_here(db, ids)
    if wide is not None:
        return wide
    q = Select(db).col("P", "TASK_PMU_INFO", "globalTaskId", "gid", INT)
    for name, col in PMU_COLUMNS.items():
        keys = ", ".join([str(i) for i in ids[name]] + [f"'{name}'"])
        q.expr(f"MAX(CASE WHEN P.name IN ({keys}) THEN CAST(P.value AS REAL) END)", col, FLOAT)
    wide = q.fetch("FROM TASK_PMU_INFO AS P GROUP BY P.globalTaskId")
    return wide.set_index("gid")


def _pmu_pivoted_here(db: Db, ids: dict[str, list[int]]) -> pd.DataFrame | None:
    """The SQL pivot of :func:`_pmu` made in numpy from the table's three columns; None (the SQL
    pivot then runs) unless every id and name is an integer and every value a number.

    Why: the pivot came back as a Python float per cell (0.6 s of CPU for the 641k rows of one
    side of the 32×92 Db pair; its three columns: 0.2 s). The integer values are fetched as one
    text per column (:meth:`Db.int_columns`) and only the real ones as Python floats (exact,
    which SQLite's text of a real is not). The result is the same: each name is an interned id
    (a text never matches one), and the largest value of a group as float64 is the largest of
    its values converted one by one, as ``MAX(CAST(value AS REAL))`` (the conversion keeps order).
    """
    sql = "SELECT P.globalTaskId AS gid, P.name AS name, P.value AS value FROM TASK_PMU_INFO AS P WHERE "
    whole = db.scan_columns(sql + "typeof(P.value) = 'integer'", ["gid", "name", "value"])
    if whole is None:
        return None
    try:
        reals = np.array(db.rows(sql + "typeof(P.value) != 'integer'"), dtype=object).reshape(-1, 3)
        gid = np.concatenate([whole["gid"], reals[:, 0].astype(np.int64)])
        name = np.concatenate([whole["name"], reals[:, 1].astype(np.int64)])
    except (TypeError, ValueError, OverflowError):  # a NULL, text or real id or name
        return None
    if not all(type(v) is float for v in reals[:, 2].tolist()):  # a NULL, text or BLOB value
        return None
    value = np.concatenate([whole["value"].astype(np.float64), reals[:, 2].astype(np.float64)])
    gids, group = np.unique(gid, return_inverse=True)
    out: dict[str, np.ndarray] = {}
    for metric, col in PMU_COLUMNS.items():
        hit = np.isin(name, ids[metric])
        best = np.full(len(gids), -np.inf)
        np.maximum.at(best, group[hit], value[hit])
        seen = np.zeros(len(gids), dtype=bool)
        seen[group[hit]] = True
        out[col] = np.where(seen, best, np.nan)
    return pd.DataFrame(out, index=pd.Index(gids, name="gid"))


def communication_ops(db: Db, steps: pd.DataFrame) -> pd.DataFrame:
    """COMM_OPS plus an ``op_id`` helper column (used to attach tasks)."""
    if not db.has("COMMUNICATION_OP", "startNs", "endNs"):
        out = empty(COMM_OPS)
        out["op_id"] = pd.Series(dtype="int64")
        return out
    op = "COMMUNICATION_OP"
    df = (Select(db).col("O", op, "opName", "name", SID).col("O", op, "opType", "op_type", SID)
          .col("O", op, "groupName", "grp", SID).col("O", op, "opId", "op_id", INT)
          .col("O", op, "connectionId", "link", INT)
          .expr("O.startNs", "start_ns", INT).expr("O.endNs", "end_ns", INT)
          .fetch("FROM COMMUNICATION_OP AS O WHERE O.startNs IS NOT NULL AND O.endNs IS NOT NULL ORDER BY O.rowid"))
    df = durations(db, op, df).sort_values("start_ns", kind="stable").reset_index(drop=True)
    df["link"] = df["link"].where(df["link"] != INVALID_ID, -1)
    out = frame(COMM_OPS, {
        "name": df["name"], "op_type": comm_op_types(df["op_type"], df["name"]), "group": df["grp"], "start_ns": df["start_ns"],
        "dur_ns": df["dur_ns"], "link": df["link"], "step": assign_step(df["start_ns"].to_numpy(), steps),
    }, n=len(df))
    out["op_id"] = df["op_id"].to_numpy(dtype="int64")
    return out


def comm_op_types(op_types: pd.Series, names: pd.Series) -> pd.Series:
    """``COMMUNICATION_OP.opType``, or where it is absent (level 0 writes ``N/A``) the type spelt
    in the op's name: ``hcom_allReduce__576_0_1`` → ``hcom_allReduce_``, exactly what level 1
    writes as opType, so level-0 and level-1 runs key their collectives alike."""
    derived = hccl_op_types(names)
    known = (op_types != "") & (op_types != NA)
    return op_types.where(known, derived)


#: The join of ``COMMUNICATION_TASK_INFO`` (I) with ``TASK`` (T) that COMM_TASKS reads.
_COMM_JOIN = ("FROM COMMUNICATION_TASK_INFO AS I JOIN TASK AS T ON T.globalTaskId = I.globalTaskId "
              "WHERE T.startNs IS NOT NULL AND T.endNs IS NOT NULL")


def _comm_join_select(db: Db) -> Select:
    """The columns COMM_TASKS reads of :data:`_COMM_JOIN`."""
    info = "COMMUNICATION_TASK_INFO"
    return (Select(db).col("I", info, "taskType", "name", SID).col("I", info, "groupName", "grp", SID)
            .col("I", info, "planeId", "plane_order", INT).col("I", info, "opId", "op_id", INT)
            .expr("T.startNs", "start_ns", INT).expr("T.endNs", "end_ns", INT)
            .col("T", "TASK", "taskType", "task_type", SID))


def _comm_join(db: Db) -> str:
    """The SQL of the join COMM_TASKS reads when it is not made from scans."""
    return f"SELECT {', '.join(_comm_join_select(db).items)} {_COMM_JOIN}"


def communication_tasks(db: Db, tasks: TaskRows, comm_ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    if not (db.has("COMMUNICATION_TASK_INFO", "globalTaskId") and db.has("TASK", "globalTaskId", "startNs", "endNs")):
        return empty(COMM_TASKS)
    if tasks.comm is not None:
        comm, tasks.comm = tasks.comm, None
        df = table({**comm, "name": db.texts(comm["name"]), "grp": db.texts(comm["grp"])})
    else:
        q = _comm_join_select(db)
        df = q.fetch(_COMM_JOIN)
    df = durations(db, "TASK", df).sort_values("start_ns", kind="stable").reset_index(drop=True)
    # Level 0 writes N/A task names; the runtime task type ("Notify Wait", "SDMA") still tells them apart.
    df["name"] = df["name"].where(~_is(df["name"], NA, ""), df["task_type"])
    plane = as_text(df["plane_order"]).where(df["plane_order"] >= 0, "")
    return frame(COMM_TASKS, {
        "name": df["name"], "group": df["grp"], "plane": plane, "plane_order": df["plane_order"],
        "start_ns": df["start_ns"], "dur_ns": df["dur_ns"], "op_row": _task_op_rows(df, comm_ops),
        "step": assign_step(df["start_ns"].to_numpy(), steps),
    }, n=len(df))


def _comm_joined(tasks: pd.DataFrame, scan: CommScan) -> dict[str, np.ndarray] | None:
    """The rows of the SQL join :func:`_comm_join` (ids not yet resolved to text) from the scans
    already made: the scan of ``COMMUNICATION_TASK_INFO`` (``info``) and the TASK rows; None
    (SQLite joins) when two TASK rows read share a task id.

    The same rows in the same order: the TASK rows read are those of the join's WHERE, in the
    order of one scan of ``TASK``; every id is an integer (SQLite's ``=`` is then integer
    equality) and each task id names one TASK row, so a row of ``info`` joins at most one task;
    and the rows come in the order the plan :func:`_join_order` read gives them."""
    index, info = pd.Index(tasks["gid"].to_numpy()), scan.columns
    if not index.is_unique:
        return None
    pos = index.get_indexer(info["gid"])
    hit = np.flatnonzero(pos >= 0)
    if scan.order == "T":  # the tasks' order; a task's rows in their table order
        hit = hit[np.argsort(pos[hit], kind="stable")]
    pos = pos[hit]
    return {"name": info["name"][hit], "grp": info["grp"][hit], "plane_order": info["plane_order"][hit],
            "op_id": info["op_id"][hit], "start_ns": tasks["start_ns"].to_numpy()[pos],
            "end_ns": tasks["end_ns"].to_numpy()[pos], "task_type": tasks["task_type"].to_numpy()[pos]}


def _task_op_rows(tasks: pd.DataFrame, comm_ops: pd.DataFrame) -> np.ndarray:
    """Row of the comm op each task belongs to: same (opId, group); failing that, the only op with
    that opId (groups can be spelt differently on ops and tasks in some exports)."""
    out = np.full(len(tasks), -1, dtype="int64")
    if tasks.empty or comm_ops.empty:
        return out
    ops = pd.DataFrame({"op_id": comm_ops["op_id"].to_numpy(), "grp": as_text(comm_ops["group"]).to_numpy(),
                        "row": np.arange(len(comm_ops), dtype="int64")})
    ops = ops[ops["op_id"] >= 0]
    keys = pd.DataFrame({"op_id": tasks["op_id"].to_numpy(), "grp": as_text(tasks["grp"]).to_numpy()})
    exact = keys.merge(ops.drop_duplicates(["op_id", "grp"]), on=["op_id", "grp"], how="left")["row"]
    unique = ops[~ops["op_id"].duplicated(keep=False)].set_index("op_id")["row"]
    by_id = keys["op_id"].map(unique)
    return exact.fillna(by_id).fillna(-1).to_numpy(dtype="int64")


def op_statistic(kernels: pd.DataFrame) -> pd.DataFrame:
    """Compute tasks grouped by (op type, core type), like the reference's Db KernelTypeCompare:
    unlike ``op_statistic.csv`` of a Text export, the Db statistic honours the selected step
    (:func:`~perfcmp_core.load.steps.select_step` makes it again from the step's tasks)."""
    k = kernels[kernels["has_details"]]
    if k.empty:
        return empty(OP_STATISTIC)
    dur_us = (k["dur_ns"] / 1000.0).rename("dur")
    g = dur_us.groupby([as_text(k["op_type"]), as_text(k["core"])], sort=False)
    stats = g.agg(["size", "sum", "mean", "max", "min"]).reset_index()
    stats.columns = ["op_type", "core_type", "count", "total_us", "avg_us", "max_us", "min_us"]
    return frame(OP_STATISTIC, {c: stats[c] for c in OP_STATISTIC})
