"""Text numbered once: perfcmp_core.text_codes.categorical (the Categorical pandas makes of the
whole array, made from the distinct values) and Profile.among (isin through the profile's codes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile, ProfileMeta
from perfcmp_core.text_codes import BY_OBJECT_MIN, categorical

ROOT = Path(__file__).resolve().parents[1]


def _pool() -> np.ndarray:
    """Texts that sort differently from their first appearance, non-ASCII texts, the empty text,
    equal texts in different objects, missing values (None, two NaN objects) and a NUL."""
    pool = np.empty(12, dtype=object)
    pool[:] = ["zeta", "Alpha", "é", "中文", "", None, float("nan"), float("nan"), "a\x00b", "beta",
               "".join(["be", "ta"]), "alpha"]
    return pool


@pytest.mark.parametrize("size", [0, 1, 7, 300, 2 * BY_OBJECT_MIN])  # cell by cell, and by object
def test_categorical_is_pandas_categorical_of_the_whole_array(size: int) -> None:
    rng = np.random.default_rng(size)
    values = _pool()[rng.integers(0, 12, size=size)]
    want = pd.Categorical(values)
    got = categorical(values)
    assert got.dtype == want.dtype  # the same categories, in pandas' sorted order, same dtype
    assert got.codes.dtype == want.codes.dtype and got.codes.tolist() == want.codes.tolist()
    pd.testing.assert_extension_array_equal(got, want)


def test_categorical_sorts_categories_and_codes_missing_values_minus_one() -> None:
    values = np.array(["b", None, "a", "b", float("nan"), "é"], dtype=object)
    got = categorical(values)
    assert list(got.categories) == ["a", "b", "é"]  # sorted, not in order of appearance
    assert got.codes.tolist() == [1, -1, 0, 1, -1, 2]


@pytest.mark.parametrize("texts", [("cuda_runtime", "cuda_driver", "runtime"), ("cpu_op",),
                                   ("user_annotation", "no such category"), ()])
def test_profile_among_is_isin_of_the_column(texts: tuple[str, ...]) -> None:
    profile = load_profile(str(ROOT / "fixtures" / "gpu" / "base.pt.trace.json"))
    got = profile.among("ops", "cat", texts)
    want = profile.ops["cat"].isin(list(texts)).to_numpy()
    assert got.dtype == bool and got.tolist() == want.tolist()
    if texts == ("cpu_op",):
        assert 0 < got.sum() < len(got)  # the fixture holds ops of other categories too


def test_profile_among_of_an_empty_table() -> None:
    assert Profile(ProfileMeta(kind="gpu", source="none")).among("ops", "cat", ("cpu_op",)).tolist() == []
