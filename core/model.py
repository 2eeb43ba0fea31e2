"""One profile model for every input kind.

Every loader (GPU torch.profiler trace, Ascend NPU Text export, Ascend NPU Db export, MindSpore)
produces a :class:`Profile`: a handful of columnar pandas tables with fixed column names, dtypes
and units, plus :class:`ProfileMeta`. Comparators only ever see this model, never the raw files,
so one comparison works for every pair of kinds.

Units (fixed, see ``docs/model.md``):

* **time points and durations are int64 nanoseconds** (``*_ns`` columns). NPU exports carry ns
  precision in µs strings (``"1704161511422904.204"``) and Db files are ns; at epoch magnitudes a
  float64 µs value cannot hold that precision (its step is 0.25 µs), so flow/kernel joins on start
  time would silently fail. Integer ns keeps those joins exact and interval sums free of floating
  residue. Everything shown to a user is converted to µs / ms at the edge.
* **sizes are int64 bytes** (``*_bytes``).
* PMU fields of ``kernel_details.csv`` stay float64 µs (``*_us``) because they are measurements,
  not time points; NaN means "absent / N/A".
* missing integers are ``-1`` (``stream``, ``step``, ``op_row`` …), missing text is ``""``.

Row links between tables are positional row numbers (``op_row`` → ``Profile.ops`` row), which the
loaders guarantee by resetting every index to ``0..n-1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from .compat import as_text
from .notes import Note
from .text_codes import first_seen_codes

Kind = Literal["gpu", "npu_text", "npu_db"]

#: dtype names used in schemas. A "str" column is ``object`` holding Python ``str`` on every pandas
#: line (:func:`perfcmp_core.compat.as_text`): pandas 3's own string dtype is never used, so no
#: result depends on whether pandas 2 or 3, with or without pyarrow, is installed.
I64, F64, STR, BOOL = "int64", "float64", "str", "bool"

Schema = Mapping[str, str]

# --------------------------------------------------------------------------------------------
# Schemas. The docstring of each constant is the contract loaders fill and comparators read.
# --------------------------------------------------------------------------------------------

KERNELS: Schema = {
    "name": STR,  # kernel / task name as recorded
    "op_type": STR,  # NPU kernel_details `Type` (HCCL rows without one: spelt by the name) / Db opType; "" on GPU
    "task_type": STR,  # NPU `Task Type` (AI_CORE, SDMA_SQE, EVENT_WAIT_SQE, C_CORE_SQE …) / Db TASK.taskType; GPU: trace cat (kernel, gpu_memcpy, gpu_memset)
    "core": STR,  # accelerator core: kernel_details `Accelerator Core` / Db COMPUTE_TASK_INFO.taskType; "" on GPU
    "stream": I64,  # stream id, -1 when absent (GPU stream 0 is kept as 0; NPU Text: Stream Id / Physic Stream Id)
    "start_ns": I64,
    "dur_ns": I64,
    "step": I64,  # step id the kernel belongs to, -1 when unknown
    "input_shapes": STR,  # NPU: raw `Input Shapes` without the quirk quotes; "" when absent
    "input_dtypes": STR,
    "link": I64,  # GPU correlation id, NPU Text async_npu flow id, Db connectionId; -1 none
    "op_row": I64,  # row in Profile.ops of the host op that launched it; -1 unknown
    "is_comm": BOOL,  # NCCL kernel (GPU) or HCCL op/task (NPU); an HCCL op row has task_type "" and covers its tasks
    "in_trace": BOOL,  # present on the device timeline (GPU kernel events, NPU Ascend Hardware, Db TASK)
    "has_details": BOOL,  # a kernel_details.csv row / Db COMPUTE_TASK_INFO row describes it
    "task_id": I64,  # NPU `Task Id` / `Task ID` (Text), TASK globalTaskId (Db); -1 when absent (GPU, HCCL ops)
    "aicore_us": F64,  # PMU `aicore_time(us)` (Db: aic_total_time), NaN if absent/N/A
    "mac_us": F64,  # PMU `mac_time(us)` or `aic_mac_time(us)`
    "mte2_us": F64,  # PMU `aic_mte2_time(us)`
    "aiv_us": F64,  # PMU `aiv_time(us)`
    "aiv_vec_us": F64,  # PMU `aiv_vec_time(us)`
}
"""Device kernels and tasks: GPU ``kernel``/``gpu_memcpy``/``gpu_memset`` events; NPU Text
``Ascend Hardware`` events and HCCL ops, merged with the ``kernel_details.csv`` rows describing
them (a task: same start and name; an HCCL op: same name), plus kernel_details rows absent from the
trace (``in_trace`` False); NPU Db ``TASK`` ⟕ ``COMPUTE_TASK_INFO``. Sorted by ``start_ns``."""

OPS: Schema = {
    "name": STR,
    "cat": STR,  # trace category lower-cased (cpu_op, user_annotation, cuda_runtime, cuda_driver …); Db: "op"
    "pid": I64,
    "tid": I64,
    "start_ns": I64,
    "end_ns": I64,
    "input_dims": STR,  # as text: GPU `Input Dims` rendered like Python str(list); NPU raw
    "input_types": STR,
    "call_stack": STR,  # `Call stack` arg ("" when absent)
    "link": I64,  # GPU `correlation` (runtime ops); Db connectionId; -1
    "parent": I64,  # row of the enclosing op on the same (pid, tid); -1 at top level
    "depth": I64,  # 0 for top-level ops of a thread
    "step": I64,  # id of the ProfilerStep#N op enclosing it (-1 outside steps)
    "is_step": BOOL,  # this op is a `ProfilerStep#N` marker
}
"""Host (CPU) ops: GPU categories cpu_op, user_annotation, operator and the launch calls (cuda_runtime,
cuda_driver, runtime, xpu_*/privateuse1_* runtime and driver); NPU
``cpu_op``; Db ``PYTORCH_API`` rows of type ``op``. Nesting (``parent``/``depth``) is computed per
thread with proper containment (start ≥ parent start and end ≤ parent end). Sorted by
(``start_ns``, longer first)."""

PYFUNCS: Schema = {
    "name": STR,
    "pid": I64,
    "tid": I64,
    "start_ns": I64,
    "end_ns": I64,
    "is_module": BOOL,  # name starts with "nn.Module:" (case-insensitive)
    "parent": I64,  # enclosing python frame on the same thread, -1 at top
    "depth": I64,
}
"""``python_function`` events (``with_stack=True``): nn.Module frames and plain call frames."""

FWDBWD: Schema = {
    "id": I64,
    "start_ts_ns": I64,  # `s` end of the flow (forward op)
    "start_tid": I64,
    "end_ts_ns": I64,  # `f` end (backward op)
    "end_pid": I64,
    "end_tid": I64,
}
"""Complete forward→backward (``fwdbwd``) flow pairs, in file order."""

COMM_OPS: Schema = {
    "name": STR,
    "op_type": STR,  # Db opType / Text: name; used for the comparison key
    "group": STR,  # HCCL group (thread name in Text, groupName in Db); "" on GPU
    "start_ns": I64,
    "dur_ns": I64,
    "link": I64,  # Db connectionId / GPU correlation; -1
    "step": I64,
}
"""Communication ops: GPU NCCL kernels; NPU HCCL group-thread events / Db COMMUNICATION_OP."""

COMM_TASKS: Schema = {
    "name": STR,  # Notify_Wait, RDMASend, Memcpy …
    "group": STR,
    "plane": STR,  # Text: plane thread name; Db: planeId as text
    "plane_order": I64,  # Text: thread sort index; Db: planeId
    "start_ns": I64,
    "dur_ns": I64,
    "op_row": I64,  # row in Profile.comm_ops containing it, -1
    "step": I64,
}
"""Communication tasks (NPU only): HCCL plane-thread events / Db COMMUNICATION_TASK_INFO."""

OVERLAP: Schema = {
    "kind": STR,  # Computing | Communication | Communication(Not Overlapped) | Free
    "start_ns": I64,
    "dur_ns": I64,
}
"""NPU Text ``Overlap Analysis`` process events."""

MEMORY: Schema = {
    "ts_ns": I64,
    "component": STR,  # NPU memory_record Component (PTA, APP, GE …); GPU ""
    "device": I64,
    "total_reserved_bytes": I64,
    "total_allocated_bytes": I64,
}
"""Memory usage samples: GPU ``[memory]`` instants with Device Id ≥ 0; NPU memory_record.csv;
Db MEMORY_RECORD."""

OP_MEMORY: Schema = {
    "name": STR,  # record name; "" means "take the name of the op it lands in"
    "size_bytes": I64,
    "place_ns": I64,  # time used to attach the record to a host op
    "alloc_ns": I64,
    "release_ns": I64,  # -1 when never released / N/A
}
"""Per-op memory allocations: GPU ``[memory]`` alloc/free pairs by Addr; NPU
operator_memory.csv; Db OP_MEMORY."""

QUEUE: Schema = {
    "kind": STR,  # enqueue | dequeue
    "correlation": I64,
    "start_ns": I64,
    "end_ns": I64,
}
"""NPU enqueue/dequeue events (used to re-time ``cann::`` memory records)."""

OP_STATISTIC: Schema = {
    "op_type": STR,
    "core_type": STR,
    "count": I64,
    "total_us": F64,
    "avg_us": F64,
    "max_us": F64,
    "min_us": F64,
}
"""NPU ``op_statistic.csv`` (Db: grouped from compute tasks)."""

STEPS: Schema = {
    "step": I64,
    "start_ns": I64,
    "end_ns": I64,
}
"""Steps: GPU/NPU-Text ``ProfilerStep#N`` ops, Db STEP_TIME. Sorted by start."""

