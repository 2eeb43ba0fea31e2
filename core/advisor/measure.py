"""How much time each (step, stage) spends per category, how busy it is, and how much
communication no compute hides.

* **Category time** — the sum of its items' durations.
* **Busy time** — the sum of the stage's item durations, i.e. the sum of its category times, so
  the categories partition it exactly whatever runs concurrently (two compute streams, a
  collective beside compute). It is the device *work* time the stage asked for — what a
  ``kernel_details.csv`` summary adds up — and the denominator of every share.
* **Wall time** — the length of the union of the stage's item intervals (≤ busy time; equal on
  one stream). Reported beside busy time, never divided by.
* **Exposed communication** — the part of the stage's communication intervals during which no
  compute item of any stage runs. A part of Comm, reported beside the categories, not inside
  their sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..timeline import Spans
from .categories import COMM
from .rules import CATEGORIES


@dataclass
class Window:
    """Device time per analysis window (a step; the whole profile when there are no steps) and stage.

    Axis 0 is the window, axis 1 the stage code; the last stage index is the whole profile ("All").
    """

    cat_ns: np.ndarray  # (windows, stages + 1, categories): summed item durations
    wall_ns: np.ndarray  # (windows, stages + 1): union of the stage's item intervals
    exposed_ns: np.ndarray  # (windows, stages + 1): communication during which no compute runs

    @property
    def busy_ns(self) -> np.ndarray:
        """(windows, stages + 1): the categories' sum — the share denominator."""
        return self.cat_ns.sum(axis=2)

    def pooled(self) -> "Window":
        """All windows added into one (the numerators and denominators of the mean shares)."""
        return Window(self.cat_ns.sum(axis=0, keepdims=True), self.wall_ns.sum(axis=0, keepdims=True),
                      self.exposed_ns.sum(axis=0, keepdims=True))


def _blocks(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-key interval unions in one pass: (key, start, end) of every merged block.

    Items are sorted by (key, start); a block ends where the next item of the same key starts
    after everything before it ended (touching intervals merge, as in :class:`Spans`).
    """
    if len(key) == 0:
        empty = np.empty(0, dtype="int64")
        return empty, empty, empty
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    reach = pd.Series(e).groupby(k).cummax().to_numpy()
    new = np.ones(len(k), dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(k) - 1)
    return k[first], s[first], reach[last]


def _covered(spans: Spans, x: np.ndarray) -> np.ndarray:
    """Length of ``spans`` before each time point ``x`` (a prefix sum over the normalised spans)."""
    if len(spans) == 0:
        return np.zeros(len(x), dtype="int64")
    length = spans.end - spans.start
    before = np.concatenate([[0], np.cumsum(length)])
    i = np.searchsorted(spans.start, x, side="right") - 1
    inside = np.where(i >= 0, np.minimum(x - spans.start[np.clip(i, 0, None)], length[np.clip(i, 0, None)]), 0)
    return before[np.clip(i, 0, None)] * (i >= 0) + inside


def measure(start: np.ndarray, end: np.ndarray, window: np.ndarray, stage: np.ndarray, cat: np.ndarray,
            n_windows: int, n_stages: int) -> Window:
    """Category sums, wall time and exposed communication per (window, stage), vectorised.

    Exposure is measured against the compute of all given items, so communication hidden behind
    another stage's (or step's) kernels counts as hidden.
    """
    width = n_stages + 1
    cat_ns = np.zeros((n_windows, width, len(CATEGORIES)), dtype="int64")
    np.add.at(cat_ns, (window, stage, cat), end - start)
    cat_ns[:, n_stages] = cat_ns[:, :n_stages].sum(axis=1)
    # Keys: (window, stage) for every stage, and (window, All) for the whole profile.
    key = np.concatenate([window * width + stage, window * width + n_stages])
    s2, e2 = np.concatenate([start, start]), np.concatenate([end, end])
    wall = np.zeros(n_windows * width, dtype="int64")
    bk, bs, be = _blocks(key, s2, e2)
    np.add.at(wall, bk, be - bs)
    is_comm = np.concatenate([cat, cat]) == COMM
    compute = Spans.of(start[cat != COMM], end[cat != COMM])
    ck, cs, ce = _blocks(key[is_comm], s2[is_comm], e2[is_comm])
    exposed = np.zeros(n_windows * width, dtype="int64")
    np.add.at(exposed, ck, (ce - cs) - (_covered(compute, ce) - _covered(compute, cs)))
    return Window(cat_ns, wall.reshape(n_windows, width), exposed.reshape(n_windows, width))
