"""Model-building steps shared by every loader: per-thread nesting and steps."""

from __future__ import annotations

import math
import re
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from ..model import STEPS, frame

_INT64_MAX = 2**63 - 1
_STEP_RE = re.compile(r"ProfilerStep#(\d+)")
_STEP_MARK = re.compile(r"ProfilerStep#\d+")  # no group: str.contains warns on capturing groups


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
    in (start, longest first) order; then a stable sort by thread alone gives the same order."""
    if len(start) > 1:
        step = np.diff(start)
        if (step >= 0).all() and (np.diff(end)[step == 0] <= 0).all():
            return np.argsort(tid_key, kind="stable")
    return np.lexsort((-end, start, tid_key))


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
            level_max = prev.copy()
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
    order = np.lexsort((-iv_end, iv_start, iv_key))
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


def steps_from_ops(names: pd.Series, start: pd.Series, end: pd.Series) -> pd.DataFrame:
    """The STEPS table from ``ProfilerStep#N`` host ops (first occurrence of each id wins)."""
    ids = names.str.extract(_STEP_RE, expand=False)
    mask = ids.notna().to_numpy()
    df = pd.DataFrame(
        {"step": ids[mask].astype("int64").to_numpy(), "start_ns": start[mask].to_numpy(),
         "end_ns": end[mask].to_numpy()}
    )
    df = df.drop_duplicates("step").sort_values("start_ns", kind="stable")
    return frame(STEPS, {c: df[c] for c in STEPS})