SYNCS: Schema = {
    "name": STR,
    "pid": I64,  # the process of the ops on the calling thread (NPU Text: not the CANN pseudo-pid)
    "tid": I64,
    "start_ns": I64,
    "end_ns": I64,
}
"""Host runtime calls that block until the device drains, where the profile records them beside
its ops rather than among them: torch_npu's CANN API ``aclrtSynchronize*`` (Text: the ``CANN``
process of ``trace_view.json``; Db: ``CANN_API``). GPU traces keep ``cudaStreamSynchronize`` and
the like in ``ops`` (as ``cuda_runtime`` rows), so this table stays empty for them."""

#: The runtime calls that block the host until a stream, an event or the whole device is done:
#: the step explanation's ``sync`` cause, on GPU (``ops`` rows) and NPU (:data:`SYNCS` rows).
SYNC_CALL = re.compile(
    r"^(?:cuda|hip|cu)(?:Device|Stream|Event|Ctx)Synchronize$"
    r"|^(?:AscendCL@)?aclrtSynchronize(?:Stream|Device|Event)(?:WithTimeout)?$",
)

SCHEMAS: dict[str, Schema] = {
    "kernels": KERNELS,
    "ops": OPS,
    "pyfuncs": PYFUNCS,
    "fwdbwd": FWDBWD,
    "comm_ops": COMM_OPS,
    "comm_tasks": COMM_TASKS,
    "overlap": OVERLAP,
    "memory": MEMORY,
    "op_memory": OP_MEMORY,
    "queue": QUEUE,
    "op_statistic": OP_STATISTIC,
    "steps": STEPS,
    "syncs": SYNCS,
}

