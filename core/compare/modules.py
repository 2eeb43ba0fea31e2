"""Module comparison: device time per ``nn.Module`` (``ModuleCompareStatistic``, ``ModuleCompare``).

Device time is charged to modules through the host op that launched each kernel, which tells a
user *which layer* got slower — the question op-level sheets cannot answer for a model made of
many identical ``aten::`` calls. Each side's module forest, with its device times, top-layer ops
and call stacks, is built by :mod:`.module_forest`; this module pairs the two sides and lays out
the sheets.

Modules are paired breadth-first by full path with :func:`~.align.align_runs` (a true LCS; forward root
with forward root, backward with backward). ``Module Level`` is the tree depth with top-level
modules at 1 on *both* sheets (the reference uses 2 on one sheet and the ``/`` count of the path on
the other, quirk 7). On ``ModuleCompare`` op rows the ``Diff Total Ratio`` column holds the ratio
of the op's *self* device times (op rows have no total), exactly as in the reference: the header
must stay identical for a drop-in workbook.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import factorize_text, object_frame, object_text, one_text
from ..load.common import per_distinct
from ..model import Profile
from ..text_codes import first_seen_codes
from ..options import CompareOptions
from .align import align_runs, key_codes
from .equivalence import Equivalence
from .kernel_rows import SUMMARY, Coded, KernelRows, offsets
from .module_forest import BACKWARD_PREFIX, ModuleSide, build_side
from .names import BY_POSITION, matched_as, pairing_keys, side_keys
from .operators import MATCHED_AS, take_rows
from .optree import children_csr, preorder, subtree_sizes, tree_levels
from .result import IS_TOTAL, LEVEL, NODE, PARENT, Column, Table, diff, ratio
from .step_column import STEP, step_labels, step_of


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


@dataclass
class _Pairs:
    """Module pairs in breadth-first order (arrays, one entry per pair)."""

    base: np.ndarray  # base module id, -1 when the pair has none
    comp: np.ndarray  # comparison module id, -1 when the pair has none
    parent: np.ndarray  # index of the parent pair, -1 for top-level pairs
    depth: np.ndarray
    positional: np.ndarray  # paired by position (:func:`.align.fill_by_position`)


def _one_sided(b_n: np.ndarray, c_n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs laid out without aligning (``--disable-details``): all base items, then all
    comparison items, as :func:`.align.align_runs` returns them (positions relative to each run)."""
    counts = b_n + c_n
    ptr = np.concatenate(([0], np.cumsum(counts))).astype("int64")
    t = np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], counts)
    nb = np.repeat(b_n, counts)
    return ptr, np.where(t < nb, t, -1), np.where(t >= nb, t - nb, -1), np.zeros(len(t), dtype=bool)


def _match(b: ModuleSide, c: ModuleSide, b_keys: np.ndarray, c_keys: np.ndarray, one_sided: bool,
           structural: bool) -> _Pairs:
    """Breadth-first pairing from the two root pairs (§3.7): the children of a module pair are
    aligned by their own names' pairing keys (``b_keys`` / ``c_keys``; siblings share the parent's
    path, so this is the reference's pairing by full path), then one-each leftovers by position.

    Breadth-first order is level order, so each level's pairs are aligned in one
    :func:`.align.align_runs` call."""
    nb, nc = len(b.name), len(c.name)
    bk, ck = key_codes(b_keys, c_keys)
    b_item_codes, c_item_codes = bk[b.child_idx], ck[c.child_idx]  # key of each child slot
    lb, lc = np.array([nb, nb + 1]), np.array([nc, nc + 1])  # forward roots, backward roots
    lidx, d = np.array([-1, -1]), 0
    parts: list[tuple[np.ndarray, ...]] = []
    total = 0
    while len(lb):
        b_lo = np.where(lb >= 0, b.child_ptr[np.maximum(lb, 0)], 0)
        c_lo = np.where(lc >= 0, c.child_ptr[np.maximum(lc, 0)], 0)
        b_n = np.where(lb >= 0, b.child_ptr[np.maximum(lb, 0) + 1], 0) - b_lo
        c_n = np.where(lc >= 0, c.child_ptr[np.maximum(lc, 0) + 1], 0) - c_lo
        if one_sided:
            ptr, ob, oc, flags = _one_sided(b_n, c_n)
            run = np.repeat(np.arange(len(b_n)), np.diff(ptr))
            ob = np.where(ob >= 0, b_lo[run] + ob, -1)
            oc = np.where(oc >= 0, c_lo[run] + oc, -1)
        else:
            ptr, ob, oc, flags = align_runs(b_item_codes, b_lo, b_n, c_item_codes, c_lo, c_n, structural)
        bi = np.where(ob >= 0, b.child_idx[np.maximum(ob, 0)] if len(b.child_idx) else -1, -1)
        cj = np.where(oc >= 0, c.child_idx[np.maximum(oc, 0)] if len(c.child_idx) else -1, -1)
        parent = np.repeat(lidx, np.diff(ptr))
        parts.append((bi, cj, parent, np.full(len(bi), d, dtype="int64"), flags))
        lb, lc, lidx, d = bi, cj, total + np.arange(len(bi)), d + 1
        total += len(bi)
    base, comp, parent, depth, positional = (np.concatenate(x) for x in zip(*parts))
    return _Pairs(base.astype("int64"), comp.astype("int64"), parent.astype("int64"), depth, positional.astype(bool))


