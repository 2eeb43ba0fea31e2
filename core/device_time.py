"""Where a profile's device time goes: to a host op, to communication, or unlinked — with why.

Every comparison that charges kernels to host ops (operators, modules, API, the advisor) silently
drops a kernel it cannot attach. This module is the one owner of that accounting, so ``info``,
the comparison notes and the tests all say the same thing, and so the sum always closes:
``linked_ns + communication_ns + unlinked_ns == total_ns``, exactly, in integer ns.

What counts as device time (the same rule for every input kind; ``docs/model.md``):

* every ``kernels`` row on the device timeline (``in_trace``) counts once with its full duration —
  kernels, copies, memsets, collectives. Device time is *stream time*: two kernels running at the
  same moment on two streams both count, as CPU time over cores does, so the total equals the sum
  of the kernel durations the operator sheets add up (it is not the wall-clock union that
  OverallMetrics reports as Computing Time);
* not counted, because no device work happens in them or it is counted elsewhere
  (:data:`EXCLUDED`): stream synchronisation tasks (NPU ``EVENT_WAIT``/``EVENT_RECORD``,
  placeholders, profiling markers: the stream waits; GPU traces do not record waits at all),
  communication tasks lying inside a collective row (NPU HCCL ``Notify_Wait``/``SDMA``… tasks:
  the collective's row already covers their time), and ``kernel_details.csv`` rows that are not on
  the device timeline (``in_trace`` False: a description without a recorded task).

Each counted row falls in exactly one bucket: ``communication`` (``is_comm``: NCCL kernels, HCCL
ops), ``linked`` (``op_row`` points at the host op that launched it), or ``unlinked`` with the
first reason of :data:`REASONS` that applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .model import Profile

# Row buckets of :func:`classify` (int8 codes). Reasons are codes from UNLINKED on.
EXCLUDED, LINKED, COMMUNICATION, UNLINKED = -1, 0, 1, 2

#: Why an unlinked row has no host op, in the order they are tested (keys of ``unlinked_by_reason``).
REASONS = ("launched_before_trace", "launch_not_recorded", "no_link")

#: Why a row is not device time (keys of :attr:`DeviceTime.excluded_by_reason`).
EXCLUDED_REASONS = ("stream_sync", "collective_task", "not_on_timeline")

#: NPU task types in which the stream only waits or marks (Text ``*_SQE`` spelling and Db's).
SYNC_TASK = re.compile(r"^(EVENT_(WAIT|RECORD)|PLACE_HOLDER|PROFILING_(ENABLE|DISABLE))", re.IGNORECASE)

_LINK_NAME = {"gpu": "correlation id", "npu_text": "async_npu flow", "npu_db": "connection id"}


@dataclass(frozen=True)
class DeviceTime:
    """The device-time partition of one profile (all ns; counts are ``kernels`` rows)."""

    total_ns: int
    linked_ns: int
    communication_ns: int
    unlinked_ns: int
    unlinked_by_reason: dict[str, int]
    tasks: int = 0
    linked_tasks: int = 0
    communication_tasks: int = 0
    unlinked_tasks: int = 0
    unlinked_tasks_by_reason: dict[str, int] = field(default_factory=dict)
    #: reason → (rows, ns) of what is not device time (see the module docstring)
    excluded_by_reason: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``device_time`` object of ``info --json`` (the identity's terms)."""
        return {"total_ns": self.total_ns, "linked_ns": self.linked_ns,
                "communication_ns": self.communication_ns, "unlinked_ns": self.unlinked_ns,
                "unlinked_by_reason": dict(self.unlinked_by_reason)}

    def detail_json(self) -> dict[str, Any]:
        """The ``device_time_detail`` object of ``info --json``: row counts and what is not counted."""
        return {"tasks": self.tasks, "linked_tasks": self.linked_tasks,
                "communication_tasks": self.communication_tasks, "unlinked_tasks": self.unlinked_tasks,
                "unlinked_tasks_by_reason": dict(self.unlinked_tasks_by_reason),
                "not_counted": {r: {"tasks": n, "ns": ns} for r, (n, ns) in self.excluded_by_reason.items()}}

    @classmethod
    def from_json(cls, main: dict[str, Any], detail: dict[str, Any]) -> DeviceTime:
        """Inverse of :meth:`to_json` + :meth:`detail_json` (``info`` renders the JSON form)."""
        return cls(**main, **{k: v for k, v in detail.items() if k != "not_counted"},
                   excluded_by_reason={r: (d["tasks"], d["ns"]) for r, d in detail["not_counted"].items()})


