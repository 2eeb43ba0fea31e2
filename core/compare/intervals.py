"""Interval-set arithmetic on int64 nanosecond time spans, vectorised with numpy.

OverallMetrics is made of "how long was the device busy with X and not Y" questions: compute time
is the union of compute kernels, uncovered communication is communication minus compute, a
group's wait is its Notify_Wait tasks inside the uncovered spans, and so on. The reference answers
them with per-event sweeps (and, on GPU, by counting 1-µs ticks); here each answer is a few numpy
passes over sorted arrays, exact in integer nanoseconds.

:class:`Spans` is always *normalised*: sorted, pairwise disjoint, non-touching and of positive
length. Every operation returns a normalised value, so lengths never double-count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_I64 = np.int64


def _arr(values: object) -> np.ndarray:
    return np.asarray(values, dtype=_I64).reshape(-1)


@dataclass(frozen=True)
class Spans:
    """A normalised set of half-open intervals ``[start, end)`` in ns."""

    start: np.ndarray
    end: np.ndarray

    @classmethod
    def empty(cls) -> Spans:
        return cls(np.empty(0, dtype=_I64), np.empty(0, dtype=_I64))

    @classmethod
    def of(cls, start: object, end: object) -> Spans:
        """The union of the intervals ``[start[i], end[i])`` (any order, overlaps allowed).

        Zero- and negative-length intervals contribute nothing and are dropped.
        """
        s, e = _arr(start), _arr(end)
        if s.shape != e.shape:
            raise ValueError(f"start/end length mismatch: {s.shape} vs {e.shape}")
        keep = e > s
        s, e = s[keep], e[keep]
        if len(s) == 0:
            return cls.empty()
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        reach = np.maximum.accumulate(e)
        # A new block starts where an interval begins strictly after everything before it ended;
        # touching intervals ([a, b) and [b, c)) are merged so the set stays non-touching.
        new_block = np.empty(len(s), dtype=bool)
        new_block[0] = True
        new_block[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new_block)
        last = np.append(first[1:] - 1, len(s) - 1)
        return cls(s[first], reach[last])

    def __len__(self) -> int:
        return len(self.start)

    @property
    def length(self) -> int:
        """Total covered time in ns."""
        return int((self.end - self.start).sum())

    def __or__(self, other: Spans) -> Spans:
        return Spans.of(np.concatenate([self.start, other.start]), np.concatenate([self.end, other.end]))

    def __and__(self, other: Spans) -> Spans:
        """Intersection. Each interval of ``self`` is paired with the run of ``other`` intervals
        it overlaps (found by binary search), so the cost is O((n + m) log m + pairs)."""
        if len(self) == 0 or len(other) == 0:
            return Spans.empty()
        lo = np.searchsorted(other.end, self.start, side="right")  # first b with end > a.start
        hi = np.searchsorted(other.start, self.end, side="left")  # first b with start >= a.end
        counts = np.maximum(hi - lo, 0)
        total = int(counts.sum())
        if total == 0:
            return Spans.empty()
        a_idx = np.repeat(np.arange(len(self)), counts)
        # b index = lo[a] + position within the run of a
        run_start = np.cumsum(counts) - counts
        b_idx = lo[a_idx] + (np.arange(total) - run_start[a_idx])
        s = np.maximum(self.start[a_idx], other.start[b_idx])
        e = np.minimum(self.end[a_idx], other.end[b_idx])
        keep = e > s
        # Pieces are already sorted and disjoint (both inputs are normalised).
        return Spans(s[keep], e[keep])

    def __sub__(self, other: Spans) -> Spans:
        """Difference: the parts of ``self`` not covered by ``other``."""
        if len(self) == 0 or len(other) == 0:
            return self
        lo_bound = min(int(self.start[0]), int(other.start[0]))
        hi_bound = max(int(self.end[-1]), int(other.end[-1]))
        gaps = Spans.of(
            np.concatenate([[lo_bound], other.end]), np.concatenate([other.start, [hi_bound]])
        )
        return self & gaps