_FILL: dict[str, object] = {I64: -1, F64: np.nan, STR: "", BOOL: False}


def frame(schema: Schema, columns: Mapping[str, object] | None = None, n: int | None = None, *,
          owned: bool = False) -> pd.DataFrame:
    """Build a table that conforms to ``schema`` from column arrays/lists.

    Missing columns are filled with the schema's "absent" value (-1, NaN, "" or False); extra
    columns are dropped; dtypes are coerced. Loaders build their tables with this so that every
    table of every kind has exactly the same columns and dtypes.

    ``owned``: the numpy arrays given are the caller's own fresh arrays, never used again, so the
    table takes them as they are; pandas 3 otherwise copies every array a Series is made of (a
    second copy of the 0.5M-row KERNELS of the 32×92 NPU side, +65 MB at the load's peak).
    """
    columns = dict(columns or {})
    if n is None:
        n = len(next(iter(columns.values()))) if columns else 0
    out: dict[str, object] = {}
    for col, dt in schema.items():
        if col in columns:
            values = columns[col]
            if isinstance(values, pd.Series):
                s = values.reset_index(drop=True)
            else:  # text as object: pandas would scan it to infer "str", and _text converts it
                s = pd.Series(values, dtype=object if dt == STR else None,
                              copy=False if owned and isinstance(values, np.ndarray) else None)
            if dt == STR:
                s = _text(s)
            elif dt == I64 and s.dtype == np.int64:
                pass  # already what the conversion below would give
            elif dt == I64:
                num = pd.to_numeric(s, errors="coerce")
                if num.dtype.kind == "f":
                    # inf / NaN / values beyond int64 are "absent", not INT64_MIN or a crash
                    num = num.where(np.isfinite(num) & (num.abs() < 2.0**63), np.nan)
                s = num.fillna(-1).astype("int64")
            elif dt == F64:
                s = pd.to_numeric(s, errors="coerce").astype("float64")
            elif dt == BOOL:
                s = s.fillna(False).astype(bool)
            out[col] = s
        else:
            fill = pd.Series(np.full(n, _FILL[dt], dtype=object if dt == STR else dt),
                             dtype=object if dt == STR else None, copy=False)  # a fresh array
            out[col] = fill
    # Every column is a fresh Series: gathering them into consolidated 2-D blocks would copy
    # all the numbers once more (a third of the table's build time) for nothing.
    return pd.DataFrame(out, copy=False)


