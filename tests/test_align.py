"""LCS alignment: optimality against a brute-force DP, layout order, fallbacks and speed."""

from __future__ import annotations

import random
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np

from perfcmp_core.compare.align import _myers, align, align_runs, fill_by_position, lcs_length


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


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=9), st.lists(st.integers(0, 4), max_size=9),
                          st.booleans()), max_size=6),
       st.booleans())
def test_align_runs_gives_each_run_its_own_alignment(runs: list, structural: bool) -> None:
    """Many runs in one call (identical ones included: the flag copies the base run) give each
    run exactly what align() and fill_by_position() give it alone, at its own offsets."""
    bs = [a for a, _, _ in runs]
    cs = [list(a) if same else b for a, b, same in runs]
    b_n = np.array([len(a) for a in bs], dtype="int64")
    c_n = np.array([len(b) for b in cs], dtype="int64")
    b_lo, c_lo = np.cumsum(b_n) - b_n, np.cumsum(c_n) - c_n
    ptr, b_pos, c_pos, flags = align_runs(np.array(sum(bs, []), dtype="int64"), b_lo, b_n,
                                          np.array(sum(cs, []), dtype="int64"), c_lo, c_n, structural)
    for p, (a, b) in enumerate(zip(bs, cs)):
        steps = align(a, b)
        by_position = [False] * len(steps)
        if structural:
            steps, by_position = fill_by_position(steps)
        expected = [(-1 if i is None else int(b_lo[p]) + i, -1 if j is None else int(c_lo[p]) + j, f)
                    for (i, j), f in zip(steps, by_position)]
        lo, hi = ptr[p], ptr[p + 1]
        assert list(zip(b_pos[lo:hi].tolist(), c_pos[lo:hi].tolist(), flags[lo:hi].tolist())) == expected


def test_align_runs_with_one_side_empty_lay_out_that_side_alone() -> None:
    """Runs with nothing on one side (most of the module comparison's op runs on an unbalanced
    pair) are laid out without being solved, beside runs that are solved: each gives its one
    side's items in order, with nothing paired (not even by position), at its own offsets."""
    b_runs = [[1, 2], [], [3, 4, 5], [], [7]]
    c_runs = [[], [6, 6, 2], [3, 9, 5], [], [8]]
    b_n = np.array([len(r) for r in b_runs], dtype="int64")
    c_n = np.array([len(r) for r in c_runs], dtype="int64")
    b_lo, c_lo = np.cumsum(b_n) - b_n, np.cumsum(c_n) - c_n
    ptr, b_pos, c_pos, flags = align_runs(np.array(sum(b_runs, []), dtype="int64"), b_lo, b_n,
                                          np.array(sum(c_runs, []), dtype="int64"), c_lo, c_n, True)
    entries = list(zip(b_pos.tolist(), c_pos.tolist(), flags.tolist()))
    runs = [entries[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())]
    assert runs[0] == [(0, -1, False), (1, -1, False)]
    assert runs[1] == [(-1, 0, False), (-1, 1, False), (-1, 2, False)]
    assert runs[2] == [(2, 3, False), (3, 4, True), (4, 5, False)]  # solved: 9 paired by position
    assert runs[3] == []
    assert runs[4] == [(5, 6, True)]


def test_fill_by_position_pairs_only_one_each_gaps() -> None:
    """Gaps of exactly one base and one comparison item become one flagged pair; other gaps
    (two on a side, one side only) stay as they are; matched pairs are never touched."""
    steps = [(None, 0), (0, None), (1, 1), (2, None), (3, None), (None, 2), (4, 3), (5, None)]
    out, flags = fill_by_position(steps)
    assert out == [(0, 0), (1, 1), (2, None), (3, None), (None, 2), (4, 3), (5, None)]
    assert flags == [True, False, False, False, False, False, False]


