"""Module comparison: device time per ``nn.Module`` (``ModuleCompareStatistic``, ``ModuleCompare``).

With ``with_stack=True`` PyTorch records every ``nn.Module`` call as a ``python_function`` event.
Device time is charged to modules through the host op that launched each kernel, which tells a
user *which layer* got slower — the question op-level sheets cannot answer for a model made of
many identical ``aten::`` calls.

Per side (spec comparisons-and-outputs.md §3):

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

Modules are paired breadth-first by full path with :func:`~.align.align` (a true LCS; forward root
with forward root, backward with backward). ``Module Level`` is the tree depth with top-level
modules at 1 on *both* sheets (the reference uses 2 on one sheet and the ``/`` count of the path on
the other, quirk 7). On ``ModuleCompare`` op rows the ``Diff Total Ratio`` column holds the ratio
of the op's *self* device times (op rows have no total), exactly as in the reference: the header
must stay identical for a drop-in workbook.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import Profile
from ..options import CompareOptions
from ..timeline import innermost, nest, thread_key
from .align import align
from .operators import kernel_lines, take_rows
from .optree import UNCOUNTED_TASK_TYPES
from .result import IS_TOTAL, LEVEL, NODE, PARENT, Column, Table, diff, ratio

#: Root placeholders in the pair tree: the synthetic forward and backward roots of a side.
_FWD_ROOT, _BWD_ROOT = -1, -2
_BACKWARD_PREFIX = "[ BACKWARD ]"
_STACK_SEP = ";\n"


# ---------------------------------------------------------------------------------------------
# Interval lookups
# ---------------------------------------------------------------------------------------------


def _paths(names: np.ndarray, parent: np.ndarray, depth: np.ndarray, sep: str, root: str) -> np.ndarray:
    """``parent path + sep + name`` for every node (``root + name`` at depth 0), level by level."""
    out = np.empty(len(names), dtype=object)
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == d)
        prefix = np.full(len(rows), root, dtype=object) if d == 0 else out[parent[rows]] + sep
        out[rows] = prefix + names[rows]
    return out


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


def _concat_runs(keys: np.ndarray, texts: list[str]) -> tuple[list[int], list[str]]:
    """The texts of each run of equal consecutive ``keys``, concatenated (one join per run)."""
    lo, hi = _runs(keys)
    return keys[lo].tolist(), ["".join(texts[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]


def ordered(df: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    """``df`` with the visible columns first, in sheet order, then the hidden ``_`` columns."""
    visible = [c.key for c in columns]
    return df[visible + [c for c in df.columns if c not in visible]]


def _classes(paths: pd.Series) -> pd.Series:
    """Module Class of every path: its last ``/`` segment without a trailing ``_<digits>``
    (``nn.Module: Linear``, ``Optimizer.step#SGD.step``)."""
    return paths.str.rsplit("/", n=1).str[-1].str.replace(r"_[0-9]+$", "", regex=True)


def _displays(paths: pd.Series) -> np.ndarray:
    """Displayed Module Name of every path: ``nn.Module:`` removed (``/ Net_0/ Linear_0``)."""
    return paths.str.replace("nn.Module:", "", regex=False).to_numpy(dtype=object)


# ---------------------------------------------------------------------------------------------
# One side
# ---------------------------------------------------------------------------------------------


@dataclass
class _Side:
    """One profile's modules (forward ids first, then backward ids) with device times and ops."""

    name: np.ndarray  # raw event / pseudo-module name (object)
    path: np.ndarray  # raw path, e.g. "/nn.Module: Net_0/nn.Module: Linear_0"
    shown: np.ndarray  # displayed path, e.g. "/ Net_0/ Linear_0"
    cls: np.ndarray  # Module Class, e.g. "nn.Module: Linear"
    depth: np.ndarray  # 0 for roots
    start: np.ndarray
    self_ns: np.ndarray
    total_ns: np.ndarray
    stack: list[str]
    children: dict[int, list[int]]  # _FWD_ROOT / _BWD_ROOT / module id → child ids in start order
    # Top-layer ops, ordered by (module, start); ``op_span`` maps a module id to its [lo, hi).
    op_name: list[str]
    op_details: list[str]  # Kernel Details text of the op's own kernels
    op_dev: list[int]  # device ns of the op's kernels
    op_stack: list[str]  # "Call stack" arg, "N/A" when absent
    op_span: dict[int, tuple[int, int]]
    op_kernels: pd.DataFrame  # kernels credited to top-layer ops: op (index above), kernel, dur_ns
    notes: list[str]


def _optimizer_ops(ops: pd.DataFrame) -> np.ndarray:
    """Host ops named ``Optimizer…`` (any case): pseudo-modules, never ops inside modules."""
    return ops["name"].str.match("(?i)optimizer").to_numpy(dtype=bool)


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
    lookup = pd.DataFrame({"k": okey, "s": ops["start_ns"].to_numpy(), "row": np.arange(len(ops))})
    lookup = lookup.drop_duplicates(["k", "s"], keep="last")
    ends = pd.DataFrame({"k": thread_key(fl["end_pid"].to_numpy(), fl["end_tid"].to_numpy()),
                         "s": fl["end_ts_ns"].to_numpy()})
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
        "name": _BACKWARD_PREFIX + pd.Series(fpath[pairs["mod"].to_numpy()], dtype=object),
        "pid": ops["pid"].to_numpy()[rows], "tid": ops["tid"].to_numpy()[rows],
        "start": ops["start_ns"].to_numpy()[rows], "end": ops["end_ns"].to_numpy()[rows],
        "skey": pairs["skey"].to_numpy(),
    })
    return _sorted(df)


