"""Kernel classes for any two inputs: ``KernelClassCompare`` and ``KernelOpCompare``.

Kernel names are vendor-specific (an H100 GEMM is ``nvjet_…`` / ``sm90_xmma_gemm_…``, the same
GEMM on MI300 ``Cijk_…``, on Ascend a ``MatMulV3`` task), so kernels of two different platforms
can only be compared by what they do. Every counted kernel (the device-time rows of
:mod:`perfcmp_core.device_time`, so the classes add up to the profile's device time exactly) gets
one class, decided in this order:

1. collectives flagged by the loader (NCCL kernels, HCCL ops) are ``communication``;
2. the first ``[kernel.*]`` rule of the equivalence table (:mod:`.equivalence`) whose ``tasks``
   match the task type or whose ``names`` match the kernel — the NPU op type when there is one
   (``MatMulV3``), else the kernel name (``sm90_xmma_gemm_…``, the primitive of a MindSpore
   ``<scope>/MatMul-op12``);
3. the first rule whose ``ops`` match the *launching op*: the innermost host op above the launch
   call (GPU ``cudaLaunchKernel`` / ``hipLaunchKernel`` …, torch_npu's ``aclnn*`` launchers, HCCL
   launchers) — so a Triton or custom kernel launched by ``aten::mm`` is a GEMM;
4. ``other`` — the unclassified rest, reported as a share of device time.

``KernelClassCompare`` sums calls and time per class and side; ``KernelOpCompare`` keys by
(launching op, class), which is what two GPU vendors have in common when no kernel name is: the
launching op's pairing key (:mod:`.names`, so ``aten::_scaled_dot_product_flash_attention`` and
``aten::_scaled_dot_product_efficient_attention`` share a row) and the class.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text
from ..device_time import COMMUNICATION as BUCKET_COMM
from ..device_time import EXCLUDED, classify as device_buckets
from ..model import Profile
from ..options import CompareOptions
from .equivalence import Equivalence, builtin_equivalence
from .names import OP_INSTANCE_SUFFIX, side_keys
from .operators import MATCHED_AS
from .result import IS_TOTAL, Column, Table, diff, ratio

COMMUNICATION, OTHER = "communication", "other"
CLASS_SHEET, OP_SHEET = "KernelClassCompare", "KernelOpCompare"
#: Host-op categories that are launch calls (CUDA runtime / driver, ROCm HIP under the same two,
#: and the generic runtime categories of other backends).
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
#: Host ops that only launch what their parent op asked for: torch_npu's aclnn / aclop launchers,
#: HCCL / NCCL launch wrappers.
LAUNCHER_NAMES = re.compile(r"^(?:aclnn|aclop|AscendCL@|Hccl[A-Z]|hcom_|record_param_comms$|nccl:)")
#: How many kernel names a row lists per side.
TOP_KERNELS = 3


def launching_ops(profile: Profile, op_row: np.ndarray) -> np.ndarray:
    """The launching op of each kernel: ``op_row`` walked up past launch calls and launchers
    (-1 stays -1; a launcher without a parent is kept)."""
    ops = profile.ops
    rows = np.asarray(op_row, dtype="int64").copy()
    if len(ops) == 0:
        return np.full(len(rows), -1, dtype="int64")
    codes, names = profile.codes("ops", "name")
    is_launcher = pd.Series(names, dtype=object).str.contains(LAUNCHER_NAMES).to_numpy(dtype=bool)
    skip = profile.among("ops", "cat", LAUNCH_CATEGORIES) | is_launcher[codes]
    parent = ops["parent"].to_numpy()
    pending = np.flatnonzero((rows >= 0) & skip[np.clip(rows, 0, None)])
    while len(pending):
        up = parent[rows[pending]]
        move = up >= 0
        rows[pending[move]] = up[move]
        pending = pending[move]
        pending = pending[skip[rows[pending]]]
    return rows


#: torch_npu kernel names: ``<aclnn launcher>_<implementation>_<op type>``.
ACLNN_KERNEL = re.compile(r"^aclnn[A-Za-z0-9]+_[A-Za-z0-9]+_([A-Za-z0-9]+)$")


def _kernel_text(profile: Profile) -> pd.Series:
    """What a kernel's name rules look at: the NPU op type when known (else the one a torch_npu
    kernel name ends with), else the kernel name, with a MindSpore scope and ``-op<N>`` suffix
    removed."""
    k = profile.kernels
    op_type = k["op_type"].astype(object)
    text = op_type.where(~op_type.isin(["", "N/A"]), k["name"].astype(object))
    codes, uniques = factorize_text(text.to_numpy(dtype=object))
    leaf = pd.Series(uniques, dtype=object).str.rsplit("/", n=1).str[-1].str.replace(OP_INSTANCE_SUFFIX, "",
                                                                                     regex=True)
    if profile.meta.is_npu:
        leaf = leaf.str.extract(ACLNN_KERNEL, expand=False).fillna(leaf)
    return pd.Series(leaf.to_numpy(dtype=object)[codes] if len(codes) else [], index=k.index, dtype=object)


def short_kernel_name(text: pd.Series) -> pd.Series:
    """Readable kernel names: ``void ns::kernel<…>(…)`` → ``ns::kernel``, at most 60 characters."""
    out = (text.str.replace(r"^void\s+", "", regex=True).str.replace("(anonymous namespace)::", "", regex=False)
           .str.split(r"[<(]", n=1, regex=True).str[0].str.strip())
    return out.where(out.str.len() <= 60, out.str.slice(0, 57) + "…")


def kernel_classes(profile: Profile, table: Equivalence) -> pd.DataFrame:
    """Every counted kernel of ``profile`` with its class: ``row`` (in ``Profile.kernels``),
    ``cls`` (a class label, ``communication`` or ``other``), ``family`` (the deciding rule's id,
    ``communication`` or ``other``: what other screens map from, whatever label a user gives
    it), ``by_name`` (the kernel's own name or task type decided, not its launching op),
    ``launch`` (launching op row, -1), ``kernel`` (short name), ``dur_ns``.

    This is the one classification of a profile's kernels: KernelClassCompare, KernelOpCompare,
    the step explanation, OverallMetrics' GPU classes and the advisor's categories all read it
    (a comparison computes it once per side, :meth:`perfcmp_core.compare.Context.kernel_classes`);
    every rule runs once per distinct text."""
    k = profile.kernels
    bucket = device_buckets(profile)
    rows = np.flatnonzero(bucket != EXCLUDED)
    launch = launching_ops(profile, k["op_row"].to_numpy()[rows])
    op_names = profile.ops["name"].to_numpy(dtype=object)
    launch_name = np.where(launch >= 0, op_names[np.maximum(launch, 0)] if len(op_names) else "", "")
    text = _kernel_text(profile).to_numpy(dtype=object)[rows]
    task = k["task_type"].to_numpy(dtype=object)[rows]
    chosen, by_name = _chosen(table, pd.Series(text, dtype=object), pd.Series(task, dtype=object),
                              pd.Series(launch_name, dtype=object))
    comm = bucket[rows] == BUCKET_COMM
    out_cls = np.where(comm, COMMUNICATION, _labels(table)[chosen])
    family = np.where(comm, COMMUNICATION, np.array([r.id for r in table.kernels] + [OTHER], dtype=object)[chosen])
    codes, uniques = factorize_text(text)
    short = short_kernel_name(pd.Series(uniques, dtype=object)).to_numpy(dtype=object)
    names = short[codes] if len(codes) else np.zeros(0, dtype=object)
    return pd.DataFrame({"row": rows, "cls": out_cls, "family": family, "by_name": by_name & ~comm,
                         "launch": launch, "kernel": names, "dur_ns": k["dur_ns"].to_numpy()[rows]})


def _first_rule(table: Equivalence, values: np.ndarray, patterns: str) -> np.ndarray:
    """Per value (object array): index of the first rule whose ``patterns`` match it, or
    ``len(table.kernels)``; each pattern list runs once per distinct value."""
    rules = table.kernels
    codes, uniques = factorize_text(values)
    lower = [str(u).lower() for u in uniques]  # a few hundred: plain lists, no Series per rule
    first = np.full(len(lower), len(rules), dtype="int64")
    open_ = np.arange(len(lower))
    for i, rule in enumerate(rules):
        if not len(open_):
            break
        hit = getattr(rule, patterns).matches([lower[j] for j in open_.tolist()])
        first[open_[hit]] = i
        open_ = open_[~hit]
    return first[codes] if len(codes) else np.zeros(0, dtype="int64")


def class_of(table: Equivalence, text: pd.Series, task: pd.Series, op: pd.Series) -> np.ndarray:
    """The class label of each (kernel text, task type, launching op name): the first rule whose
    names or tasks match, else the first whose ops match, else ``other`` (communication flagged by
    the loader is decided by the caller)."""
    return _labels(table)[_chosen(table, text, task, op)[0]]


def _labels(table: Equivalence) -> np.ndarray:
    return np.array([r.label for r in table.kernels] + [OTHER], dtype=object)


def _chosen(table: Equivalence, text: pd.Series, task: pd.Series, op: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Index of the deciding rule per kernel (``len(table.kernels)``: none), and whether the
    kernel's name or task type decided (False: its launching op, or nothing)."""
    none = len(table.kernels)
    by_name = np.minimum(_first_rule(table, text.to_numpy(dtype=object), "names"),
                         _first_rule(table, task.to_numpy(dtype=object), "tasks"))
    named = by_name < none
    return np.where(named, by_name, _first_rule(table, op.to_numpy(dtype=object), "ops")), named


def class_order(table: Equivalence) -> list[str]:
    """Class labels in rule order, communication first and other last (the sheet's row order);
    a label that several rules share stands where its last rule does (the Inductor rules come
    first only to decide first)."""
    labels = [COMMUNICATION, *(r.label for r in table.kernels), OTHER]
    return list(reversed(dict.fromkeys(reversed(labels))))


def _top_kernels(df: pd.DataFrame, group: np.ndarray) -> pd.Series:
    """Per group (``group``: a non-negative integer code per row of ``df``), its largest kernels
    by time, ``name (ms)`` joined by ``; ``, indexed by the group's code. Grouped on integer
    codes: a large pair has tens of thousands of kernel rows with long names."""
    if df.empty:
        return pd.Series(dtype=object)
    kernel, names = factorize_text(df["kernel"].to_numpy(dtype=object))
    n = max(len(names), 1)
    per = pd.Series(df["dur_ns"].to_numpy()).groupby(group.astype("int64") * n + kernel, sort=False).sum()
    order = np.argsort(-per.to_numpy(), kind="stable")  # largest first, ties as first seen
    pair, ns = per.index.to_numpy()[order], per.to_numpy()[order]
    rank = pd.Series(pair // n).groupby(pair // n, sort=False).cumcount().to_numpy()
    keep = rank < TOP_KERNELS  # formatted only for the rows kept
    top = pd.DataFrame({"g": pair[keep] // n, "text": as_text(pd.Series(names[pair[keep] % n], dtype=object)) + " ("
                        + pd.Series(ns[keep] / 1e6).map("{:.3f}".format) + " ms)"})
    return top.groupby("g", sort=False)["text"].agg("; ".join)


def _side_cols(prefix: str, role: str) -> list[Column]:
    return [Column(f"{prefix}_calls", "Calls", role, "int", "count", 10),
            Column(f"{prefix}_ms", "Device Time(ms)", role, "float", "ms", 18),
            Column(f"{prefix}_share", "Share", role, "percent", "", 10)]


CLASS_COLUMNS: tuple[Column, ...] = (
    Column("cls", "Kernel Class", "key", "bold", "", 26),
    *_side_cols("base", "base"),
    *_side_cols("comp", "comparison"),
    Column("diff", "Diff Time(ms)", "diff", "float", "ms", 16),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 12),
    Column("base_top", "Base Top Kernels", "base", "text", "", 50),
    Column("comp_top", "Comparison Top Kernels", "comparison", "text", "", 50),
)

OP_COLUMNS: tuple[Column, ...] = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("op", "Launching Op", "key", "bold", "", 40),
    Column("cls", "Kernel Class", "key", "text", "", 22),
    Column("base_calls", "Calls", "base", "int", "count", 10),
    Column("base_ms", "Device Time(ms)", "base", "float", "ms", 18),
    Column("comp_calls", "Calls", "comparison", "int", "count", 10),
    Column("comp_ms", "Device Time(ms)", "comparison", "float", "ms", 18),
    Column("diff", "Diff Time(ms)", "diff", "float", "ms", 16),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 12),
    Column("base_kernels", "Base Kernels", "base", "text", "", 50),
    Column("comp_kernels", "Comparison Kernels", "comparison", "text", "", 50),
    # Our own sheet, not the reference's: here the workbook holds the column too.
    replace(MATCHED_AS, export=True),
)


