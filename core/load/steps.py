"""Keep one step of a profile (``--base-step`` / ``--comparison-step``).

Unlike the reference (which ignores the step for NPU Text OverallMetrics and rejects it for GPU),
the step window filters every table of every kind the same way: rows whose start lies in the
window ``[start, end]`` (inclusive) survive; allocations survive when their lifetime overlaps the
window. Row links (``op_row``, ``parent``) are renumbered so the model stays consistent.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..errors import InputError
from ..model import Profile

#: table → the column holding its start time
_START = {
    "kernels": "start_ns",
    "ops": "start_ns",
    "pyfuncs": "start_ns",
    "comm_ops": "start_ns",
    "comm_tasks": "start_ns",
    "overlap": "start_ns",
    "memory": "ts_ns",
    "queue": "start_ns",
    "fwdbwd": "start_ts_ns",
    "syncs": "start_ns",
}


def _remap(links: pd.Series, keep: np.ndarray) -> np.ndarray:
    """Map old row numbers to new ones after keeping rows ``keep`` (bool mask); lost → -1."""
    new_pos = np.cumsum(keep) - 1
    new_pos[~keep] = -1
    old = links.to_numpy()
    out = np.full(len(old), -1, dtype="int64")
    valid = (old >= 0) & (old < len(keep))
    out[valid] = new_pos[old[valid]]
    return out


def step_ids(profile: Profile) -> list[int]:
    return [int(s) for s in profile.steps["step"].tolist()]


def no_such_step(source: str, step: int, known: list[int]) -> InputError:
    """The one error for a requested step a profile does not have."""
    listed = ", ".join(str(s) for s in known) or "none (no ProfilerStep markers)"
    return InputError(source, f"has no step {step}; available steps: {listed}")


def step_window(profile: Profile, step: int) -> tuple[pd.DataFrame, int, int]:
    """The ``steps`` row of ``step`` and its window ``[lo, hi]`` in ns (InputError when the
    profile has no such step)."""
    steps = profile.steps
    hit = steps[steps["step"] == step]
    if hit.empty:
        raise no_such_step(profile.meta.source, step, step_ids(profile))
    return hit, int(hit["start_ns"].iloc[0]), int(hit["end_ns"].iloc[0])


def _in_window(profile: Profile, table: str, lo: int, hi: int) -> np.ndarray:
    """The rows of ``profile.<table>`` (one of ``_START``) that start inside ``[lo, hi]``."""
    t = getattr(profile, table)[_START[table]].to_numpy()
    return (t >= lo) & (t <= hi)


def rows_at(df: pd.DataFrame, rows: slice | np.ndarray) -> pd.DataFrame:
    """The rows :func:`window_positions` gave of ``df``, numbered from 0, with their link columns
    as they are (not renumbered: for readers of durations only). A slice is a view (pandas copies
    on write, and no reader writes to it): copying every column of a 500k-row table's slice per
    step was half the per-step cost."""
    return (df.iloc[rows] if isinstance(rows, slice) else df[rows]).reset_index(drop=True)


def window_positions(profile: Profile, table: str, lo: int, hi: int, ordered: bool = False) -> slice | np.ndarray:
    """The rows of ``profile.<table>`` that :func:`select_step` keeps for the window ``[lo, hi]``:
    a bool mask, or where ``ordered`` (the caller knows the table's start column never decreases,
    :func:`ordered_by_start`) one slice found by binary search instead of a test of every row (a
    hundred steps cut a 500k-row table a hundred times). Either indexes a per-row array of the
    table, such as its text codes."""
    if not ordered:
        return _in_window(profile, table, lo, hi)
    t = getattr(profile, table)[_START[table]].to_numpy()
    return slice(int(np.searchsorted(t, lo, side="left")), int(np.searchsorted(t, hi, side="right")))


def ordered_by_start(profile: Profile, table: str) -> bool:
    """Whether the start column :func:`window_positions` cuts ``profile.<table>`` by never decreases."""
    t = getattr(profile, table)[_START[table]].to_numpy()
    return bool((t[1:] >= t[:-1]).all())


def select_step(profile: Profile, step: int) -> Profile:
    """Return ``profile`` restricted to step ``step`` (raises InputError when it does not exist)."""
    hit, lo, hi = step_window(profile, step)
    keep = {name: _in_window(profile, name, lo, hi) for name in _START}
    om = profile.op_memory
    rel = om["release_ns"].to_numpy()
    keep_om = (om["alloc_ns"].to_numpy() <= hi) & ((rel < 0) | (rel >= lo))

    kernels = profile.kernels[keep["kernels"]].reset_index(drop=True)
    kernels["op_row"] = _remap(profile.kernels["op_row"][keep["kernels"]], keep["ops"])
    ops = profile.ops[keep["ops"]].reset_index(drop=True)
    ops["parent"] = _remap(profile.ops["parent"][keep["ops"]], keep["ops"])
    pyfuncs = profile.pyfuncs[keep["pyfuncs"]].reset_index(drop=True)
    pyfuncs["parent"] = _remap(profile.pyfuncs["parent"][keep["pyfuncs"]], keep["pyfuncs"])
    comm_tasks = profile.comm_tasks[keep["comm_tasks"]].reset_index(drop=True)
    comm_tasks["op_row"] = _remap(profile.comm_tasks["op_row"][keep["comm_tasks"]], keep["comm_ops"])

    # The cut's own metadata: the whole profile stays as it was (a long-lived comparison child
    # keeps it and cuts another step from it later, :mod:`perfcmp_core.held`).
    meta = replace(profile.meta, selected_step=step, notes=list(profile.meta.notes))
    op_statistic = profile.op_statistic
    if profile.meta.kind == "npu_db":  # the Db's statistic is made from the step's compute tasks
        from .npu_db_device import op_statistic as db_statistic

        op_statistic = db_statistic(kernels)
        meta.profiler_overlap_ns = profile.meta.profiler_overlap_steps.get(str(step), {})
    return Profile(
        meta=meta,
        kernels=kernels,
        ops=ops,
        pyfuncs=pyfuncs,
        fwdbwd=profile.fwdbwd[keep["fwdbwd"]].reset_index(drop=True),
        comm_ops=profile.comm_ops[keep["comm_ops"]].reset_index(drop=True),
        comm_tasks=comm_tasks,
        overlap=profile.overlap[keep["overlap"]].reset_index(drop=True),
        memory=profile.memory[keep["memory"]].reset_index(drop=True),
        op_memory=om[keep_om].reset_index(drop=True),
        queue=profile.queue[keep["queue"]].reset_index(drop=True),
        op_statistic=op_statistic,
        steps=hit.reset_index(drop=True),
        syncs=profile.syncs[keep["syncs"]].reset_index(drop=True),
    )
