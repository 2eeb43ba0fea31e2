"""Readers for the side files of an NPU Text export (everything but ``trace_view.json``).

Each reader turns one file into model-ready columns (ns, bytes, "" / -1 / NaN for missing) and
raises :class:`InputError` naming the file for content it cannot read (bad encoding, invalid JSON,
missing required columns). Problems that only degrade a result (no bandwidth info, rows without an
allocation time) are appended to the caller's ``notes`` instead, so one odd side file never stops
a comparison.

The export's quirks are handled here once: numeric cells such as ``"1736413971558972.912\\t"``
carry a trailing tab, ``Input Shapes`` keeps literal double quotes after CSV parsing
(``"81920,4096;8192,512"``; :mod:`.shapes` removes them, for the Db export too), and ``N/A`` marks
absent values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import msgspec
import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
from ..notes import Note
from .common import hccl_op_types, is_cann_allocation, per_distinct, us_text_to_ns
from .shapes import normalise_shapes
from ..model import KERNELS, MEMORY, OP_MEMORY, OP_STATISTIC, frame

NA = "N/A"
KB = 1024
MB = 1024 * 1024

#: kernel_details.csv PMU columns → KERNELS columns; the first present header of each list wins.
_PMU_COLUMNS: dict[str, tuple[str, ...]] = {
    "aicore_us": ("aicore_time(us)",),
    "mac_us": ("mac_time(us)", "aic_mac_time(us)"),
    "mte2_us": ("aic_mte2_time(us)",),
    "aiv_us": ("aiv_time(us)",),
    "aiv_vec_us": ("aiv_vec_time(us)",),
}
#: Any of these headers means the export ran above Level0 with PipeUtilization metrics, so the
#: Cube/Vector breakdown can be computed.
PMU_MARKERS = ("mac_time(us)", "aiv_vec_time(us)", "aic_mac_time(us)")
#: Every kernel_details.csv column read (besides the required ones).
_DETAIL_USED = ("Accelerator Core", "Stream ID", "Stream Id", "Task ID", "Task Id", "Step Id", "Step ID",
                "Input Shapes", "Input Data Types", *PMU_MARKERS,
                *(h for headers in _PMU_COLUMNS.values() for h in headers))


# ------------------------------------------------------------------------------------------------
# Generic readers
# ------------------------------------------------------------------------------------------------


def read_csv(path: Path, required: Sequence[str], used: Sequence[str] = ()) -> pd.DataFrame | None:
    """The ``required`` and ``used`` columns (every column when ``used`` is empty), all cells as
    ``str`` (never NaN), headers stripped; ``None`` for an empty (0-byte) file.

    Reading as text is what keeps ns precision in the µs time columns; numbers are converted per
    column by the callers. Only the columns a reader uses are kept: kernel_details.csv has 46
    and the loader reads 15 — every cell of the others was a Python string (a 46 MB file took
    0.5 GB and 2 s that way).
    """
    wanted = frozenset(required) | frozenset(used)
    usecols = (lambda c: str(c).strip() in wanted) if used else None
    try:
        df = pd.read_csv(path, dtype=object, keep_default_na=False, encoding="utf-8-sig", usecols=usecols)
    except pd.errors.EmptyDataError:
        return None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(path, f"is not a readable CSV file ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(path, f"lacks the required column(s) {', '.join(missing)}")
    return df.reset_index(drop=True)


def read_json(path: Path) -> object:
    """Parsed JSON content, or ``None`` for an empty file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc})") from None


def _text(col: pd.Series) -> pd.Series:
    """Strip whitespace (the exporter's trailing tabs) and turn ``N/A`` into ""."""
    return per_distinct(col, _stripped_text)


def _stripped_text(col: pd.Series) -> pd.Series:
    s = col.str.strip()
    return s.mask(s == NA, "")


def _float(col: pd.Series) -> pd.Series:
    """float64 of a text column; "", ``N/A``, junk and values no counter can hold (``inf``,
    ``1e400``, beyond int64) → NaN, so that integer columns built from it never overflow."""
    return per_distinct(col, _floats).astype("float64")


def _floats(col: pd.Series) -> pd.Series:
    v = pd.to_numeric(col.str.strip(), errors="coerce").astype("float64")
    return v.where(v.abs() < 2.0**63)