def _frame_stacks(profile: Profile, key: np.ndarray, start: np.ndarray) -> list[str]:
    """Chain of non-module python frames strictly containing each start, outermost first.

    Walks the python-function nesting upward from the innermost frame containing the start;
    strings are memoised per frame so shared prefixes are built once.
    """
    pf = profile.pyfuncs
    n = len(start)
    if pf.empty:
        return [""] * n
    pkey = thread_key(pf["pid"].to_numpy(), pf["tid"].to_numpy())
    parent = pf["parent"].to_numpy()
    is_module = pf["is_module"].to_numpy()
    names = pf["name"].tolist()
    hit = innermost(pkey, pf["start_ns"].to_numpy(), pf["end_ns"].to_numpy(), parent, key, start,
                    strict=True)
    memo: dict[int, str] = {-1: ""}

    def stack_of(row: int) -> str:
        chain = []
        while row not in memo:
            chain.append(row)
            row = int(parent[row])
        text = memo[row]
        for r in reversed(chain):
            if not is_module[r]:
                text = f"{text}{_STACK_SEP}{names[r]}" if text else names[r]
            memo[r] = text
        return text

    return [stack_of(int(h)) for h in hit]


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
    for d in range(1, int(odepth.max()) + 1 if len(ops) else 0):
        inherit = np.flatnonzero((odepth == d) & (placed >= 0) & ~is_top)
        top_of[inherit] = top_of[oparent[inherit]]
    return placed, top_of


