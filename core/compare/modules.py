"""Module comparison: device time per ``nn.Module`` (``ModuleCompareStatistic``, ``ModuleCompare``).

Device time is charged to modules through the host op that launched each kernel, which tells a
user *which layer* got slower — the question op-level sheets cannot answer for a model made of
many identical ``aten::`` calls. Each side's module forest, with its device times, top-layer ops
and call stacks, is built by :mod:`.module_forest`; this module pairs the two sides and lays out
the sheets.

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
from .align import align, fill_by_position
from .equivalence import Equivalence
from .module_forest import BACKWARD_PREFIX, BWD_ROOT, FWD_ROOT, ModuleSide, build_side, concat_runs
from .names import BY_POSITION, matched_as, pairing_keys, side_keys
from .operators import MATCHED_AS, take_rows
from .result import IS_TOTAL, LEVEL, NODE, PARENT, Column, Table, diff, ratio
from .step_column import STEP, step_labels, step_of


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


@dataclass
class _Pairs:
    base: list[int | None]
    comp: list[int | None]
    parent: list[int]  # index of the parent pair, -1 for top-level pairs
    depth: list[int]
    positional: list[bool]  # paired by position (:func:`.align.fill_by_position`)


def _align(base_keys: list, comp_keys: list, structural: bool) -> tuple[list[tuple[int | None, int | None]],
                                                                        list[bool]]:
    """:func:`align` (the common case of identical sequences answered directly), then the
    structural pairing of one-each leftovers when ``structural``."""
    if base_keys == comp_keys:
        return [(i, i) for i in range(len(base_keys))], [False] * len(base_keys)
    steps = align(base_keys, comp_keys)
    return fill_by_position(steps) if structural else (steps, [False] * len(steps))


def _match(b: ModuleSide, c: ModuleSide, b_keys: np.ndarray, c_keys: np.ndarray, one_sided: bool,
           structural: bool) -> _Pairs:
    """Breadth-first pairing from the two root pairs (§3.7): the children of a module pair are
    aligned by their own names' pairing keys (``b_keys`` / ``c_keys``; siblings share the parent's
    path, so this is the reference's pairing by full path), then one-each leftovers by position."""
    out = _Pairs([], [], [], [], [])
    queue: deque[tuple[int | None, int | None, int, int]] = deque(
        [(FWD_ROOT, FWD_ROOT, -1, 0), (BWD_ROOT, BWD_ROOT, -1, 0)]
    )
    while queue:
        bn, cn, pidx, d = queue.popleft()
        kb = b.children.get(bn, []) if bn is not None else []
        kc = c.children.get(cn, []) if cn is not None else []
        if one_sided:
            steps = [(i, None) for i in range(len(kb))] + [(None, j) for j in range(len(kc))]
            flags = [False] * len(steps)
        else:
            steps, flags = _align([b_keys[i] for i in kb], [c_keys[j] for j in kc], structural)
        for (i, j), flag in zip(steps, flags):
            bi = kb[i] if i is not None else None
            cj = kc[j] if j is not None else None
            out.base.append(bi)
            out.comp.append(cj)
            out.parent.append(pidx)
            out.depth.append(d)
            out.positional.append(flag)
            queue.append((bi, cj, len(out.base) - 1, d + 1))
    return out


def _module_keys(side: ModuleSide, opts: CompareOptions, equivalence: Equivalence | None) -> np.ndarray:
    """Pairing key of every module's own name: ``nn.Module: Linear_0`` as recorded, an optimizer
    pseudo-module (``Optimizer.step#NpuFusedAdamW.step``) through the equivalence table, a
    backward pseudo-module by the forward path it names."""
    return pairing_keys(pd.Series(side.name, dtype=object), opts, equivalence=equivalence).key


#: Per module pair: its aligned top-layer ops (base op, comparison op — indices into the sides'
#: op lists, -1 when absent — and whether they were paired by position).
OpSteps = dict[int, list[tuple[int, int, bool]]]


def _op_steps(pairs: _Pairs, b: ModuleSide, c: ModuleSide, structural: bool) -> OpSteps:
    out: OpSteps = {}
    for k, (bm, cm) in enumerate(zip(pairs.base, pairs.comp)):
        blo, bhi = b.op_span.get(bm, (0, 0)) if bm is not None else (0, 0)
        clo, chi = c.op_span.get(cm, (0, 0)) if cm is not None else (0, 0)
        steps, flags = _align(b.op_key[blo:bhi], c.op_key[clo:chi], structural)
        out[k] = [(-1 if i is None else blo + i, -1 if j is None else clo + j, f) for (i, j), f in zip(steps, flags)]
    return out


