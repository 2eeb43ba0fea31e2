"""Which step a compared row belongs to: the ``Step`` column of the module tree and of the
matched-pair tables (OperatorCompare, ModuleCompare, MemoryCompare).

A model's steps repeat the same ops and modules, so rows of one name come once per step; the
column tells them apart and says when the two sides' rows fall in different steps. It is a
screen (and ``--json``) column only: the reference's sheets keep their exact columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .result import Column

#: The matched-pair tables' step column: last, not exported (see :attr:`Column.export`).
STEP = Column("step", "Step", "key", "text", "", 8, export=False)


def step_of(start: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """The id of the step whose window holds each start time; -1 outside every step."""
    out = np.full(len(start), -1, dtype="int64")
    if steps.empty or not len(start):
        return out
    lo = steps["start_ns"].to_numpy(dtype="int64")
    hi = steps["end_ns"].to_numpy(dtype="int64")
    at = np.searchsorted(lo, np.asarray(start, dtype="int64"), side="right") - 1
    inside = (at >= 0) & (np.asarray(start) <= hi[np.maximum(at, 0)])
    out[inside] = steps["step"].to_numpy(dtype="int64")[at[inside]]
    return out


def step_labels(b_step: np.ndarray, c_step: np.ndarray) -> np.ndarray:
    """``"2"`` when both sides' steps agree (or one side has none), ``"2 / 5"`` when not, ``""``
    outside every step (or a side absent: -1). Each distinct (base, comparison) pair is spelled
    once (a table of 10⁵ rows holds a few hundred)."""
    b, c = np.asarray(b_step, dtype="int64"), np.asarray(c_step, dtype="int64")
    codes = pd.DataFrame({"b": b, "c": c}).groupby(["b", "c"], sort=False).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1] if len(codes) else np.zeros(0, dtype="int64")

    def text(v: np.ndarray) -> np.ndarray:
        return np.where(v >= 0, v.astype(str), "")  # dtype-neutral: numpy int array → numpy text
    bt, ct = text(b[first]), text(c[first])
    same = (bt == ct) | (bt == "") | (ct == "")
    labels = np.where(same, np.where(bt != "", bt, ct), np.char.add(np.char.add(bt, " / "), ct)).astype(object)
    return labels[codes] if len(codes) else labels