def _build_side(profile: Profile, label: str) -> _Side:
    ops = profile.ops
    optimizer = _optimizer_ops(ops)
    forest = _forest(profile, optimizer)
    frames, nf = forest.frames, forest.nf
    n = len(frames)
    start = frames["start"].to_numpy(dtype="int64")
    names = frames["name"].to_numpy(dtype=object)
    notes: list[str] = []

    # Kernels → modules (each tree on its own), through the launching op's start. Counted
    # kernels are those the operator comparison counts (device timeline, no memsets).
    kern = profile.kernels
    counted = kern["in_trace"].to_numpy() & ~kern["task_type"].isin(UNCOUNTED_TASK_TYPES).to_numpy()
    linked = counted & (kern["op_row"].to_numpy() >= 0)
    unlinked = int((counted & ~linked).sum())
    k = kern[linked].reset_index(drop=True)
    lrow = k["op_row"].to_numpy()
    lts = ops["start_ns"].to_numpy()[lrow]
    kdur = k["dur_ns"].to_numpy(dtype="int64")
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
    kc = pd.DataFrame({
        "op": top_pos[top_of[lrow[credited]]],
        "kernel": k["name"].to_numpy()[credited],
        "dur_ns": kdur[credited],
        "line": kernel_lines(profile)[linked][credited],
        "ts": lts[credited],
        "kstart": k["start_ns"].to_numpy()[credited],
    }).sort_values(["op", "ts", "kstart"], kind="stable").reset_index(drop=True)
    op_dev = np.zeros(len(top_rows), dtype="int64")
    np.add.at(op_dev, kc["op"].to_numpy(), kc["dur_ns"].to_numpy())
    op_details = [""] * len(top_rows)
    for op, text in zip(*_concat_runs(kc["op"].to_numpy(), kc["line"].tolist())):
        op_details[op] = text
    stacks = ops["call_stack"].to_numpy(dtype=object)[top_rows]
    mods = placed[top_rows]
    lo, hi = _runs(mods)
    op_span = {int(mods[a]): (int(a), int(b)) for a, b in zip(lo, hi)}

    # Call stacks: python frames around the module start, else the module-name chain.
    frames_stack = _frame_stacks(profile, frames["skey"].to_numpy(dtype="int64"), start)
    default = _paths(names, forest.parent, forest.depth, _STACK_SEP, "")
    stack = [f if f else str(dflt) for f, dflt in zip(frames_stack, default)]

    children: dict[int, list[int]] = {_FWD_ROOT: [], _BWD_ROOT: []}
    for i, p in enumerate(forest.parent.tolist()):
        children.setdefault(p if p >= 0 else (_BWD_ROOT if i >= nf else _FWD_ROOT), []).append(i)
    paths = pd.Series(forest.path, dtype=object)
    return _Side(path=forest.path, shown=_displays(paths), cls=_classes(paths).to_numpy(dtype=object),
                 depth=forest.depth, start=start, self_ns=self_ns,
                 total_ns=_subtree_sums(self_ns, forest.parent, forest.depth), stack=stack,
                 children=children, name=names, op_name=ops["name"].to_numpy(dtype=object)[top_rows].tolist(),
                 op_details=op_details, op_dev=op_dev.tolist(),
                 op_stack=np.where(stacks == "", "N/A", stacks).tolist(), op_span=op_span,
                 op_kernels=kc[["op", "kernel", "dur_ns"]], notes=notes)


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


@dataclass
class _Pairs:
    base: list[int | None]
    comp: list[int | None]
    parent: list[int]  # index of the parent pair, -1 for top-level pairs
    depth: list[int]


def _align(base_keys: list, comp_keys: list) -> list[tuple[int | None, int | None]]:
    """:func:`align`, with the common case of identical sequences answered directly."""
    if base_keys == comp_keys:
        return [(i, i) for i in range(len(base_keys))]
    return align(base_keys, comp_keys)


def _match(b: _Side, c: _Side, one_sided: bool) -> _Pairs:
    """Breadth-first pairing by full path from the two root pairs (§3.7)."""
    out = _Pairs([], [], [], [])
    queue: deque[tuple[int | None, int | None, int, int]] = deque(
        [(_FWD_ROOT, _FWD_ROOT, -1, 0), (_BWD_ROOT, _BWD_ROOT, -1, 0)]
    )
    while queue:
        bn, cn, pidx, d = queue.popleft()
        kb = b.children.get(bn, []) if bn is not None else []
        kc = c.children.get(cn, []) if cn is not None else []
        if one_sided:
            steps = [(i, None) for i in range(len(kb))] + [(None, j) for j in range(len(kc))]
        else:
            steps = _align([b.path[i] for i in kb], [c.path[j] for j in kc])
        for i, j in steps:
            bi = kb[i] if i is not None else None
            cj = kc[j] if j is not None else None
            out.base.append(bi)
            out.comp.append(cj)
            out.parent.append(pidx)
            out.depth.append(d)
            queue.append((bi, cj, len(out.base) - 1, d + 1))
    return out


def _walk_order(pairs: _Pairs, b: _Side, c: _Side) -> list[int]:
    """Pair indices in sheet order (§3.8): pairs with a base module by base start, comparison-only
    pairs slotted in before the first matched pair whose comparison module starts later."""
    idx = range(len(pairs.base))
    with_base = sorted((k for k in idx if pairs.base[k] is not None), key=lambda k: b.start[pairs.base[k]])
    comp_only = sorted((k for k in idx if pairs.base[k] is None), key=lambda k: c.start[pairs.comp[k]])
    order: list[int] = []
    pending = 0
    for k in with_base:
        cj = pairs.comp[k]
        if cj is not None:
            while pending < len(comp_only) and c.start[pairs.comp[comp_only[pending]]] < c.start[cj]:
                order.append(comp_only[pending])
                pending += 1
        order.append(k)
    order.extend(comp_only[pending:])
    return order


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

