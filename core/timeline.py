"""Intervals on a timeline, in int64 nanoseconds: the one home of the interval algorithms.

Loaders nest host ops per thread and attach points (launches, allocations) to the innermost op
around them; the comparisons and the advisor ask the same questions of the loaded model, and
answer "how long was the device busy with X and not Y" with interval sets. Both layers import
this module, and it imports nothing of the project.

* Nesting: :func:`nest` (each interval's innermost container on its thread), :func:`innermost`
  (the innermost interval around each point), :func:`thread_key` / :func:`thread_groups` (which
  rows share a thread).
* Labelled pieces: :func:`overlaps` (cut intervals by a disjoint set, keeping which interval
  each piece came from), :func:`first_come` (split a union among overlapping intervals).
* Interval sets: :class:`Spans`. OverallMetrics is made of "busy with X and not Y" questions:
  compute time is the union of compute kernels, uncovered communication is communication minus
  compute, a group's wait is its Notify_Wait tasks inside the uncovered spans, and so on. The
  reference answers them with per-event sweeps (and, on GPU, by counting 1-µs ticks); here each
  answer is a few numpy passes over sorted arrays, exact in integer nanoseconds. A
  :class:`Spans` is always *normalised*: sorted, pairwise disjoint, non-touching and of positive
  length, and every operation returns a normalised value, so lengths never double-count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

_I64 = np.int64


# ------------------------------------------------------------------------------------ nesting


def nest(tid_key: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent row and depth of each interval, nesting only within the same ``tid_key``.

    An interval's parent is the innermost earlier interval of the same thread that fully contains
    it (start ≥ parent start and end ≤ parent end). Unlike the reference (one tree over all
    threads, start-only test, inclusive end), an op that outlives its would-be parent or lives on
    another thread is never nested under it, so self times cannot go negative.

    Inputs are parallel arrays in any order; outputs refer to positions in those arrays.

    With rows sorted by (thread, start, longest first) every earlier row of the thread starts
    no later, so the innermost container is simply the *nearest earlier row whose end is not
    before this one's* (the classic "previous greater element"; a stack walk finds the same
    row). That is found for all rows at once over a table of window maxima of the ends: each
    row first doubles a window back from itself until the window holds an end not before its
    own (or covers its whole thread), then halves back into that window to the nearest such row.
    Most parents are a few rows back (the previous row, or the previous sibling's subtree), so a
    row costs about twice the log of its distance rather than the log of the table; depths
    come from pointer jumping up the parents. O(n log n) at worst in numpy, instead of a Python
    loop per row (0.77 → 0.1 s for the 520k ops of an 8× trace, then ≈ 2.5× less again).
    """
    n = len(start)
    if n == 0:
        return np.full(0, -1, dtype="int64"), np.zeros(0, dtype="int64")
    order = _thread_order(tid_key, start, end)
    ends = end[order]
    tids = tid_key[order]
    first = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1]])  # first row of each thread
    thread_start = np.repeat(first, np.diff(np.r_[first, n]))
    sorted_parent = _previous_not_before(ends, first, thread_start)
    sorted_depth = _depths(sorted_parent)
    parent = np.full(n, -1, dtype="int64")
    has = sorted_parent >= 0
    parent[order[has]] = order[sorted_parent[has]]
    depth = np.empty(n, dtype="int64")
    depth[order] = sorted_depth
    return parent, depth