def per_name(names: pd.Series | np.ndarray, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """``test`` (a vectorised text test, e.g. ``lambda s: s.str.startswith("x")``) of each name,
    run once per distinct name: names repeat every step, and a regex per row of a 0.5M-op
    profile cost 1.5 s."""
    codes, uniques = pd.factorize(pd.Series(names, dtype=object), use_na_sentinel=False)
    if not len(uniques):
        return np.zeros(0, dtype=bool)
    return test(pd.Series(uniques, dtype=object).astype(str)).to_numpy(dtype=bool)[codes]


def is_step_name(names: pd.Series | np.ndarray) -> np.ndarray:
    """Which names mark a step (``ProfilerStep#N``)."""
    return per_name(names, lambda s: s.str.contains(_STEP_MARK, regex=True))


def is_module_name(names: pd.Series | np.ndarray) -> np.ndarray:
    """Which python frames are ``nn.Module`` calls (``nn.Module: Linear_0``, any case)."""
    return per_name(names, lambda s: s.str.lower().str.startswith("nn.module:"))


def assign_step(start_ns: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Step id of each time point (-1 outside every step window); windows assumed disjoint."""
    if steps.empty or len(start_ns) == 0:
        return np.full(len(start_ns), -1, dtype="int64")
    st = steps.sort_values("start_ns")
    lo = st["start_ns"].to_numpy()
    hi = st["end_ns"].to_numpy()
    ids = st["step"].to_numpy()
    idx = np.searchsorted(lo, start_ns, side="right") - 1
    ok = idx >= 0
    inside = np.zeros(len(start_ns), dtype=bool)
    inside[ok] = start_ns[ok] <= hi[idx[ok]]
    out = np.full(len(start_ns), -1, dtype="int64")
    out[inside] = ids[idx[inside]]
    return out


def float_us_to_ns(arr: np.ndarray) -> np.ndarray:
    """float64 µs → int64 ns without the 2**53 overflow of ``arr * 1000`` at epoch magnitudes
    (whole µs and the fraction are converted separately). NaN/inf and values beyond int64 ns
    (≈ 9.2e15 µs) → -1."""
    out = np.full(len(arr), -1, dtype="int64")
    ok = np.isfinite(arr) & (np.abs(arr) < 9.2e15)
    a = arr[ok]
    whole = np.floor(a)
    out[ok] = whole.astype("int64") * 1000 + np.round((a - whole) * 1000.0).astype("int64")
    return out


def us_to_ns(values: pd.Series) -> np.ndarray:
    """µs values (numbers, or strings such as ``"1736413971558972.912\\t"``) → int64 ns, exactly.

    Strings are split at the decimal point (:func:`us_text_to_ns`) so ns precision survives at
    epoch magnitudes, where a float64 µs value would round to 0.25 µs steps. Unparsable or
    negative cells become -1.
    """
    if values.dtype.kind in "iu":
        return values.to_numpy(dtype="int64") * 1000
    if values.dtype.kind == "f":
        return float_us_to_ns(values.to_numpy(dtype="float64"))
    return us_text_to_ns(values)


def _one_us_to_ns(value: object) -> int:
    """One µs value → int ns, exactly; -1 when it is not a non-negative number."""
    if isinstance(value, str):
        whole, _, frac = value.strip().partition(".")
        if whole.isascii() and whole.isdigit() and (not frac or (frac.isascii() and frac.isdigit())):
            return int(whole) * 1000 + int(frac[:3].ljust(3, "0"))
        return -1
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return -1
    if isinstance(value, int):
        return value * 1000 if value >= 0 else -1
    if not math.isfinite(value) or value < 0:
        return -1
    whole = math.floor(value)
    return int(whole) * 1000 + round((value - whole) * 1000.0)


def us_text_to_ns(values: Iterable[object]) -> np.ndarray:
    """µs values as the export writes them → exact int64 ns (-1 for anything unparsable).

    ``trace_view.json`` ``ts`` and the CSV time columns are µs *strings* with ns digits
    (``"1736413971558972.912\\t"``); splitting at the decimal point keeps every digit, where a
    float64 µs value would round to 0.25 µs at epoch magnitudes and break the exact joins.
    Strings written like most of them (an exporter writes every timestamp alike) are converted
    as one digit matrix (:func:`_plain_us_to_ns`: ≈ 0.05 µs a value, against 1 µs for one
    ``int()`` per value, 7.7 µs for a pandas regex extract); any other value goes through
    :func:`_one_us_to_ns`. Values past int64 become -1.
    """
    values = values.tolist() if isinstance(values, (pd.Series, np.ndarray)) else list(values)
    out = np.full(len(values), -1, dtype="int64")
    todo: Iterable[int] = range(len(values))
    if values and set(map(type, values)) == {str}:
        ns, ok = _plain_us_to_ns(values)
        out[ok] = ns[ok]
        todo = np.flatnonzero(~ok).tolist()
    for i in todo:
        v = _one_us_to_ns(values[i])
        out[i] = v if v <= _INT64_MAX else -1
    return out


#: Largest whole µs whose ns (with three decimals) fits int64.
_MAX_WHOLE_US = (_INT64_MAX - 999) // 1000


def _plain_us_to_ns(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ns, ok) of the texts written like the most common one — same length, the decimal point
    in the same place, digits around it, the same trailing tabs/spaces (an exporter writes every
    timestamp of a file alike: ``1736413971558972.912``, or with a tab in CSV files) — computed
    as one digit matrix; ``ok`` is False for every other text, which the caller converts one by
    one."""
    n = len(texts)
    ns = np.zeros(n, dtype="int64")
    ok = np.zeros(n, dtype=bool)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    width = int(np.bincount(lengths).argmax())
    rows = np.flatnonzero(lengths == width)
    model = texts[int(rows[0])]
    body = model.rstrip(" \t")
    point = body.find(".")
    digits_end = len(body)
    if width == 0 or not 0 < (point if point >= 0 else digits_end) <= 16:
        return ns, ok
    group = texts if len(rows) == n else [texts[i] for i in rows.tolist()]
    m = np.frombuffer("".join(group).encode("ascii", "replace"), dtype=np.uint8).reshape(len(group), width)
    whole_end = point if point >= 0 else digits_end
    # One row per character position (reductions over rows run vectorised; over the short
    # rows of the text matrix they cost 30 ns a text); digits become 0..9, anything else > 9.
    t = np.ascontiguousarray(m.T)
    d = t - np.uint8(48)
    good = (d[:whole_end].max(axis=0) <= 9) & (d[whole_end + 1:digits_end].max(axis=0, initial=0) <= 9)
    if point >= 0:
        good &= t[point] == 46
    tail = t[digits_end:]
    good &= ((tail == 9) | (tail == 32)).all(axis=0)
    whole = (10 ** np.arange(whole_end - 1, -1, -1, dtype=np.int64)) @ d[:whole_end].astype(np.int64)
    frac_digits = d[whole_end + 1:min(whole_end + 4, digits_end)] if point >= 0 else d[:0]
    scale = 10 ** np.arange(2, 2 - len(frac_digits), -1, dtype=np.int64)
    frac = scale @ frac_digits.astype(np.int64) if len(frac_digits) else np.zeros(len(group), dtype=np.int64)
    good &= whole <= _MAX_WHOLE_US
    ns[rows] = np.where(good, whole * 1000 + frac, 0)
    ok[rows] = good
    return ns, ok


#: The call instance at the end of an HCCL op name (``hcom_allReduce__868_0_1``: ``_868_0_1``).
_HCCL_INSTANCE = r"_\d+_\d+_\d+$"


def hccl_op_types(names: pd.Series) -> pd.Series:
    """The collective type an HCCL op name spells (``hcom_allReduce__868_0_1`` → ``hcom_allReduce_``):
    what level 1 writes as the op's type, and the only trace of it at level 0 (``N/A`` there), in
    both exports."""
    return names.astype(str).str.replace(_HCCL_INSTANCE, "", regex=True)
