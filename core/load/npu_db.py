"""Ascend NPU Db export (``ascend_pytorch_profiler*.db``, ``ascend_mindspore_profiler*.db``,
``msmonitor*.db``; SQLite) → :class:`~perfcmp_core.model.Profile`.

Why this module looks the way it does:

* **Read-only, set-based.** The file is opened through a ``file:…?mode=ro`` URI so a profile is
  never modified (no journal, no WAL checkpoint). Every table is read with one ``SELECT`` (tables
  joined in SQL); interned strings come back as ids and are resolved against one in-memory copy of
  ``STRING_IDS`` (see :class:`~.npu_db_sql.Db`); all later work is pandas/numpy, so a Db with a
  million tasks loads in seconds of CPU.
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

The loader is five modules: ``npu_db_sql`` (read-only typed SQLite access), ``npu_db_host``
(host tables), ``npu_db_device`` (device and communication tables), ``npu_db_launch`` (which op
launched each task) and this one (entry point, memory and metadata).

Table mapping (schema: torch_npu ``TableColumnsManager`` / msprof export headers; names follow the
reference's ``Constant.TABLE_*``):

* KERNELS — ``TASK`` ⟕ ``COMPUTE_TASK_INFO`` (``has_details``) ⟕ ``TASK_PMU_INFO`` pivoted by metric
  name (values are ns like the reference assumes; stored as µs = value / 1000). Tasks referenced by
  ``COMMUNICATION_TASK_INFO`` are ``is_comm`` and named by their task type (``Notify_Wait`` …); other
  tasks without compute info are named by ``TASK.taskType`` (``EVENT_WAIT_SQE``, ``C_CORE_SQE`` …).
  ``COMMUNICATION_OP`` rows are appended as well (``is_comm`` True, ``task_type`` "", stream -1,
  like the Text loader's HCCL-op kernels) so operator comparison attributes HCCL ops to the torch
  op that launched them. Communication *tasks* keep ``op_row`` -1 so that an op's device time
  does not count both an HCCL op and its tasks. ``TASK`` rows that only frame sub-tasks (no
  context id, same stream and task id as rows with one: every HCCL op, FFTS+ launches) are not
  kernels. Shapes lose their literal quotes (``load/shapes.py``, shared with the Text loader);
  level-0 ``N/A`` types read as absent. ``op_row`` comes from ``npu_db_launch``.
* OPS / QUEUE / PYFUNCS — ``PYTORCH_API`` rows of ``ENUM_API_TYPE`` ``op`` / ``queue`` / ``trace``.
  ``PYTORCH_API.connectionId`` points at a *list* in ``CONNECTION_IDS``: an op keeps one row (its
  ``link`` is the first id of the list) and kernels are attached through the whole list.
  ``globalTid`` is ``pid << 32 | tid``; nesting is per ``globalTid``. Call stacks come from
  ``PYTORCH_CALLCHAINS`` when present. ``inputShapes``/``inputDtypes`` exchanged (as real torch_npu
  Dbs store them) are read the right way round.
* FWDBWD — connection ids shared by exactly two torch ops (forward → backward), as the reference.
* COMM_OPS / COMM_TASKS — ``COMMUNICATION_OP`` and ``COMMUNICATION_TASK_INFO`` ⋈ ``TASK``; a task
  belongs to the op with the same ``opId`` (and group). Level 0 writes ``N/A`` op types and task
  names: the type is read from the op name, task names from ``TASK.taskType``.
* MEMORY / OP_MEMORY — ``MEMORY_RECORD`` / ``OP_MEMORY``; ``cann::`` allocations are re-timed to the
  enqueue of the dequeue that covers them, like the Text loader does.
* STEPS — ``STEP_TIME`` (falling back to ``ProfilerStep#N`` ops when the table is absent or empty).
* OP_STATISTIC — compute tasks grouped by (op type, core type), within the selected step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..compat import as_text
from ..model import MEMORY, OP_MEMORY, Profile, ProfileMeta, empty, frame
from ..notes import Note
from ..options import LoadOptions
from .common import assign_step, is_cann_allocation
from .detect import Source
from .variants import db_variants
from .npu_db_device import communication_ops, communication_tasks, device_kernels, op_statistic, read_task_rows
from .npu_db_host import (fwdbwd_pairs, host_ops, python_functions, queue_rows, read_apis, read_connection_ids,
                          read_steps, read_syncs)
from .npu_db_launch import enqueue_of
from .npu_db_sql import INT, SID, TEXT, U32, Db, Select, check_header


def load_npu_db(src: Source, opts: LoadOptions) -> Profile:
    """Read an NPU Db export into the profile model (see the module docstring for the mapping)."""
    assert src.db is not None, "an npu_db Source always names its database"
    path = src.db
    check_header(path)
    db = Db(path)
    try:
        return _load(db, src, opts)
    finally:
        db.close()


def _load(db: Db, src: Source, opts: LoadOptions) -> Profile:
    notes = list(src.notes)
    wanted = ["TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "STEP_TIME"]
    if src.framework == "pytorch":
        wanted.append("PYTORCH_API")
    if opts.load_memory:
        wanted += ["MEMORY_RECORD", "OP_MEMORY"]
    absent = [t for t in wanted if t not in db.tables]
    if absent:
        notes.append(Note(f"tables absent from the Db (their parts are empty): {', '.join(absent)}"))

    apis = read_apis(db, notes)
    conn_ids = read_connection_ids(db)
    ops, op_conns = host_ops(apis, conn_ids)
    pyfuncs = python_functions(apis)
    queue = queue_rows(apis, conn_ids)

    steps = read_steps(db, ops, notes)
    comm_ops = communication_ops(db, steps)
    tasks = read_task_rows(db)
    kernels = device_kernels(db, tasks, comm_ops, ops, op_conns, queue, steps)
    comm_tasks = communication_tasks(db, tasks, comm_ops, steps)
    ops["step"] = assign_step(ops["start_ns"].to_numpy(), steps)
    fwdbwd = fwdbwd_pairs(ops, op_conns, kernels["link"].to_numpy())

    memory = _memory(db) if opts.load_memory else empty(MEMORY)
    op_memory = _op_memory(db, queue, notes) if opts.load_memory else empty(OP_MEMORY)

    has_pmu = db.any_rows("TASK_PMU_INFO")
    if not has_pmu and kernels["has_details"].any():
        notes.append(Note("no TASK_PMU_INFO rows: Cube/Vector split falls back to the task type (Level0 export?)"))
    rank, device = _rank_device(db, src.rank)
    profiler_overlap, overlap_steps = _overlap_analysis(db, steps)
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
        variants=db_variants(src),
        profiler_overlap_ns=profiler_overlap,
        profiler_overlap_steps=overlap_steps,
    )
    if db.unmerged_wal:
        notes.append(Note(f"{db.path.name}-wal holds changes not merged into the database (was the profiler "
                          "still running?); they are not read, the file is left untouched"))
    reversed_rows = [f"{table} {n}" for table, n in db.ends_before_start.items() if n]
    if reversed_rows:
        notes.append(Note(f"rows that end before they start are counted as 0 ns: {', '.join(reversed_rows)}"))
    if db.bad_text:  # checked last: any query above may have met the first bad cell
        notes.append(Note("some text in the Db is not valid UTF-8; shown with U+FFFD replacement characters"))
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
        queue=queue.drop(columns=["gtid"]),
        op_statistic=op_statistic(kernels),
        steps=steps,
        syncs=read_syncs(db),
    )


# ------------------------------------------------------------------------------ OVERLAP_ANALYSIS

#: ``ENUM_OVERLAP_ANALYSIS_TYPE`` names by id, as schema 1.2.0 writes them; an export holding the
#: table without the enum (the real torch_npu Db of January 2025) uses the same ids.
OVERLAP_TYPES = ("COMPUTE", "COMMUNICATION", "COMM_NOT_OVERLAP_COMP", "FREE")


def _overlap_analysis(db: Db, steps: pd.DataFrame) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Total ns per ``OVERLAP_ANALYSIS`` type over the whole profile, and per step (rows starting
    in the step's window); empty when the table is absent."""
    if not db.has("OVERLAP_ANALYSIS", "startNs", "endNs", "type"):
        return {}, {}
    names = dict(enumerate(OVERLAP_TYPES))
    if db.has("ENUM_OVERLAP_ANALYSIS_TYPE", "id", "name"):
        enum = Select(db).col("E", "ENUM_OVERLAP_ANALYSIS_TYPE", "id", "id", INT) \
            .col("E", "ENUM_OVERLAP_ANALYSIS_TYPE", "name", "name", TEXT).fetch("FROM ENUM_OVERLAP_ANALYSIS_TYPE AS E")
        names = dict(zip(enum["id"].tolist(), as_text(enum["name"]).tolist()))
    rows = Select(db).col("O", "OVERLAP_ANALYSIS", "startNs", "start", INT) \
        .col("O", "OVERLAP_ANALYSIS", "endNs", "end", INT).col("O", "OVERLAP_ANALYSIS", "type", "type", INT) \
        .fetch("FROM OVERLAP_ANALYSIS AS O")
    dur = (rows["end"] - rows["start"]).clip(lower=0)
    kind = rows["type"].map({t: names.get(int(t), str(t)) for t in rows["type"].unique()})
    whole = {str(t): int(v) for t, v in dur.groupby(kind).sum().items()}
    if steps.empty:
        return whole, {}
    # each row to the step whose window [start, end) holds its start (steps do not overlap)
    lo, hi = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    start = rows["start"].to_numpy()
    at = np.searchsorted(lo, start, side="right") - 1
    inside = (at >= 0) & (start < hi[np.maximum(at, 0)])
    step = steps["step"].to_numpy()[np.maximum(at, 0)]
    per_step: dict[str, dict[str, int]] = {}
    for (s, t), v in dur[inside].groupby([step[inside], kind[inside]]).sum().items():
        per_step.setdefault(str(s), {})[str(t)] = int(v)
    return whole, per_step


