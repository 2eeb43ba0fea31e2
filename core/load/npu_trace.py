"""``trace_view.json`` of an NPU Text export as columns: the parsed events and the process layout.

The trace is parsed once with orjson into per-field columns (:class:`Events`); every later step of
:mod:`.npu_text` and :mod:`.npu_device` works on those columns. Times stay exact integer ns: the
exporter writes ``ts`` as a µs *string* with ns digits, and the flow and kernel_details joins are
exact matches on it. :class:`Layout` says which process plays which role (Ascend Hardware, HCCL,
Overlap Analysis) and how the HCCL threads form groups and planes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..errors import InputError
from .common import float_us_to_ns, us_text_to_ns

HARDWARE = "Ascend Hardware"
HCCL_PROCESSES = ("HCCL", "Communication")
OVERLAP_PROCESS = "Overlap Analysis"


# ------------------------------------------------------------------------------------------------
# Raw events → columns
# ------------------------------------------------------------------------------------------------


def read_events(path: Path) -> list[dict]:
    """The trace's event objects; anything that is not a JSON array of objects is an InputError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc}); is the file truncated?") from None
    if not isinstance(data, list):
        raise InputError(path, "is not an NPU trace_view.json (expected a JSON array of events)")
    return [e for e in data if isinstance(e, dict)]


def text_of(value: object) -> str:
    """Text form of an event field or arg: "" for absent, raw strings, ``str()`` otherwise."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def arg_values(args: list[dict], key: str) -> list:
    return [a.get(key) for a in args]


def arg_texts(args: list[dict], key: str) -> list[str]:
    return [text_of(a.get(key)) for a in args]


def _fast_array(values: list, dtype: str) -> np.ndarray | None:
    """``np.array(values, dtype)`` when every value is a plain scalar of that kind, else None."""
    try:
        arr = np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    return arr if arr.shape == (len(values),) else None  # nested lists would add dimensions


def numbers(values: list) -> np.ndarray:
    """int64 of JSON numbers / numeric strings; anything else → -1."""
    arr = _fast_array(values, "int64")
    if arr is not None:
        return arr
    s = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    return s.where(s.abs() < 2**63, np.nan).fillna(-1).to_numpy().astype("int64")


def floats(values: list) -> np.ndarray:
    """float64 of JSON numbers / numeric strings; anything else → NaN."""
    arr = _fast_array(values, "float64")
    if arr is not None:
        return arr
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype="float64")


@dataclass
class Events:
    """Columnar view of the trace (one row per event, file order) plus the raw dicts for args."""

    raw: list[dict]
    ph: np.ndarray
    cat: np.ndarray  # lower-cased
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    is_complete: np.ndarray  # an X event with a valid ts
    bad_dur: int  # complete events whose dur is missing, not a number or negative (read as 0)

    @classmethod
    def parse(cls, events: list[dict]) -> Events:
        def col(key: str) -> list:
            return [e.get(key) for e in events]

        def text(key: str) -> np.ndarray:
            return np.array([v if type(v) is str else text_of(v) for v in col(key)], dtype=object)

        ph = text("ph")
        ts_ns = us_text_to_ns(col("ts"))
        dur_ns = float_us_to_ns(floats(col("dur")))
        is_complete = (ph == "X") & (ts_ns >= 0)
        return cls(
            raw=events,
            ph=ph,
            cat=np.array([v.lower() if type(v) is str else text_of(v).lower() for v in col("cat")], dtype=object),
            name=text("name"),
            pid=numbers(col("pid")),
            tid=numbers(col("tid")),
            ts_ns=ts_ns,
            dur_ns=np.maximum(dur_ns, 0),
            is_complete=is_complete,
            bad_dur=int((is_complete & (dur_ns < 0)).sum()),
        )

    def flow_ids(self, rows: np.ndarray) -> np.ndarray:
        """``id`` of the given rows as text (flow ends pair on it; ints and strings both occur)."""
        raw = self.raw
        return np.array([text_of(raw[i].get("id")) for i in rows.tolist()], dtype=object)

    def args(self, rows: np.ndarray) -> list[dict]:
        """The ``args`` objects of the given rows ({} where absent or not an object)."""
        raw = self.raw
        return [a if isinstance(a, dict) else {} for a in (raw[i].get("args") for i in rows.tolist())]

    def complete(self, mask: np.ndarray) -> np.ndarray:
        """Rows of ``X`` events with a valid start that also satisfy ``mask``."""
        return np.flatnonzero(mask & self.is_complete)


# ------------------------------------------------------------------------------------------------
# Process / thread metadata
# ------------------------------------------------------------------------------------------------


@dataclass
class Layout:
    """Which pid plays which role, and the HCCL thread layout (spec inputs §4.1, §4.3)."""

    hardware_pid: int | None = None
    hccl_pid: int | None = None
    overlap_pid: int | None = None
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    group_threads: dict[int, tuple[str, int]] = field(default_factory=dict)  # tid → (name, order)
    plane_threads: dict[int, tuple[str, str, int]] = field(default_factory=dict)  # tid → (group, plane, sort)


def _sort_index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_layout(ev: Events, notes: list[str]) -> Layout:
    """Map pids by ``process_name`` (last match wins, as in the reference) and walk the HCCL
    threads in ``thread_sort_index`` order: a thread whose name contains ``Communication`` opens
    a group, every later named thread is a plane of it."""
    out = Layout()
    sort_index: dict[tuple[int, int], int] = {}
    rows = np.flatnonzero(ev.ph == "M")
    args = ev.args(rows)
    names, indexes = arg_texts(args, "name"), arg_values(args, "sort_index")
    for i, arg_name, idx in zip(rows.tolist(), names, indexes):
        kind, pid, tid = ev.name[i], int(ev.pid[i]), int(ev.tid[i])
        if kind == "process_name":
            if arg_name == HARDWARE:
                out.hardware_pid = pid
            elif arg_name in HCCL_PROCESSES:
                out.hccl_pid = pid
            elif arg_name == OVERLAP_PROCESS:
                out.overlap_pid = pid
        elif kind == "thread_name":
            out.thread_names[(pid, tid)] = arg_name
        elif kind == "thread_sort_index" and _sort_index(idx) is not None:
            sort_index[(pid, tid)] = int(idx)
    if out.hccl_pid is None:
        return out
    hccl = out.hccl_pid
    threads = [(sort_index[k], k[1]) for k in sort_index if k[0] == hccl]
    group, order = "", 0
    for sort, tid in sorted(threads):
        name = out.thread_names.get((hccl, tid), "")
        if "Communication" in name:
            out.group_threads[tid] = (name, order)
            group, order = name, order + 1
        elif name:
            out.plane_threads[tid] = (group, name, sort)
    unsorted = sorted(t for (p, t), n in out.thread_names.items()
                      if p == hccl and "Communication" in n and t not in out.group_threads)
    for tid in unsorted:
        out.group_threads[tid] = (out.thread_names[(hccl, tid)], len(out.group_threads))
    if unsorted:
        notes.append(f"{len(unsorted)} HCCL group thread(s) have no thread_sort_index: their "
                     "planes are unknown, so their Wait time is 0")
    return out
