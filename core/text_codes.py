"""Text columns as codes: each distinct text numbered by its first appearance.

Profiles repeat a few thousand names over hundreds of thousands of rows, so every text test and
every grouping runs on the distinct values and is broadcast back through the codes. Numbering a
column touches every cell; :meth:`perfcmp_core.model.Profile.codes` does it once per column of a
profile (and a profile read from the cache gets the codes the cache stored).
"""

from __future__ import annotations

import numpy as np


def first_seen_codes(values: np.ndarray | list[object]) -> tuple[np.ndarray, list[object]]:
    """Code of every cell (0, 1, … numbered by first appearance) and the distinct values in that
    order.

    ``map(dict.setdefault, …)`` records each cell's first row in one C-level pass with no Python
    frame per cell, reusing the strings' cached hashes (pd.factorize re-hashes the UTF-8 bytes
    of every cell, ~10x slower on long GPU kernel names); a lookup table then renumbers the
    first rows 0..k-1, which keeps first-appearance order because first rows increase with it.
    """
    n = len(values)
    seen: dict[object, int] = {}
    first = np.fromiter(map(seen.setdefault, values, range(n)), dtype=np.int64, count=n)
    number = np.empty(n, dtype=np.int64)
    number[np.fromiter(seen.values(), dtype=np.int64, count=len(seen))] = np.arange(len(seen))
    return number[first], list(seen)