def kernel_class_compare(base: Profile, comp: Profile, equivalence: Equivalence | None = None,
                         classes: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> Table:
    """``KernelClassCompare``: calls, device time and share per kernel class and side, a
    ``[ TOTAL ]`` row (= each side's device time), and each class's largest kernels.

    ``equivalence``: the run's table (None: the built-in one); ``classes``: both sides'
    :func:`kernel_classes` when the caller has them."""
    table = equivalence if equivalence is not None else builtin_equivalence()
    b, c = classes or (kernel_classes(base, table), kernel_classes(comp, table))
    order = class_order(table)
    cols: dict[str, object] = {"cls": order}
    notes = []
    for prefix, df, label in (("base", b, "base"), ("comp", c, "comparison")):
        g = df.groupby("cls")["dur_ns"].agg(["size", "sum"]).reindex(order, fill_value=0)
        total = int(df["dur_ns"].sum())
        cols[f"{prefix}_calls"] = g["size"].to_numpy(dtype="int64")
        cols[f"{prefix}_ms"] = g["sum"].to_numpy(dtype="float64") / 1e6
        cols[f"{prefix}_share"] = g["sum"].to_numpy(dtype="float64") / total if total else np.zeros(len(order))
        codes, labels = factorize_text(df["cls"].to_numpy(dtype=object))
        top = _top_kernels(df, codes)
        top.index = labels[top.index.to_numpy()] if len(top) else top.index
        cols[f"{prefix}_top"] = top.reindex(order).fillna("").to_numpy(dtype=object)
        other = int(g.loc[OTHER, "sum"])
        if other:
            notes.append(f"{label}: {other / total:.1%} of device time ({other / 1e6:.3f} ms) is in no kernel class "
                         f"(add a [kernel.*] rule with --equivalence)")
    data = pd.DataFrame(cols)
    data = data[(data["base_calls"] > 0) | (data["comp_calls"] > 0)].reset_index(drop=True)
    total_row = {"cls": "[ TOTAL ]", "base_top": "", "comp_top": ""}
    for prefix in ("base", "comp"):
        total_row[f"{prefix}_calls"] = int(data[f"{prefix}_calls"].sum())
        total_row[f"{prefix}_ms"] = float(data[f"{prefix}_ms"].sum())
        total_row[f"{prefix}_share"] = 1.0 if total_row[f"{prefix}_calls"] else 0.0
    data = pd.concat([data, pd.DataFrame([total_row])], ignore_index=True)
    data["diff"] = diff(data["base_ms"], data["comp_ms"])
    data["ratio"] = ratio(data["base_ms"], data["comp_ms"])
    data[IS_TOTAL] = data["cls"] == "[ TOTAL ]"
    reason = "" if len(data) > 1 else "no device kernels on either side"
    return Table(CLASS_SHEET, CLASS_COLUMNS, data[[col.key for col in CLASS_COLUMNS] + [IS_TOTAL]], (1, 3), (4, 6),
                 title="Kernels by class (any pair: GPU vs NPU, vendor vs vendor)", default_sort="diff",
                 absent_reason=reason, notes=notes)


def kernel_op_compare(base: Profile, comp: Profile, opts: CompareOptions,
                      equivalence: Equivalence | None = None,
                      classes: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> Table:
    """``KernelOpCompare``: calls and device time per (launching op, kernel class) and side,
    largest increase first; kernels without a launching op are keyed by their class alone.
    Launching ops are keyed like the operators' (``opts``, ``equivalence``)."""
    table = equivalence if equivalence is not None else builtin_equivalence()
    b, c = classes or (kernel_classes(base, table), kernel_classes(comp, table))
    sides = []
    for df, profile, other in ((b, base, comp), (c, comp, base)):
        keys = side_keys(profile, other, opts, table)
        launch = df["launch"].to_numpy()
        linked = launch >= 0
        key = np.where(linked, keys.key[np.maximum(launch, 0)] if len(keys.key) else "", "(no launching op)")
        label = np.where(linked, keys.name[np.maximum(launch, 0)] if len(keys.name) else "", "(no launching op)")
        cls_of = np.where(linked, keys.cls[np.maximum(launch, 0)] if len(keys.cls) else "", "")
        sides.append(df.assign(key=key, label=label, opcls=cls_of))
    agg = []
    for s in sides:
        # Grouped on one integer code per (key, class): each text column factorised once.
        key, keys = factorize_text(s["key"].to_numpy(dtype=object))
        cls, classes = factorize_text(s["cls"].to_numpy(dtype=object))
        n = max(len(classes), 1)
        gid = key.astype("int64") * n + cls
        g = s.assign(_g=gid).groupby("_g", sort=False).agg(calls=("dur_ns", "size"), ns=("dur_ns", "sum"),
                                                           label=("label", "first"), opcls=("opcls", "first"))
        g["kernels"] = _top_kernels(s, gid)
        at = g.index.to_numpy()
        g.index = pd.MultiIndex.from_arrays([keys[at // n], classes[at % n]], names=["key", "cls"])
        agg.append(g)
    keys_all = agg[0].index.union(agg[1].index, sort=False)
    bb, cc = agg[0].reindex(keys_all), agg[1].reindex(keys_all)
    both = bb["label"].notna() & cc["label"].notna() & (bb["label"] != cc["label"])
    opcls = bb["opcls"].combine_first(cc["opcls"]).fillna("")
    data = pd.DataFrame({
        "op": bb["label"].combine_first(cc["label"]).to_numpy(dtype=object),
        "cls": [k[1] for k in keys_all],
        "base_calls": bb["calls"].fillna(0).to_numpy(dtype="int64"),
        "base_ms": bb["ns"].fillna(0).to_numpy(dtype="float64") / 1e6,
        "comp_calls": cc["calls"].fillna(0).to_numpy(dtype="int64"),
        "comp_ms": cc["ns"].fillna(0).to_numpy(dtype="float64") / 1e6,
        "base_kernels": bb["kernels"].fillna("").to_numpy(dtype=object),
        "comp_kernels": cc["kernels"].fillna("").to_numpy(dtype=object),
        "matched_as": np.where(both.to_numpy() & (opcls.to_numpy() != ""),
                               [f"{k} (table): {n}" for k, n in zip(opcls.tolist(), cc["label"].fillna("").tolist())],
                               ""),
    })
    data["diff"] = diff(data["base_ms"], data["comp_ms"])
    data["ratio"] = ratio(data["base_ms"], data["comp_ms"])
    data = data.iloc[np.argsort(-data["diff"].to_numpy(), kind="stable")].reset_index(drop=True)
    data.insert(0, "order", np.arange(1, len(data) + 1, dtype="int64"))
    reason = "" if len(data) else "no device kernels on either side"
    return Table(OP_SHEET, OP_COLUMNS, data[[col.key for col in OP_COLUMNS]], (3, 4), (5, 6),
                 title="Kernels by launching op and class", default_sort="diff", absent_reason=reason)
