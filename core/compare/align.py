"""Sequence alignment by longest common subsequence (LCS).

Every detail comparison (operators, modules, memory) pairs a base op sequence with a comparison op
sequence by key. The reference uses ``difflib.SequenceMatcher`` (longest contiguous block, then
recurse left/right), which is not an LCS: on the real alexnet traces it pairs 161 of the 192
comparison top-level ops although all 192 have a partner. We compute a true LCS instead.

Algorithm (exact unless the edit distance is huge):

1. Keys are mapped to small ints so that every comparison is an int comparison.
2. The common prefix and suffix are matched directly (the usual case for two runs of one model).
3. Keys that occur on only one side can never be matched; they are removed before the diff, which
   shrinks both the length and the edit distance D (a GPU-vs-NPU pair, whose names mostly differ,
   becomes tiny). Removing them does not change the LCS.
4. Myers' O((N+M)·D) greedy diff finds a shortest edit script, i.e. a longest common subsequence.
   Long diagonal runs ("snakes") are followed by comparing list slices of doubling size, so the
   repetitive layer-after-layer structure of profiles costs C-speed slice compares, not Python
   steps.

Fallback when D exceeds :data:`MAX_D` (Myers' cost grows with D²): split the problem at
"patience" anchors — keys that occur exactly once on each side, taking the longest increasing run
of their positions — and solve each gap between anchors exactly (recursively). If a range has no
unique anchor, the Myers search is cut at distance ``MAX_D``: the furthest-reaching path found so
far (an optimal alignment of the prefixes it covers, like GNU diff's "too expensive" heuristic) is
kept and the rest is solved from its end by further short searches of distance ``GREEDY_D``. Both steps may lose a few matches compared with the
optimum, but only on pairs of sequences that differ in more than ``MAX_D`` places.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from itertools import chain
from typing import Hashable, Sequence

import numpy as np

from ..compat import factorize_text

#: Largest edit distance searched exactly by one Myers run (work ≈ MAX_D² / 2 steps).
MAX_D = 2000

#: Stands for "no diagonal here" beside the outermost diagonals of a Myers round.
_NOWHERE = -(2**62)

#: Search budget of each round of the last-resort greedy fallback (see module docstring).
GREEDY_D = 128

Pair = tuple[int | None, int | None]


def align(base_keys: Sequence[Hashable], comp_keys: Sequence[Hashable], *, max_d: int = MAX_D) -> list[Pair]:
    """Align two key sequences by LCS.

    Returns ``(base_index, comp_index)`` entries in sequence order: matched items as pairs, unmatched
    ones as ``(i, None)`` / ``(None, j)``. Between two consecutive matches the unmatched base items
    come first, then the unmatched comparison items (the reference's layout).
    """
    ids: dict[Hashable, int] = {}
    a = np.array([ids.setdefault(k, len(ids)) for k in base_keys], dtype="int64")
    b = np.array([ids.setdefault(k, len(ids)) for k in comp_keys], dtype="int64")
    _, bi, cj, _ = align_runs(a, [0], [len(a)], b, [0], [len(b)], structural=False, max_d=max_d)
    return _pairs(bi, cj)


def key_codes(b_keys: np.ndarray, c_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two sides' keys as int codes for :func:`align_runs` (equal codes = equal keys), numbered
    by first appearance as ``pd.factorize`` numbers them.

    Why :func:`~perfcmp_core.compat.factorize_text`: the keys are a few hundred texts shared by
    tens of thousands of ops, numbered by object before any text is hashed (``pd.factorize``
    hashes every cell's text: 6 ms a step on the H200 pair)."""
    codes, _ = factorize_text(np.concatenate([np.asarray(b_keys, dtype=object), np.asarray(c_keys, dtype=object)]))
    return codes[: len(b_keys)], codes[len(b_keys):]


def align_runs(b_codes: np.ndarray, b_lo: Sequence[int] | np.ndarray, b_n: Sequence[int] | np.ndarray,
               c_codes: np.ndarray, c_lo: Sequence[int] | np.ndarray, c_n: Sequence[int] | np.ndarray,
               structural: bool, *, max_d: int = MAX_D) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Many alignments at once: run ``p`` aligns ``b_codes[b_lo[p] : b_lo[p] + b_n[p]]`` with
    ``c_codes[c_lo[p] : c_lo[p] + c_n[p]]`` (int key codes, equal codes = equal keys) as
    :func:`align` does, then, when ``structural``, pairs one-each leftovers as
    :func:`fill_by_position` does.

    The module comparison aligns the sub-modules and the top-layer ops of every module pair
    (130k runs on a 32-layer × 42-step profile), nearly all of them identical sequences, and the
    operator comparison a few runs of 10⁵ top-level ops. So only the LCS itself is solved per run
    in Python (identical runs are recognised with a few array operations and match one to one);
    laying out the entries and the structural pairing are array operations over all runs at
    once. Returns ``(ptr, b_pos, c_pos, by_position)``: run ``p``'s entries are ``[ptr[p],
    ptr[p + 1])``, positions index ``b_codes`` / ``c_codes`` (-1: absent on that side).
    """
    b_lo, b_n, c_lo, c_n = (np.asarray(x, dtype="int64") for x in (b_lo, b_n, c_lo, c_n))
    identical = b_n == c_n
    cand = np.flatnonzero(identical & (b_n > 0))
    t, owner = _offsets(b_n[cand])
    differs = b_codes[b_lo[cand][owner] + t] != c_codes[c_lo[cand][owner] + t]
    identical[cand[np.bincount(owner[differs], minlength=len(cand)) > 0]] = False
    # Matches (run, base offset, comp offset) in run order: identical runs one to one, the others by LCS.
    t, m_run = _offsets(np.where(identical, b_n, 0))
    # The other runs' matches gathered as plain lists (thousands of small runs: no arrays per run).
    solved_runs: list[int] = []
    solved: list[int] = []  # base offset, comp offset of each match, flattened
    # A run with one side empty has nothing to match (most of the module comparison's runs on
    # an unbalanced pair: a module pair's ops on one side only): laid out without solving.
    todo = np.flatnonzero(~identical & (b_n > 0) & (c_n > 0)).tolist()
    b_list, c_list = (b_codes.tolist(), c_codes.tolist()) if todo else ([], [])
    for p in todo:
        lo_b, lo_c = int(b_lo[p]), int(c_lo[p])
        found = _solve(b_list[lo_b : lo_b + int(b_n[p])], c_list[lo_c : lo_c + int(c_n[p])], max(1, max_d))
        solved_runs.extend([p] * len(found))
        solved.extend(chain.from_iterable(found))
    pairs = np.array(solved, dtype="int64").reshape(-1, 2)
    m_run = np.concatenate((m_run, np.array(solved_runs, dtype="int64")))
    order = np.argsort(m_run, kind="stable")
    bi, cj, run = _layout(m_run[order], np.concatenate((t, pairs[:, 0]))[order],
                          np.concatenate((t, pairs[:, 1]))[order], b_n, c_n)
    flags = np.zeros(len(bi), dtype=bool)
    if structural:
        bi, cj, flags, run = _fill(bi, cj, run)
    ptr = np.concatenate(([0], np.cumsum(np.bincount(run, minlength=len(b_n))))).astype("int64")
    return ptr, np.where(bi >= 0, b_lo[run] + bi, -1), np.where(cj >= 0, c_lo[run] + cj, -1), flags


def _pairs(bi: np.ndarray, cj: np.ndarray) -> list[Pair]:
    return [(None if i < 0 else i, None if j < 0 else j) for i, j in zip(bi.tolist(), cj.tolist())]


def _offsets(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``counts`` items laid end to end: each item's offset in its run and its run."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner], owner


def lcs_length(base_keys: Sequence[Hashable], comp_keys: Sequence[Hashable]) -> int:
    """Number of matched pairs :func:`align` finds (convenience for tests and reports)."""
    return sum(1 for i, j in align(base_keys, comp_keys) if i is not None and j is not None)


def _layout(m_run: np.ndarray, mb: np.ndarray, mc: np.ndarray, n: np.ndarray,
            m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`align`'s entries of every run from its matches (sorted by run, then position):
    (base offset, comp offset — -1 for none —, run) per entry. Each match is preceded by its gap's
    base items, then comp items; after a run's last match come the rest of both sides."""
    k = np.bincount(m_run, minlength=len(n))
    # Segments of a run: one per match (its gap, then itself), then the tail.
    seg_ptr = np.concatenate(([0], np.cumsum(k + 1)))
    seg_run = np.repeat(np.arange(len(n)), k + 1)
    seg_mb = np.full(int(seg_ptr[-1]), -1, dtype="int64")
    seg_mc = np.full(int(seg_ptr[-1]), -1, dtype="int64")
    at = seg_ptr[m_run] + np.arange(len(m_run)) - (np.cumsum(k) - k)[m_run]
    seg_mb[at], seg_mc[at] = mb, mc
    first = np.zeros(len(seg_mb), dtype=bool)
    first[seg_ptr[:-1]] = True
    start_b = np.where(first, 0, np.r_[-1, seg_mb[:-1]] + 1)
    start_c = np.where(first, 0, np.r_[-1, seg_mc[:-1]] + 1)
    is_match_seg = seg_mb >= 0
    nb = np.where(is_match_seg, seg_mb, n[seg_run]) - start_b
    nc = np.where(is_match_seg, seg_mc, m[seg_run]) - start_c
    off, seg = _offsets(nb + nc + is_match_seg)
    gb, gc = nb[seg], nc[seg]
    is_match = off >= gb + gc
    bi = np.where(off < gb, start_b[seg] + off, np.where(is_match, seg_mb[seg], -1))
    cj = np.where((off >= gb) & ~is_match, start_c[seg] + off - gb, np.where(is_match, seg_mc[seg], -1))
    return bi, cj, seg_run[seg]


