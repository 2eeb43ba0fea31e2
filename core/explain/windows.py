"""Step windows: the stretch of time each step owns, tiling the profiled steps.

A training loop sees a step as the time from one iteration's start to the next's; that is what a
user means by "the step got longer", and it includes the host work before the step's first
kernel (loading the batch) that a device-only span leaves out. So a step's window runs from its
``ProfilerStep#N`` start to the start of step N+1 when that step follows it; the last step (or
one whose successor was not profiled) runs to its own end or to the end of the device work it
launched, whichever is later. Consecutive windows touch, so every nanosecond from the first
step's start to the last window's end belongs to exactly one step. A profile without step markers
is one window: its E2E span (first to last device task), the OverallMetrics E2E Time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compare.device_sets import DeviceSets
from ..model import Profile

#: Window of a profile without step markers.
WHOLE_PROFILE = -1


def step_windows(profile: Profile, sets: DeviceSets) -> pd.DataFrame:
    """``step``, ``start_ns``, ``end_ns`` per window, in time order (empty: no device activity
    and no steps)."""
    steps = profile.steps.sort_values("start_ns", kind="stable")
    if steps.empty:
        if sets.e2e_ns <= 0:
            return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_ns": pd.Series(dtype="int64"),
                                 "end_ns": pd.Series(dtype="int64")})
        return pd.DataFrame({"step": [WHOLE_PROFILE], "start_ns": [sets.lo], "end_ns": [sets.hi]}, dtype="int64")
    ids = steps["step"].to_numpy()
    start = steps["start_ns"].to_numpy()
    own_end = np.maximum(steps["end_ns"].to_numpy(), _device_end(profile, ids, start, steps["end_ns"].to_numpy()))
    end = own_end.copy()
    follows = ids[1:] == ids[:-1] + 1
    end[:-1] = np.where(follows, start[1:], np.minimum(own_end[:-1], start[1:]))
    return pd.DataFrame({"step": ids, "start_ns": start, "end_ns": np.maximum(end, start)}, dtype="int64")


def _device_end(profile: Profile, ids: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per step, the end of the last device task it launched or that began inside it (the device
    may still be working through a step's queue after its host part ended)."""
    k = profile.kernels
    k_start = k["start_ns"].to_numpy()
    k_end = k_start + k["dur_ns"].to_numpy()
    op_row = k["op_row"].to_numpy()
    ops_step = profile.ops["step"].to_numpy()
    launched_in = np.where((op_row >= 0) & (op_row < len(ops_step)), ops_step[np.clip(op_row, 0, None)], -1) \
        if len(ops_step) else np.full(len(k), -1)
    at = np.searchsorted(start, k_start, side="right") - 1
    began_in = np.where((at >= 0) & (k_start <= end[np.maximum(at, 0)]), ids[np.maximum(at, 0)], -1)
    out = np.full(len(ids), np.iinfo("int64").min, dtype="int64")
    index = pd.Index(ids)
    in_trace = k["in_trace"].to_numpy(dtype=bool)
    for step_of in (launched_in, began_in):
        at = index.get_indexer(step_of)
        ok = (at >= 0) & in_trace
        np.maximum.at(out, at[ok], k_end[ok])
    return out
