"""Db export: which host op launched each device task (``KERNELS.op_row``).

torch_npu records a launch in two ways, and a task reaches its op by one of two routes:

1. **CONNECTION_IDS.** The op's ``PYTORCH_API`` row lists the task's ``connectionId``. torch_npu
   writes this for the kernels and HCCL ops it launches through a node-level CANN API (``aclnn*``
   kernels, ``HcclAllreduce``). Where several ops list one id, the innermost (latest-starting) wins.
2. **CANN_API.** Every other task the runtime ran — the copies of ``aclrtMemcpyAsync`` and of the
   ``aclopCompileAndExecute`` behind ``ReduceSum``, the copy of a gradient bucket — carries the
   ``connectionId`` of a ``CANN_API`` row, and no op lists it. That row was called on some thread
   at some time. When that moment lies inside a ``Dequeue`` of torch_npu's task queue, the launch
   was really requested at the matching ``Enqueue`` (same correlation), on the thread that
   enqueued it. The launching op is the innermost op running on that thread at that moment: the
   rule by which the Text export's ``async_npu`` flows start at the launching ``cpu_op``. On the
   real AlexNet Db this links the 24 copies (0.87 ms) that route 1 leaves unlinked.

Stream synchronisation tasks (``EVENT_RECORD`` / ``EVENT_WAIT``) are never attributed to an op,
whichever route could reach them: a wait is a stream sitting idle until another stream's event,
not work of the op that queued it (one wait spans 66.7 ms of a 152 ms step on the real Db), and
the Text export of the same run leaves them unlinked too, so both exports give an op the same
device time. HCCL tasks are reached through their ``COMMUNICATION_OP`` row, never one by one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..timeline import innermost, thread_key
from .npu_db_sql import INT, INVALID_ID, U32, Db, Select

#: Runtime task types of stream synchronisation (Db ``TASK.taskType``; Text spells them ``*_SQE``).
SYNC_TASK_TYPES = ("EVENT_RECORD", "EVENT_WAIT", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE")


def launching_ops(db: Db, kernels: pd.DataFrame, eligible: np.ndarray, ops: pd.DataFrame,
                  op_conns: pd.DataFrame, queue: pd.DataFrame) -> np.ndarray:
    """``op_row`` of every kernel row (-1 where no op launched it or it is not ``eligible``).

    ``ops`` is the OPS table (``pid``/``tid``/``parent`` per-thread nesting), ``op_conns`` its
    (op_row, conn) pairs, ``queue`` the QUEUE table with its ``gtid`` helper column.
    """
    link = kernels["link"].to_numpy(dtype="int64")
    out = np.full(len(kernels), -1, dtype="int64")
    eligible = eligible & (link >= 0) & ~kernels["task_type"].isin(SYNC_TASK_TYPES).to_numpy()
    if not eligible.any() or ops.empty:
        return out
    if len(op_conns):
        by_conn = op_conns.sort_values("op_row", kind="stable").drop_duplicates("conn", keep="last")
        direct = pd.Index(by_conn["conn"].to_numpy(dtype="int64")).get_indexer(link)
        hit = eligible & (direct >= 0)
        out[hit] = by_conn["op_row"].to_numpy(dtype="int64")[direct[hit]]
    need = np.flatnonzero(eligible & (out < 0))
    if len(need) == 0:
        return out
    cann = _cann_launches(db)
    pos = pd.Index(cann["conn"].to_numpy(dtype="int64")).get_indexer(link[need])
    need, pos = need[pos >= 0], pos[pos >= 0]
    if len(need) == 0:
        return out
    gtid = cann["gtid"].to_numpy(dtype="int64")[pos]
    ts = cann["start_ns"].to_numpy(dtype="int64")[pos]
    enq_ts, enq_gtid, queued = enqueue_of(queue, ts, gtid)
    ts, gtid = np.where(queued, enq_ts, ts), np.where(queued, enq_gtid, gtid)
    op_key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    out[need] = innermost(op_key, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy(), ops["parent"].to_numpy(),
                          thread_key(gtid >> 32, gtid & U32), ts, strict=False)
    return out


def _cann_launches(db: Db) -> pd.DataFrame:
    """(conn, gtid, start_ns) of the ``CANN_API`` call behind each task connection id; of several
    calls with one id (an ACL call and the node call inside it) the latest-starting, innermost."""
    if not (db.has("CANN_API", "connectionId", "globalTid", "startNs") and db.has("TASK", "connectionId")):
        return pd.DataFrame({"conn": pd.Series(dtype="int64"), "gtid": pd.Series(dtype="int64"),
                             "start_ns": pd.Series(dtype="int64")})
    df = (Select(db).col("C", "CANN_API", "connectionId", "conn", INT).col("C", "CANN_API", "globalTid", "gtid", INT)
          .expr("MAX(C.startNs)", "start_ns", INT)
          .fetch(f"FROM CANN_API AS C WHERE C.connectionId IN (SELECT connectionId FROM TASK) "
                 f"AND C.connectionId != {INVALID_ID} AND C.startNs IS NOT NULL GROUP BY C.connectionId"))
    return df[(df["conn"] >= 0) & (df["start_ns"] >= 0)].reset_index(drop=True)


def enqueue_of(queue: pd.DataFrame, ts: np.ndarray,
               gtid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(enqueue start, enqueue thread, found) for each time ``ts``: the Enqueue paired (same
    correlation) with the Dequeue that starts last at or before ``ts`` and still runs at ``ts``
    — on the same thread ``gtid`` when given (a call on another thread is not part of the
    dequeued work). Only enqueue/dequeue pairs sharing a correlation count."""
    n = len(ts)
    enq_ts, enq_gtid, ok = np.full(n, -1, dtype="int64"), np.full(n, -1, dtype="int64"), np.zeros(n, dtype=bool)
    enq = queue[queue["kind"] == "enqueue"].drop_duplicates("correlation")
    deq = queue[queue["kind"] == "dequeue"].drop_duplicates("correlation")
    pairs = deq.merge(enq[["correlation", "start_ns", "gtid"]], on="correlation", suffixes=("", "_enq"))
    if n == 0 or pairs.empty:
        return enq_ts, enq_gtid, ok
    pairs = pairs.sort_values("start_ns", kind="stable").reset_index(drop=True)
    right = pd.DataFrame({"start_ns": pairs["start_ns"].to_numpy(dtype="int64"), "j": np.arange(len(pairs))})
    left = pd.DataFrame({"start_ns": np.asarray(ts, dtype="int64"), "i": np.arange(n)})
    by = None
    if gtid is not None:
        by = "gtid"
        right[by] = pairs["gtid"].to_numpy(dtype="int64")
        left[by] = np.asarray(gtid, dtype="int64")
    # Only row positions travel through the as-of join (a miss turns a column into float64,
    # which would round ns timestamps); times are read back from the int64 columns.
    hit = pd.merge_asof(left.sort_values("start_ns", kind="stable"), right, on="start_ns", by=by,
                        direction="backward")
    hit = hit[hit["j"].notna()]
    i, j = hit["i"].to_numpy(dtype="int64"), hit["j"].to_numpy(dtype="int64")
    inside = np.asarray(ts, dtype="int64")[i] <= pairs["end_ns"].to_numpy(dtype="int64")[j]
    i, j = i[inside], j[inside]
    enq_ts[i] = pairs["start_ns_enq"].to_numpy(dtype="int64")[j]
    enq_gtid[i] = pairs["gtid_enq"].to_numpy(dtype="int64")[j]
    ok[i] = True
    return enq_ts, enq_gtid, ok


