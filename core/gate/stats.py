"""The noise test: a one-sided Mann-Whitney U test on per-step values (numpy and the standard
library only).

Step times are not normally distributed — a step that hits a garbage collection, a page fault or
a straggling collective is an outlier — so the gate compares the two sides' steps by rank: is a
comparison step larger than a base step more often than chance allows? One slow step moves a mean
a lot and a rank sum little, which is what keeps a single outlier from failing a gate.

Small samples without ties use the exact null distribution of U (every arrangement of the ranks
equally likely); larger ones, or ties, the normal approximation with the tie correction and a
continuity correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Largest n_base + n_comparison for the exact distribution (its counts stay exact in int64).
EXACT_MAX = 60
EXACT, NORMAL = "exact", "normal approximation"


@dataclass(frozen=True)
class RankTest:
    u: float  # U of the comparison side: pairs (base, comparison) with comparison larger, ties ½
    p: float  # one-sided p-value for "comparison steps are larger"
    method: str  # EXACT | NORMAL


def mann_whitney_greater(base: np.ndarray, comp: np.ndarray) -> RankTest:
    """One-sided Mann-Whitney U test of H1 "``comp`` values tend to be larger than ``base``"."""
    x = np.asarray(base, dtype="float64")
    y = np.asarray(comp, dtype="float64")
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("the rank test needs values on both sides")
    both = np.concatenate([x, y])
    ranks, tie_sizes = _average_ranks(both)
    u = float(ranks[m:].sum() - n * (n + 1) / 2)
    ties = bool((tie_sizes > 1).any())
    if not ties and m + n <= EXACT_MAX:
        counts = _u_counts(m, n)
        k = int(round(u))
        return RankTest(u, float(counts[k:].sum() / counts.sum()), EXACT)
    big_n = m + n
    var = m * n / 12.0 * ((big_n + 1) - float((tie_sizes ** 3 - tie_sizes).sum()) / (big_n * (big_n - 1)))
    if var <= 0:  # every value equal: no evidence either way
        return RankTest(u, 1.0, NORMAL)
    z = (u - m * n / 2.0 - 0.5) / math.sqrt(var)
    return RankTest(u, 0.5 * math.erfc(z / math.sqrt(2.0)), NORMAL)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks with ties sharing their mean rank, and the size of every tie group."""
    order = np.argsort(values, kind="stable")
    s = values[order]
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] != s[:-1]
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    sizes = np.diff(np.append(first, len(s)))
    mean_rank = first + (sizes + 1) / 2.0  # positions first+1 … first+size
    ranks = np.empty(len(s), dtype="float64")
    ranks[order] = mean_rank[group]
    return ranks, sizes.astype("float64")


def _u_counts(m: int, n: int) -> np.ndarray:
    """How many of the C(m+n, m) rank arrangements give U = 0 … m·n: the coefficients of the
    Gaussian binomial [m+n choose m]_q = Π_{i=1..m} (1 − q^(n+i)) / (1 − q^i), built one factor
    at a time (every intermediate is itself a Gaussian binomial, so int64 holds it exactly)."""
    poly = np.zeros(m * n + 1, dtype="int64")
    poly[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        nxt = poly.copy()
        nxt[shift:] -= poly[:-shift]
        for r in range(i):  # divide by (1 − q^i): a running sum over each residue class mod i
            nxt[r::i] = np.cumsum(nxt[r::i])
        poly = nxt
    return poly