_US, _MS = 1_000.0, 1_000_000.0


def _side_cols(prefix: str, role: str, unit: str, with_number: bool) -> list[Column]:
    header_unit = "us" if unit == "us" else "ms"
    cols = [Column(f"{prefix}_kernels", "Kernel Details", role, "text", "", 20),
            Column(f"{prefix}_self", f"Device Self Time({header_unit})", role, "float", unit, 20)]
    if with_number:
        cols.append(Column(f"{prefix}_number", "Number", role, "int", "count", 10))
    cols.append(Column(f"{prefix}_total", f"Device Total Time({header_unit})", role, "float", unit, 20))
    return cols


MODULE_COMPARE_COLUMNS: tuple[Column, ...] = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("module_class", "Module Class", "key", "text", "", 20),
    Column("module_level", "Module Level", "key", "int", "", 15),
    Column("module_name", "Module Name", "key", "text", "", 35),
    Column("base_op", "Operator Name", "base", "text", "", 25),
    *_side_cols("base", "base", "us", False),
    Column("comp_op", "Operator Name", "comparison", "text", "", 25),
    *_side_cols("comp", "comparison", "us", False),
    Column("diff_total", "Device Total Time Diff(us)", "diff", "float", "us", 20),
    Column("diff_self", "Device Self Time Diff(us)", "diff", "float", "us", 20),
    Column("ratio", "Diff Total Ratio", "ratio", "percent", "", 15),
    Column("base_stack", "Base Call Stack", "base", "text", "", 30),
    Column("comp_stack", "Comparison Call Stack", "comparison", "text", "", 30),
)
"""``ModuleCompare`` (µs). ``ratio`` is total/total on TOTAL rows and self/self on op rows."""

MODULE_STATISTIC_COLUMNS: tuple[Column, ...] = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("module_class", "Module Class", "key", "text", "", 20),
    Column("module_level", "Module Level", "key", "int", "", 15),
    Column("module_name", "Module Name", "key", "text", "", 35),
    Column("op", "Operator Name", "key", "text", "", 25),
    *_side_cols("base", "base", "ms", True),
    *_side_cols("comp", "comparison", "ms", True),
    Column("diff_total", "Device Total Time Diff(ms)", "diff", "float", "ms", 20),
    Column("diff_self", "Device Self Time Diff(ms)", "diff", "float", "ms", 20),
    Column("ratio", "Diff Total Ratio", "ratio", "percent", "", 15),
    Column("base_stack", "Base Call Stack", "base", "text", "", 30),
    Column("comp_stack", "Comparison Call Stack", "comparison", "text", "", 30),
)
"""``ModuleCompareStatistic`` (ms). ``ratio`` is total/total on ``[ TOTAL ]`` rows, self/self on op
rows."""

MODULE_TREE_COLUMNS: tuple[Column, ...] = (
    Column("module_class", "Module Class", "key", "text", "", 20),
    Column("module", "Module Name", "key", "text", "", 35),
    Column("base_self", "Base Self Time(us)", "base", "float", "us", 18),
    Column("base_total", "Base Total Time(us)", "base", "float", "us", 18),
    Column("comp_self", "Comparison Self Time(us)", "comparison", "float", "us", 18),
    Column("comp_total", "Comparison Total Time(us)", "comparison", "float", "us", 18),
    Column("diff_total", "Diff Total(us)", "diff", "float", "us", 15),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 12),
)
"""``ModuleTree`` (TUI only): one row per module pair in depth-first order."""


@dataclass
class ModuleResult:
    """The module comparison's tables (``detail`` is None with ``--disable_details``)."""

    statistic: Table
    detail: Table | None
    tree: Table

    def tables(self) -> list[Table]:
        return [t for t in (self.statistic, self.detail, self.tree) if t is not None]


def _absent_reason(base: Profile, comp: Profile, opts: CompareOptions) -> str:
    if not opts.enables("operator"):
        return "operator comparison is not enabled"
    if opts.disable_module:
        return "module comparison turned off (--disable_module)"
    for side, p in (("base", base), ("comparison", comp)):
        if p.pyfuncs.empty:
            return f"no python_function events in {side}: collect with with_stack=True"
    for side, p in (("base", base), ("comparison", comp)):
        if not p.pyfuncs["is_module"].any():
            return f"no nn.Module python_function events in {side}"
    return ""


