"""The model's table builder: every loader relies on it to coerce columns to the schema."""

from __future__ import annotations

import numpy as np

from perfcmp_core import model


def test_frame_maps_unrepresentable_integers_to_absent() -> None:
    """inf, NaN and values beyond int64 in an int64 column are "absent" (-1), never INT64_MIN."""
    df = model.frame(model.STEPS, {"step": [1, np.inf, 1e30, None, 5], "start_ns": [1, 2, 3, 4, 5]})
    assert df["step"].tolist() == [1, -1, -1, -1, 5]
    assert df["end_ns"].tolist() == [-1] * 5


def test_nest_per_thread_with_full_containment() -> None:
    """Hand-derived: A 0–10 t1 holds C 2–5 t1; B 5–20 (t2) is a root of its own thread; D 8–12
    starts inside A but outlives it, so it is a root; E 3–4 sits in C (depth 2). Input order is
    shuffled: outputs refer to input positions."""
    from perfcmp_core.load.common import nest

    #            A   B   C   D   E
    tid = np.array([1, 2, 1, 1, 1])
    start = np.array([0, 5, 2, 8, 3])
    end = np.array([10, 20, 5, 12, 4])
    perm = np.array([3, 0, 4, 1, 2])
    parent, depth = nest(tid[perm], start[perm], end[perm])
    names = np.array(list("ABCDE"))[perm]
    got = {names[i]: (names[parent[i]] if parent[i] >= 0 else None, int(depth[i]))
           for i in range(5)}
    assert got == {"A": (None, 0), "B": (None, 0), "C": ("A", 1), "D": (None, 0), "E": ("C", 2)}