def classify(profile: Profile) -> np.ndarray:
    """Bucket of every ``kernels`` row: EXCLUDED, LINKED, COMMUNICATION, or UNLINKED + the index
    of its reason in :data:`REASONS`."""
    return _classify(profile)[0]


def not_counted(profile: Profile) -> dict[str, np.ndarray]:
    """Per reason of :data:`EXCLUDED_REASONS`, which ``kernels`` rows are not device time."""
    return _classify(profile)[1]


def device_time(profile: Profile) -> DeviceTime:
    """Partition the device time of ``profile`` (see the module docstring)."""
    code, excluded = _classify(profile)
    dur = profile.kernels["dur_ns"].to_numpy()
    counted = code != EXCLUDED
    buckets = UNLINKED + len(REASONS)
    rows = np.bincount(code[counted], minlength=buckets)
    # Integer sums per bucket (bincount weights would go through float64).
    sums = [int(dur[code == c].sum()) for c in range(buckets)]
    by_reason = {r: sums[UNLINKED + i] for i, r in enumerate(REASONS) if rows[UNLINKED + i]}
    by_reason_n = {r: int(rows[UNLINKED + i]) for i, r in enumerate(REASONS) if rows[UNLINKED + i]}
    excluded_out = {r: (int(m.sum()), int(dur[m].sum())) for r, m in excluded.items() if m.any()}
    return DeviceTime(
        total_ns=int(dur[counted].sum()), linked_ns=sums[LINKED], communication_ns=sums[COMMUNICATION],
        unlinked_ns=sum(by_reason.values()), unlinked_by_reason=by_reason,
        tasks=int(counted.sum()), linked_tasks=int(rows[LINKED]), communication_tasks=int(rows[COMMUNICATION]),
        unlinked_tasks=sum(by_reason_n.values()), unlinked_tasks_by_reason=by_reason_n,
        excluded_by_reason=excluded_out,
    )


def reason_text(reason: str, kind: str) -> str:
    """What the rows of ``reason`` are, for a profile of ``kind``: a predicate of "N kernels that
    …" for unlinked reasons, a noun phrase for excluded ones."""
    link = _LINK_NAME.get(kind, "link")
    texts = {
        "launched_before_trace": "were launched before the trace (or the selected step) began, "
                                 "so their launch is not recorded",
        "launch_not_recorded": ("have an async_npu flow that starts in no recorded host op" if kind == "npu_text"
                                else f"have a {link} that matches no recorded host op"),
        "no_link": ("carry no correlation id and no flow reaches them" if kind == "gpu"
                    else f"carry no {link}"),
        "stream_sync": "stream synchronisation tasks (event wait/record: the stream waits, no work runs)",
        "collective_task": "communication tasks inside a collective (counted through the collective)",
        "not_on_timeline": "kernel_details rows with no task on the device timeline",
    }
    return texts[reason]


def format_device_time(dt: DeviceTime, kind: str) -> list[str]:
    """``dt`` in words, one line per fact (``info``)."""
    if dt.total_ns == 0 and not dt.excluded_by_reason:
        return ["no device activity"]
    lines = [f"{_ms(dt.total_ns)}  in {dt.tasks:,} device tasks"]
    for label, ns, n in (("launched by host ops", dt.linked_ns, dt.linked_tasks),
                         ("communication", dt.communication_ns, dt.communication_tasks),
                         ("linked to no host op", dt.unlinked_ns, dt.unlinked_tasks)):
        lines.append(f"{_ms(ns)}  {_pct(ns, dt.total_ns):>7}  {label} ({n:,})")
    for reason, ns in dt.unlinked_by_reason.items():
        n = dt.unlinked_tasks_by_reason[reason]
        lines.append(f"{'':>22}  {_ms(ns).strip()} in {n:,} that {reason_text(reason, kind)}")
    for reason, (n, ns) in dt.excluded_by_reason.items():
        lines.append(f"not counted: {_ms(ns).strip()} in {n:,} {reason_text(reason, kind)}")
    return lines


