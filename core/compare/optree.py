"""The host-op forest of one profile, as the operator and memory comparisons see it.

Loaders nest ops per thread with proper containment (``Profile.ops.parent``). For the comparison
we need one forest per profile in which a user annotation such as ``## backward ##`` on the main
thread owns the autograd-thread ops that ran inside it — that grouping is what makes the
reference's top-level rows (``## forward ##``, ``## backward ##`` …) meaningful. So every
per-thread *root* is adopted by the innermost op of another thread that strictly contains its
whole interval. Unlike the reference (one start-only stack over all threads, quirk 3), nothing is
nested under an op it outlives, and same-thread nesting is the loader's exact one.

Kernels hang off the op that launched them by the loader's ``op_row`` link (correlation id /
flow / connection id), never by timestamp equality (quirk 2: no double counting, CUDA-graph
replays included). As in the reference, ``gpu_memset`` tasks and kernel-details rows missing from
the device timeline carry no device time for operators.

Everything is columnar: a depth-first preorder numbering makes every subtree a contiguous range,
so subtree sums are prefix-sum differences and "all kernels below an op" is one slice.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Callable, TypeVar

import numpy as np

from ..model import Profile
from ..timeline import thread_groups

#: Kernel task types that never count as operator device time (the reference ignores memsets).
UNCOUNTED_TASK_TYPES = ("gpu_memset",)

T = TypeVar("T")


@dataclass(frozen=True)
class Items:
    """Things attached to ops (kernels, memory records), grouped by the op's preorder position.

    ``rows`` are the item rows (into the source table) ordered by (op preorder, item order);
    the items of the op at preorder position ``p`` are ``rows[ptr[p]:ptr[p + 1]]``.
    """

    rows: np.ndarray
    op: np.ndarray  # op row of each entry of ``rows``
    ptr: np.ndarray


@dataclass(frozen=True)
class OpForest:
    """Adopted host-op forest of one profile (arrays indexed by ``Profile.ops`` row)."""

    profile: Profile
    parent: np.ndarray  # adopted parent row, -1 for roots
    depth: np.ndarray
    pre: np.ndarray  # depth-first preorder position
    size: np.ndarray  # number of ops in the subtree, itself included
    child_ptr: np.ndarray  # children of r: child_idx[child_ptr[r]:child_ptr[r + 1]], start order
    child_idx: np.ndarray
    kernels: Items
    kernel_num: np.ndarray  # counted kernels in the subtree
    device_ns: np.ndarray  # Σ counted kernel durations in the subtree
    top: np.ndarray  # top-level op rows, start order

    def children(self, row: int) -> np.ndarray:
        return self.child_idx[self.child_ptr[row] : self.child_ptr[row + 1]]

    def subtree_items(self, items: Items, row: int) -> np.ndarray:
        """Item rows of the subtree of ``row`` in the reference's breadth-first order: the op's
        own items, then level by level (within a level, preorder = the reference's queue order)."""
        lo = items.ptr[self.pre[row]]
        hi = items.ptr[self.pre[row] + self.size[row]]
        if hi - lo <= 1:
            return items.rows[lo:hi]
        order = np.argsort(self.depth[items.op[lo:hi]], kind="stable")
        return items.rows[lo:hi][order]

    def subtree_gather(self, items: Items, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per op row (-1: none), its subtree's items in :meth:`subtree_items` order: (item
        rows, row after row; items per row). All rows' items are gathered and ordered at once
        (by row, depth, preorder)."""
        rows = np.asarray(rows, dtype="int64")
        if len(self.pre) == 0:  # no ops: every row is absent
            return np.zeros(0, dtype="int64"), np.zeros(len(rows), dtype="int64")
        r = np.maximum(rows, 0)
        lo = np.where(rows >= 0, items.ptr[self.pre[r]], 0)
        counts = np.where(rows >= 0, items.ptr[self.pre[r] + self.size[r]], 0) - lo
        first = np.cumsum(counts) - counts  # each row's first slot in the gathered items
        group = np.repeat(np.arange(len(rows)), counts)
        pos = np.arange(len(group)) + np.repeat(lo - first, counts)
        return items.rows[pos[np.lexsort((pos, self.depth[items.op[pos]], group))]], counts

    def subtree_sum(self, per_op: np.ndarray) -> np.ndarray:
        """Σ of a per-op value over each op's subtree (vectorised prefix-sum difference)."""
        return subtree_sum(self.pre, self.size, per_op)

    def group(self, op_of_item: np.ndarray, item_order: np.ndarray) -> Items:
        """Index items attached to ops (``op_of_item`` ≥ 0) by op preorder, then ``item_order``."""
        return group_items(self.pre, op_of_item, item_order)

    def segments(self) -> list[tuple[bool, np.ndarray]]:
        """Top-level ops cut into runs on / off the backward (autograd) thread (spec §2.4a)."""
        return split_segments(self.top, self.profile.ops["tid"].to_numpy(), self.profile.meta.backward_tid)


def group_items(pre: np.ndarray, op_of_item: np.ndarray, item_order: np.ndarray) -> Items:
    keep = np.flatnonzero(op_of_item >= 0)
    ops = op_of_item[keep]
    order = np.lexsort((item_order[keep], pre[ops]))
    rows, ops = keep[order], ops[order]
    counts = np.bincount(pre[ops], minlength=len(pre))
    return Items(rows=rows, op=ops, ptr=np.concatenate(([0], np.cumsum(counts))).astype("int64"))


def subtree_sum(pre: np.ndarray, size: np.ndarray, per_op: np.ndarray) -> np.ndarray:
    by_pre = np.zeros(len(pre), dtype=per_op.dtype)
    by_pre[pre] = per_op
    csum = np.concatenate(([0], np.cumsum(by_pre)))
    return csum[pre + size] - csum[pre]


# ---------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------

#: id(profile) → (weak reference to it, what was derived from it by name). Values never refer to
#: the profile (the forest is kept as its arrays), so the cache never keeps a profile alive; the
#: entry goes when the profile does.
_CACHE: dict[int, tuple[weakref.ref[Profile], dict[str, object]]] = {}


def derived(profile: Profile, name: str, build: Callable[[Profile], T]) -> T:
    """``build(profile)``, computed once per live profile and ``name`` (the operator, module and
    memory comparisons and the TUI drill-in views all ask for the same forest and kernel lines).
    The value must not refer to the profile."""
    key = id(profile)
    hit = _CACHE.get(key)
    if hit is None or hit[0]() is not profile:
        hit = (weakref.ref(profile, lambda _ref, k=key, cache=_CACHE: cache.pop(k, None)), {})
        _CACHE[key] = hit
    values = hit[1]
    if name not in values:
        values[name] = build(profile)
    return values[name]  # type: ignore[return-value]


@contextmanager
def derived_forgotten() -> Iterator[None]:
    """Run the block, then forget what was derived in it (what was derived before stays): for a
    worker whose results are self-contained, which then holds the forests no longer (≈ 68 MB on
    the 32×92 NPU Db pair) while it sends them."""
    before = {key: set(values) for key, (_, values) in _CACHE.items()}
    try:
        yield
    finally:
        for key, (_, values) in list(_CACHE.items()):
            for name in set(values) - before.get(key, set()):
                del values[name]


def forest_of(profile: Profile) -> OpForest:
    """The forest of ``profile``, built once and reused while the profile lives."""
    arrays = derived(profile, "forest", _forest_arrays)
    return OpForest(profile=profile, **arrays)  # type: ignore[arg-type]


#: The forest's arrays of op and kernel rows and positions, kept as int32 while the profile lives
#: (in the worker beside, both sides' forests at its peak: ≈ 31 MB less on the 32×92 NPU pairs);
#: subtree counts and durations stay int64.
_ROW_ARRAYS = ("parent", "depth", "pre", "size", "child_ptr", "child_idx")


def _forest_arrays(profile: Profile) -> dict[str, object]:
    forest = build_forest(profile)
    arrays = {f.name: getattr(forest, f.name) for f in fields(forest) if f.name != "profile"}
    if len(profile.ops) < 2**31 and len(profile.kernels) < 2**31:
        arrays.update({name: arrays[name].astype("int32") for name in _ROW_ARRAYS})
        items = forest.kernels
        arrays["kernels"] = Items(rows=items.rows.astype("int32"), op=items.op.astype("int32"),
                                  ptr=items.ptr.astype("int32"))
    return arrays


def build_forest(profile: Profile) -> OpForest:
    ops = profile.ops
    n = len(ops)
    start = ops["start_ns"].to_numpy()
    end = ops["end_ns"].to_numpy()
    thread = thread_groups(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    parent = adopt_roots(ops["parent"].to_numpy().astype("int64"), thread, start, end)
    child_ptr, child_idx = children_csr(parent)
    levels = tree_levels(parent, child_ptr, child_idx)
    depth = level_depths(levels, n)
    size = subtree_sizes(parent, levels)
    pre = preorder(parent, levels, size, child_ptr, child_idx)

    k = profile.kernels
    counted = (k["in_trace"].to_numpy() & ~k["task_type"].isin(UNCOUNTED_TASK_TYPES).to_numpy()
               & (k["op_row"].to_numpy() >= 0) & (k["op_row"].to_numpy() < n))
    op_row = np.where(counted, k["op_row"].to_numpy(), -1)
    dur = k["dur_ns"].to_numpy()
    own_num = np.bincount(op_row[counted], minlength=n).astype("int64")
    own_ns = np.bincount(op_row[counted], weights=dur[counted], minlength=n).round().astype("int64")

    return OpForest(
        profile=profile, parent=parent, depth=depth, pre=pre, size=size, child_ptr=child_ptr,
        child_idx=child_idx, kernels=group_items(pre, op_row, k["start_ns"].to_numpy()),
        kernel_num=subtree_sum(pre, size, own_num), device_ns=subtree_sum(pre, size, own_ns),
        top=top_level(parent, ops["is_step"].to_numpy(), child_ptr, child_idx),
    )


def adopt_roots(parent: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Give each per-thread root the innermost op of another thread that strictly contains it.

    "Strictly" = contains the whole interval and is not the identical interval, so adoption always
    goes to a longer interval and can never form a cycle. Per other thread the candidate is the
    last op starting at or before the root, walked up its (same-thread) ancestors until one ends
    at or after the root; across threads the latest-starting (then shortest) candidate wins.
    Relies on rows being sorted by start (the OPS contract); ``thread`` numbers the threads
    0, 1, … (a group number, as ``ngroup`` gives).
    """
    out = parent.copy()
    roots = np.flatnonzero(parent < 0)
    if len(roots) == 0 or thread.max(initial=0) == 0:
        return out
    best = np.full(len(roots), -1, dtype="int64")
    for t in np.flatnonzero(np.bincount(thread)):  # the thread numbers in use, ascending
        rows_t = np.flatnonzero(thread == t)
        sel = np.flatnonzero(thread[roots] != t)
        r = roots[sel]
        pos = np.searchsorted(start[rows_t], start[r], side="right") - 1
        cand = np.where(pos >= 0, rows_t[np.maximum(pos, 0)], -1)
        while True:
            c = np.maximum(cand, 0)
            bad = (cand >= 0) & ((end[c] < end[r]) | ((start[c] == start[r]) & (end[c] == end[r])))
            if not bad.any():
                break
            cand[bad] = parent[cand[bad]]
        prev = best[sel]
        p = np.maximum(prev, 0)
        c = np.maximum(cand, 0)
        better = (cand >= 0) & ((prev < 0) | (start[c] > start[p]) | ((start[c] == start[p]) & (end[c] < end[p])))
        best[sel[better]] = cand[better]
    out[roots] = best
    return out


def children_csr(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Children lists in row (= start) order as CSR arrays."""
    n = len(parent)
    kids = np.flatnonzero(parent >= 0)
    child_idx = kids[np.argsort(parent[kids], kind="stable")]
    counts = np.bincount(parent[kids], minlength=n)
    return np.concatenate(([0], np.cumsum(counts))).astype("int64"), child_idx.astype("int64")


def tree_levels(parent: np.ndarray, child_ptr: np.ndarray, child_idx: np.ndarray) -> list[np.ndarray]:
    """Rows of each tree level, roots first, found breadth-first through the children lists:
    every row is visited once (sorting rows by depth, or iterating depths to a fixpoint, costs
    several passes over all rows). Within a level, rows come grouped by parent."""
    out: list[np.ndarray] = []
    level = np.flatnonzero(parent < 0)
    while len(level):
        out.append(level)
        level = children_of(level, child_ptr, child_idx)
    return out


def children_of(rows: np.ndarray, child_ptr: np.ndarray, child_idx: np.ndarray) -> np.ndarray:
    """The children of ``rows``, concatenated in ``rows`` order (each one's in start order)."""
    lo = child_ptr[rows]
    counts = child_ptr[rows + 1] - lo
    # Child slot of the t-th output: t - (outputs before its row) + that row's first slot.
    skip = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return child_idx[np.arange(len(skip)) + skip]


def level_depths(levels: list[np.ndarray], n: int) -> np.ndarray:
    """Depth of every row (0 at roots) from :func:`tree_levels`."""
    depth = np.zeros(n, dtype="int64")
    for d, rows in enumerate(levels):
        depth[rows] = d
    return depth


def subtree_sizes(parent: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    size = np.ones(len(parent), dtype="int64")
    for rows in reversed(levels[1:]):
        np.add.at(size, parent[rows], size[rows])
    return size


def preorder(parent: np.ndarray, levels: list[np.ndarray], size: np.ndarray, child_ptr: np.ndarray,
             child_idx: np.ndarray) -> np.ndarray:
    """Depth-first preorder positions (roots and children in start order), top-down by level."""
    n = len(parent)
    pre = np.zeros(n, dtype="int64")
    if n == 0:
        return pre
    roots = np.flatnonzero(parent < 0)
    pre[roots] = np.cumsum(size[roots]) - size[roots]
    # Offset of each child inside its parent's range: Σ sizes of its earlier siblings.
    csz = size[child_idx]
    excl = np.cumsum(csz) - csz
    counts = np.diff(child_ptr)
    group_start = np.repeat(excl[child_ptr[:-1][counts > 0]], counts[counts > 0])
    offset = np.zeros(n, dtype="int64")
    offset[child_idx] = excl - group_start
    for rows in levels[1:]:
        pre[rows] = pre[parent[rows]] + 1 + offset[rows]
    return pre


def top_level(parent: np.ndarray, is_step: np.ndarray, child_ptr: np.ndarray,
              child_idx: np.ndarray) -> np.ndarray:
    """Roots, with each ``ProfilerStep#N`` root replaced by its children (one level)."""
    roots = np.flatnonzero(parent < 0)
    steps = roots[is_step[roots]]
    kids = [child_idx[child_ptr[s] : child_ptr[s + 1]] for s in steps]
    return np.sort(np.concatenate([roots[~is_step[roots]], *kids])).astype("int64")


def split_segments(rows: np.ndarray, tid: np.ndarray, backward_tid: int) -> list[tuple[bool, np.ndarray]]:
    """Cut ``rows`` (start order) wherever they switch between the backward thread and any other
    thread; one segment when there is no backward thread."""
    if len(rows) == 0:
        return []
    bwd = tid[rows] == backward_tid if backward_tid >= 0 else np.zeros(len(rows), dtype=bool)
    cuts = np.flatnonzero(bwd[1:] != bwd[:-1]) + 1
    return [(bool(seg_bwd[0]), seg) for seg, seg_bwd in zip(np.split(rows, cuts), np.split(bwd, cuts))]


def segment_pairs(base: OpForest, comp: OpForest) -> list[tuple[np.ndarray, np.ndarray]]:
    """Which top-level runs are aligned with which (spec §2.4a).

    Without a backward thread on both sides: one pair (all top-level ops). Otherwise runs are
    paired in order; when the first runs are of different kinds, the side with more runs (the
    comparison on a tie) emits its first run on its own. Leftover runs are emitted on their own.
    """
    none = np.zeros(0, dtype="int64")
    if base.profile.meta.backward_tid < 0 or comp.profile.meta.backward_tid < 0:
        return [(base.top, comp.top)]
    bs, cs = base.segments(), comp.segments()
    if not bs or not cs:
        return [(base.top, comp.top)]
    out: list[tuple[np.ndarray, np.ndarray]] = []
    if bs[0][0] != cs[0][0]:
        if len(bs) > len(cs):
            out.append((bs[0][1], none))
            bs = bs[1:]
        else:
            out.append((none, cs[0][1]))
            cs = cs[1:]
    for i in range(max(len(bs), len(cs))):
        out.append((bs[i][1] if i < len(bs) else none, cs[i][1] if i < len(cs) else none))
    return out