# ---------------------------------------------------------------------------------------- memory


def _memory(db: Db) -> pd.DataFrame:
    if not db.has("MEMORY_RECORD", "timestamp", "totalReserved"):
        return empty(MEMORY)
    rec = "MEMORY_RECORD"
    df = (Select(db).expr("M.timestamp", "ts_ns", INT).col("M", rec, "component", "component", SID)
          .col("M", rec, "deviceId", "device", INT).col("M", rec, "totalReserved", "total_reserved_bytes", INT)
          .col("M", rec, "totalAllocated", "total_allocated_bytes", INT)
          .fetch("FROM MEMORY_RECORD AS M WHERE M.timestamp IS NOT NULL ORDER BY M.timestamp, M.rowid", scan=True))
    return frame(MEMORY, {c: df[c] for c in MEMORY}, n=len(df))


def _op_memory(db: Db, queue: pd.DataFrame, notes: list[Note]) -> pd.DataFrame:
    """OP_MEMORY rows, as the Text loader reads operator_memory.csv: ``cann::`` allocations happen
    on the device-side dequeue thread, so they are placed at the enqueue (host side) of the dequeue
    covering their allocation time and keep their name; other records are placed at their
    allocation and take the name of the op they land in (name ''). Rows without an allocation
    time cannot be placed and are dropped."""
    if not db.has("OP_MEMORY", "size", "allocationTime"):
        return empty(OP_MEMORY)
    mem = "OP_MEMORY"
    df = (Select(db).col("O", mem, "name", "name", SID).col("O", mem, "size", "size_bytes", INT)
          .col("O", mem, "allocationTime", "alloc_ns", INT).col("O", mem, "releaseTime", "release_ns", INT)
          .fetch("FROM OP_MEMORY AS O ORDER BY O.rowid", scan=True))
    unplaced = int((df["alloc_ns"] <= 0).sum())
    df = df[df["alloc_ns"] > 0].sort_values("alloc_ns", kind="stable").reset_index(drop=True)
    df["release_ns"] = df["release_ns"].where(df["release_ns"] > 0, -1)
    place = df["alloc_ns"].to_numpy(dtype="int64").copy()
    cann = is_cann_allocation(df["name"])
    if cann.any():
        placed, _, ok = enqueue_of(queue, place[cann])
        place[cann] = placed
        keep = np.ones(len(df), dtype=bool)
        keep[np.flatnonzero(cann)[~ok]] = False
        unplaced += int((~ok).sum())
        df, place, cann = df[keep].reset_index(drop=True), place[keep], cann[keep]
    if unplaced:
        notes.append(Note(f"{unplaced} OP_MEMORY rows dropped: no allocation time, or a cann:: allocation "
                          "outside every Dequeue"))
    names = df["name"].where(cann, "")
    return frame(OP_MEMORY, {"name": names, "size_bytes": df["size_bytes"], "place_ns": place,
                             "alloc_ns": df["alloc_ns"], "release_ns": df["release_ns"]}, n=len(df))


