"""One side of the module comparison: the ``nn.Module`` forest of a profile with device times.

With ``with_stack=True`` PyTorch records every ``nn.Module`` call as a ``python_function`` event;
this module turns those frames into a forest per side and charges device time to it
(spec comparisons-and-outputs.md §3). :mod:`.modules` pairs two such sides and builds the sheets.

* **forward tree** — ``nn.Module:`` frames plus host ops named ``Optimizer…`` (pseudo-modules),
  nested per thread by proper containment (the reference nests across threads by start only,
  quirk 3);
* **kernels** — a kernel is charged to the innermost module containing its launching op's start
  (``kernels.op_row`` → ``ops.start_ns``) on the launching op's thread; kernels without a launching
  op are charged nowhere (counted in the table notes);
* **backward tree** — for every ``fwdbwd`` flow, the backward op where it ends becomes a
  pseudo-module ``[ BACKWARD ]<path of the forward module strictly containing the flow start>``;
  kernels are charged in this tree independently of the forward tree;
* **ops** — every host op (except ``Optimizer…`` and ``ProfilerStep#`` ops) belongs to the
  innermost forward module strictly containing its start, else to the innermost backward one; the
  module's *top-layer ops* are those whose enclosing op is not in the same module. A kernel is
  credited to the top-layer op that encloses its launching op;
* **call stacks** — the enclosing non-module ``python_function`` frames of the module's start on its
  thread (for a backward pseudo-module: on the forward thread, where ``backward()`` was called),
  outermost first, joined with ``;\\n``; without such frames, the chain of enclosing module names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..load.common import per_distinct
from ..text_codes import first_seen_codes
from ..model import Profile
from ..timeline import innermost, nest, thread_key
from .names import PairingKeys
from .kernel_rows import KernelRows, launches
from .optree import UNCOUNTED_TASK_TYPES, children_csr
from .py_stacks import STACK_SEP, frame_stacks

BACKWARD_PREFIX = "[ BACKWARD ]"


# ---------------------------------------------------------------------------------------------
# Interval lookups
# ---------------------------------------------------------------------------------------------


def _paths(names: np.ndarray, parent: np.ndarray, depth: np.ndarray, sep: str, root: str) -> np.ndarray:
    """``parent path + sep + name`` for every node (``root + name`` at depth 0), level by level.

    Each distinct (parent path, name) is joined once and its rows share that one ``str``: a
    training profile calls the same modules every step (683 distinct paths in 65,780 frames of
    the 32 × 92 pair), and a new string per frame was ≈ 10 MB per side in every process that
    holds the module sides."""
    n = len(names)
    name_code, name_text = first_seen_codes(np.asarray(names, dtype=object))
    code = np.full(n, -1, dtype="int64")  # each node's path, as a position in ``texts``
    texts: list[str] = []
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == d)
        up = np.full(len(rows), -1, dtype="int64") if d == 0 else code[parent[rows]]
        pairs, first, inverse = np.unique((up + 1) * len(name_text) + name_code[rows],
                                          return_index=True, return_inverse=True)
        ups, nms = up[first].tolist(), name_code[rows][first].tolist()
        code[rows] = len(texts) + inverse.reshape(-1)
        texts += [(root if u < 0 else texts[u] + sep) + name_text[m] for u, m in zip(ups, nms)]
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out[code] if n else np.empty(0, dtype=object)


def _subtree_sums(values: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Each node's value plus all its descendants' (children folded in, deepest level first)."""
    total = values.astype("int64").copy()
    for d in range(int(depth.max()) if len(depth) else 0, 0, -1):
        rows = np.flatnonzero(depth == d)
        np.add.at(total, parent[rows], total[rows])
    return total


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) bounds of the runs of equal consecutive values in ``keys``."""
    if len(keys) == 0:
        return np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64")
    lo = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return lo, np.r_[lo[1:], len(keys)]


def _per_path(paths: np.ndarray, text: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """``text`` of each module path, made once per distinct path (paths repeat every step) and
    shared by its rows."""
    return per_distinct(pd.Series(paths, dtype=object), text).to_numpy(dtype=object)


def _classes(paths: pd.Series) -> pd.Series:
    """Module Class of every path: its last ``/`` segment without a trailing ``_<digits>``
    (``nn.Module: Linear``, ``Optimizer.step#SGD.step``)."""
    return paths.str.rsplit("/", n=1).str[-1].str.replace(r"_[0-9]+$", "", regex=True)


def _displays(paths: pd.Series) -> pd.Series:
    """Displayed Module Name of every path: ``nn.Module:`` removed (``/ Net_0/ Linear_0``)."""
    return paths.str.replace("nn.Module:", "", regex=False)


# ---------------------------------------------------------------------------------------------
# One side
# ---------------------------------------------------------------------------------------------


@dataclass
class ModuleSide:
    """One profile's modules (forward ids first, then backward ids) with device times and ops."""

    name: np.ndarray  # raw event / pseudo-module name (object)
    path: np.ndarray  # raw path, e.g. "/nn.Module: Net_0/nn.Module: Linear_0"
    shown: np.ndarray  # displayed path, e.g. "/ Net_0/ Linear_0"
    cls: np.ndarray  # Module Class, e.g. "nn.Module: Linear"
    depth: np.ndarray  # 0 for roots
    start: np.ndarray
    self_ns: np.ndarray
    total_ns: np.ndarray
    stack: np.ndarray  # call stack text of each module (object)
    # Children in start order as CSR arrays over the module ids plus two synthetic roots, the
    # forward root (id ``len(name)``) and the backward root (``len(name) + 1``): the children
    # of node ``v`` are ``child_idx[child_ptr[v] : child_ptr[v + 1]]``.
    child_ptr: np.ndarray
    child_idx: np.ndarray
    # Top-layer ops, ordered by (module, start); module ``m``'s are ``[op_lo[m], op_hi[m])``.
    op_name: np.ndarray  # (object arrays of str, ints for op_dev)
    op_key: np.ndarray  # the op's pairing key (:func:`.names.pairing_keys`)
    op_label: np.ndarray  # the op's pairing name (what rows are labelled with)
    op_cls: np.ndarray  # label of the equivalence class behind the key, ""
    op_dev: np.ndarray  # device ns of the op's kernels
    op_stack: np.ndarray  # "Call stack" arg, "N/A" when absent
    op_lo: np.ndarray
    op_hi: np.ndarray
    #: The kernels credited to each top-layer op (launch entries, row ``i`` = op ``i`` above, by
    #: launch): its ``Kernel Details``
    op_kernels: KernelRows
    notes: list[str]


def _optimizer_ops(profile: Profile) -> np.ndarray:
    """Host ops named ``Optimizer…`` (any case): pseudo-modules, never ops inside modules."""
    codes, names = profile.codes("ops", "name")  # a few hundred distinct names
    return pd.Series(names, dtype=object).str.match("(?i)optimizer").to_numpy(dtype=bool)[codes]


def _module_frames(profile: Profile, optimizer: np.ndarray) -> pd.DataFrame:
    """nn.Module frames plus ``Optimizer…`` host ops, sorted by (start, longer first)."""
    pf = profile.pyfuncs[profile.pyfuncs["is_module"]]
    opt = profile.ops[optimizer]
    df = pd.concat(
        [
            pd.DataFrame({"name": pf["name"], "pid": pf["pid"], "tid": pf["tid"],
                          "start": pf["start_ns"], "end": pf["end_ns"]}),
            pd.DataFrame({"name": opt["name"], "pid": opt["pid"], "tid": opt["tid"],
                          "start": opt["start_ns"], "end": opt["end_ns"]}),
        ],
        ignore_index=True,
    )
    df = _sorted(df)
    df["skey"] = thread_key(df["pid"].to_numpy(), df["tid"].to_numpy())
    return df


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    order = np.lexsort((-df["end"].to_numpy(), df["start"].to_numpy()))
    return df.iloc[order].reset_index(drop=True)


def _nest_frames(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = thread_key(df["pid"].to_numpy(), df["tid"].to_numpy())
    parent, depth = nest(key, df["start"].to_numpy(dtype="int64"), df["end"].to_numpy(dtype="int64"))
    return key, parent, depth


def _backward_frames(profile: Profile, fwd: pd.DataFrame, fkey: np.ndarray, fparent: np.ndarray,
                     fpath: np.ndarray) -> pd.DataFrame:
    """Backward pseudo-modules: the op each ``fwdbwd`` flow ends on, named after the forward
    module strictly containing the flow start. One per (backward op, forward module).

    ``skey`` is the thread whose python frames give the call stack: the forward thread (the flow
    start's), since the autograd thread runs no python code — its frames show where
    ``backward()`` was called, as in the reference."""
    fl = profile.fwdbwd
    ops = profile.ops
    empty = pd.DataFrame({"name": [], "pid": [], "tid": [], "start": [], "end": [], "skey": []})
    if fl.empty or fwd.empty or ops.empty:
        return empty
    okey = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    # The op starting exactly at the flow end on its thread; on ties the innermost (last in
    # (start, longer-first) order), i.e. the backward op itself rather than an enclosing wrapper.
    # Only ops starting at some flow end can be one (a few percent of them on a training profile).
    ostart = ops["start_ns"].to_numpy()
    end_ts = fl["end_ts_ns"].to_numpy()
    near = np.flatnonzero(np.isin(ostart, end_ts))
    lookup = pd.DataFrame({"k": okey[near], "s": ostart[near], "row": near})
    lookup = lookup.drop_duplicates(["k", "s"], keep="last")
    ends = pd.DataFrame({"k": thread_key(fl["end_pid"].to_numpy(), fl["end_tid"].to_numpy()), "s": end_ts})
    op_row = ends.merge(lookup, on=["k", "s"], how="left")["row"].fillna(-1).to_numpy(dtype="int64")
    skey = thread_key(fl["end_pid"].to_numpy(), fl["start_tid"].to_numpy())
    mod = innermost(fkey, fwd["start"].to_numpy(), fwd["end"].to_numpy(), fparent, skey,
                    fl["start_ts_ns"].to_numpy(), strict=True)
    pairs = pd.DataFrame({"op": op_row, "mod": mod, "skey": skey})
    pairs = pairs[(pairs["op"] >= 0) & (pairs["mod"] >= 0)].drop_duplicates(["op", "mod"])
    if pairs.empty:
        return empty
    rows = pairs["op"].to_numpy()
    df = pd.DataFrame({
        "name": per_distinct(pd.Series(fpath[pairs["mod"].to_numpy()], dtype=object),
                             lambda paths: BACKWARD_PREFIX + paths).to_numpy(dtype=object),
        "pid": ops["pid"].to_numpy()[rows], "tid": ops["tid"].to_numpy()[rows],
        "start": ops["start_ns"].to_numpy()[rows], "end": ops["end_ns"].to_numpy()[rows],
        "skey": pairs["skey"].to_numpy(),
    })
    return _sorted(df)


@dataclass
class _Forest:
    """Forward and backward module frames of one side in one id space (forward ids first)."""

    frames: pd.DataFrame  # name, pid, tid, start, end, skey (thread whose frames give the stack)
    nf: int  # number of forward modules
    key: np.ndarray  # thread of each module
    parent: np.ndarray  # module id, -1 for a root
    depth: np.ndarray
    path: np.ndarray

    def locate(self, key: np.ndarray, ts: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
        """Innermost forward and innermost backward module containing each point (ids, -1)."""
        nf = self.nf
        start = self.frames["start"].to_numpy(dtype="int64")
        end = self.frames["end"].to_numpy(dtype="int64")
        bpar = np.where(self.parent[nf:] >= 0, self.parent[nf:] - nf, -1)
        fwd = innermost(self.key[:nf], start[:nf], end[:nf], self.parent[:nf], key, ts, strict)
        bwd = innermost(self.key[nf:], start[nf:], end[nf:], bpar, key, ts, strict)
        return fwd, np.where(bwd >= 0, bwd + nf, -1)


def _forest(profile: Profile, optimizer: np.ndarray) -> _Forest:
    fwd = _module_frames(profile, optimizer)
    fkey, fpar, fdep = _nest_frames(fwd)
    fpath = _paths(fwd["name"].to_numpy(dtype=object), fpar, fdep, "/", "/")
    bwd = _backward_frames(profile, fwd, fkey, fpar, fpath)
    bkey, bpar, bdep = _nest_frames(bwd)
    bpath = _paths(bwd["name"].to_numpy(dtype=object), bpar, bdep, "/", "/")
    nf = len(fwd)
    return _Forest(
        frames=pd.concat([fwd, bwd], ignore_index=True), nf=nf, key=np.concatenate([fkey, bkey]),
        parent=np.concatenate([fpar, np.where(bpar >= 0, bpar + nf, -1)]),
        depth=np.concatenate([fdep, bdep]), path=np.concatenate([fpath, bpath]),
    )


def _place_ops(ops: pd.DataFrame, forest: _Forest, optimizer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Module of every host op (-1: none) and its top-layer op in that module (-1: none).

    An op belongs to the innermost forward module strictly containing its start, else to the
    innermost backward one; ``Optimizer…`` and ``ProfilerStep#`` ops belong to none. An op is
    top-layer when its enclosing op is not in the same module; deeper ops inherit their
    parent's top-layer op, one nesting level at a time.
    """
    eligible = ~(optimizer | ops["is_step"].to_numpy())
    rows = np.flatnonzero(eligible)
    fwd, bwd = forest.locate(thread_key(ops["pid"].to_numpy()[rows], ops["tid"].to_numpy()[rows]),
                             ops["start_ns"].to_numpy()[rows], strict=True)
    placed = np.full(len(ops), -1, dtype="int64")
    placed[rows] = np.where(fwd >= 0, fwd, bwd)
    oparent = ops["parent"].to_numpy()
    odepth = ops["depth"].to_numpy()
    parent_mod = np.where(oparent >= 0, placed[np.maximum(oparent, 0)], -1)
    is_top = (placed >= 0) & (parent_mod != placed)
    top_of = np.where(is_top, np.arange(len(ops)), -1)
    inherit = np.flatnonzero((placed >= 0) & ~is_top)
    inherit = inherit[np.argsort(odepth[inherit], kind="stable")]  # shallower first
    bounds = np.searchsorted(odepth[inherit], np.arange(1, int(odepth.max()) + 2 if len(ops) else 1))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        level = inherit[lo:hi]
        top_of[level] = top_of[oparent[level]]
    return placed, top_of


def build_side(profile: Profile, label: str, op_keys: PairingKeys) -> ModuleSide:
    """One side's modules; ``op_keys`` are the pairing keys of every host op."""
    ops = profile.ops
    optimizer = _optimizer_ops(profile)
    forest = _forest(profile, optimizer)
    frames, nf = forest.frames, forest.nf
    n = len(frames)
    start = frames["start"].to_numpy(dtype="int64")
    names = frames["name"].to_numpy(dtype=object)
    notes: list[str] = []

    # Kernels → modules (each tree on its own), through the launching op's start. Counted
    # kernels are those the operator comparison counts (device timeline, no memsets).
    kern = profile.kernels
    task_codes, task_types = profile.codes("kernels", "task_type")  # tested once per distinct type
    uncounted = pd.Series(task_types, dtype=object).isin(UNCOUNTED_TASK_TYPES).to_numpy()[task_codes]
    counted = kern["in_trace"].to_numpy() & ~uncounted
    linked = counted & (kern["op_row"].to_numpy() >= 0)
    unlinked = int((counted & ~linked).sum())
    lrow = kern["op_row"].to_numpy()[linked]
    lts = ops["start_ns"].to_numpy()[lrow]
    kdur = kern["dur_ns"].to_numpy(dtype="int64")[linked]
    fmod, bmod = forest.locate(thread_key(ops["pid"].to_numpy()[lrow], ops["tid"].to_numpy()[lrow]), lts,
                               strict=False)
    self_ns = np.zeros(n, dtype="int64")
    np.add.at(self_ns, fmod[fmod >= 0], kdur[fmod >= 0])
    np.add.at(self_ns, bmod[bmod >= 0], kdur[bmod >= 0])
    outside = int(((fmod < 0) & (bmod < 0)).sum())
    if unlinked or outside:
        notes.append(f"{label}: {unlinked + outside} kernels are charged to no module ({unlinked} without a "
                     f"launching host op, {outside} launched outside every module)")

    # Kernels → top-layer ops: the launching op's top-layer op, when it is in the charged module.
    placed, top_of = _place_ops(ops, forest, optimizer)
    lmod = placed[lrow]
    credited = (lmod >= 0) & ((lmod == fmod) | (lmod == bmod))
    top_rows = np.flatnonzero((top_of == np.arange(len(ops))) & (placed >= 0))
    top_rows = top_rows[np.argsort(placed[top_rows], kind="stable")]  # by module, then start
    top_pos = np.full(len(ops), -1, dtype="int64")
    top_pos[top_rows] = np.arange(len(top_rows))
    kop = top_pos[top_of[lrow[credited]]]
    order = np.lexsort((kern["start_ns"].to_numpy()[linked][credited], lts[credited], kop))  # by op, launch, start
    kc_op = kop[order]
    op_dev = np.zeros(len(top_rows), dtype="int64")
    np.add.at(op_dev, kc_op, kdur[credited][order])
    op_kernels = launches(profile, np.bincount(kc_op, minlength=len(top_rows)),
                          np.flatnonzero(linked)[credited][order])
    stacks = ops["call_stack"].to_numpy(dtype=object)[top_rows]
    mods = placed[top_rows]
    lo, hi = _runs(mods)
    op_lo = np.zeros(n, dtype="int64")
    op_hi = np.zeros(n, dtype="int64")
    op_lo[mods[lo]], op_hi[mods[lo]] = lo, hi

    # Call stacks: python frames around the module start, else the module-name chain.
    frames_stack = frame_stacks(profile, frames["skey"].to_numpy(dtype="int64"), start)
    default = _paths(names, forest.parent, forest.depth, STACK_SEP, "")
    stack = np.empty(n, dtype=object)
    stack[:] = [f if f else str(dflt) for f, dflt in zip(frames_stack, default.tolist())]

    # Roots hang off the synthetic forward (id n) and backward (id n + 1) roots.
    tree_parent = np.where(forest.parent >= 0, forest.parent, np.where(np.arange(n) >= nf, n + 1, n))
    child_ptr, child_idx = children_csr(np.concatenate([tree_parent, [-1, -1]]))
    return ModuleSide(path=forest.path, shown=_per_path(forest.path, _displays),
                      cls=_per_path(forest.path, _classes), depth=forest.depth, start=start,
                      self_ns=self_ns, total_ns=_subtree_sums(self_ns, forest.parent, forest.depth),
                      stack=stack, child_ptr=child_ptr, child_idx=child_idx, name=names,
                      op_name=ops["name"].to_numpy(dtype=object)[top_rows], op_key=op_keys.key[top_rows],
                      op_label=op_keys.name[top_rows], op_cls=op_keys.cls[top_rows],
                      op_dev=op_dev,
                      op_stack=np.where(stacks == "", "N/A", stacks).astype(object), op_lo=op_lo, op_hi=op_hi,
                      op_kernels=op_kernels, notes=notes)