def textbook_myers(a: list[int], b: list[int], max_d: int) -> tuple[bool, list[tuple[int, int]], tuple[int, int]]:
    """Myers' search one diagonal at a time with a full copy of ``v`` per round (the paper's
    form), cut at ``max_d`` and ended at the furthest on-grid point as the module describes:
    the independent oracle of the array rounds."""
    n, m = len(a), len(b)
    v: dict[int, int] = {1: 0}
    rounds: list[dict[int, int]] = []
    for d in range(min(n + m, max_d) + 1):
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            while x < n and x - k < m and a[x] == b[x - k]:
                x += 1
            v[k] = x
        rounds.append(dict(v))
        if n - m in v and abs(n - m) <= d and (n - m + d) % 2 == 0 and v[n - m] >= n:
            end = (n, m)
            break
    else:
        while True:
            d = len(rounds) - 1
            on_grid = [(2 * x - k, k, x) for k, x in rounds[d].items()
                       if -d <= k <= d and (k + d) % 2 == 0 and x <= n and x - k <= m]
            if on_grid:
                _, k, x = max(on_grid)
                end = (x, x - k)
                break
            rounds.pop()
    # Walk back: each round's move into the path's diagonal, then the snake after it.
    matches, (x, y) = [], end
    for d in range(len(rounds) - 1, 0, -1):
        k, prev = x - y, rounds[d - 1]
        down = k == -d or (k != d and prev[k - 1] < prev[k + 1])
        px = prev[k + 1] if down else prev[k - 1]
        sx = px if down else px + 1
        matches.extend((sx + t, sx + t - k) for t in range(x - sx - 1, -1, -1))
        x, y = px, px - (k + 1 if down else k - 1)
    matches.extend((t, t) for t in range(x - 1, -1, -1))
    return end == (n, m), matches[::-1], end


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=40), st.lists(st.integers(0, 5), max_size=40),
       st.sampled_from([1, 2, 3, 5, 10, 2000]))
def test_myers_rounds_equal_the_textbook_search(a: list[int], b: list[int], max_d: int) -> None:
    """The array rounds find the very path (not only one of the same length) that a plain
    diagonal-by-diagonal search finds, complete or cut: alignments do not change with the speed-up."""
    assert _myers(a, b, max_d) == textbook_myers(a, b, max_d)


def test_myers_rounds_on_sequences_that_share_keys_but_few_snakes() -> None:
    """The shape that made the search slow (a 1-step base against a 12-step comparison: common
    keys, a distance far above the budget, almost no equal diagonal starts): same path as the
    textbook search."""
    r = random.Random(11)
    base = [r.randrange(300) for _ in range(700)]
    comp = [r.randrange(300) for _ in range(1900)]
    assert _myers(base, comp, 400) == textbook_myers(base, comp, 400)


def test_key_codes_number_keys_by_first_appearance_across_both_sides() -> None:
    """``key_codes`` numbers equal keys alike by first appearance over base then comparison,
    whether the cells share objects (a large column: numbered by object first) or not."""
    from perfcmp_core.compare.align import key_codes

    names = [f"aten::op_{i % 37}" for i in range(5000)]
    shared = np.array([sys.intern(n) for n in names], dtype=object)
    fresh = np.array(["".join(n) for n in names], dtype=object)  # equal texts, other objects
    for b_keys, c_keys in ((shared[:3000], fresh[3000:]), (fresh[:10], shared[::-1][:20]),
                           (shared[:0], fresh[:5])):
        bk, ck = key_codes(b_keys, c_keys)
        first: dict[str, int] = {}
        expected = [first.setdefault(k, len(first)) for k in [*b_keys.tolist(), *c_keys.tolist()]]
        assert [*bk.tolist(), *ck.tolist()] == expected
    # missing keys stay uncoded, as pd.factorize leaves them
    bk, ck = key_codes(np.array(["a", None], dtype=object), np.array([None, "a"], dtype=object))
    assert bk.tolist() == [0, -1] and ck.tolist() == [-1, 0]