def _walk_order(pairs: _Pairs, b: ModuleSide, c: ModuleSide) -> list[int]:
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


def ordered(df: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    """``df`` with the visible columns first, in sheet order, then the hidden ``_`` columns."""
    visible = [c.key for c in columns]
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
    if not pairs.base:
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
    node = df[NODE].to_numpy()
    parent = df[PARENT].to_numpy().copy()
    level = level.copy()
    totals = {side: df[side].to_numpy(dtype="float64").copy() for side in ("base_total", "comp_total")}
    # Only the backward rows are walked (in Python: a stack of open ancestors by path prefix);
    # every column is then rebuilt with one gather, the step roots inserted before their runs.
    firsts: list[int] = []  # df row before which each run's root goes
    root_steps: list[object] = []
    root_totals: dict[str, list[float]] = {"base_total": [], "comp_total": []}
    stack: list[tuple[str, int, int]] = []  # (path, node, df row) of open ancestors
    prev, run_step = -2, None
    for r, text, step in zip(rows.tolist(), module[rows].tolist(), df["step"].to_numpy(dtype=object)[rows].tolist()):
        if r != prev + 1 or step != run_step:
            run_step = step
            firsts.append(r)
            root_steps.append(step)
            for side in root_totals:
                root_totals[side].append(0.0)
            stack = []
        prev = r
        path = str(text)[len(BACKWARD_PREFIX):].strip()
        while stack and not path.startswith(stack[-1][0] + "/"):
            stack.pop()
        parent_path, parent_node = (stack[-1][0], stack[-1][1]) if stack else ("", first_id + len(firsts) - 1)
        parent[r] = parent_node
        level[r] = len(stack) + 1
        module[r] = path[len(parent_path):].lstrip("/ ").strip() or path
        for side, values in totals.items():
            own = float(values[r])
            root_totals[side][-1] = root_totals[side][-1] + own
            for _, _, a in stack:
                values[a] = float(values[a]) + own
        stack.append((path, int(node[r]), r))
    n_roots = len(firsts)
    root_values: dict[str, object] = {
        "module": BACKWARD_PREFIX, "module_class": "", "step": root_steps, "base_self": 0.0,
        "comp_self": 0.0, "base_total": root_totals["base_total"], "comp_total": root_totals["comp_total"],
        NODE: np.arange(first_id, first_id + n_roots), PARENT: -1, LEVEL: 0, "_path": "",
    }
    changed = {"module": module, PARENT: parent, LEVEL: level, **totals}
    cols = {}
    for col in df.columns:
        values = changed[col] if col in changed else df[col].to_numpy()
        fill = root_values.get(col, "")
        cols[col] = np.insert(values.astype(object), firsts, np.asarray(fill, dtype=object)
                              if isinstance(fill, list) else fill)
    return pd.DataFrame(cols, columns=df.columns).astype(df.dtypes.to_dict())


def _detail_table(pairs: _Pairs, order: list[int], b: ModuleSide, c: ModuleSide, op_steps: OpSteps,
                  notes: list[str], module_steps: tuple[np.ndarray, np.ndarray]) -> Table:
    """``ModuleCompare``: per pair a TOTAL row, then its top-layer ops aligned by pairing key;
    every row's ``step`` is its module pair's (``module_steps``: each side's step per module;
    a module's top-layer ops run inside it).

    The loop only lays out row indices (pair, base op, comparison op); every column is then one
    vectorised gather."""
    row_pair: list[int] = []
    row_b: list[int] = []
    row_c: list[int] = []
    row_pos: list[bool] = []
    for k in order:
        steps = op_steps[k]
        row_pair.extend([k] * (len(steps) + 1))
        row_b.append(-1)
        row_c.append(-1)
        row_pos.append(pairs.positional[k])
        row_b.extend(i for i, _, _ in steps)
        row_c.extend(j for _, j, _ in steps)
        row_pos.extend(f for _, _, f in steps)
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
    pos = np.asarray(row_pos, dtype=bool)
    op_matched = matched_as(take_rows(np.asarray(b.op_label, dtype=object), rb, ""),
                            take_rows(np.asarray(c.op_label, dtype=object), rc, ""),
                            take_rows(np.asarray(b.op_cls, dtype=object), rb, ""),
                            take_rows(np.asarray(c.op_cls, dtype=object), rc, ""), pos)
    df["matched_as"] = np.where(total, np.where(pos, BY_POSITION, ""), op_matched)
    df["step"] = step_labels(take_rows(module_steps[0], pb, -1), take_rows(module_steps[1], pc, -1))
    return Table("ModuleCompare", MODULE_COMPARE_COLUMNS, ordered(df, MODULE_COMPARE_COLUMNS), (4, 7), (8, 11),
                 title="Modules (detail, µs)", default_sort="diff_total", notes=list(notes))


def _statistic_table(pairs: _Pairs, order: list[int], b: ModuleSide, c: ModuleSide, op_steps: OpSteps,
                     notes: list[str]) -> Table:
    """``ModuleCompareStatistic``: modules grouped by path per side, ``[ TOTAL ]`` then op names.

    A comparison module paired with a base module is counted under the base module's path, and a
    comparison op paired by position under the base op's key, so that structural pairs land in one
    row (as pairs by name always do)."""
    base_walk = [pairs.base[k] for k in order if pairs.base[k] is not None]
    comp_walk = [pairs.comp[k] for k in order if pairs.comp[k] is not None]
    comp_path = {cm: str(b.path[bm]) for bm, cm in zip(pairs.base, pairs.comp) if bm is not None and cm is not None}
    by_position = {str(b.path[bm]): str(c.shown[cm]) for bm, cm, f in zip(pairs.base, pairs.comp, pairs.positional)
                   if f and bm is not None and cm is not None}
    bg, cg = _group(b, base_walk), _group(c, comp_walk, comp_path)
    paths = list(bg) + [p for p in cg if p not in bg]
    override = {j: b.op_key[i] for steps in op_steps.values() for i, j, f in steps if f and i >= 0 and j >= 0}
    bops, cops = _op_groups(b, bg), _op_groups(c, cg, override)
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
                     "base_stack": b.stack[bm[0]] if bm else "", "comp_stack": c.stack[cm[0]] if cm else "",
                     "matched_as": f"{BY_POSITION}: {by_position[path]}" if path in by_position else ""})
        bo, co = bops.get(path, {}), cops.get(path, {})
        for op in list(bo) + [o for o in co if o not in bo]:
            bs, cs = bo.get(op), co.get(op)
            rows.append({**head, "op": bs.label if bs else cs.label, IS_TOTAL: False,
                         "base_kernels": bs.details if bs else "", "base_self": bs.dev_ns / _MS if bs else 0.0,
                         "base_number": bs.number if bs else 0, "base_total": np.nan,
                         "comp_kernels": cs.details if cs else "", "comp_self": cs.dev_ns / _MS if cs else 0.0,
                         "comp_number": cs.number if cs else 0, "comp_total": np.nan,
                         "base_stack": "", "comp_stack": "", "matched_as": _op_matched(bs, cs)})
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