def unlinked_note(label: str, dt: DeviceTime, kind: str) -> str | None:
    """The comparison note on device time no operator row accounts for, None when all is linked."""
    if not dt.unlinked_tasks:
        return None
    why = "; ".join(f"{dt.unlinked_tasks_by_reason[r]:,} {reason_text(r, kind)}" for r in dt.unlinked_by_reason)
    return (f"{label}: {dt.unlinked_tasks:,} kernels ({dt.unlinked_ns / 1e6:.3f} ms, "
            f"{_pct(dt.unlinked_ns, dt.total_ns)} of device time) are linked to no host op and appear in "
            f"no operator row: {why}")


# ------------------------------------------------------------------------------------------------


def _classify(profile: Profile) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    k = profile.kernels
    n = len(k)
    in_trace = k["in_trace"].to_numpy(dtype=bool)
    is_comm = k["is_comm"].to_numpy(dtype=bool)
    task_type = k["task_type"].to_numpy(dtype=object)
    start = k["start_ns"].to_numpy()
    end = start + k["dur_ns"].to_numpy()

    sync = in_trace & ~is_comm & _matches(profile, "task_type", SYNC_TASK)
    # Collective rows: NPU HCCL ops (``is_comm`` with no task type). Their tasks lie inside them.
    collective = in_trace & is_comm & (task_type == "")
    part = in_trace & is_comm & ~collective & _inside(start, end, start[collective], end[collective])
    excluded = {"stream_sync": sync, "collective_task": part, "not_on_timeline": ~in_trace}

    code = np.full(n, EXCLUDED, dtype="int8")
    counted = in_trace & ~sync & ~part
    code[counted & is_comm] = COMMUNICATION
    op_row = k["op_row"].to_numpy()
    linked = counted & ~is_comm & (op_row >= 0) & (op_row < len(profile.ops))
    code[linked] = LINKED
    lost = counted & ~is_comm & ~linked
    if lost.any():
        code[lost] = UNLINKED + _reasons(profile, np.flatnonzero(lost))
    return code, excluded


def _reasons(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """Index in :data:`REASONS` for each unlinked row."""
    link = profile.kernels["link"].to_numpy()[rows]
    out = np.full(len(rows), REASONS.index("no_link"), dtype="int8")
    out[link >= 0] = REASONS.index("launch_not_recorded")
    if profile.meta.kind == "gpu":
        # Correlation ids grow with every launch; one below every launch the trace recorded was
        # issued before recording began (real traces: up to 30 % of a short step's kernels).
        op_link = profile.ops["link"].to_numpy()
        recorded = op_link[op_link >= 0]
        first = recorded.min() if len(recorded) else np.iinfo("int64").max
        out[(link >= 0) & (link < first)] = REASONS.index("launched_before_trace")
    return out


def _matches(profile: Profile, column: str, pattern: re.Pattern[str]) -> np.ndarray:
    """``pattern`` matched against each distinct value of ``kernels[column]`` once (task types
    repeat a lot)."""
    codes, distinct = profile.codes("kernels", column)
    if not len(codes):
        return np.zeros(0, dtype=bool)
    hit = np.array([bool(pattern.match(str(u))) for u in distinct.tolist()] + [False], dtype=bool)
    return hit[codes]


def _inside(start: np.ndarray, end: np.ndarray, span_start: np.ndarray, span_end: np.ndarray) -> np.ndarray:
    """Whether each interval lies within the union of the spans."""
    out = np.zeros(len(start), dtype=bool)
    if not len(span_start) or not len(start):
        return out
    order = np.argsort(span_start, kind="stable")
    s, e = span_start[order], np.maximum.accumulate(span_end[order])
    # Merge overlapping spans: a block starts where a span begins after every earlier one ended.
    first = np.ones(len(s), dtype=bool)
    first[1:] = s[1:] > e[:-1]
    block_start = s[first]
    block_end = np.maximum.reduceat(e, np.flatnonzero(first))
    at = np.searchsorted(block_start, start, side="right") - 1
    ok = at >= 0
    out[ok] = end[ok] <= block_end[at[ok]]
    return out


def _ms(ns: int) -> str:
    return f"{ns / 1e6:9.3f} ms"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "0.0 %"
