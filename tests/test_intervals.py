"""Interval-set arithmetic: hand cases plus a brute-force cross-check on small integer ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcmp_core.timeline import Spans


def pairs(spans: Spans) -> list[tuple[int, int]]:
    return list(zip(spans.start.tolist(), spans.end.tolist()))


def test_of_merges_overlapping_touching_and_nested_intervals_in_any_order() -> None:
    s = Spans.of([30, 0, 5, 10, 50, 52], [40, 10, 8, 12, 60, 55])
    # [0,10) + nested [5,8) + touching [10,12) → [0,12); [50,60) swallows [52,55)
    assert pairs(s) == [(0, 12), (30, 40), (50, 60)]
    assert s.length == 12 + 10 + 10


def test_of_drops_empty_and_reversed_intervals() -> None:
    s = Spans.of([5, 7, 20], [5, 3, 25])
    assert pairs(s) == [(20, 25)]
    assert Spans.of([], []).length == 0


def test_intersection_pairs_each_interval_with_every_overlapping_one() -> None:
    a = Spans.of([0, 100], [50, 200])
    b = Spans.of([10, 40, 90, 150], [20, 120, 95, 300])
    # [10,20) [40,50) from the first a; [100,120) [150,200) from the second
    assert pairs(a & b) == [(10, 20), (40, 50), (100, 120), (150, 200)]
    assert (a & b).length == 10 + 10 + 20 + 50


def test_difference_keeps_uncovered_pieces_only() -> None:
    n = Spans.of([0, 100], [60, 130])
    c = Spans.of([10, 40, 100], [20, 70, 110])
    assert pairs(n - c) == [(0, 10), (20, 40), (110, 130)]
    assert pairs(n - Spans.empty()) == pairs(n)
    assert (Spans.empty() - c).length == 0


def test_union_and_lengths_are_exact_at_epoch_nanosecond_magnitudes() -> None:
    base = 1_736_413_971_558_972_912  # ns since epoch: beyond float64's integer precision
    s = Spans.of([base, base + 1], [base + 3, base + 5])
    assert s.length == 5
    assert Spans.of([base, base + 10], [base + 1, base + 11]).length == 2
    assert (Spans.of([base], [base + 5]) | Spans.of([base + 5], [base + 7])).length == 7


intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12)


def points(iv: list[tuple[int, int]]) -> set[int]:
    return {t for s, d in iv for t in range(s, s + d)}


def spans(iv: list[tuple[int, int]]) -> Spans:
    return Spans.of([s for s, _ in iv], [s + d for s, d in iv])


@settings(max_examples=300, deadline=None)
@given(intervals, intervals)
def test_set_operations_match_unit_point_sets(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    sa, sb = spans(a), spans(b)
    pa, pb = points(a), points(b)
    assert sa.length == len(pa)
    assert (sa | sb).length == len(pa | pb)
    assert (sa & sb).length == len(pa & pb)
    assert (sa - sb).length == len(pa - pb)
    for result in (sa & sb, sa - sb, sa | sb):
        # normalised: sorted, disjoint, non-touching, positive length
        assert np.all(result.end > result.start)
        assert np.all(result.start[1:] > result.end[:-1])
