"""Db export, host side: ``PYTORCH_API`` (ops, python frames, Enqueue/Dequeue), ``CONNECTION_IDS``,
``PYTORCH_CALLCHAINS`` and ``STEP_TIME`` → OPS, PYFUNCS, QUEUE, FWDBWD and STEPS tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text, one_text
from ..model import FWDBWD, OPS, PYFUNCS, QUEUE, STEPS, SYNC_CALL, SYNCS, empty, frame
from ..notes import Note
from ..timeline import nest
from .common import is_module_name, is_step_name, per_name, steps_of_ops
from .npu_db_sql import INT, INVALID_ID, SID, TEXT, U32, Db, Select


_API_INT = ("start_ns", "end_ns", "gtid", "conn_ref", "chain")
_API_TEXT = ("name", "input_dims", "input_types", "api_type", "call_stack")


def _no_apis() -> pd.DataFrame:
    return pd.DataFrame({**{c: pd.Series(dtype="int64") for c in _API_INT},
                         **{c: pd.Series(dtype=object) for c in _API_TEXT}})


def read_apis(db: Db, notes: list[Note]) -> pd.DataFrame:
    """All ``PYTORCH_API`` rows with their API type name (no rows when the table is absent)."""
    if not db.has("PYTORCH_API", "startNs", "endNs", "type"):
        return _no_apis()
    if not db.has("ENUM_API_TYPE", "id", "name"):
        notes.append(Note("PYTORCH_API present but ENUM_API_TYPE absent: host ops cannot be told apart, skipped"))
        return _no_apis()
    api = "PYTORCH_API"
    apis = (Select(db)
            .col("A", api, "startNs", "start_ns", INT).col("A", api, "endNs", "end_ns", INT)
            .col("A", api, "globalTid", "gtid", INT).col("A", api, "connectionId", "conn_ref", INT)
            .col("A", api, "name", "name", SID).col("A", api, "inputShapes", "input_dims", SID)
            .col("A", api, "inputDtypes", "input_types", SID).col("A", api, "callchainId", "chain", INT)
            .col("A", api, "type", "api_type", INT)
            .fetch("FROM PYTORCH_API AS A WHERE A.startNs IS NOT NULL AND A.endNs IS NOT NULL", scan=True))
    # The type names are joined here, not in SQL: a query of integers only is fetched as int64
    # columns without a Python object per cell (Db.fetch), and the enum has a handful of rows.
    enum = Select(db).col("E", "ENUM_API_TYPE", "id", "id", INT).col("E", "ENUM_API_TYPE", "name", "name", TEXT) \
        .fetch("FROM ENUM_API_TYPE AS E ORDER BY E.rowid").drop_duplicates("id")
    pos = pd.Index(enum["id"].to_numpy(dtype="int64")).get_indexer(apis["api_type"].to_numpy(dtype="int64"))
    apis["api_type"] = np.append(enum["name"].to_numpy(dtype=object), "")[pos]  # -1 (no such id) → ''
    if _swapped(apis["input_dims"], apis["input_types"]):
        apis["input_dims"], apis["input_types"] = apis["input_types"], apis["input_dims"]
    apis["call_stack"] = _call_stacks(db, apis["chain"])
    return apis


def read_syncs(db: Db) -> pd.DataFrame:
    """The ``CANN_API`` synchronisation calls (``aclrtSynchronizeStream`` …) → SYNCS: the Db keeps
    them beside ``PYTORCH_API``, on the same ``globalTid`` (pid in the high 32 bits) as the ops."""
    if not db.has("CANN_API", "startNs", "endNs", "globalTid", "name"):
        return empty(SYNCS)
    ids = db.string_ids_matching(SYNC_CALL)
    if not ids:
        return empty(SYNCS)
    df = (Select(db).col("C", "CANN_API", "startNs", "start_ns", INT).col("C", "CANN_API", "endNs", "end_ns", INT)
          .col("C", "CANN_API", "globalTid", "gtid", INT).col("C", "CANN_API", "name", "name", SID)
          .fetch(f"FROM CANN_API AS C WHERE C.name IN ({', '.join(map(str, ids))}) "
                 "AND C.startNs IS NOT NULL AND C.endNs IS NOT NULL ORDER BY C.startNs"))
    gtid = df["gtid"].to_numpy(dtype="int64")
    return frame(SYNCS, {"name": df["name"], "pid": np.where(gtid >= 0, gtid >> 32, -1),
                         "tid": np.where(gtid >= 0, gtid & U32, -1), "start_ns": df["start_ns"],
                         "end_ns": df["end_ns"]}, n=len(df))


def _swapped(dims: pd.Series, dtypes: pd.Series) -> bool:
    """Whether the shape and dtype columns are exchanged. Some torch_npu releases write the dtypes
    (``float;\r\nScalar``) into ``inputShapes`` and the dims (``32,3,224,224;\r\n64``) into
    ``inputDtypes`` (the real AlexNet Db export does); dims never contain a letter, dtype lists
    nearly always do, so the column holding more letters is the dtype column."""
    def lettered(col: pd.Series) -> int:  # rows with a letter, tested once per distinct text
        codes, uniques = factorize_text(as_text(col), use_na_sentinel=False)
        hit = pd.Series(uniques, dtype=object).str.contains(r"[A-Za-z]", regex=True).to_numpy(dtype=bool)
        return int(np.bincount(codes, minlength=len(uniques))[hit].sum()) if len(codes) else 0
    return lettered(dims) > lettered(dtypes)


def _call_stacks(db: Db, chain: pd.Series) -> pd.Series:
    """``PYTORCH_CALLCHAINS`` frames joined outermost-last with ';\\n' (as trace ``Call stack``)."""
    if chain.empty or not db.has("PYTORCH_CALLCHAINS", "id", "stack"):
        return pd.Series([""] * len(chain), index=chain.index, dtype=object)
    order = "C.id, C.stackDepth" if "stackDepth" in db.columns("PYTORCH_CALLCHAINS") else "C.id, C.rowid"
    frames = (Select(db).col("C", "PYTORCH_CALLCHAINS", "id", "chain", INT)
              .col("C", "PYTORCH_CALLCHAINS", "stack", "frame", SID)
              .fetch(f"FROM PYTORCH_CALLCHAINS AS C ORDER BY {order}"))
    stacks = frames.groupby("chain", sort=False)["frame"].agg(";\n".join)
    return chain.map(stacks).fillna("")


def read_connection_ids(db: Db) -> pd.DataFrame | None:
    """``CONNECTION_IDS`` (list id → connection id) in table order; None when the table is absent,
    in which case ``PYTORCH_API.connectionId`` is taken as the connection id itself."""
    if not db.has("CONNECTION_IDS", "id", "connectionId"):
        return None
    df = (Select(db).col("L", "CONNECTION_IDS", "id", "ref", INT)
          .col("L", "CONNECTION_IDS", "connectionId", "conn", INT)
          .fetch("FROM CONNECTION_IDS AS L ORDER BY L.rowid", scan=True))
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
    df["tid"] = np.where(gtid >= 0, gtid & U32, -1)
    df["parent"], df["depth"] = nest(gtid, df["start_ns"].to_numpy(), df["end_ns"].to_numpy())
    return df


def host_ops(apis: pd.DataFrame, conn_ids: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OPS (plus a ``conn_ref`` helper column) and the (op_row, conn) pairs of every op."""
    df = _host_rows(apis, "op")
    ops = frame(OPS, {
        "name": df["name"], "cat": pd.Series(["op"] * len(df), dtype=object), "pid": df["pid"], "tid": df["tid"],
        "start_ns": df["start_ns"], "end_ns": df["end_ns"], "input_dims": df["input_dims"],
        "input_types": df["input_types"], "call_stack": df["call_stack"],
        "link": _first_conn(df["conn_ref"], conn_ids), "parent": df["parent"], "depth": df["depth"],
        "is_step": is_step_name(as_text(df["name"])),
    }, n=len(df))
    ops["conn_ref"] = df["conn_ref"].to_numpy(dtype="int64")
    rows = pd.DataFrame({"op_row": np.arange(len(df), dtype="int64"), "ref": ops["conn_ref"]})
    rows = rows[(rows["ref"] >= 0) & (rows["ref"] != INVALID_ID)]
    if conn_ids is None:
        pairs = rows.rename(columns={"ref": "conn"})
    else:
        pairs = rows.merge(conn_ids, on="ref", how="inner")[["op_row", "conn"]]
    return ops, pairs.reset_index(drop=True)