def _module_keys(side: ModuleSide, opts: CompareOptions, equivalence: Equivalence | None) -> np.ndarray:
    """Pairing key of every module's own name: ``nn.Module: Linear_0`` as recorded, an optimizer
    pseudo-module (``Optimizer.step#NpuFusedAdamW.step``) through the equivalence table, a
    backward pseudo-module by the forward path it names."""
    return pairing_keys(pd.Series(side.name, dtype=object), opts, equivalence=equivalence).key


@dataclass
class _OpSteps:
    """Per module pair ``k``: its aligned top-layer ops, entries ``[ptr[k], ptr[k + 1])`` — base
    op, comparison op (indices into the sides' op arrays, -1 when absent) and whether they were
    paired by position."""

    ptr: np.ndarray
    base: np.ndarray
    comp: np.ndarray
    positional: np.ndarray


def _op_steps(pairs: _Pairs, b: ModuleSide, c: ModuleSide, structural: bool) -> _OpSteps:
    bk, ck = key_codes(b.op_key, c.op_key)
    b_lo = np.where(pairs.base >= 0, b.op_lo[np.maximum(pairs.base, 0)] if len(b.op_lo) else 0, 0)
    b_n = np.where(pairs.base >= 0, b.op_hi[np.maximum(pairs.base, 0)] if len(b.op_hi) else 0, 0) - b_lo
    c_lo = np.where(pairs.comp >= 0, c.op_lo[np.maximum(pairs.comp, 0)] if len(c.op_lo) else 0, 0)
    c_n = np.where(pairs.comp >= 0, c.op_hi[np.maximum(pairs.comp, 0)] if len(c.op_hi) else 0, 0) - c_lo
    return _OpSteps(*align_runs(bk, b_lo, b_n, ck, c_lo, c_n, structural))


def _walk_order(pairs: _Pairs, b: ModuleSide, c: ModuleSide) -> list[int]:
    """Pair indices in sheet order (§3.8): pairs with a base module by base start, comparison-only
    pairs slotted in before the first matched pair whose comparison module starts later."""
    has_base = pairs.base >= 0
    with_base = np.flatnonzero(has_base)
    with_base = with_base[np.argsort(b.start[pairs.base[with_base]], kind="stable")].tolist()
    comp_only = np.flatnonzero(~has_base)
    comp_only = comp_only[np.argsort(c.start[pairs.comp[comp_only]], kind="stable")]
    comp_start = (c.start[pairs.comp[comp_only]] if len(comp_only) else np.zeros(0, dtype="int64")).tolist()
    comp_only = comp_only.tolist()
    cstart = np.where(pairs.comp >= 0, c.start[np.maximum(pairs.comp, 0)] if len(c.start) else 0, 0).tolist()
    has_comp = (pairs.comp >= 0).tolist()
    order: list[int] = []
    pending = 0
    for k in with_base:
        if has_comp[k]:
            while pending < len(comp_only) and comp_start[pending] < cstart[k]:
                order.append(comp_only[pending])
                pending += 1
        order.append(k)
    order.extend(comp_only[pending:])
    return order


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def ordered(df: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    """``df`` with the visible columns first, in sheet order, then the hidden ``_`` columns."""
    visible = [c.key for c in columns if c.key in df]
    return df[visible + [c for c in df.columns if c not in visible]]


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
    MATCHED_AS,
    STEP,
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
    MATCHED_AS,
)
"""``ModuleCompareStatistic`` (ms). ``ratio`` is total/total on ``[ TOTAL ]`` rows, self/self on op
rows."""