def _group(side: ModuleSide, walk: list[int], path_of: dict[int, str] | None = None) -> dict[str, list[int]]:
    """Module ids grouped by path (``path_of`` overrides a module's own), paths and ids in walk order."""
    out: dict[str, list[int]] = {}
    for m in walk:
        path = path_of.get(m) if path_of else None
        out.setdefault(path if path is not None else str(side.path[m]), []).append(m)
    return out


@dataclass(frozen=True)
class _OpGroup:
    """The top-layer ops of one key in one module path."""

    dev_ns: int
    number: int
    details: str  # each distinct kernel name once with its count and Σ ms
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
               key_of: dict[int, str] | None = None) -> dict[str, dict[str, _OpGroup]]:
    """Per path, per top-layer op pairing key (first-seen order): an :class:`_OpGroup`.
    ``key_of`` overrides the key of some ops (comparison ops paired by position take the base op's)."""
    spans = [(path, side.op_span[m]) for path, ms in groups.items() for m in ms if m in side.op_span]
    if not spans:
        return {}
    # Group number per path (first-seen), so a path's instances aggregate together.
    gid = {p: i for i, p in enumerate(dict.fromkeys(p for p, _ in spans))}
    lo = np.array([a for _, (a, _) in spans], dtype="int64")
    counts = np.array([b for _, (_, b) in spans], dtype="int64") - lo
    rows = np.arange(int(counts.sum())) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
    path_ids = np.repeat(np.array([gid[p] for p, _ in spans], dtype="int64"), counts)
    all_keys = np.asarray(side.op_key, dtype=object)
    all_moved = np.zeros(len(all_keys), dtype=bool)
    if key_of:
        all_keys = all_keys.copy()
        moved_rows = np.fromiter(key_of, dtype="int64", count=len(key_of))
        all_keys[moved_rows] = np.array(list(key_of.values()), dtype=object)
        all_moved[moved_rows] = True
    ops = pd.DataFrame({"path": path_ids, "seq": np.arange(len(rows)), "row": rows, "name": all_keys[rows],
                        "label": np.asarray(side.op_label, dtype=object)[rows],
                        "cls": np.asarray(side.op_cls, dtype=object)[rows], "moved": all_moved[rows],
                        "dev_ns": np.asarray(side.op_dev, dtype="int64")[rows]})
    ops["group"] = ops.groupby(["path", "name"], sort=False).ngroup()
    agg = ops.groupby("group", sort=True).agg(path=("path", "first"), name=("name", "first"),
                                             label=("label", "first"), cls=("cls", "first"),
                                             moved=("moved", "any"),
                                             dev_ns=("dev_ns", "sum"), number=("row", "size"))
    kern = side.op_kernels.merge(ops[["row", "group", "seq"]], left_on="op", right_on="row")
    kern = kern.sort_values("seq", kind="stable")
    per_kernel = kern.groupby(["group", "kernel"], sort=False).agg(
        n=("dur_ns", "size"), ns=("dur_ns", "sum")).reset_index()
    per_kernel = per_kernel.sort_values("group", kind="stable")
    per_kernel["line"] = (per_kernel["kernel"] + ", [number: " + per_kernel["n"].astype(str)
                          + "], [duration_ms: " + (per_kernel["ns"] / _MS).map("{:.3f}".format) + "]\n")
    details = dict(zip(*concat_runs(per_kernel["group"].to_numpy(), per_kernel["line"].tolist())))
    paths = list(gid)
    out: dict[str, dict[str, _OpGroup]] = {}
    for g, rec in zip(agg.index.tolist(), agg.itertuples(index=False)):
        out.setdefault(paths[rec.path], {})[rec.name] = _OpGroup(
            int(rec.dev_ns), int(rec.number), details.get(g, ""), str(rec.label), str(rec.cls), bool(rec.moved))
    return out