def _text(s: pd.Series) -> pd.Series:
    """``s`` as a text column: missing values → ``""``, every other value through ``str``.

    Loaders pass object columns whose cells are all ``str`` already; there ``fillna`` would copy
    every cell to change nothing, and ``infer_dtype`` tells so in a fraction of the time (even
    the test for missing values costs as much as the fill). Only object columns are checked that
    way: for a pandas string column ``infer_dtype`` says "string" with missing values in it.
    The result is ``object`` on every pandas line (:data:`STR`).
    """
    if s.dtype == object and infer_dtype(s, skipna=False) == "string":
        return s
    return as_text(s)


def empty(schema: Schema) -> pd.DataFrame:
    """A zero-row table with the schema's columns and dtypes: a copy of one made once per schema
    (a profile starts with a dozen empty tables; building one column by column costs 0.6 ms,
    a copy a sixth of it)."""
    key = tuple(schema.items())
    made = _EMPTY.get(key)
    if made is None:
        made = _EMPTY[key] = frame(schema, n=0)
    return made.copy()


#: The empty table of each schema seen, by its columns and dtypes (:func:`empty`).
_EMPTY: dict[tuple[tuple[str, str], ...], pd.DataFrame] = {}


def check(df: pd.DataFrame, schema: Schema, table: str) -> None:
    """Assert that ``df`` has exactly the schema's columns and numeric dtypes (used by tests)."""
    if list(df.columns) != list(schema):
        raise AssertionError(f"{table}: columns {list(df.columns)} != {list(schema)}")
    for col, dt in schema.items():
        got = str(df[col].dtype)
        if dt in (I64, F64, BOOL) and got != dt:
            raise AssertionError(f"{table}.{col}: dtype {got} != {dt}")