# ------------------------------------------------------------------------------------------ meta


def _rank_device(db: Db, rank_from_name: int | None) -> tuple[int | None, int | None]:
    """Rank and device: ``RANK_DEVICE_MAP`` when present (rank -1 there means "not distributed"),
    else the rank in the file name and the device of the first task."""
    rank, device = rank_from_name, None
    if db.has("RANK_DEVICE_MAP", "rankId", "deviceId"):
        row = (Select(db).col("R", "RANK_DEVICE_MAP", "rankId", "rank", INT)
               .col("R", "RANK_DEVICE_MAP", "deviceId", "device", INT).fetch("FROM RANK_DEVICE_MAP AS R LIMIT 1"))
        if len(row):
            r, d = int(row["rank"].iloc[0]), int(row["device"].iloc[0])
            rank = r if r >= 0 else rank
            device = d if d >= 0 else None
    if device is None and db.has("TASK", "deviceId"):
        row = Select(db).col("T", "TASK", "deviceId", "device", INT).fetch("FROM TASK AS T LIMIT 1")
        if len(row) and int(row["device"].iloc[0]) >= 0:
            device = int(row["device"].iloc[0])
    return rank, device


def group_hash(group_id: str) -> str:
    """The name HCCL gives a communication group in Db exports: two 32-bit polynomial string
    hashes (bases 29 and 131) packed into one 64-bit number, in decimal."""
    high = low = 0
    for ch in group_id:
        high = (high * 29 + ord(ch)) & U32
        low = (low * 131 + ord(ch)) & U32
    return str(high << 32 | low)


def _group_names(db: Db, notes: list[Note]) -> dict[str, str]:
    """Process-group names (dp, tp …) from ``META_DATA.parallel_group_info``, keyed by the group id
    and by its hashed form (the spelling ``COMMUNICATION_OP.groupName`` uses)."""
    if not db.has("META_DATA", "name", "value"):
        return {}
    rows = Select(db).col("D", "META_DATA", "value", "value", TEXT).fetch(
        "FROM META_DATA AS D WHERE D.name = 'parallel_group_info'")
    if rows.empty:
        return {}
    try:
        info = orjson.loads(str(rows["value"].iloc[0]))
    except orjson.JSONDecodeError:
        notes.append(Note("META_DATA parallel_group_info is not valid JSON: group names unknown"))
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
    check_header(path)
    db = Db(path)
    try:
        if not db.has("STEP_TIME", "id", "startNs", "endNs"):
            return None
        rows = db._execute('SELECT DISTINCT id FROM STEP_TIME WHERE id >= 0 AND startNs >= 0 ORDER BY id')
        ids = [i for (i,) in rows if isinstance(i, int)]
        return ids or None
    finally:
        db.close()