MODULE_TREE_COLUMNS: tuple[Column, ...] = (
    Column("module_class", "Module Class", "key", "text", "", 20),
    Column("module", "Module Name", "key", "text", "", 35),
    Column("step", "Step", "key", "text", "", 8),
    Column("base_self", "Base Self Time(us)", "base", "float", "us", 18),
    Column("base_total", "Base Total Time(us)", "base", "float", "us", 18),
    Column("comp_self", "Comparison Self Time(us)", "comparison", "float", "us", 18),
    Column("comp_total", "Comparison Total Time(us)", "comparison", "float", "us", 18),
    Column("diff_total", "Diff Total(us)", "diff", "float", "us", 15),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 12),
    MATCHED_AS,
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


def compare_modules(base: Profile, comp: Profile, opts: CompareOptions,
                    equivalence: Equivalence | None = None) -> tuple[ModuleResult | None, str]:
    """Module comparison tables, or ``(None, reason)`` when it cannot run (then the operator
    comparison stands in for it, as in the reference). Ops and optimizer modules are keyed
    through ``equivalence`` (the run's table; None: the built-in one)."""
    reason = _absent_reason(base, comp, opts)
    if reason:
        return None, reason
    b = build_side(base, "base", side_keys(base, comp, opts, equivalence))
    c = build_side(comp, "comparison", side_keys(comp, base, opts, equivalence))
    structural = not opts.exact_names
    pairs = _match(b, c, _module_keys(b, opts, equivalence), _module_keys(c, opts, equivalence),
                   one_sided=opts.disable_details, structural=structural)
    if not len(pairs.base):
        return None, "no modules to compare"
    order = _walk_order(pairs, b, c)
    notes = b.notes + c.notes
    steps = _op_steps(pairs, b, c, structural)
    module_steps = (step_of(b.start, base.steps), step_of(c.start, comp.steps))
    statistic = _statistic_table(pairs, order, b, c, steps, notes)
    detail = None if opts.disable_details else _detail_table(pairs, order, b, c, steps, notes,
                                                             module_steps)
    return ModuleResult(statistic, detail, _tree_table(pairs, b, c, notes, module_steps)), ""


