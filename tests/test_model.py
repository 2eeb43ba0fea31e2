"""The model's table builder: every loader relies on it to coerce columns to the schema."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcmp_core import model


def test_frame_maps_unrepresentable_integers_to_absent() -> None:
    """inf, NaN and values beyond int64 in an int64 column are "absent" (-1), never INT64_MIN."""
    df = model.frame(model.STEPS, {"step": [1, np.inf, 1e30, None, 5], "start_ns": [1, 2, 3, 4, 5]})
    assert df["step"].tolist() == [1, -1, -1, -1, 5]
    assert df["end_ns"].tolist() == [-1] * 5


@pytest.mark.parametrize("values, expected", [
    (pd.Series(["a", "b"], dtype=object), ["a", "b"]),  # all str: the fast path
    (pd.Series(["a", None, np.nan, 3], dtype=object), ["a", "", "", "3"]),
    (pd.Series([], dtype=object), []),
    (pd.Series(["a", None], dtype="str"), ["a", ""]),  # a string column with a missing value
    (["x", None], ["x", ""]),
    ([1, 2], ["1", "2"]),
])
def test_frame_text_columns_fill_missing_and_convert_the_rest(values: object, expected: list[str]) -> None:
    """Text columns: missing values become "", anything else goes through str, whether or not
    the input was all str already (the fast path must not change a value or the dtype)."""
    df = model.frame({"name": model.STR}, {"name": values})
    assert df["name"].tolist() == expected
    assert all(type(v) is str for v in df["name"])
    assert df["name"].dtype == model.frame({"name": model.STR}, {"name": [""]})["name"].dtype


def test_frame_keeps_int64_columns_and_converts_others() -> None:
    df = model.frame(model.STEPS, {"step": np.array([3, -1, 7]), "start_ns": pd.Series([1.0, np.nan, 2.0]),
                                   "end_ns": np.array([1, 2, 3], dtype="int32")})
    assert df["step"].tolist() == [3, -1, 7]
    assert df["start_ns"].tolist() == [1, -1, 2]
    assert df["end_ns"].tolist() == [1, 2, 3]
    model.check(df, model.STEPS, "steps")


def test_nest_per_thread_with_full_containment() -> None:
    """Hand-derived: A 0–10 t1 holds C 2–5 t1; B 5–20 (t2) is a root of its own thread; D 8–12
    starts inside A but outlives it, so it is a root; E 3–4 sits in C (depth 2). Input order is
    shuffled: outputs refer to input positions."""
    from perfcmp_core.timeline import nest

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


def _nest_by_stack(tid: list[int], start: list[int], end: list[int]) -> tuple[list[int], list[int]]:
    """The definition, walked directly: per thread, rows by (start, longest first, input order);
    a stack of open intervals; pop those that do not contain the row; the top is its parent."""
    order = sorted(range(len(start)), key=lambda i: (tid[i], start[i], -end[i], i))
    parent, depth = [-1] * len(start), [0] * len(start)
    stack: list[int] = []
    prev = None
    for i in order:
        if tid[i] != prev:
            stack, prev = [], tid[i]
        while stack and not (start[stack[-1]] <= start[i] and end[i] <= end[stack[-1]]):
            stack.pop()
        if stack:
            parent[i], depth[i] = stack[-1], len(stack)
        stack.append(i)
    return parent, depth


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 15)),
                max_size=60))
def test_nest_matches_the_stack_walk(rows: list[tuple[int, int, int]]) -> None:
    """Vectorised nesting (binary lifting + pointer jumping) equals the plain stack walk on
    random overlapping, nested, equal and zero-length intervals over three threads."""
    from perfcmp_core.timeline import nest

    tid = [r[0] for r in rows]
    start = [r[1] for r in rows]
    end = [r[1] + r[2] for r in rows]
    parent, depth = nest(np.array(tid, dtype="int64"), np.array(start, dtype="int64"),
                         np.array(end, dtype="int64"))
    assert (parent.tolist(), depth.tolist()) == _nest_by_stack(tid, start, end)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), max_size=60), st.booleans())
def test_interval_order_is_start_then_longer_then_position(rows: list[tuple[int, int]],
                                                           presorted: bool) -> None:
    """The nested tables' row order, by its definition: sorted by (start, -end, position) in
    Python, on random starts with many ties (sorted first, as traces mostly come, or not)."""
    from perfcmp_core.timeline import interval_order

    if presorted:
        rows = sorted(rows)
    start = [r[0] for r in rows]
    end = [r[0] + r[1] for r in rows]
    expect = sorted(range(len(rows)), key=lambda i: (start[i], -end[i], i))
    got = interval_order(np.array(start, dtype="int64"), np.array(end, dtype="int64"))
    assert got.tolist() == expect


def test_thread_ids_are_equal_exactly_for_the_same_pid_and_tid() -> None:
    """Hand-derived: (1, 2) twice, (2, 1), (1, -5) (a text id's code): 3 threads; then ids
    beyond 32 bits, where the thread key is not exact (they go through the grouping):
    (2**40, 2) twice, (0, 2**40 + 2), (0, 2): 3 threads."""
    from perfcmp_core.timeline import thread_ids

    small = thread_ids(np.array([1, 2, 1, 1]), np.array([2, 1, 2, -5]))
    assert small[0] == small[2] and len(set(small.tolist())) == 3
    big = thread_ids(np.array([2**40, 0, 0, 2**40]), np.array([2, 2**40 + 2, 2, 2]))
    assert big[0] == big[3] and len(set(big.tolist())) == 3


_US_CHARS = st.sampled_from(list("0123456789") * 4 + list(".\t -+e\n٣"))
_US_TEXTS = st.one_of(
    st.builds(lambda w, f, tail: f"{w}.{f:03d}{tail}", st.integers(0, 10**17), st.integers(0, 999),
              st.sampled_from(["", "\t", " ", "\t\t", " \n"])),
    st.builds(lambda w, f: f"{w}.{f}", st.integers(0, 10**16), st.integers(0, 10**6)),
    st.text(_US_CHARS, max_size=24),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_US_TEXTS, max_size=40), st.integers(0, 3))
def test_us_texts_convert_exactly_as_one_by_one(texts: list[str], copies: int) -> None:
    """The digit-matrix conversion of µs texts (all texts written alike, as exporters do) gives
    exactly what the value-by-value parse gives, for every form of text, odd ones included."""
    from perfcmp_core.load.common import _INT64_MAX, _one_us_to_ns, us_text_to_ns

    texts = texts + texts[:1] * copies  # make one form the most common
    want = [v if (v := _one_us_to_ns(t)) <= _INT64_MAX else -1 for t in texts]
    assert us_text_to_ns(texts).tolist() == want


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 17), st.integers(-1, 4), st.sampled_from(["", "\t", " \t", "\n"]),
       st.lists(st.integers(0, 10**17 - 1), min_size=1, max_size=30),
       st.lists(st.tuples(st.integers(0, 29), st.integers(0, 30), _US_CHARS), max_size=2))
def test_us_texts_written_alike_convert_exactly_as_one_by_one(
        whole_digits: int, frac_digits: int, tail: str, numbers: list[int],
        edits: list[tuple[int, int, str]]) -> None:
    """The conversion of texts all written like the first (the usual case, converted without a
    pass over their lengths) gives what the value-by-value parse gives, also when a few texts are
    changed in one character, made longer or shorter: texts of unequal lengths that add up to as
    many characters as equal ones (``1.5``, ``12.55``, ``3``) must not be read as rows."""
    from perfcmp_core.load.common import _INT64_MAX, _one_us_to_ns, us_text_to_ns

    def text(n: int) -> str:
        whole = f"{n % 10**whole_digits:0{whole_digits}d}"
        frac = "" if frac_digits < 0 else "." + f"{n:05d}"[-frac_digits:] if frac_digits else "."
        return whole + frac + tail

    texts = [text(n) for n in numbers]
    for row, at, char in edits:
        if row < len(texts):
            t = texts[row]
            texts[row] = t[:at] + char + t[at + 1:] if at % 3 else t[:at] + char + t[at:]
    want = [v if (v := _one_us_to_ns(t)) <= _INT64_MAX else -1 for t in texts]
    assert us_text_to_ns(texts).tolist() == want
    assert us_text_to_ns(["1.5", "12.55", "3"]).tolist() == [1_500, 12_550, 3_000]