def _thread_order(tid_key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions sorted by (thread, start, longest first, position). Loaders pass rows already
    in (start, longest first) order; then a stable sort by thread alone gives the same order.
    Other rows are put in that order first (:func:`interval_order`, cheap on the nearly sorted
    starts of a trace): a three-key ``lexsort`` cost 8x more on 0.2M ops."""
    if len(start) > 1:
        step = np.diff(start)
        if (step >= 0).all() and (np.diff(end)[step == 0] <= 0).all():
            return np.argsort(tid_key, kind="stable")
    order = interval_order(start, end)
    return order[np.argsort(tid_key[order], kind="stable")]


def _previous_not_before(ends: np.ndarray, first: np.ndarray, thread_start: np.ndarray) -> np.ndarray:
    """For each position ``i``: the largest ``j`` in ``[thread_start[i], i)`` with
    ``ends[j] >= ends[i]``, or -1 (``first``: the first position of each thread).

    Rows ending after every earlier row of their thread have none (a running maximum per
    thread tells them apart). For the others, ``window_max[k][p]`` — the maximum of
    ``ends[p - 2**k + 1 .. p]``, built level by level only as far as some row needs — is used
    twice: each row doubles its window ``[i - 2**k, i)`` until it holds an end not before its
    own (the answer then lies in the window's older half, and not before the thread's first
    row), then walks that half down, halving, to the nearest such row.
    """
    n = len(ends)
    out = np.full(n, -1, dtype="int64")
    earlier_max = np.empty_like(ends)
    for a, b in zip(first.tolist(), np.r_[first[1:], n].tolist()):
        earlier_max[a] = ends[a]  # no earlier row: never a parent of itself (excluded below)
        if b - a > 1:
            earlier_max[a + 1:b] = np.maximum.accumulate(ends[a:b - 1])
    todo = np.flatnonzero((np.arange(n) > thread_start) & (earlier_max >= ends))
    window_max = [ends]
    found: list[np.ndarray] = []
    k = 0
    while len(todo):
        if k == len(window_max):
            prev, half = window_max[-1], 1 << (k - 1)
            level_max = np.empty_like(prev)  # not a copy: all but the first rows are written
            level_max[:half] = prev[:half]
            np.maximum(prev[half:], prev[:-half], out=level_max[half:])
            window_max.append(level_max)
        start = np.maximum(todo - (1 << k), 0)  # a window reaching before row 0 is cut there
        hit = _range_max(window_max, start, todo) >= ends[todo] if k else ends[todo - 1] >= ends[todo]
        found.append(todo[hit])
        todo = todo[~hit]
        k += 1
    if not found:
        return out
    # Deepest searches first, so the rows still walking at level m are a prefix.
    rows = np.concatenate(found[::-1])
    level = np.repeat(np.arange(len(found))[::-1], [len(f) for f in found[::-1]])
    # The 2**(level-1) rows right before the row hold no such end: search below them.
    hi = rows - np.where(level > 0, 1 << np.maximum(level - 1, 0), 0)
    lo = thread_start[rows]
    walking = np.cumsum([len(f) for f in found[::-1]])  # rows with level ≥ len(found)-1-i
    for m in range(len(found) - 3, -1, -1):
        count = walking[len(found) - 1 - (m + 2)]  # rows with level ≥ m + 2
        h = hi[:count]
        skip = (window_max[m][h - 1] < ends[rows[:count]]) & (h - (1 << m) >= lo[:count])
        h[skip] -= 1 << m
    out[rows] = hi - 1
    return out


def _range_max(window_max: list[np.ndarray], start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """max(ends[start:stop]) per row, for ``stop - start`` ≤ 2 ** (len(window_max) - 1)."""
    size = stop - start
    k = len(window_max) - 1
    full = size == (1 << k)
    out = np.empty(len(start), dtype=window_max[0].dtype)
    out[full] = window_max[k][stop[full] - 1]
    part = np.flatnonzero(~full)
    if len(part):  # near row 0 only: two overlapping windows of a smaller level
        lg = np.floor(np.log2(size[part])).astype("int64")
        for j in np.unique(lg).tolist():
            at = part[lg == j]
            out[at] = np.maximum(window_max[j][start[at] + (1 << j) - 1], window_max[j][stop[at] - 1])
    return out


def _depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each node of a forest given by parent positions (-1: root), by
    pointer jumping: each round adds the distance to the current ancestor and jumps to its
    ancestor, so ``log2(depth)`` rounds suffice."""
    dist = (parent >= 0).astype("int64")
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while len(live):
        target = up[live]
        dist[live] += dist[target]
        up[live] = up[target]
        live = live[up[live] >= 0]
    return dist


def thread_groups(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One group number per distinct (pid, tid) pair of these arrays, exact for ids of any size
    (hash grouping; a MultiIndex factorize is 10x slower). The numbers mean nothing outside
    this call: to compare threads across tables, use :func:`thread_key`."""
    return pd.DataFrame({"pid": pid, "tid": tid}).groupby(["pid", "tid"], sort=False).ngroup().to_numpy()


def thread_ids(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per row, equal exactly for rows of the same (pid, tid), for :func:`nest`: the
    :func:`thread_key` when every id fits 32 bits (then it is exact, and 20x cheaper than
    grouping), else the :func:`thread_groups` numbers."""
    if len(pid) and min(pid.min(), tid.min()) >= -(2**31) and max(pid.max(), tid.max()) < 2**31:
        return thread_key(pid, tid)
    return thread_groups(pid, tid)


def interval_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions sorted by (start, longer first, position): the row order of nested tables.

    Trace events come nearly in start order, which a stable sort of the starts alone passes
    over quickly; only the runs of equal starts are then sorted by end (a three-key
    ``lexsort`` costs 20x more on the 0.2M host ops of a 12-step trace)."""
    order = np.argsort(start, kind="stable")
    sorted_start = start[order]
    tie = sorted_start[1:] == sorted_start[:-1]
    if not tie.any():
        return order
    in_run = np.r_[tie, False] | np.r_[False, tie]
    at = np.flatnonzero(in_run)
    run = np.cumsum(np.r_[True, ~tie])[at]  # run number of each tied position
    # stable: equal ends keep the start sort's order, which is position order
    order[at] = order[at][np.lexsort((-end[order[at]], run))]
    return order


def thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid) so that "same thread" is a single integer comparison.

    Exact for OS thread ids (32-bit ``pid_t``) and for the negative codes loaders give text ids.
    """
    return (np.asarray(pid, dtype="int64") << 32) | (np.asarray(tid, dtype="int64") & 0xFFFFFFFF)


def innermost(
    iv_key: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
    iv_parent: np.ndarray,
    pt_key: np.ndarray,
    pt_ts: np.ndarray,
    strict: bool,
) -> np.ndarray:
    """Row of the innermost interval containing each point on the same thread, -1 for none.

    ``iv_parent`` must be the containment nesting of the intervals (as :func:`nest` computes).
    Containment is ``start <= ts <= end``, or ``start < ts < end`` when ``strict``. The candidate
    is the last interval of the thread starting before the point (shortest first on ties); if it
    ended too early, the answer is its nearest ancestor that did not — in a nested family every
    interval containing the point is an ancestor of that candidate. One vectorised step per
    nesting level, one ``searchsorted`` per thread.
    """
    out = np.full(len(pt_ts), -1, dtype="int64")
    if len(pt_ts) == 0 or len(iv_start) == 0:
        return out
    order = _thread_order(iv_key, iv_start, iv_end)
    sk, ss = iv_key[order], iv_start[order]
    side = "left" if strict else "right"
    for key in np.unique(pt_key):
        lo, hi = np.searchsorted(sk, key, "left"), np.searchsorted(sk, key, "right")
        if lo == hi:
            continue
        pts = np.flatnonzero(pt_key == key)
        pos = np.searchsorted(ss[lo:hi], pt_ts[pts], side=side) - 1
        ok = pos >= 0
        out[pts[ok]] = order[lo + pos[ok]]
    while True:
        has = out >= 0
        cur = out[has]
        ends = iv_end[cur]
        ts = pt_ts[has]
        too_early = ends <= ts if strict else ends < ts
        if not too_early.any():
            return out
        idx = np.flatnonzero(has)[too_early]
        out[idx] = iv_parent[out[idx]]


# ------------------------------------------------------------------------------ interval sets


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
        """Intersection (see :func:`overlaps`)."""
        _, _, s, e = overlaps(self.start, self.end, other.start, other.end)
        # Pieces are already sorted and disjoint (both inputs are normalised).
        return Spans(s, e)

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



def overlaps(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
             b_end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every non-empty overlap of an interval of A with an interval of B: ``(a_idx, b_idx, start,
    end)``, ordered by ``a_idx`` then ``b_idx``.

    B must be sorted and pairwise disjoint (touching allowed: step windows that tile time); A may
    be anything. Each A interval is paired with the run of B intervals it overlaps, found by
    binary search, so the cost is O((n + m) log m + pairs) — which is what lets a labelled set of
    pieces (kernels, idle gaps) be cut by windows or by another set while keeping each piece's
    identity, something a plain :class:`Spans` intersection forgets.
    """
    a_start, a_end, b_start, b_end = (_arr(x) for x in (a_start, a_end, b_start, b_end))
    empty = np.empty(0, dtype=_I64)
    if len(a_start) == 0 or len(b_start) == 0:
        return empty, empty, empty, empty
    lo = np.searchsorted(b_end, a_start, side="right")  # first b with end > a.start
    hi = np.searchsorted(b_start, a_end, side="left")  # first b with start >= a.end
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return empty, empty, empty, empty
    a_idx = np.repeat(np.arange(len(a_start), dtype=_I64), counts)
    # b index = lo[a] + position within the run of a
    run_start = np.cumsum(counts) - counts
    b_idx = lo[a_idx] + (np.arange(total, dtype=_I64) - run_start[a_idx])
    s = np.maximum(a_start[a_idx], b_start[b_idx])
    e = np.minimum(a_end[a_idx], b_end[b_idx])
    keep = e > s
    return a_idx[keep], b_idx[keep], s[keep], e[keep]


def first_come(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each interval's share of the union when overlaps go to the interval that started first
    (ties: the earlier row): ``(rows, start, end)`` of the non-empty shares, in time order.

    The shares are disjoint and their union is the union of the inputs, so per-row sums of share
    lengths add up to the union's length exactly — the rule that splits a busy period covered by
    two streams at once between the kernels running in it without counting any nanosecond twice.
    """
    s, e = _arr(start), _arr(end)
    if len(s) == 0:
        empty = np.empty(0, dtype=_I64)
        return empty, empty, empty
    order = np.lexsort((np.arange(len(s)), s))
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(np.maximum(e, s))
    before = np.concatenate([[s[0]], reach[:-1]])
    share_s = np.maximum(s, before)
    share_e = np.maximum(e, before)
    keep = share_e > share_s
    return order[keep], share_s[keep], share_e[keep]