def _nest_backward(df: pd.DataFrame, first_id: int) -> pd.DataFrame:
    """The backward pseudo-modules as a tree the user can fold, one per step.

    They come as flat roots, one per module a backward flow started in (``[ BACKWARD ]/
    TransformerLM_0/ TransformerLayer_1/ MLP_1/ Linear_7``). Each step's run of them gets a
    ``[ BACKWARD ]`` root, and each one nests under the nearest row before it whose path holds it,
    labelled by the rest of its path (``MLP_1/ Linear_7``). Self time stays the row's own; total
    time becomes the subtree's (the pseudo-modules' kernels are disjoint), as in the forward tree.
    """
    level = df[LEVEL].to_numpy()
    back = (level == 0) & df["module"].str.startswith(BACKWARD_PREFIX).to_numpy(dtype=bool)
    if not back.any():
        return df
    rows = np.flatnonzero(back)
    module = df["module"].to_numpy(dtype=object).copy()
    # A few hundred distinct paths over ~16k rows (H200 pair): each stripped once.
    path_code, texts = first_seen_codes(module[rows])
    paths = np.array([str(t)[len(BACKWARD_PREFIX):].strip() for t in texts] + [""], dtype=object)[path_code].tolist()
    step_code, _ = first_seen_codes(df["step"].to_numpy(dtype=object)[rows])
    # A run: consecutive rows of one step; each gets a [ BACKWARD ] root.
    new_run = np.ones(len(rows), dtype=bool)
    new_run[1:] = (np.diff(rows) != 1) | (np.diff(step_code) != 0)
    run_of = np.cumsum(new_run) - 1
    # Only the nesting is walked in Python (a stack of open ancestors by path prefix: each row's
    # parent position among ``rows``, depth and label); the totals are then summed with numpy.
    up = np.full(len(rows), -1, dtype="int64")
    depth = np.zeros(len(rows), dtype="int64")
    labels: list[str] = []
    stack: list[tuple[str, int]] = []  # (path + "/", position) of open ancestors
    for i, (path, starts) in enumerate(zip(paths, new_run.tolist())):
        if starts:
            stack = []
        while stack and not path.startswith(stack[-1][0]):
            stack.pop()
        if stack:
            up[i] = stack[-1][1]
            depth[i] = len(stack)
            labels.append(path[len(stack[-1][0]) - 1:].lstrip("/ ").strip() or path)
        else:
            labels.append(path.lstrip("/ ").strip() or path)
        stack.append((path + "/", i))
    node = df[NODE].to_numpy()
    parent = df[PARENT].to_numpy().copy()
    parent[rows] = np.where(up >= 0, node[rows[np.maximum(up, 0)]], first_id + run_of)
    level = level.copy()
    level[rows] = depth + 1
    module[rows] = labels
    # Each row's own total is added to each of its ancestors' and to its run's root, in row order
    # (``np.add.at`` adds repeated indices one after another): the same double additions in the
    # same order as a walk adding them row by row.
    desc, anc = [], []
    at, a = np.arange(len(rows)), up
    while len(at):
        has = a >= 0
        at, a = at[has], a[has]
        desc.append(at)
        anc.append(a)
        a = up[a]
    desc_all, anc_all = np.concatenate(desc), np.concatenate(anc)
    order = np.argsort(desc_all, kind="stable")
    desc_all, anc_all = desc_all[order], rows[anc_all[order]]
    n_roots = int(run_of[-1]) + 1
    totals: dict[str, np.ndarray] = {}
    root_totals: dict[str, np.ndarray] = {}
    for side in ("base_total", "comp_total"):
        values = df[side].to_numpy(dtype="float64").copy()
        own = values[rows]
        np.add.at(values, anc_all, own[desc_all])
        totals[side] = values
        root_totals[side] = np.zeros(n_roots, dtype="float64")
        np.add.at(root_totals[side], run_of, own)
    firsts = rows[new_run]
    root_values: dict[str, object] = {
        "module": BACKWARD_PREFIX, "module_class": "", "step": df["step"].to_numpy(dtype=object)[firsts],
        "base_self": 0.0, "comp_self": 0.0, "base_total": root_totals["base_total"],
        "comp_total": root_totals["comp_total"], NODE: np.arange(first_id, first_id + n_roots),
        PARENT: -1, LEVEL: 0, "_path": "",
    }
    changed = {"module": module, PARENT: parent, LEVEL: level, **totals}
    cols = {}
    for col, dtype in df.dtypes.items():
        values = changed[col] if col in changed else df[col].to_numpy()
        fill = root_values.get(col, "")
        if col in root_values and isinstance(dtype, np.dtype) and dtype.kind in "iufb":
            cols[col] = np.insert(values, firsts, fill)
        else:
            cols[col] = np.insert(values.astype(object), firsts, np.asarray(fill, dtype=object)
                                  if isinstance(fill, np.ndarray) else fill)
    return object_frame(cols).astype(df.dtypes.to_dict())