def compare_modules(base: Profile, comp: Profile, opts: CompareOptions) -> tuple[ModuleResult | None, str]:
    """Module comparison tables, or ``(None, reason)`` when it cannot run (then the operator
    comparison stands in for it, as in the reference)."""
    reason = _absent_reason(base, comp, opts)
    if reason:
        return None, reason
    b, c = _build_side(base, "base"), _build_side(comp, "comparison")
    pairs = _match(b, c, one_sided=opts.disable_details)
    if not pairs.base:
        return None, "no modules to compare"
    order = _walk_order(pairs, b, c)
    notes = b.notes + c.notes
    statistic = _statistic_table(pairs, order, b, c, notes)
    detail = None if opts.disable_details else _detail_table(pairs, order, b, c, notes)
    return ModuleResult(statistic, detail, _tree_table(pairs, b, c, notes)), ""


def _detail_table(pairs: _Pairs, order: list[int], b: _Side, c: _Side, notes: list[str]) -> Table:
    """``ModuleCompare``: per pair a TOTAL row, then its top-layer ops aligned by name.

    The loop only lays out row indices (pair, base op, comparison op); every column is then one
    vectorised gather."""
    row_pair: list[int] = []
    row_b: list[int] = []
    row_c: list[int] = []
    for k in order:
        bm, cm = pairs.base[k], pairs.comp[k]
        blo, bhi = b.op_span.get(bm, (0, 0)) if bm is not None else (0, 0)
        clo, chi = c.op_span.get(cm, (0, 0)) if cm is not None else (0, 0)
        steps = _align(b.op_name[blo:bhi], c.op_name[clo:chi])
        row_pair.extend([k] * (len(steps) + 1))
        row_b.append(-1)
        row_c.append(-1)
        row_b.extend(-1 if i is None else blo + i for i, _ in steps)
        row_c.extend(-1 if j is None else clo + j for _, j in steps)
    rp, rb, rc = (np.asarray(x, dtype="int64") for x in (row_pair, row_b, row_c))
    total = np.r_[True, rp[1:] != rp[:-1]] if len(rp) else np.zeros(0, dtype=bool)
    pb = np.array([-1 if m is None else m for m in pairs.base], dtype="int64")[rp]
    pc = np.array([-1 if m is None else m for m in pairs.comp], dtype="int64")[rp]
    def pick(field: str, fill: object) -> np.ndarray:
        return np.where(pb >= 0, take_rows(getattr(b, field), pb, fill), take_rows(getattr(c, field), pc, fill))

    cols: dict[str, object] = {"order": np.arange(1, len(rp) + 1), "module_class": pick("cls", ""),
                               "module_level": pick("depth", 0).astype("int64") + 1,
                               "module_name": pick("shown", "")}
    for prefix, side, mod, op in (("base", b, pb, rb), ("comp", c, pc, rc)):
        op_self = take_rows(np.asarray(side.op_dev, dtype="float64"), op, 0.0)
        cols[f"{prefix}_op"] = np.where(total, "TOTAL", take_rows(np.asarray(side.op_name, dtype=object), op, ""))
        cols[f"{prefix}_kernels"] = np.where(total, "", take_rows(np.asarray(side.op_details, dtype=object), op, ""))
        cols[f"{prefix}_self"] = np.where(total, take_rows(side.self_ns.astype("float64"), mod, 0.0), op_self) / _US
        cols[f"{prefix}_total"] = np.where(total, take_rows(side.total_ns.astype("float64"), mod, 0.0) / _US, np.nan)
    df = pd.DataFrame(cols)
    df[IS_TOTAL] = total
    df["diff_total"] = np.where(total, diff(df["base_total"], df["comp_total"]), np.nan)
    df["diff_self"] = diff(df["base_self"], df["comp_self"])
    df["ratio"] = np.where(total, ratio(df["base_total"], df["comp_total"]),
                           ratio(df["base_self"], df["comp_self"]))
    # Call stacks: the module's on TOTAL rows; an op's only where the comparison is slower.
    worse = df["diff_self"].to_numpy() > 0
    for prefix, side, mod, op in (("base", b, pb, rb), ("comp", c, pc, rc)):
        module_stack = take_rows(np.asarray(side.stack, dtype=object), mod, "")
        op_stack = take_rows(np.asarray(side.op_stack, dtype=object), op, "")
        df[f"{prefix}_stack"] = np.where(total, module_stack, np.where(worse, op_stack, ""))
    return Table("ModuleCompare", MODULE_COMPARE_COLUMNS, ordered(df, MODULE_COMPARE_COLUMNS), (4, 7), (8, 11),
                 title="Modules (detail, µs)", default_sort="diff_total", notes=list(notes))


