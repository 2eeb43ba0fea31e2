"""The model's table builder: every loader relies on it to coerce columns to the schema."""

from __future__ import annotations

import numpy as np

from perfcmp_core import model


def test_frame_maps_unrepresentable_integers_to_absent() -> None:
    """inf, NaN and values beyond int64 in an int64 column are "absent" (-1), never INT64_MIN."""
    df = model.frame(model.STEPS, {"step": [1, np.inf, 1e30, None, 5], "start_ns": [1, 2, 3, 4, 5]})
    assert df["step"].tolist() == [1, -1, -1, -1, 5]
    assert df["end_ns"].tolist() == [-1] * 5