def _detail_table(pairs: _Pairs, order: list[int], b: ModuleSide, c: ModuleSide, op_steps: _OpSteps,
                  notes: list[str], module_steps: tuple[np.ndarray, np.ndarray]) -> Table:
    """``ModuleCompare``: per pair a TOTAL row, then its top-layer ops aligned by pairing key;
    every row's ``step`` is its module pair's (``module_steps``: each side's step per module;
    a module's top-layer ops run inside it).

    The rows' indices (pair, base op, comparison op) are laid out with array arithmetic over
    the op steps; every column is then one vectorised gather."""
    order_k = np.asarray(order, dtype="int64")
    n_ops = np.diff(op_steps.ptr)[order_k]
    # Per pair in sheet order: its TOTAL row (slot -1), then its op steps.
    rp = np.repeat(order_k, n_ops + 1)
    first = np.cumsum(n_ops + 1) - (n_ops + 1)
    slot = np.arange(len(rp)) - np.repeat(first, n_ops + 1) - 1
    flat = np.where(slot >= 0, op_steps.ptr[rp] + slot, 0)
    total = slot < 0
    rb = np.where(total, -1, op_steps.base[flat] if len(op_steps.base) else -1)
    rc = np.where(total, -1, op_steps.comp[flat] if len(op_steps.comp) else -1)
    pos = np.where(total, pairs.positional[rp], op_steps.positional[flat] if len(op_steps.positional) else False)
    pb, pc = pairs.base[rp], pairs.comp[rp]

    def pick(field: str, fill: object) -> np.ndarray:
        return np.where(pb >= 0, take_rows(getattr(b, field), pb, fill), take_rows(getattr(c, field), pc, fill))

    children: dict[str, KernelRows] = {}
    cols: dict[str, object] = {"order": np.arange(1, len(rp) + 1), "module_class": pick("cls", ""),
                               "module_level": pick("depth", 0).astype("int64") + 1,
                               "module_name": pick("shown", "")}
    for prefix, side, mod, op in (("base", b, pb, rb), ("comp", c, pc, rc)):
        op_self = take_rows(np.asarray(side.op_dev, dtype="float64"), op, 0.0)
        cols[f"{prefix}_op"] = np.where(total, one_text("TOTAL"), take_rows(np.asarray(side.op_name, dtype=object), op, ""))
        children[f"{prefix}_kernels"] = side.op_kernels.take(np.where(total, -1, op))
        cols[f"{prefix}_self"] = np.where(total, take_rows(side.self_ns.astype("float64"), mod, 0.0), op_self) / _US
        cols[f"{prefix}_total"] = np.where(total, take_rows(side.total_ns.astype("float64"), mod, 0.0) / _US, np.nan)
    df = object_frame(cols)
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
        df[f"{prefix}_stack"] = object_text(np.where(total, module_stack, np.where(worse, op_stack, "")))
    op_matched = matched_as(take_rows(np.asarray(b.op_label, dtype=object), rb, ""),
                            take_rows(np.asarray(c.op_label, dtype=object), rc, ""),
                            take_rows(np.asarray(b.op_cls, dtype=object), rb, ""),
                            take_rows(np.asarray(c.op_cls, dtype=object), rc, ""), pos)
    df["matched_as"] = object_text(np.where(total, np.where(pos, one_text(BY_POSITION), ""), op_matched))
    df["step"] = object_text(step_labels(take_rows(module_steps[0], pb, -1), take_rows(module_steps[1], pc, -1)))
    return Table("ModuleCompare", MODULE_COMPARE_COLUMNS, ordered(df, MODULE_COMPARE_COLUMNS), (4, 7), (8, 11),
                 title="Modules (detail, µs)", default_sort="diff_total", notes=list(notes), children=children)