def _fill(bi: np.ndarray, cj: np.ndarray, run: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fill_by_position` on :func:`_layout` entries, every run on its own: a gap (the
    entries between two matched ones of a run) of exactly one base and one comp item becomes one
    pair, flagged. Returns (base, comp, by position, run) of the kept entries."""
    matched = (bi >= 0) & (cj >= 0)
    run_start = np.r_[True, run[1:] != run[:-1]] if len(run) else np.zeros(0, dtype=bool)
    gap = np.cumsum(matched | run_start)  # the unmatched entries of one gap share it
    un = ~matched
    g_base, g_comp = gap[un & (bi >= 0)], gap[un & (cj >= 0)]
    size = len(bi) + 2
    one_each = (np.bincount(g_base, minlength=size) == 1) & (np.bincount(g_comp, minlength=size) == 1)
    in_pair = un & one_each[gap]
    first = in_pair & (run_start | np.r_[True, ~un[:-1]]) if len(bi) else in_pair
    base_of, comp_of = np.zeros(size, dtype="int64"), np.zeros(size, dtype="int64")
    base_of[g_base] = bi[un & (bi >= 0)]
    comp_of[g_comp] = cj[un & (cj >= 0)]
    bi, cj = bi.copy(), cj.copy()
    bi[first], cj[first] = base_of[gap[first]], comp_of[gap[first]]
    keep = ~in_pair | first
    return bi[keep], cj[keep], first[keep], run[keep]


def _common_run(a: list[int], b: list[int], x: int, y: int, n: int, m: int) -> int:
    """Length of the run of equal items starting at a[x], b[y] (bounded by n, m).

    Compares slices of doubling size so that long runs cost a few C-level list compares.
    """
    start = x
    step = 8
    while x < n and y < m and a[x] == b[y]:
        e = min(step, n - x, m - y)
        if a[x : x + e] == b[y : y + e]:
            x += e
            y += e
            step <<= 1
        else:
            step = max(1, step >> 2)
    return x - start


def _common_suffix(a: list[int], b: list[int], lo_a: int, lo_b: int, n: int, m: int) -> int:
    """Length of the common suffix of a[lo_a:n] and b[lo_b:m]."""
    i, j = n, m
    while i > lo_a and j > lo_b and a[i - 1] == b[j - 1]:
        i -= 1
        j -= 1
    return n - i


def _solve(a: list[int], b: list[int], max_d: int) -> list[tuple[int, int]]:
    """Matched index pairs (increasing in both coordinates) of an LCS of ``a`` and ``b``."""
    n, m = len(a), len(b)
    p = _common_run(a, b, 0, 0, n, m)
    s = _common_suffix(a, b, p, p, n, m)
    out = [(t, t) for t in range(p)]
    tail = [(n - s + t, m - s + t) for t in range(s)]
    n, m = n - s, m - s
    common = set(a[p:n]).intersection(b[p:m])
    ia = [i for i in range(p, n) if a[i] in common]
    jb = [j for j in range(p, m) if b[j] in common]
    if ia:
        fa = [a[i] for i in ia]
        fb = [b[j] for j in jb]
        out.extend((ia[i], jb[j]) for i, j in _solve_filtered(fa, fb, max_d))
    out.extend(tail)
    return out


def _solve_filtered(a: list[int], b: list[int], max_d: int) -> list[tuple[int, int]]:
    """LCS pairs of two sequences that share at least one key (exact while D <= max_d)."""
    done, path, (x, y) = _myers(a, b, max_d)
    if done:
        return path
    anchors = _patience_anchors(a, b)
    if anchors:
        return _solve_between(a, b, anchors, max_d)
    # No unique anchor: keep furthest-reaching partial paths, one short search after another.
    # A round of budget g costs about g²/2 steps and advances x + y by at least g.
    out = path
    g = min(max_d, GREEDY_D)
    while True:
        p = _common_run(a, b, x, y, len(a), len(b))
        out.extend((x + t, y + t) for t in range(p))
        x, y = x + p, y + p
        if x >= len(a) or y >= len(b):
            return out
        done, path, (dx, dy) = _myers(a[x:], b[y:], g)
        out.extend((x + i, y + j) for i, j in path)
        if done:
            return out
        x, y = x + dx, y + dy


def _solve_between(
    a: list[int], b: list[int], anchors: list[tuple[int, int]], max_d: int
) -> list[tuple[int, int]]:
    """Match the anchors and solve each gap between consecutive anchors (recursively)."""
    out: list[tuple[int, int]] = []
    px = py = 0
    for ax, ay in [*anchors, (len(a), len(b))]:
        out.extend((px + i, py + j) for i, j in _solve(a[px:ax], b[py:ay], max_d))
        if ax < len(a):
            out.append((ax, ay))
        px, py = ax + 1, ay + 1
    return out


def _patience_anchors(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """Pairs of keys unique on both sides, reduced to their longest increasing chain."""
    ca, cb = Counter(a), Counter(b)
    pos_b = {k: j for j, k in enumerate(b) if cb[k] == 1}
    cand = [(i, pos_b[k]) for i, k in enumerate(a) if ca[k] == 1 and k in pos_b]
    if not cand:
        return []
    # Longest increasing subsequence of the b positions (patience sorting with back links).
    tops: list[int] = []  # b position at the top of each pile
    top_idx: list[int] = []  # index into cand of that top
    back = [-1] * len(cand)
    for c, (_, j) in enumerate(cand):
        p = bisect_left(tops, j)
        if p == len(tops):
            tops.append(j)
            top_idx.append(c)
        else:
            tops[p] = j
            top_idx[p] = c
        back[c] = top_idx[p - 1] if p else -1
    chain: list[tuple[int, int]] = []
    c = top_idx[-1]
    while c != -1:
        chain.append(cand[c])
        c = back[c]
    chain.reverse()
    return chain


def _myers(a: list[int], b: list[int], max_d: int) -> tuple[bool, list[tuple[int, int]], tuple[int, int]]:
    """Myers' greedy shortest-edit-script search, cut at edit distance ``max_d``.

    Returns ``(complete, matches, end)``: when complete, ``matches`` is an LCS of the whole
    sequences and ``end == (n, m)``; otherwise ``matches`` is an optimal alignment of
    ``a[:end[0]]`` and ``b[:end[1]]`` where ``end`` is the furthest point reached at ``max_d``.

    Round ``d`` reads only round ``d - 1``'s points, so each round is a few array operations over
    its ``d + 1`` diagonals; only the diagonals whose point starts a snake (equal items) step in
    Python. Sequences that differ a lot — the case that runs up to ``max_d`` rounds — start a
    snake almost nowhere (one in two million steps on a real training-step pair), so such a
    search costs ``max_d`` small array rounds instead of ``max_d² / 2`` Python steps.
    """
    n, m = len(a), len(b)
    limit = min(n + m, max_d)
    av, bv = np.asarray(a, dtype="int64"), np.asarray(b, dtype="int64")
    # trace[d][i]: the furthest x reached on diagonal k = x - y = 2i - d after round d.
    trace: list[np.ndarray] = []
    x = np.zeros(1, dtype="int64")
    for d in range(limit + 1):
        if d:
            # From diagonal k + 1 (a step down) unless k - 1 got further (a step right, x + 1);
            # the outermost diagonals have one neighbour each (the sentinel is never taken).
            left = np.concatenate(([_NOWHERE], x))
            right = np.concatenate((x, [_NOWHERE]))
            x = np.where(left < right, right, left + 1)
        y = x - np.arange(-d, d + 1, 2)
        inside = np.flatnonzero((x < n) & (y < m))
        for i in inside[av[x[inside]] == bv[y[inside]]].tolist():
            x[i] += _common_run(a, b, int(x[i]), int(y[i]), n, m)
        trace.append(x)
        kk = n - m
        if -d <= kk <= d and (kk + d) % 2 == 0 and x[(kk + d) // 2] >= n:
            return True, _backtrack(trace, n, m), (n, m)
    # Cut: the on-grid point of the latest round that got furthest along the diagonals. Points
    # that stepped off the grid (x > n or y > m) are not paths; round 1 always has on-grid points.
    d = len(trace) - 1
    while True:  # ends at the latest at round 0, whose point (v, v) is always on the grid
        ks = range(-d, d + 1, 2)
        on_grid = [(x + x - k, k, x) for k, x in zip(ks, trace[d].tolist()) if x <= n and x - k <= m]
        if on_grid:
            _, k, x = max(on_grid)
            return False, _backtrack(trace[: d + 1], x, x - k), (x, x - k)
        d -= 1


def _backtrack(trace: list[np.ndarray], x: int, y: int) -> list[tuple[int, int]]:
    """Recover the matched pairs of the path ending at (x, y) from the per-round snapshots."""
    matches: list[tuple[int, int]] = []
    d = len(trace) - 1
    while d > 0:
        prev = trace[d - 1]
        k = x - y
        if k == -d or (k != d and prev[(k - 1 + d - 1) // 2] < prev[(k + 1 + d - 1) // 2]):
            pk = k + 1
            px = int(prev[(pk + d - 1) // 2])
            mx, my = px, px - pk + 1  # vertical move: insertion of b[px - pk]
        else:
            pk = k - 1
            px = int(prev[(pk + d - 1) // 2])
            mx, my = px + 1, px - pk  # horizontal move: deletion of a[px]
        for t in range(x - mx - 1, -1, -1):
            matches.append((mx + t, my + t))
        x, y = px, px - pk
        d -= 1
    for t in range(x - 1, -1, -1):
        matches.append((t, t))
    matches.reverse()
    return matches


def fill_by_position(steps: list[Pair]) -> tuple[list[Pair], list[bool]]:
    """Structural pairing of what the name alignment left one-sided.

    Between two consecutive matched pairs of one alignment (the children of one paired parent, the
    top-level ops of a step, the sub-modules of a paired module) the items left over are the ops
    one side has where the other has something else. When there is exactly one on each side, they
    are the same place of the same parent — what TraceLens' tree diff compares at their lowest
    common ancestor when vendors lower an op differently — so they are paired. The second list
    flags those pairs (``True`` = paired by position) so that screens can say so; with more than
    one leftover on a side nothing is guessed.
    """
    bi = np.array([-1 if i is None else i for i, _ in steps], dtype="int64")
    cj = np.array([-1 if j is None else j for _, j in steps], dtype="int64")
    bi, cj, flags, _ = _fill(bi, cj, np.zeros(len(bi), dtype="int64"))
    return _pairs(bi, cj), flags.tolist()
