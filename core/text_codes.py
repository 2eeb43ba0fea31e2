"""Text columns as codes: each distinct text numbered by its first appearance.

Profiles repeat a few thousand names over hundreds of thousands of rows, so every text test and
every grouping runs on the distinct values and is broadcast back through the codes. Numbering a
column touches every cell; :meth:`perfcmp_core.model.Profile.codes` does it once per column of a
profile (and a profile read from the cache gets the codes the cache stored).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: From this many cells on, :func:`first_seen_codes` groups the cells by object first.
BY_OBJECT_MIN = 4096


def first_seen_codes(values: np.ndarray | list[object]) -> tuple[np.ndarray, list[object]]:
    """Code of every cell (0, 1, … numbered by first appearance) and the distinct values in that
    order.

    The loaders make one object per distinct text and share it between the rows that repeat it
    (the Db's interned strings, the traces' names), so a column of half a million cells holds a
    few thousand objects. A large object array is therefore numbered by object first: the cells'
    object addresses (their identity, while the array holds them) are integers that
    ``pd.factorize`` numbers in C without touching a string, and only one cell per object is
    then numbered by text (:func:`_by_text`; two objects with equal texts get one code). Both
    steps number by first appearance, so the codes are the ones :func:`_by_text` gives the whole
    column (0.02–0.03 → 0.005–0.014 s for a 500k-row column of a 32×92 Db side).
    """
    grouped = by_object(values)
    if grouped is None:
        return _by_text(values)
    by_obj, firsts = grouped
    codes, distinct = _by_text(firsts)
    return codes[by_obj], distinct


def by_object(values: object) -> tuple[np.ndarray, np.ndarray] | None:
    """A large 1-d object array's cells numbered by object, by first appearance, and each
    object's first cell (an object array); None for anything else (a small or not an object
    array), which the caller numbers cell by cell.

    The numbering is exact for any grouping by value: cells holding one object hold one value.
    The addresses are read while the array holds their objects, so none is reused meanwhile.
    """
    if not (isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1
            and len(values) >= BY_OBJECT_MIN):
        return None
    cells = np.ascontiguousarray(values)
    try:
        address = np.frombuffer(cells, dtype=np.intp)
    except (TypeError, ValueError, BufferError):  # pragma: no cover - numpy exports object arrays
        return None
    numbered, _ = pd.factorize(address)
    # each object's first cell: where the running largest number grows (numbers count up from 0
    # in order of first appearance)
    seen = np.maximum.accumulate(numbered)
    return numbered, cells[np.flatnonzero(np.diff(seen, prepend=-1) > 0)]


def _by_text(values: np.ndarray | list[object]) -> tuple[np.ndarray, list[object]]:
    """:func:`first_seen_codes` cell by cell.

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


def among(values: np.ndarray, texts: frozenset[str]) -> np.ndarray:
    """Which cells of a text column equal one of ``texts`` (``np.isin``'s answer), each distinct
    object tested once (:func:`by_object`) or, in a small column, each cell by one set look-up.

    Why: ``np.isin`` of an object array compares every cell with every text in Python's
    comparison; the StepCompare's per-step task-type tests (E2E's task types, the SDMA and
    event-wait tasks) took a fifth of the steps made in the main process on the 32×92 Db pair.
    """
    if values.dtype != object:
        return np.isin(values, list(texts))
    grouped = by_object(values)
    if grouped is None:
        return np.fromiter(map(texts.__contains__, values), dtype=bool, count=len(values))
    numbered, firsts = grouped
    return np.fromiter(map(texts.__contains__, firsts), dtype=bool, count=len(firsts))[numbered]


def categorical(values: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(values)`` of a 1-d object array, with its text hashed once per distinct
    object instead of once per cell.

    Why: ``pd.Categorical`` factorises every cell's text (and on pandas 3 first infers and builds
    a ``str`` array of them); the step explanation's pieces are hundreds of thousands of cells
    holding a few hundred label objects (0.02 s of the H200 side's analysis). The cells are
    numbered by :func:`first_seen_codes` and only the distinct values go through
    ``pd.Categorical``, whose categories (sorted, missing values left out) and dtype are
    therefore the ones it gives the whole array; each cell takes its distinct value's code
    (-1 for a missing value, as ``pd.Categorical`` gives it).
    """
    codes, distinct = first_seen_codes(values)
    each = np.empty(len(distinct), dtype=object)
    each[:] = distinct
    small = pd.Categorical(each)
    return pd.Categorical.from_codes(small.codes[codes] if len(codes) else np.zeros(0, dtype=small.codes.dtype),
                                     dtype=small.dtype)