def _statistic_table(pairs: _Pairs, order: list[int], b: _Side, c: _Side, notes: list[str]) -> Table:
    """``ModuleCompareStatistic``: modules grouped by path per side, ``[ TOTAL ]`` then op names."""
    base_walk = [pairs.base[k] for k in order if pairs.base[k] is not None]
    comp_walk = [pairs.comp[k] for k in order if pairs.comp[k] is not None]
    bg, cg = _group(b, base_walk), _group(c, comp_walk)
    paths = list(bg) + [p for p in cg if p not in bg]
    bops, cops = _op_groups(b, bg), _op_groups(c, cg)
    rows: list[dict[str, object]] = []
    for path in paths:
        bm, cm = bg.get(path, []), cg.get(path, [])
        side, first = (b, bm[0]) if bm else (c, cm[0])
        head = {"module_class": side.cls[first], "module_level": int(side.depth[first]) + 1,
                "module_name": side.shown[first]}
        rows.append({**head, "op": "[ TOTAL ]", IS_TOTAL: True,
                     "base_kernels": "", "base_self": b.self_ns[bm].sum() / _MS, "base_number": len(bm),
                     "base_total": b.total_ns[bm].sum() / _MS,
                     "comp_kernels": "", "comp_self": c.self_ns[cm].sum() / _MS, "comp_number": len(cm),
                     "comp_total": c.total_ns[cm].sum() / _MS,
                     "base_stack": b.stack[bm[0]] if bm else "", "comp_stack": c.stack[cm[0]] if cm else ""})
        bo, co = bops.get(path, {}), cops.get(path, {})
        for op in list(bo) + [o for o in co if o not in bo]:
            bs, cs = bo.get(op), co.get(op)
            rows.append({**head, "op": op, IS_TOTAL: False,
                         "base_kernels": bs[2] if bs else "", "base_self": bs[0] / _MS if bs else 0.0,
                         "base_number": bs[1] if bs else 0, "base_total": np.nan,
                         "comp_kernels": cs[2] if cs else "", "comp_self": cs[0] / _MS if cs else 0.0,
                         "comp_number": cs[1] if cs else 0, "comp_total": np.nan,
                         "base_stack": "", "comp_stack": ""})
    df = pd.DataFrame(rows)
    df.insert(0, "order", np.arange(1, len(df) + 1))
    total = df[IS_TOTAL].to_numpy()
    df["diff_total"] = np.where(total, diff(df["base_total"], df["comp_total"]), np.nan)
    df["diff_self"] = diff(df["base_self"], df["comp_self"])
    df["ratio"] = np.where(total, ratio(df["base_total"], df["comp_total"]),
                           ratio(df["base_self"], df["comp_self"]))
    return Table("ModuleCompareStatistic", MODULE_STATISTIC_COLUMNS, ordered(df, MODULE_STATISTIC_COLUMNS),
                 (5, 8), (9, 12),
                 title="Modules (by path, ms)", default_sort="diff_total", notes=list(notes))


def _group(side: _Side, walk: list[int]) -> dict[str, list[int]]:
    """Module ids grouped by path, paths and ids in walk order."""
    out: dict[str, list[int]] = {}
    for m in walk:
        out.setdefault(str(side.path[m]), []).append(m)
    return out


