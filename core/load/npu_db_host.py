"""Db export, host side: ``PYTORCH_API`` (ops, python frames, Enqueue/Dequeue), ``CONNECTION_IDS``,
``PYTORCH_CALLCHAINS`` and ``STEP_TIME`` → OPS, PYFUNCS, QUEUE, FWDBWD and STEPS tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text, one_text
from ..model import FWDBWD, OPS, PYFUNCS, QUEUE, STEPS, SYNC_CALL, SYNCS, empty, frame
from ..notes import Note
from ..text_codes import first_seen_codes
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


#: ``PYTORCH_CALLCHAINS.stack`` as an interned id, -2 where the cell is not an integer (text stored
#: inline, a real, a BLOB): such a Db is read again with the text of every cell (:func:`_frames`).
_FRAME_ID = "CASE WHEN typeof(C.stack) IN ('integer', 'null') THEN COALESCE(C.stack, -1) ELSE -2 END"


def _call_stacks(db: Db, chain: pd.Series) -> pd.Series:
    """``PYTORCH_CALLCHAINS`` frames joined outermost-last with ';\\n' (as trace ``Call stack``):
    a chain's rows in ``stackDepth`` order (rows of one depth, or all rows when the column is
    absent, in table order), an op whose chain has no row gets ''.

    Why not a join per chain: a with_stack Db has a chain per op (466k on issue 27's heavy shape,
    14 frames each) and a few dozen distinct stacks; a Python join per chain cost 10 s per side
    and a string per op. Chains are numbered by their sequence of frames (:func:`_same_frames`),
    each distinct sequence is joined once, and every op holds the one ``str`` of its text."""
    if chain.empty or not db.has("PYTORCH_CALLCHAINS", "id", "stack"):
        return pd.Series([""] * len(chain), index=chain.index, dtype=object)
    ids, frames, texts = _frames(db)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, dtype=np.int64)
    lengths = np.diff(np.r_[starts, len(ids)])
    sequence, first_chain = _same_frames(frames, starts, lengths)
    joined = [";\n".join(texts[frames[starts[c]:starts[c] + lengths[c]]].tolist()) for c in first_chain]
    text_code, distinct = first_seen_codes([*joined, ""])  # equal texts of different frames: one object
    stacks = np.empty(len(distinct), dtype=object)
    stacks[:] = distinct
    # Chain ids are sorted: an op's chain is found by binary search (a miss: the trailing '').
    chain_ids = chain.to_numpy(dtype="int64")
    at = np.searchsorted(ids[starts], chain_ids)
    found = at < len(starts)
    found[found] = ids[starts[at[found]]] == chain_ids[found]
    code = np.full(len(chain_ids), text_code[-1], dtype=np.int64)
    code[found] = text_code[sequence[at[found]]]
    return pd.Series(stacks[code], index=chain.index, dtype=object)


def _frames(db: Db) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ``PYTORCH_CALLCHAINS`` row sorted by (chain id, ``stackDepth``), stably: the chain id
    of each row, its frame as a code, and the text of each code.

    One scan in table order, sorted here (SQL's ``ORDER BY`` cost 1.7 s of CPU on the heavy
    shape's 6.6M rows, and real Dbs are stored sorted: then nothing moves); the texts are looked
    up once per distinct frame id. The bare columns are read first: when every cell is an integer
    (what torch_npu writes) SQLite hands them over without an expression per cell (1.43 against
    1.9 s of CPU there). Otherwise the cells are read as :class:`Select` reads them (NULL → -1), and
    a frame that is not an interned id (text stored inline) makes the frames texts."""
    with_depth = "stackDepth" in db.columns("PYTORCH_CALLCHAINS")
    tail = "FROM PYTORCH_CALLCHAINS AS C" + ("" if with_depth else " ORDER BY C.rowid")
    names = {"id": "chain", "stack": "frame", **({"stackDepth": "depth"} if with_depth else {})}
    got: dict[str, np.ndarray] | None = db.scan_columns(
        f"SELECT {', '.join(f'C.{col} AS {name}' for col, name in names.items())} {tail}", list(names.values()))
    if got is None:
        def select(frame_kind: str) -> pd.DataFrame:
            sel = Select(db).col("C", "PYTORCH_CALLCHAINS", "id", "chain", INT)
            sel = sel.expr(_FRAME_ID, "frame", INT) if frame_kind == INT \
                else sel.col("C", "PYTORCH_CALLCHAINS", "stack", "frame", SID)
            if with_depth:
                sel = sel.col("C", "PYTORCH_CALLCHAINS", "stackDepth", "depth", INT)
            return sel.fetch(tail, scan=True)

        rows = select(INT)
        if (rows["frame"].to_numpy(dtype="int64") == -2).any():
            rows = select(SID)
        got = {name: rows[name].to_numpy() for name in names.values()}
        del rows
    ids, stack = got["chain"].astype(np.int64, copy=False), got["frame"]
    depth = got["depth"].astype(np.int64, copy=False) if with_depth else np.zeros(len(ids), dtype=np.int64)
    del got
    step_id, step_depth = np.diff(ids), np.diff(depth)
    if not ((step_id > 0) | ((step_id == 0) & (step_depth >= 0))).all():
        order = np.lexsort((depth, ids))  # stable: rows of equal keys keep table order
        ids, stack = ids[order], stack[order]
    if stack.dtype == object:
        codes, texts = factorize_text(stack)
    else:
        codes, frame_ids = pd.factorize(stack)
        texts = db.texts(np.asarray(frame_ids, dtype=np.int64))
    return ids, codes.astype(np.int32 if len(texts) <= np.iinfo(np.int32).max else np.int64), texts


def _same_frames(frames: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chains numbered by their sequence of frame codes (chain ``c`` holds ``frames[starts[c]:
    starts[c] + lengths[c]]``): the number of every chain, and the first chain of each number.

    Chains of one length form a matrix whose rows are compared as whole byte strings, one length
    at a time, so the work is one pass over the frames whatever the lengths (a matrix padded to
    the longest chain would grow with one deep chain)."""
    number = np.empty(len(starts), dtype=np.int64)
    firsts: list[np.ndarray] = []
    seen = 0  # distinct sequences of the shorter lengths
    for length in np.unique(lengths):
        chains = np.flatnonzero(lengths == length)
        grid = np.ascontiguousarray(frames[starts[chains][:, None] + np.arange(length)])
        rows = grid.view(np.dtype((np.void, grid.itemsize * int(length)))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        number[chains] = inverse.reshape(-1) + seen
        firsts.append(chains[first])
        seen += len(first)
    return number, np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)


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