def _statistic_table(pairs: _Pairs, order: list[int], b: ModuleSide, c: ModuleSide, op_steps: _OpSteps,
                     notes: list[str]) -> Table:
    """``ModuleCompareStatistic``: modules grouped by path per side, ``[ TOTAL ]`` then op names.

    A comparison module paired with a base module is counted under the base module's path, and a
    comparison op paired by position under the base op's key, so that structural pairs land in one
    row (as pairs by name always do)."""
    walk_b, walk_c = pairs.base[order].tolist(), pairs.comp[order].tolist()
    base_walk = [m for m in walk_b if m >= 0]
    comp_walk = [m for m in walk_c if m >= 0]
    both = np.flatnonzero((pairs.base >= 0) & (pairs.comp >= 0))
    comp_path = dict(zip(pairs.comp[both].tolist(), b.path[pairs.base[both]].tolist()))
    moved = both[pairs.positional[both]]
    by_position = dict(zip(b.path[pairs.base[moved]].tolist(), c.shown[pairs.comp[moved]].tolist()))
    bg, cg = _group(b, base_walk), _group(c, comp_walk, comp_path)
    paths = list(bg) + [p for p in cg if p not in bg]
    by_pos = op_steps.positional & (op_steps.base >= 0) & (op_steps.comp >= 0)
    override = dict(zip(op_steps.comp[by_pos].tolist(), b.op_key[op_steps.base[by_pos]].tolist()))
    (bops, b_kernels), (cops, c_kernels) = _op_groups(b, bg), _op_groups(c, cg, override)
    rows: list[dict[str, object]] = []
    groups: list[tuple[int, int]] = []  # per row, the base and comparison op group (-1: none)
    for path in paths:
        bm, cm = bg.get(path, []), cg.get(path, [])
        side, first = (b, bm[0]) if bm else (c, cm[0])
        head = {"module_class": side.cls[first], "module_level": int(side.depth[first]) + 1,
                "module_name": side.shown[first]}
        groups.append((-1, -1))
        rows.append({**head, "op": "[ TOTAL ]", IS_TOTAL: True,
                     "base_self": b.self_ns[bm].sum() / _MS, "base_number": len(bm),
                     "base_total": b.total_ns[bm].sum() / _MS,
                     "comp_self": c.self_ns[cm].sum() / _MS, "comp_number": len(cm),
                     "comp_total": c.total_ns[cm].sum() / _MS,
                     "base_stack": b.stack[bm[0]] if bm else "", "comp_stack": c.stack[cm[0]] if cm else "",
                     "matched_as": f"{BY_POSITION}: {by_position[path]}" if path in by_position else ""})
        bo, co = bops.get(path, {}), cops.get(path, {})
        for op in list(bo) + [o for o in co if o not in bo]:
            bs, cs = bo.get(op), co.get(op)
            groups.append((bs.group if bs else -1, cs.group if cs else -1))
            rows.append({**head, "op": bs.label if bs else cs.label, IS_TOTAL: False,
                         "base_self": bs.dev_ns / _MS if bs else 0.0,
                         "base_number": bs.number if bs else 0, "base_total": np.nan,
                         "comp_self": cs.dev_ns / _MS if cs else 0.0,
                         "comp_number": cs.number if cs else 0, "comp_total": np.nan,
                         "base_stack": "", "comp_stack": "", "matched_as": _op_matched(bs, cs)})
    df = pd.DataFrame(rows)
    df.insert(0, "order", np.arange(1, len(df) + 1))
    total = df[IS_TOTAL].to_numpy()
    df["diff_total"] = np.where(total, diff(df["base_total"], df["comp_total"]), np.nan)
    df["diff_self"] = diff(df["base_self"], df["comp_self"])
    df["ratio"] = np.where(total, ratio(df["base_total"], df["comp_total"]),
                           ratio(df["base_self"], df["comp_self"]))
    group_of = np.asarray(groups, dtype="int64").reshape(-1, 2)
    children = {"base_kernels": b_kernels.take(group_of[:, 0]), "comp_kernels": c_kernels.take(group_of[:, 1])}
    return Table("ModuleCompareStatistic", MODULE_STATISTIC_COLUMNS, ordered(df, MODULE_STATISTIC_COLUMNS),
                 (5, 8), (9, 12),
                 title="Modules (by path, ms)", default_sort="diff_total", notes=list(notes), children=children)


def _group(side: ModuleSide, walk: list[int], path_of: dict[int, str] | None = None) -> dict[str, list[int]]:
    """Module ids grouped by path (``path_of`` overrides a module's own), paths and ids in walk order."""
    paths = side.path[np.asarray(walk, dtype="int64")].tolist()
    if path_of:
        paths = [path_of.get(m, p) for m, p in zip(walk, paths)]
    out: dict[str, list[int]] = {}
    for m, path in zip(walk, paths):
        out.setdefault(path, []).append(m)
    return out