@dataclass
class ProfileMeta:
    """What the profile is and where it came from (``perfcmp-tui info`` prints this)."""

    kind: Kind
    source: str  # the path the user gave
    framework: str = ""  # pytorch | mindspore | msmonitor | "" (unknown)
    export: str = ""  # json (GPU trace) | text | db
    level: str = ""  # file | trace | output | profiling (NPU Text path level, spec §1.3)
    rank: int | None = None
    device: int | None = None
    files_used: list[str] = field(default_factory=list)
    files_missing: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)  # non-fatal warnings worth showing
    with_stack: bool | None = None
    profile_memory: bool | None = None
    record_shapes: bool | None = None
    profiler_level: str = ""  # Level0/Level1/Level2 (NPU profiler_info)
    backward_tid: int = -1  # tid of the autograd thread (first fwdbwd flow end)
    has_pmu: bool = False  # NPU kernel details carry PMU columns (not Level0)
    group_names: dict[str, str] = field(default_factory=dict)  # HCCL thread/group → pg name
    # communication.json, last step key (spec §2.5); None: the profile holds no such figure (a Db
    # export, a GPU trace, a Text export without communication.json): absent is not zero.
    rdma_bandwidth_gbps: float | None = None
    sdma_bandwidth_gbps: float | None = None
    selected_step: int | None = None  # the step filter applied, if any
    variants: list[str] = field(default_factory=list)  # format variants seen (load/variants.py)
    #: The profiler's own overall breakdown (Db ``OVERLAP_ANALYSIS``), ns per type: COMPUTE,
    #: COMMUNICATION, COMM_NOT_OVERLAP_COMP, FREE; empty when the export has none.
    profiler_overlap_ns: dict[str, int] = field(default_factory=dict)
    #: the same per step (str(step) → type → ns), for :func:`~perfcmp_core.load.steps.select_step`:
    #: the cached profile holds every step, a step is a view of it
    profiler_overlap_steps: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Short kind label for headers: GPU / NPU Text / NPU Db (+ MindSpore)."""
        base = {"gpu": "GPU", "npu_text": "NPU Text", "npu_db": "NPU Db"}[self.kind]
        return f"{base} (MindSpore)" if self.framework == "mindspore" else base

    @property
    def is_npu(self) -> bool:
        return self.kind != "gpu"


@dataclass
class Profile:
    """A loaded profile: metadata plus one table per schema in :data:`SCHEMAS`."""

    meta: ProfileMeta
    kernels: pd.DataFrame = field(default_factory=lambda: empty(KERNELS))
    ops: pd.DataFrame = field(default_factory=lambda: empty(OPS))
    pyfuncs: pd.DataFrame = field(default_factory=lambda: empty(PYFUNCS))
    fwdbwd: pd.DataFrame = field(default_factory=lambda: empty(FWDBWD))
    comm_ops: pd.DataFrame = field(default_factory=lambda: empty(COMM_OPS))
    comm_tasks: pd.DataFrame = field(default_factory=lambda: empty(COMM_TASKS))
    overlap: pd.DataFrame = field(default_factory=lambda: empty(OVERLAP))
    memory: pd.DataFrame = field(default_factory=lambda: empty(MEMORY))
    op_memory: pd.DataFrame = field(default_factory=lambda: empty(OP_MEMORY))
    queue: pd.DataFrame = field(default_factory=lambda: empty(QUEUE))
    op_statistic: pd.DataFrame = field(default_factory=lambda: empty(OP_STATISTIC))
    steps: pd.DataFrame = field(default_factory=lambda: empty(STEPS))
    syncs: pd.DataFrame = field(default_factory=lambda: empty(SYNCS))
    #: Text columns as first-seen codes and distinct values, ``(table, column)`` → ``(codes,
    #: distinct)``, each made once (:meth:`codes`); a profile read from the cache starts with
    #: those the cache stored. Not an ``__init__`` argument, so ``dataclasses.replace`` (a step
    #: cut of some tables) starts without them; nothing may change a table in place after load.
    text_codes: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def codes(self, table: str, column: str) -> tuple[np.ndarray, np.ndarray]:
        """``profile.<table>[column]`` as codes (integers, one per row: int32 from the cache) and
        its distinct values (object array, first-appearance order), made once per column."""
        found = self.text_codes.get((table, column))
        if found is None:
            codes, distinct = first_seen_codes(getattr(self, table)[column].to_numpy(dtype=object))
            found = self.text_codes[(table, column)] = (codes, _objects(distinct))
        return found

    def among(self, table: str, column: str, texts: Iterable[str]) -> np.ndarray:
        """Whether each cell of ``profile.<table>[column]`` is one of ``texts`` (what ``isin``
        answers), each distinct value tested once and broadcast through the column's
        :meth:`codes`: ``isin`` or ``==`` on an object column compares every cell's text (the ops'
        ``cat`` of the H200 side: 191,149 cells, 5–8 ms a test)."""
        codes, distinct = self.codes(table, column)
        wanted = frozenset(texts)
        hit = np.fromiter(map(wanted.__contains__, distinct), dtype=bool, count=len(distinct))
        return hit[codes]

    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in SCHEMAS}

    def nbytes(self) -> int:
        """What its tables' columns hold (an object column: its pointers, not the texts, which
        repeat): how large the profile is to send or to hold twice."""
        return int(sum(t.memory_usage(index=False, deep=False).sum() for t in self.tables().values()))

    def check(self) -> None:
        """Validate every table against its schema (cheap; used by tests and ``--debug``)."""
        for name, schema in SCHEMAS.items():
            check(getattr(self, name), schema, name)


def _objects(values: list[object]) -> np.ndarray:
    """A 1-d object array of ``values`` (``np.asarray`` would make a 2-d array of tuples)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
