"""What each terminal cell of a lane shows, at any zoom, in work proportional to the cells.

A lane holds thousands of kernels; a terminal row holds a hundred cells, and every key (zoom,
pan, cursor) redraws them. So a lane is indexed once (:class:`LaneIndex`): its disjoint items in
time order, the prefix sums of their lengths, and a sparse table of the longest item over any
run of items. A cell ``[a, b)`` then costs a few binary searches, done for all cells of a row at
once with ``numpy.searchsorted``:

* **covered time**: ``C(b) − C(a)``, where ``C(t)`` — the time covered before ``t`` — is the
  prefix sum up to the last item starting at or before ``t`` plus that item's part before ``t``;
* **dominant item** (the one covering most of the cell, which names the cell and gives its
  class): the first item reaching into the cell, the last one starting in it, or the longest of
  those strictly between — which lie wholly inside the cell, so the sparse table answers it in one
  lookup. Ties go to the earlier item.

Both are exact: no pre-binned level can drift from the events. ``bench/tui_redraw.py
--timeline`` measures the keys that redraw them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cells:
    """One row of cells: covered ns per cell, the cell's length, and its dominant item (-1: none)."""

    covered: np.ndarray  # float64
    length: float
    item: np.ndarray  # int64 index into the lane's items

    @property
    def fraction(self) -> np.ndarray:
        """Covered share of each cell, 0 … 1."""
        return np.clip(self.covered / self.length, 0.0, 1.0) if self.length > 0 else np.zeros(len(self.covered))


@dataclass(frozen=True)
class LaneIndex:
    """Disjoint items ``[start, end)`` sorted by start, indexed for :meth:`cells`."""

    start: np.ndarray  # int64
    end: np.ndarray
    prefix: np.ndarray  # int64, prefix[i] = total length of items 0 … i-1
    longest: tuple[np.ndarray, ...]  # longest[k][i]: the longest item among i … i + 2**k - 1

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray) -> LaneIndex:
        """Index items that are disjoint and sorted by start (what :mod:`.build` makes)."""
        s = np.asarray(start, dtype="int64")
        e = np.asarray(end, dtype="int64")
        if len(s) > 1 and (np.any(s[1:] < e[:-1]) or np.any(e < s)):
            raise ValueError("lane items must be disjoint and sorted by start")
        dur = e - s
        prefix = np.concatenate([[0], np.cumsum(dur)]).astype("int64")
        table = [np.arange(len(s), dtype="int64")]
        span = 1
        while 2 * span <= len(s):
            prev = table[-1]
            a, b = prev[:-span], prev[span:]
            table.append(np.where(dur[b] > dur[a], b, a))
            span *= 2
        return cls(s, e, prefix, tuple(table))

    def __len__(self) -> int:
        return len(self.start)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """Time covered by the items before each ``t`` (float64 ns)."""
        t = np.asarray(t, dtype="float64")
        if not len(self.start):
            return np.zeros(t.shape)
        k = np.searchsorted(self.start, t, side="right")  # items starting at or before t
        last = np.maximum(k - 1, 0)
        part = np.clip(t - self.start[last], 0.0, (self.end - self.start)[last])
        return np.where(k > 0, self.prefix[last] + part, 0.0)

    def _longest(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The longest item among ``lo … hi`` inclusive (``lo <= hi``; ties: the earlier)."""
        k = np.floor(np.log2(np.maximum(hi - lo + 1, 1))).astype("int64")
        out = np.empty(len(lo), dtype="int64")
        dur = self.end - self.start
        for level in np.unique(k):  # a handful of levels, never one per cell
            sel = k == level
            t = self.longest[level]
            a = t[lo[sel]]
            b = t[hi[sel] - (1 << int(level)) + 1]
            out[sel] = np.where(dur[b] > dur[a], b, a)
        return out

    def cells(self, t0: float, t1: float, width: int) -> Cells:
        """The ``width`` cells splitting ``[t0, t1)`` evenly."""
        edges = t0 + (t1 - t0) * np.arange(width + 1, dtype="float64") / max(width, 1)
        covered = np.diff(self.covered_before(edges))
        item = np.full(width, -1, dtype="int64")
        if len(self.start) and width > 0:
            a, b = edges[:-1], edges[1:]
            first = np.searchsorted(self.end, a, side="right")  # first item ending after a
            last = np.searchsorted(self.start, b, side="left") - 1  # last item starting before b
            some = first <= last
            f, l_ = np.minimum(first, len(self) - 1), np.maximum(last, 0)
            ov_f = np.minimum(self.end[f], b) - np.maximum(self.start[f], a)
            ov_l = np.minimum(self.end[l_], b) - np.maximum(self.start[l_], a)
            best, best_ov = f.copy(), ov_f
            take = ov_l > best_ov
            best, best_ov = np.where(take, l_, best), np.where(take, ov_l, best_ov)
            inner = some & (last - first >= 2)
            if inner.any():
                m = np.full(width, -1, dtype="int64")
                m[inner] = self._longest(first[inner] + 1, last[inner] - 1)
                ov_m = np.where(inner, (self.end - self.start)[np.maximum(m, 0)], -1.0)
                # Earlier wins a tie: the middle beats the last item but not the first.
                take = inner & ((ov_m > best_ov) | ((ov_m == best_ov) & (best == l_) & (ov_m > ov_f)))
                best = np.where(take, m, best)
            item = np.where(some & (covered > 0), best, -1)
        return Cells(covered, float(t1 - t0) / max(width, 1), item)