@dataclass(frozen=True)
class _OpGroup:
    """The top-layer ops of one key in one module path."""

    dev_ns: int
    number: int
    group: int  # its row of the side's per-group kernels (each kernel name once, count, Σ)
    label: str  # the first op's pairing name
    cls: str  # its equivalence class label, ""
    positional: bool  # some op of the group was paired by position


def _op_matched(bs: _OpGroup | None, cs: _OpGroup | None) -> str:
    if bs is None or cs is None:
        return ""
    if cs.positional:
        return f"{BY_POSITION}: {cs.label}"
    if bs.label != cs.label and (bs.cls or cs.cls):
        return f"{bs.cls or cs.cls} (table): {cs.label}"
    return ""


def _op_groups(side: ModuleSide, groups: dict[str, list[int]],
               key_of: dict[int, str] | None = None) -> tuple[dict[str, dict[str, _OpGroup]], KernelRows]:
    """Per path, per top-layer op pairing key (first-seen order): an :class:`_OpGroup`; and the
    groups' kernels, one summary entry per kernel name (first-seen, by op sequence) with its count
    and Σ duration, row ``g`` = group ``g``.
    ``key_of`` overrides the key of some ops (comparison ops paired by position take the base op's)."""
    mods = np.fromiter((m for ms in groups.values() for m in ms), dtype="int64")
    mod_path = np.repeat(np.arange(len(groups)), [len(ms) for ms in groups.values()])
    has_ops = side.op_hi[mods] > side.op_lo[mods]
    mods, mod_path = mods[has_ops], mod_path[has_ops]
    if not len(mods):
        none = np.zeros(0, dtype="int32")
        return {}, KernelRows(SUMMARY, np.zeros(1, dtype="int64"), Coded(none, side.op_kernels.name.values[:0]),
                              none, np.zeros(0, dtype="int64"))
    # Group number per path with ops (first-seen), so a path's instances aggregate together.
    used, path_of_mod = np.unique(mod_path, return_inverse=True)
    lo = side.op_lo[mods]
    counts = side.op_hi[mods] - lo
    rows = np.arange(int(counts.sum())) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
    path_ids = np.repeat(path_of_mod, counts)
    all_keys = np.asarray(side.op_key, dtype=object)
    all_moved = np.zeros(len(all_keys), dtype=bool)
    if key_of:
        all_keys = all_keys.copy()
        moved_rows = np.fromiter(key_of, dtype="int64", count=len(key_of))
        all_keys[moved_rows] = np.array(list(key_of.values()), dtype=object)
        all_moved[moved_rows] = True
    # Groups (path, op key) numbered in first-seen order, aggregated with array operations (a
    # step change runs this for every module path: pandas' named aggregations cost more in
    # fixed overhead than the sums themselves).
    # numbered by object, each distinct key text once (pd.factorize hashes every op's key)
    key_code, _ = factorize_text(all_keys[rows], use_na_sentinel=False)
    group, _ = pd.factorize(path_ids * (int(key_code.max()) + 1) + key_code)
    n_groups = int(group.max()) + 1
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]])
    first = rows[order[starts]]  # each group's first op
    dev = np.asarray(side.op_dev, dtype="int64")
    group_dev = np.add.reduceat(dev[rows][order], starts)
    number = np.bincount(group, minlength=n_groups)
    moved = np.bincount(group, weights=all_moved[rows], minlength=n_groups) > 0
    group_path = path_ids[order[starts]]
    # The kernels of the grouped ops, by op sequence (each op is grouped once).
    group_of, seq_of = np.full(len(all_keys), -1, dtype="int64"), np.full(len(all_keys), -1, dtype="int64")
    group_of[rows], seq_of[rows] = group, np.arange(len(rows))
    k = side.op_kernels
    k_op = k.owner()
    picked = np.flatnonzero(group_of[k_op] >= 0)
    picked = picked[np.argsort(seq_of[k_op[picked]], kind="stable")]
    k_group, k_code, k_ns = group_of[k_op[picked]], k.name.codes[picked].astype("int64"), k.dur_ns[picked]
    # (group, kernel name) pairs in first-seen order, then stably by group.
    pair, first_pair = pd.factorize(k_group * (len(k.name.values) + 1) + k_code)
    pair_n = np.bincount(pair, minlength=len(first_pair))
    pair_ns = np.zeros(len(first_pair), dtype="int64")
    np.add.at(pair_ns, pair, k_ns)
    pair_group = first_pair // (len(k.name.values) + 1)
    by_group = np.argsort(pair_group, kind="stable")
    group_kernels = KernelRows(
        SUMMARY, offsets(np.bincount(pair_group, minlength=n_groups)),
        Coded((first_pair % (len(k.name.values) + 1))[by_group].astype("int32"), k.name.values),
        pair_n[by_group].astype("int32"), pair_ns[by_group])
    names = list(groups)
    paths = [names[u] for u in used.tolist()]
    labels, classes = np.asarray(side.op_label, dtype=object), np.asarray(side.op_cls, dtype=object)
    out: dict[str, dict[str, _OpGroup]] = {}
    for g, (p, name, label, cls, ns, count, mv) in enumerate(zip(
            group_path.tolist(), all_keys[first].tolist(), labels[first].tolist(), classes[first].tolist(),
            group_dev.tolist(), number.tolist(), moved.tolist())):
        out.setdefault(paths[p], {})[name] = _OpGroup(int(ns), int(count), g, str(label), str(cls), bool(mv))
    return out, group_kernels