def _tree_table(pairs: _Pairs, b: ModuleSide, c: ModuleSide, notes: list[str],
                steps: tuple[np.ndarray, np.ndarray]) -> Table:
    """Depth-first pair tree for the TUI: hidden ``_node``/``_parent``/``_level`` links, the full
    displayed path (``_path``) and both call stacks (``_base_stack``/``_comp_stack``); ``Step``
    tells apart the roots one model's steps repeat (``steps``: each side's step per module)."""
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
        "step": step_labels(np.where(hb, steps[0][bi] if len(steps[0]) else -1, -1),
                             np.where(hc, steps[1][ci] if len(steps[1]) else -1, -1)),
        "base_self": np.where(hb, b.self_ns[bi], 0) / _US, "base_total": np.where(hb, b.total_ns[bi], 0) / _US,
        "comp_self": np.where(hc, c.self_ns[ci], 0) / _US, "comp_total": np.where(hc, c.total_ns[ci], 0) / _US,
        NODE: idx, PARENT: np.asarray(pairs.parent, dtype="int64")[idx],
        LEVEL: np.asarray(pairs.depth, dtype="int64")[idx],
        "_path": np.where(hb, b.shown[bi], c.shown[ci]),
        "_base_stack": np.where(hb, bstack[bi] if len(bstack) else "", ""),
        "_comp_stack": np.where(hc, cstack[ci] if len(cstack) else "", ""),
    })
    df["matched_as"] = np.where(np.asarray(pairs.positional, dtype=bool)[idx], BY_POSITION, "")
    df = _nest_backward(df, len(pairs.base))
    df["diff_total"] = diff(df["base_total"], df["comp_total"])
    df["ratio"] = ratio(df["base_total"], df["comp_total"])
    return Table("ModuleTree", MODULE_TREE_COLUMNS, ordered(df, MODULE_TREE_COLUMNS), (2, 3), (4, 5),
                 title="Module tree (µs)", default_sort="diff_total", notes=list(notes))
