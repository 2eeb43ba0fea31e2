"""LCS alignment: optimality against a brute-force DP, layout order, fallbacks and speed."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from perfcmp_core.compare.align import align, lcs_length


def dp_lcs(a: list, b: list) -> int:
    """Textbook O(n·m) LCS length, the independent oracle."""
    n, m = len(a), len(b)
    row = [0] * (m + 1)
    for i in range(n - 1, -1, -1):
        nxt = [0] * (m + 1)
        for j in range(m - 1, -1, -1):
            nxt[j] = row[j + 1] + 1 if a[i] == b[j] else max(row[j], nxt[j + 1])
        row = nxt
    return row[0]


def assert_valid(a: list, b: list, out: list) -> int:
    """Every index appears once, pairs match and increase, one-sided runs are base-first."""
    assert sorted(i for i, _ in out if i is not None) == list(range(len(a)))
    assert sorted(j for _, j in out if j is not None) == list(range(len(b)))
    pairs = [(i, j) for i, j in out if i is not None and j is not None]
    for i, j in pairs:
        assert a[i] == b[j]
    for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]):
        assert i1 < i2 and j1 < j2
    last_i = last_j = -1
    seen_comp_only = False
    for i, j in out:  # sequence order; within a gap no base-only entry after a comp-only one
        if i is not None:
            assert i > last_i
            last_i = i
        if j is not None:
            assert j > last_j
            last_j = j
        if i is not None and j is None:
            assert not seen_comp_only
        seen_comp_only = i is None
    return len(pairs)


small = st.lists(st.integers(0, 4), max_size=25)


@settings(max_examples=400, deadline=None)
@given(small, small)
def test_optimal_length_matches_dp(a: list[int], b: list[int]) -> None:
    assert assert_valid(a, b, align(a, b)) == dp_lcs(a, b)


@settings(max_examples=200, deadline=None)
@given(small, small, st.integers(1, 4))
def test_fallbacks_stay_valid_and_exact_within_budget(a: list[int], b: list[int], max_d: int) -> None:
    """A tiny search budget forces the patience / greedy fallbacks; the result stays a valid
    common subsequence, and is still optimal when the true distance is within budget."""
    got = assert_valid(a, b, align(a, b, max_d=max_d))
    best = dp_lcs(a, b)
    assert got <= best
    if len(a) + len(b) - 2 * best <= max_d:
        assert got == best


def test_layout_order_hand_example() -> None:
    base = ["A", "X", "B", "C"]
    comp = ["A", "Y", "Z", "B", "D"]
    assert align(base, comp) == [
        (0, 0),
        (1, None),  # base-only first …
        (None, 1),  # … then comparison-only
        (None, 2),
        (2, 3),
        (3, None),
        (None, 4),
    ]


def test_true_lcs_where_difflib_is_not() -> None:
    """difflib takes the longest contiguous block (B C D) first and loses the four A's."""
    base = ["A", "A", "A", "A", "B", "C", "D"]
    comp = ["B", "C", "D", "A", "A", "A", "A"]
    assert lcs_length(base, comp) == 4


def test_patience_fallback_keeps_unique_anchors() -> None:
    """Budget 1 cannot solve the whole problem; unique anchors U1/U2 split it into exact gaps."""
    base = ["a", "b", "U1", "c", "d", "U2", "e"]
    comp = ["b", "a", "U1", "d", "c", "U2", "e", "f"]
    out = align(base, comp, max_d=1)
    assert (2, 2) in out and (5, 5) in out and (6, 6) in out
    assert assert_valid(base, comp, out) == 5


def test_hashable_keys_of_mixed_types() -> None:
    base = [("aten::add", "[[2]]"), ("aten::mul", ""), 3]
    comp = [("aten::add", "[[2]]"), 3]
    assert align(base, comp) == [(0, 0), (1, None), (2, 1)]


def test_empty_sides() -> None:
    assert align([], []) == []
    assert align(["a"], []) == [(0, None)]
    assert align([], ["a", "b"]) == [(None, 0), (None, 1)]


def test_speed_100k_items_one_percent_edits() -> None:
    """100 000 repetitive ops (a 20-op layer repeated) with 1 % random edits: exact and fast."""
    r = random.Random(7)
    layer = [f"aten::op{r.randrange(12)}" for _ in range(20)]
    base = layer * 5000
    comp = list(base)
    for _ in range(1000):
        p = r.randrange(len(comp))
        kind = r.randrange(3)
        if kind == 0:
            comp[p] = f"aten::op{r.randrange(12)}"
        elif kind == 1:
            del comp[p]
        else:
            comp.insert(p, f"aten::op{r.randrange(12)}")
    out = align(base, comp)  # speed: bench/compare.py and docs/performance.md, not asserted here
    matched = assert_valid(base, comp, out)
    assert matched >= len(base) - 1000  # each edit costs at most one match


def test_unrelated_sequences_use_a_valid_fallback() -> None:
    """Two unrelated 20k sequences (D far above the budget, no unique keys) take the bounded
    fallback and still give a valid alignment."""
    r = random.Random(3)
    base = [r.randrange(40) for _ in range(20000)]
    comp = [r.randrange(40) for _ in range(20000)]
    out = align(base, comp)
    assert assert_valid(base, comp, out) > 0