def _tree_table(pairs: _Pairs, b: ModuleSide, c: ModuleSide, notes: list[str],
                steps: tuple[np.ndarray, np.ndarray]) -> Table:
    """Depth-first pair tree for the TUI: hidden ``_node``/``_parent``/``_level`` links, the full
    displayed path (``_path``) and both call stacks (``_base_stack``/``_comp_stack``); ``Step``
    tells apart the roots one model's steps repeat (``steps``: each side's step per module)."""
    # Depth-first order (children in pair order): preorder positions over the pair tree.
    child_ptr, child_idx = children_csr(pairs.parent)
    levels = tree_levels(pairs.parent, child_ptr, child_idx)
    pre = preorder(pairs.parent, levels, subtree_sizes(pairs.parent, levels), child_ptr, child_idx)
    idx = np.empty(len(pre), dtype="int64")
    idx[pre] = np.arange(len(pre))
    bm, cm = pairs.base[idx], pairs.comp[idx]
    hb, hc = bm >= 0, cm >= 0
    bi, ci = np.maximum(bm, 0), np.maximum(cm, 0)
    own = np.where(hb, b.name[bi], c.name[ci])
    bstack, cstack = np.asarray(b.stack, dtype=object), np.asarray(c.stack, dtype=object)
    df = object_frame({
        "module_class": np.where(hb, b.cls[bi], c.cls[ci]),
        "module": per_distinct(pd.Series(own, dtype=object),
                              lambda s: s.str.replace("nn.Module:", "", regex=False).str.strip()).to_numpy(dtype=object),
        "step": step_labels(np.where(hb, steps[0][bi] if len(steps[0]) else -1, -1),
                             np.where(hc, steps[1][ci] if len(steps[1]) else -1, -1)),
        "base_self": np.where(hb, b.self_ns[bi], 0) / _US, "base_total": np.where(hb, b.total_ns[bi], 0) / _US,
        "comp_self": np.where(hc, c.self_ns[ci], 0) / _US, "comp_total": np.where(hc, c.total_ns[ci], 0) / _US,
        NODE: idx, PARENT: pairs.parent[idx], LEVEL: pairs.depth[idx],
        "_path": np.where(hb, b.shown[bi], c.shown[ci]),
        "_base_stack": np.where(hb, bstack[bi] if len(bstack) else "", ""),
        "_comp_stack": np.where(hc, cstack[ci] if len(cstack) else "", ""),
    })
    df["matched_as"] = object_text(np.where(pairs.positional[idx], one_text(BY_POSITION), ""))
    df = _nest_backward(df, len(pairs.base))
    df["diff_total"] = diff(df["base_total"], df["comp_total"])
    df["ratio"] = ratio(df["base_total"], df["comp_total"])
    return Table("ModuleTree", MODULE_TREE_COLUMNS, ordered(df, MODULE_TREE_COLUMNS), (2, 3), (4, 5),
                 title="Module tree (µs)", default_sort="diff_total", notes=list(notes))