def _scaled_int(values: pd.Series, factor: int, missing: int) -> np.ndarray:
    """float units (KB, MB) → int64 (bytes), NaN → ``missing``."""
    v = values.to_numpy(dtype="float64") * factor
    out = np.full(len(v), missing, dtype="int64")
    ok = np.isfinite(v) & (np.abs(v) < 2.0**63)
    out[ok] = np.round(v[ok]).astype("int64")
    return out


def _optional(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first present column among ``names``, else a column of ""."""
    for name in names:
        if name in df.columns:
            return df[name]
    return pd.Series([""] * len(df), dtype=object)


# ------------------------------------------------------------------------------------------------
# kernel_details.csv
# ------------------------------------------------------------------------------------------------


@dataclass
class KernelDetails:
    """kernel_details.csv as KERNELS rows (``in_trace`` False until merged with the trace)."""

    kernels: pd.DataFrame
    has_pmu: bool


def _op_types(types: pd.Series, names: pd.Series, hccl: pd.Series) -> pd.Series:
    """``Type``, or for an HCCL row without one (Level0 writes ``N/A``) the type its name spells,
    exactly what Level1 writes there, so collectives of both levels are keyed alike."""
    derived = hccl_op_types(names)
    return types.where(~(hccl & (types == "")), derived)


def read_kernel_details(path: Path, notes: list[Note]) -> KernelDetails:
    """Parse kernel_details.csv; an unparsable start time is fatal because every later join
    (flows, trace tasks) depends on it, so silently dropping the file would hide the problem."""
    required = ("Name", "Type", "Start Time(us)", "Duration(us)")
    df = read_csv(path, required, _DETAIL_USED)
    if df is None:
        notes.append(Note(f"{path.name} is empty: no Computing breakdown and no KernelCompare"))
        return KernelDetails(frame(KERNELS, n=0), False)
    start_ns = us_text_to_ns(df["Start Time(us)"])
    bad = np.flatnonzero(start_ns < 0)
    if len(bad):
        i = int(bad[0])
        raise InputError(path, f"unparsable Start Time(us) {df['Start Time(us)'].iloc[i]!r} "
                               f"in data row {i + 1} (line {i + 2})")
    dur_us = _float(df["Duration(us)"])
    if dur_us.isna().any():
        notes.append(Note(f"{path.name}: {int(dur_us.isna().sum())} row(s) without a Duration(us) "
                          "are counted as 0 µs"))
    if (dur_us < 0).any():
        notes.append(Note(f"{path.name}: {int((dur_us < 0).sum())} row(s) with a negative Duration(us) "
                          "are counted as 0 µs"))
    core = _text(_optional(df, "Accelerator Core"))
    names = _text(df["Name"])
    columns: dict[str, object] = {
        "name": names,
        "op_type": _op_types(_text(df["Type"]), names, core == "HCCL"),
        "core": core,
        "stream": _float(_optional(df, "Stream ID", "Stream Id")),
        "task_id": _float(_optional(df, "Task ID", "Task Id")),
        "start_ns": start_ns,
        "dur_ns": np.maximum(_scaled_int(dur_us, 1000, 0), 0),
        "step": _float(_optional(df, "Step Id", "Step ID")),
        "input_shapes": normalise_shapes(_optional(df, "Input Shapes")),
        "input_dtypes": _text(_optional(df, "Input Data Types")),
        "is_comm": (core == "HCCL").to_numpy(),
        "in_trace": np.zeros(len(df), dtype=bool),
        "has_details": np.ones(len(df), dtype=bool),
    }
    for col, headers in _PMU_COLUMNS.items():
        present = next((h for h in headers if h in df.columns), None)
        columns[col] = _float(df[present]) if present else np.full(len(df), np.nan)
    has_pmu = any(h in df.columns for h in PMU_MARKERS)
    if not has_pmu:
        notes.append(Note(f"{path.name} has no PMU columns ({' / '.join(PMU_MARKERS)}; Level0 or "
                          "aic_metrics other than PipeUtilization): Cube/Vector breakdown unavailable"))
    return KernelDetails(frame(KERNELS, columns, n=len(df)), has_pmu)


# ------------------------------------------------------------------------------------------------
# op_statistic.csv, memory_record.csv, operator_memory.csv
# ------------------------------------------------------------------------------------------------


def read_op_statistic(path: Path, notes: list[Note]) -> pd.DataFrame:
    """op_statistic.csv → OP_STATISTIC (values as exported; used by KernelTypeCompare)."""
    df = read_csv(path, ("OP Type", "Count", "Total Time(us)"),
                  ("Core Type", "Avg Time(us)", "Max Time(us)", "Min Time(us)"))
    if df is None:
        notes.append(Note(f"{path.name} is empty"))
        return frame(OP_STATISTIC, n=0)
    return frame(OP_STATISTIC, {
        "op_type": _text(df["OP Type"]),
        "core_type": _text(_optional(df, "Core Type")),
        "count": _float(df["Count"]),
        "total_us": _float(df["Total Time(us)"]),
        "avg_us": _float(_optional(df, "Avg Time(us)")),
        "max_us": _float(_optional(df, "Max Time(us)")),
        "min_us": _float(_optional(df, "Min Time(us)")),
    }, n=len(df))


def _device_ids(col: pd.Series) -> pd.Series:
    """``NPU:3`` → 3; anything else → NaN (coerced to -1 by the schema)."""
    return per_distinct(col, lambda s: pd.to_numeric(s.str.extract(r":\s*(\d+)\s*$", expand=False),
                                                      errors="coerce"))


def read_memory_record(path: Path, notes: list[Note]) -> pd.DataFrame:
    """memory_record.csv → MEMORY (MB → bytes, µs → ns)."""
    df = read_csv(path, ("Total Reserved(MB)",),
                  ("Timestamp(us)", "Component", "Device Type", "Total Allocated(MB)"))
    if df is None:
        notes.append(Note(f"{path.name} is empty: Mem Usage is 0"))
        return frame(MEMORY, n=0)
    return frame(MEMORY, {
        "ts_ns": us_text_to_ns(_optional(df, "Timestamp(us)")),
        "component": _text(_optional(df, "Component")),
        "device": _device_ids(_optional(df, "Device Type")),
        "total_reserved_bytes": _scaled_int(_float(df["Total Reserved(MB)"]), MB, -1),
        "total_allocated_bytes": _scaled_int(_float(_optional(df, "Total Allocated(MB)")), MB, -1),
    }, n=len(df))


def _placement_via_queue(alloc_ns: np.ndarray, queue: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(placement ns, covered) for allocations made by CANN on the dequeue (task-queue) thread.

    Such a record is allocated when the queued op *runs*, long after the host op that launched
    it returned; to attach it to that host op it is moved to the start of the matching enqueue.
    The dequeue that covers an allocation is the last one starting at or before it, provided it
    has not ended yet; its correlation id names the enqueue. Placement is -1 when that enqueue is
    absent from the trace.
    """
    deq = queue[queue["kind"] == "dequeue"].sort_values("start_ns", kind="stable")
    place = np.full(len(alloc_ns), -1, dtype="int64")
    covered = np.zeros(len(alloc_ns), dtype=bool)
    if deq.empty or len(alloc_ns) == 0:
        return place, covered
    starts = deq["start_ns"].to_numpy()
    idx = np.searchsorted(starts, alloc_ns, side="right") - 1
    ok = idx >= 0
    ok[ok] = alloc_ns[ok] <= deq["end_ns"].to_numpy()[idx[ok]]
    covered[:] = ok
    enq = queue[queue["kind"] == "enqueue"].drop_duplicates("correlation", keep="last")
    corr = deq["correlation"].to_numpy()[idx[ok]]
    # An index lookup, not ``reindex``: one missing enqueue would turn every start into float64
    # and round it to 256 ns.
    pos = pd.Index(enq["correlation"].to_numpy()).get_indexer(corr)
    found = np.full(len(corr), -1, dtype="int64")
    found[pos >= 0] = enq["start_ns"].to_numpy()[pos[pos >= 0]]
    place[ok] = found
    return place, covered


def read_operator_memory(path: Path, queue: pd.DataFrame | None, notes: list[Note]) -> pd.DataFrame:
    """operator_memory.csv → OP_MEMORY (KB → bytes, µs → ns, ``cann::`` rows re-timed).

    Rows without an allocation time (empty, 0 or N/A) describe nothing we can place and are
    skipped. Only ``cann::`` rows keep their name; the others take the name of the host op they
    land in (the record names are allocator internals, not ops). Sizes that are N/A count as 0
    bytes so that sums stay correct.

    ``queue`` None: the export has no timeline (trace_view.json missing), so there is no host op
    to land in and no dequeue to re-time by: every record keeps its own ``Name`` and its
    allocation time, and MemoryCompare groups them by that name.
    """
    df = read_csv(path, ("Name", "Size(KB)", "Allocation Time(us)"), ("Release Time(us)",))
    if df is None:
        notes.append(Note(f"{path.name} is empty: MemoryCompare has no NPU records"))
        return frame(OP_MEMORY, n=0)
    alloc = us_text_to_ns(df["Allocation Time(us)"])
    release = us_text_to_ns(_optional(df, "Release Time(us)"))
    release[release <= 0] = -1
    names = per_distinct(df["Name"], lambda s: s.str.strip())
    keep = alloc > 0
    place = alloc.copy()
    if queue is not None:
        is_cann = is_cann_allocation(names)
        cann_place, covered = _placement_via_queue(alloc[is_cann & keep], queue)
        cann_rows = np.flatnonzero(is_cann & keep)
        place[cann_rows] = cann_place
        uncovered = cann_rows[~covered]
        keep[uncovered] = False
        if len(uncovered):
            notes.append(Note(f"{path.name}: {len(uncovered)} cann:: record(s) lie in no dequeue event of "
                              "the trace and are left out of MemoryCompare"))
        names = names.where(is_cann, "")
    size = _scaled_int(_float(df["Size(KB)"]), KB, 0)
    return frame(OP_MEMORY, {
        "name": names[keep],
        "size_bytes": size[keep],
        "place_ns": place[keep],
        "alloc_ns": alloc[keep],
        "release_ns": release[keep],
    }, n=int(keep.sum()))


# ------------------------------------------------------------------------------------------------
# communication.json, profiler_info*.json, profiler_metadata.json
# ------------------------------------------------------------------------------------------------


def _num(value: object) -> float:
    """A JSON number as float; anything else (missing, string, null) as 0."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


class _Collective(msgspec.Struct, gc=False):
    """A step's ``collective`` object: its ``Total Op Info`` as raw JSON, the per-op entries
    (nearly all of the file) skipped without building an object."""

    total: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"{}"), name="Total Op Info")


class _Step(msgspec.Struct, gc=False):
    collective: Optional[_Collective] = None


_STEPS = msgspec.json.Decoder(dict[str, _Step])


def _bandwidth_steps(path: Path) -> dict[str, dict] | None:
    """communication.json as ``{step: {"collective": {"Total Op Info": …}}}`` — the only part
    :func:`read_bandwidth` reads — or None when the file is not that shape (not an object of
    objects, invalid JSON or UTF-8, unreadable): the whole file is then parsed by orjson, which
    also words any error. Why: the whole parse built the per-op entries of every step (a 28 MB
    file on the 32×92 side) to read one object per step: 0.4 s, and ≈ 60 MB of Python's
    allocator arenas that a few surviving objects kept from being returned."""
    try:
        raw = path.read_bytes()
        steps = _STEPS.decode(raw)
        if not raw.isascii():
            raw.decode("utf-8")  # orjson refuses bad UTF-8 anywhere, msgspec not in skipped values
        return {key: ({} if step.collective is None else
                      {"collective": {"Total Op Info": orjson.loads(memoryview(step.collective.total))}})
                for key, step in steps.items()}
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, orjson.JSONDecodeError, RecursionError):
        return None


def read_bandwidth(path: Path, notes: list[Note]) -> tuple[float, float]:
    """(RDMA, SDMA) bandwidth in GB/s from communication.json: size MB / time ms.

    Like the reference, the last step key that carries ``Communication Bandwidth Info`` wins.
    Unlike it (bug B3: the reference crashes on an unset variable), a file without bandwidth info
    gives 0 and a note.
    """
    data = _bandwidth_steps(path)
    if data is None:
        data = read_json(path)
    if not data:
        notes.append(Note(f"{path.name} is empty: RDMA/SDMA bandwidth is 0"))
        return 0.0, 0.0
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object keyed by step")
    found: tuple[float, float] | None = None
    for step in data.values():
        info = step.get("collective", {}) if isinstance(step, dict) else {}
        info = info.get("Total Op Info", {}) if isinstance(info, dict) else {}
        bw = info.get("Communication Bandwidth Info") if isinstance(info, dict) else None
        if not isinstance(bw, dict):
            continue
        rates = []
        for transport in ("RDMA", "SDMA"):
            entry = bw.get(transport, {})
            entry = entry if isinstance(entry, dict) else {}
            size_mb, time_ms = _num(entry.get("Transit Size(MB)")), _num(entry.get("Transit Time(ms)"))
            rates.append(size_mb / time_ms if time_ms > 0 else 0.0)
        found = (rates[0], rates[1])
    if found is None:
        notes.append(Note(f"{path.name} has no collective \"Communication Bandwidth Info\": "
                          "RDMA/SDMA bandwidth is 0"))
        return 0.0, 0.0
    return found


@dataclass
class ProfilerInfo:
    """What profiler_info*.json says about how the profile was collected."""

    level: str = ""
    with_stack: bool | None = None
    profile_memory: bool | None = None
    record_shapes: bool | None = None
    rank: int | None = None
    device: int | None = None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _id(*values: object) -> int | None:
    """First non-negative integer among ``values`` (torch_npu writes -1 for "no rank")."""
    for v in values:
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and v >= 0:
            return v
        if isinstance(v, str) and v.strip().isdigit():
            return int(v)
    return None


def read_profiler_info(path: Path, notes: list[Note]) -> ProfilerInfo:
    """profiler_info.json / profiler_info_<rank>.json → collection settings shown by ``info``."""
    data = read_json(path)
    if not isinstance(data, dict):
        notes.append(Note(f"{path.name} holds no settings object"))
        return ProfilerInfo()
    config = _dict(data.get("config"))
    common = _dict(config.get("common_config"))
    experimental = _dict(config.get("experimental_config"))
    level = experimental.get("_profiler_level", "")
    name_rank = re.fullmatch(r"profiler_info_(\d+)\.json", path.name)
    return ProfilerInfo(
        level=level if isinstance(level, str) else "",
        with_stack=_flag(common.get("with_stack")),
        profile_memory=_flag(common.get("profile_memory")),
        record_shapes=_flag(common.get("record_shapes")),
        rank=_id(data.get("rank_id"), common.get("rank_id"), name_rank and name_rank.group(1)),
        device=_id(data.get("device_id"), common.get("device_id")),
    )


def read_group_names(path: Path, notes: list[Note]) -> dict[str, str]:
    """profiler_metadata.json → {``Group <id> Communication`` (the HCCL thread name): pg name}."""
    data = read_json(path)
    groups = _dict(data).get("parallel_group_info")
    if not isinstance(groups, dict):
        notes.append(Note(f"{path.name} has no parallel_group_info: group names unknown"))
        return {}
    out: dict[str, str] = {}
    for group_id, info in groups.items():
        name = _dict(info).get("group_name", "")
        out.setdefault(f"Group {group_id} Communication", name if isinstance(name, str) else "")
    return out


# ------------------------------------------------------------------------------------------------
# step_trace_time.csv
# ------------------------------------------------------------------------------------------------

#: step_trace_time.csv columns (µs) the trace-less loader reads; ``Step`` is absent in MindSpore
#: graph mode and without a schedule, ``Device_id`` leads newer torch_npu files (neither matters).
STEP_TIME_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Free")


def read_step_trace_time(path: Path, notes: list[Note]) -> pd.DataFrame:
    """step_trace_time.csv → one row per step: ``step`` (-1 without a ``Step`` column) and the
    :data:`STEP_TIME_COLUMNS` in int64 ns (a missing or N/A cell is 0)."""
    df = read_csv(path, STEP_TIME_COLUMNS, ("Step", "Device_id", *STEP_TIME_COLUMNS))
    if df is None:
        notes.append(Note(f"{path.name} is empty: no per-step times"))
        return pd.DataFrame({"step": np.zeros(0, dtype="int64"),
                             **{c: np.zeros(0, dtype="int64") for c in STEP_TIME_COLUMNS}})
    out = {"step": _scaled_int(_float(_optional(df, "Step")), 1, -1)}
    for col in STEP_TIME_COLUMNS:
        out[col] = np.maximum(_scaled_int(_float(df[col]), 1000, 0), 0)
    return pd.DataFrame(out)