def python_functions(apis: pd.DataFrame) -> pd.DataFrame:
    df = _host_rows(apis, "trace")
    names = as_text(df["name"])
    return frame(PYFUNCS, {
        "name": names, "pid": df["pid"], "tid": df["tid"], "start_ns": df["start_ns"], "end_ns": df["end_ns"],
        "is_module": is_module_name(names), "parent": df["parent"], "depth": df["depth"],
    }, n=len(df))


def queue_rows(apis: pd.DataFrame, conn_ids: pd.DataFrame | None) -> pd.DataFrame:
    """Enqueue/Dequeue rows plus a ``gtid`` helper column (the thread, used to trace launches made
    on the dequeue thread back to their enqueue); the correlation is the first connection id of the
    row's list, which is what torch_npu pairs an enqueue with its dequeue by."""
    df = apis[apis["api_type"] == "queue"].sort_values("start_ns", kind="stable")
    names = df["name"]
    kind = np.select([per_name(names, lambda s: s.str.startswith("Enqueue")),
                      per_name(names, lambda s: s.str.startswith("Dequeue"))],
                     [one_text("enqueue"), one_text("dequeue")], one_text(""))
    df, kind = df[kind != ""], kind[kind != ""]
    out = frame(QUEUE, {"kind": pd.Series(kind, dtype=object), "correlation": _first_conn(df["conn_ref"], conn_ids),
                        "start_ns": df["start_ns"], "end_ns": df["end_ns"]}, n=len(df))
    out["gtid"] = df["gtid"].to_numpy(dtype="int64")
    return out


def fwdbwd_pairs(ops: pd.DataFrame, op_conns: pd.DataFrame, launch_ids: np.ndarray) -> pd.DataFrame:
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


def read_steps(db: Db, ops: pd.DataFrame, notes: list[Note]) -> pd.DataFrame:
    if db.has("STEP_TIME", "id", "startNs", "endNs"):
        df = (Select(db).col("S", "STEP_TIME", "id", "step", INT).col("S", "STEP_TIME", "startNs", "start_ns", INT)
              .col("S", "STEP_TIME", "endNs", "end_ns", INT).fetch("FROM STEP_TIME AS S ORDER BY S.startNs, S.id"))
        df = df[(df["step"] >= 0) & (df["start_ns"] >= 0)]
        if len(df):
            return frame(STEPS, {c: df[c] for c in STEPS})
    if ops["is_step"].any():
        notes.append(Note("STEP_TIME absent or empty: steps taken from ProfilerStep#N ops"))
        return steps_of_ops(ops)
    return empty(STEPS)