def _op_groups(side: _Side, groups: dict[str, list[int]]) -> dict[str, dict[str, tuple[int, int, str]]]:
    """Per path, per top-layer op name (first-seen order): (Σ device ns, count, kernel details)
    where kernel details list each distinct kernel name once with its count and Σ ms."""
    spans = [(path, side.op_span[m]) for path, ms in groups.items() for m in ms if m in side.op_span]
    if not spans:
        return {}
    rows = np.concatenate([np.arange(lo, hi) for _, (lo, hi) in spans])
    owner = np.concatenate([np.full(hi - lo, g, dtype="int64") for g, (_, (lo, hi)) in enumerate(spans)])
    path_of = [p for p, _ in spans]
    # Group number per path (first-seen), so a path's instances aggregate together.
    gid = {p: i for i, p in enumerate(dict.fromkeys(path_of))}
    ops = pd.DataFrame({"path": np.array([gid[path_of[o]] for o in owner], dtype="int64"),
                        "seq": np.arange(len(rows)), "row": rows,
                        "name": np.asarray(side.op_name, dtype=object)[rows],
                        "dev_ns": np.asarray(side.op_dev, dtype="int64")[rows]})
    ops["group"] = ops.groupby(["path", "name"], sort=False).ngroup()
    agg = ops.groupby("group", sort=True).agg(path=("path", "first"), name=("name", "first"),
                                             dev_ns=("dev_ns", "sum"), number=("row", "size"))
    kern = side.op_kernels.merge(ops[["row", "group", "seq"]], left_on="op", right_on="row")
    kern = kern.sort_values("seq", kind="stable")
    per_kernel = kern.groupby(["group", "kernel"], sort=False).agg(
        n=("dur_ns", "size"), ns=("dur_ns", "sum")).reset_index()
    per_kernel = per_kernel.sort_values("group", kind="stable")
    per_kernel["line"] = (per_kernel["kernel"] + ", [number: " + per_kernel["n"].astype(str)
                          + "], [duration_ms: " + (per_kernel["ns"] / _MS).map("{:.3f}".format) + "]\n")
    details = dict(zip(*_concat_runs(per_kernel["group"].to_numpy(), per_kernel["line"].tolist())))
    paths = list(gid)
    out: dict[str, dict[str, tuple[int, int, str]]] = {}
    for g, rec in zip(agg.index.tolist(), agg.itertuples(index=False)):
        out.setdefault(paths[rec.path], {})[rec.name] = (int(rec.dev_ns), int(rec.number), details.get(g, ""))
    return out


def _tree_table(pairs: _Pairs, b: _Side, c: _Side, notes: list[str]) -> Table:
    """Depth-first pair tree for the TUI: hidden ``_node``/``_parent``/``_level`` links, the full
    displayed path (``_path``) and both call stacks (``_base_stack``/``_comp_stack``)."""
    kids: dict[int, list[int]] = {}
    for k, p in enumerate(pairs.parent):
        kids.setdefault(p, []).append(k)
    order: list[int] = []
    todo = list(reversed(kids.get(-1, [])))
    while todo:
        k = todo.pop()
        order.append(k)
        todo.extend(reversed(kids.get(k, [])))
    idx = np.array(order, dtype="int64")
    bm = np.array([-1 if m is None else m for m in pairs.base], dtype="int64")[idx]
    cm = np.array([-1 if m is None else m for m in pairs.comp], dtype="int64")[idx]
    hb, hc = bm >= 0, cm >= 0
    bi, ci = np.maximum(bm, 0), np.maximum(cm, 0)
    own = pd.Series(np.where(hb, b.name[bi], c.name[ci]), dtype=object)
    bstack, cstack = np.asarray(b.stack, dtype=object), np.asarray(c.stack, dtype=object)
    df = pd.DataFrame({
        "module_class": np.where(hb, b.cls[bi], c.cls[ci]),
        "module": own.str.replace("nn.Module:", "", regex=False).str.strip(),
        "base_self": np.where(hb, b.self_ns[bi], 0) / _US, "base_total": np.where(hb, b.total_ns[bi], 0) / _US,
        "comp_self": np.where(hc, c.self_ns[ci], 0) / _US, "comp_total": np.where(hc, c.total_ns[ci], 0) / _US,
        NODE: idx, PARENT: np.asarray(pairs.parent, dtype="int64")[idx],
        LEVEL: np.asarray(pairs.depth, dtype="int64")[idx],
        "_path": np.where(hb, b.shown[bi], c.shown[ci]),
        "_base_stack": np.where(hb, bstack[bi] if len(bstack) else "", ""),
        "_comp_stack": np.where(hc, cstack[ci] if len(cstack) else "", ""),
    })
    df["diff_total"] = diff(df["base_total"], df["comp_total"])
    df["ratio"] = ratio(df["base_total"], df["comp_total"])
    return Table("ModuleTree", MODULE_TREE_COLUMNS, ordered(df, MODULE_TREE_COLUMNS), (2, 3), (4, 5),
                 title="Module tree (µs)", default_sort="diff_total", notes=list(notes))
