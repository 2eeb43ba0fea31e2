"""Operator comparison: pair host ops of the two profiles and compare their device time.

Pipeline (spec §2.4): top-level ops of each side (:mod:`.optree`), cut into forward/backward runs,
aligned run by run with a true LCS (:func:`.align.align_runs`) on a key = the pairing name
(:func:`.names.pairing_names`: ``--op-name-map`` applied to both sides, MindSpore ``-op<N>``
suffixes dropped) plus the normalised input shape with ``--use-input-shape``; then optional
drill-down: a pair whose subtree launches more than ``--max-kernel-num`` kernels is replaced by the
alignment of the two ops' children.

Differences from the reference, on purpose:

* alignment is an LCS, not difflib's longest-block heuristic (quirk 1);
* drill-down also expands one-sided pairs (their children become one-sided rows) and pairs are
  aligned even with ``--disable-details`` — that flag only drops the detail sheet (quirk 6), so the
  statistic sheet is the same with or without it;
* the statistic groups by the pairing name, so a pair joined by ``--op-name-map`` lands in one row
  instead of two one-sided rows (quirk 5), and rows are sorted by the unrounded diff (quirk 10);
* MindSpore ops pair across runs although their ``-op<N>`` graph-node numbers differ (the
  reference pairs none of them);
* shapes are normalised (``[[8, 16], [32]]`` → ``8,16;32``) before keying, so a GPU op and an NPU op
  with the same dims can match under ``--use-input-shape`` (the reference's keys never agree).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text, object_frame, one_text
from ..device_time import device_time, unlinked_note
from ..model import Profile
from ..options import CompareOptions
from ..timeline import thread_key
from .align import align_runs, key_codes
from .equivalence import Equivalence
from .kernel_rows import KernelRows, launches
from .names import matched_as, side_keys
from .optree import OpForest, forest_of, segment_pairs
from .py_stacks import frame_stacks
from .result import Column, Table, diff, ratio
from .step_column import STEP, step_labels

STAT_SHEET = "OperatorCompareStatistic"
DETAIL_SHEET = "OperatorCompare"
NA = "N/A"


@dataclass(frozen=True)
class OperatorMatch:
    """The pair list shared by the operator and memory comparisons and the TUI drill-in.

    ``pairs`` has one row per pair in display order: ``base_row`` / ``comp_row`` (row in
    ``Profile.ops``, -1 when that side is absent), ``base_name`` / ``comp_name`` (raw names, ""),
    ``group`` / ``comp_group`` (pairing keys the statistic groups by: the base op's, else the
    comparison op's / the comparison op's, or the base op's for a pair joined by position),
    ``label`` / ``comp_label`` (the pairing names those groups are labelled with),
    ``matched_as`` (:func:`.names.matched_as`: "" for a pair by name), ``base_device_ns`` /
    ``comp_device_ns`` and ``base_kernel_num`` / ``comp_kernel_num`` (subtree values, 0 when absent).
    """

    base: OpForest
    comp: OpForest
    pairs: pd.DataFrame


# ---------------------------------------------------------------------------------------------
# Keys and matching
# ---------------------------------------------------------------------------------------------


def shape_key(input_dims: pd.Series) -> pd.Series:
    """Input shapes in one spelling for both kinds: GPU ``[[8, 16], [32], []]`` → ``8,16;32;``,
    NPU ``8,16;32`` unchanged (whitespace removed)."""
    s = input_dims.str.replace(r"\s+", "", regex=True)
    nested = s.str.slice(1, -1).str.replace("],[", ";", regex=False).str.replace(r"[\[\]]", "", regex=True)
    return nested.where(s.str.startswith("["), s)


def op_keys(ops: pd.DataFrame, keys: np.ndarray, opts: CompareOptions) -> np.ndarray:
    """Alignment key of every op (object array of str): its pairing key (``keys``), plus its
    normalised input shapes with ``--use-input-shape``."""
    if opts.use_input_shape:
        return (pd.Series(keys, dtype=object) + "\x1f" + shape_key(ops["input_dims"]).to_numpy(dtype=object)
                ).to_numpy(dtype=object)
    return keys


#: One aligned entry: base row, comparison row (-1 when absent), paired by position.
Step = tuple[int, int, bool]


def _aligned(segments: list[tuple[np.ndarray, np.ndarray]], b_keys: np.ndarray, c_keys: np.ndarray,
             structural: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align each (base op rows, comparison op rows) segment by key, then (``structural``) pair
    one-each leftovers by position; all segments in one :func:`.align.align_runs` call.
    Returns (base rows, comparison rows — -1 when absent —, paired by position), segment after
    segment."""
    none = np.zeros(0, dtype="int64")
    b_rows = np.concatenate([none, *(b for b, _ in segments)]).astype("int64")
    c_rows = np.concatenate([none, *(c for _, c in segments)]).astype("int64")
    b_n = np.array([len(b) for b, _ in segments], dtype="int64")
    c_n = np.array([len(c) for _, c in segments], dtype="int64")
    bk, ck = key_codes(b_keys[b_rows], c_keys[c_rows])
    _, bi, cj, flags = align_runs(bk, np.cumsum(b_n) - b_n, b_n, ck, np.cumsum(c_n) - c_n, c_n, structural)
    return (np.where(bi >= 0, b_rows[np.maximum(bi, 0)] if len(b_rows) else -1, -1),
            np.where(cj >= 0, c_rows[np.maximum(cj, 0)] if len(c_rows) else -1, -1), flags)


def _steps(b: np.ndarray, c: np.ndarray, flags: np.ndarray) -> list[Step]:
    return list(zip(b.tolist(), c.tolist(), flags.tolist()))


def _drill_down(pairs: list[Step], base: OpForest, comp: OpForest, b_keys: np.ndarray,
                c_keys: np.ndarray, limit: int, structural: bool) -> list[Step]:
    """Replace, in place and recursively, every pair launching more than ``limit`` kernels by the
    alignment of its ops' children (a present op without children stops the expansion)."""
    out: list[Step] = []
    stack = pairs[::-1]
    none = np.zeros(0, dtype="int64")
    while stack:
        b, c, f = stack.pop()
        kb = int(base.kernel_num[b]) if b >= 0 else 0
        kc = int(comp.kernel_num[c]) if c >= 0 else 0
        b_kids = base.children(b) if b >= 0 else none
        c_kids = comp.children(c) if c >= 0 else none
        if max(kb, kc) <= limit or (b >= 0 and len(b_kids) == 0) or (c >= 0 and len(c_kids) == 0):
            out.append((b, c, f))
            continue
        stack.extend(reversed(_steps(*_aligned([(b_kids, c_kids)], b_keys, c_keys, structural))))
    return out


def match_operators(base: Profile, comp: Profile, opts: CompareOptions,
                    equivalence: Equivalence | None = None) -> OperatorMatch:
    """Pair the two profiles' ops (top level, then drill-down), keyed through ``equivalence``
    (the run's table; None: the built-in one)."""
    bf, cf = forest_of(base), forest_of(comp)
    bk, ck = side_keys(base, comp, opts, equivalence), side_keys(comp, base, opts, equivalence)
    b_keys, c_keys = op_keys(base.ops, bk.key, opts), op_keys(comp.ops, ck.key, opts)
    structural = not opts.exact_names
    b, c, positional = _aligned(segment_pairs(bf, cf), b_keys, c_keys, structural)
    if opts.max_kernel_num is not None:
        pairs = _drill_down(_steps(b, c, positional), bf, cf, b_keys, c_keys, opts.max_kernel_num, structural)
        b = np.asarray([p[0] for p in pairs], dtype="int64")
        c = np.asarray([p[1] for p in pairs], dtype="int64")
        positional = np.asarray([p[2] for p in pairs], dtype=bool)
    b, c, positional = b.astype("int64"), c.astype("int64"), positional.astype(bool)
    base_group, comp_group = take_rows(bk.key, b, ""), take_rows(ck.key, c, "")
    base_label, comp_label = take_rows(bk.name, b, ""), take_rows(ck.name, c, "")
    frame = object_frame({
        "base_row": b,
        "comp_row": c,
        "base_name": take_rows(base.ops["name"].to_numpy(dtype=object), b, ""),
        "comp_name": take_rows(comp.ops["name"].to_numpy(dtype=object), c, ""),
        "group": np.where(b >= 0, base_group, comp_group),
        "comp_group": np.where(positional, base_group, comp_group),
        "label": np.where(b >= 0, base_label, comp_label),
        "comp_label": comp_label,
        "matched_as": matched_as(base_label, comp_label, take_rows(bk.cls, b, ""), take_rows(ck.cls, c, ""),
                                 positional),
        "base_device_ns": take_rows(bf.device_ns, b, 0),
        "comp_device_ns": take_rows(cf.device_ns, c, 0),
        "base_kernel_num": take_rows(bf.kernel_num, b, 0),
        "comp_kernel_num": take_rows(cf.kernel_num, c, 0),
    })
    return OperatorMatch(base=bf, comp=cf, pairs=frame)


def take_rows(values: np.ndarray, rows: np.ndarray, fill: object) -> np.ndarray:
    """values[rows] with ``fill`` where rows == -1."""
    if len(values) == 0:
        return np.full(len(rows), fill, dtype=object if isinstance(fill, str) else values.dtype)
    out = values[np.maximum(rows, 0)]
    if out.dtype == object:
        # Filled in place, with one object (``out`` is a fresh copy): np.where makes a new
        # array, and given a Python str a new str for every filled cell.
        out[rows < 0] = one_text(fill) if isinstance(fill, str) else fill
        return out
    return np.where(rows >= 0, out, fill)


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

#: The column every table of paired rows ends with: on the screens and in --json, not in the
#: reference's sheets (the workbook's Matching sheet carries it instead).
MATCHED_AS = Column("matched_as", "Matched As", "key", "text", "", 30, export=False)


STAT_COLUMNS = (
    Column("top", "Top", "key", "int", "", 10),
    Column("name", "Operator Name", "key", "bold", "", 30),
    Column("base_ms", "Base Device Duration(ms)", "base", "float", "ms", 25),
    Column("base_num", "Base Operator Number", "base", "int", "count", 25),
    Column("comp_ms", "Comparison Device Duration(ms)", "comparison", "float", "ms", 30),
    Column("comp_num", "Comparison Operator Number", "comparison", "int", "count", 30),
    Column("diff", "Diff Duration(ms)", "diff", "float", "ms", 20),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 20),
    MATCHED_AS,
)

DETAIL_COLUMNS = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("base_name", "Operator Name", "base", "bold", "", 30),
    Column("base_shape", "Input Shape", "base", "text", "", 20),
    Column("base_type", "Input Type", "base", "text", "", 20),
    Column("base_details", "Kernel Details", "base", "text", "", 20),
    Column("base_us", "Device Duration(us)", "base", "float", "us", 20),
    Column("comp_name", "Operator Name", "comparison", "bold", "", 30),
    Column("comp_shape", "Input Shape", "comparison", "text", "", 20),
    Column("comp_type", "Input Type", "comparison", "text", "", 20),
    Column("comp_details", "Kernel Details", "comparison", "text", "", 20),
    Column("comp_us", "Device Duration(us)", "comparison", "float", "us", 20),
    Column("diff", "Diff Duration(us)", "diff", "float", "us", 20),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 20),
    MATCHED_AS,
    STEP,
)


def grouped(pairs: pd.DataFrame, values: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """Per-group sums of the pairs' ops, per side, with op counts (``base_num`` / ``comp_num``).

    ``values`` maps an output column to (base source column, comparison source column). Rows are
    groups in first-appearance order: base groups, then comparison-only groups. ``name`` is the
    group's label (the base side's first pairing name, else the comparison's) and ``matched_as``
    says how differently named ops joined it (:func:`group_matches`).
    """
    # The group keys as codes, numbered on both sides at once (by object, each distinct text
    # once): grouping by text hashes every pair's key (a tenth of the step on the H200 pair).
    keys_of = {"base": pairs["group"].to_numpy(dtype=object)[pairs["base_row"].to_numpy() >= 0],
               "comp": pairs["comp_group"].to_numpy(dtype=object)[pairs["comp_row"].to_numpy() >= 0]}
    code, distinct = factorize_text(np.concatenate([keys_of["base"], keys_of["comp"]]))
    coded = not (code < 0).any()  # else by text: a missing key is no group
    codes_of = {"base": code[:len(keys_of["base"])], "comp": code[len(keys_of["base"]):]}
    sides = []
    for side, row_col, group_col, label_col in (("base", "base_row", "group", "label"),
                                                ("comp", "comp_row", "comp_group", "comp_label")):
        present = pairs[pairs[row_col].to_numpy() >= 0]
        cols = {out: present[src[0] if side == "base" else src[1]] for out, src in values.items()}
        g = pd.DataFrame({"group": codes_of[side] if coded else keys_of[side],
                          "label": present[label_col].to_numpy(),
                          **{k: v.to_numpy() for k, v in cols.items()}})
        first = next(iter(cols))
        agg = g.groupby("group", sort=False).agg(**{k: (k, "sum") for k in cols}, num=(first, "size"),
                                                 label=("label", "first"))
        sides.append(agg.add_prefix(f"{side}_"))
    keys = sides[0].index.union(sides[1].index, sort=False)
    b, c = (s.reindex(keys) for s in sides)
    label = b["base_label"].combine_first(c["comp_label"])
    out = pd.concat([b.drop(columns="base_label"), c.drop(columns="comp_label")], axis=1).fillna(0)
    out.insert(0, "name", label.to_numpy(dtype=object))
    text_keys = pd.Index(np.asarray(distinct, dtype=object)[keys.to_numpy(dtype="int64")], dtype=object) \
        if coded else keys
    label = pd.Series(label.to_numpy(dtype=object), index=text_keys)
    out.insert(1, "matched_as", group_matches(pairs, label).reindex(text_keys).fillna("").to_numpy(dtype=object))
    out.index.name = "group"
    return out.reset_index(drop=True)


def group_matches(pairs: pd.DataFrame, label: pd.Series) -> pd.Series:
    """``Matched As`` text per group key: how its differently named pairs were joined and the
    comparison names they brought (``flash attention (table): npu::npu_fusion_attention``)."""
    joined = pairs[(pairs["base_row"].to_numpy() >= 0) & (pairs["comp_row"].to_numpy() >= 0)
                   & (pairs["matched_as"].to_numpy() != "")]
    if joined.empty:
        return pd.Series(dtype=object)
    out: dict[object, str] = {}
    for key, rows in joined.groupby("group", sort=False):
        how = "; ".join(pd.unique(rows["matched_as"]).tolist())
        names = [n for n in pd.unique(rows["comp_label"]).tolist() if n != label.get(key)]
        shown = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
        out[key] = f"{how}: {shown}" if shown else how
    return pd.Series(out, dtype=object)


def statistic_table(match: OperatorMatch) -> Table:
    """``OperatorCompareStatistic``: device time per pairing name, largest increase first."""
    g = grouped(match.pairs, {"ns": ("base_device_ns", "comp_device_ns")})
    base_ms = g["base_ns"].to_numpy(dtype="float64") / 1e6
    comp_ms = g["comp_ns"].to_numpy(dtype="float64") / 1e6
    data = object_frame({
        "name": as_text(g["name"]),
        "base_ms": base_ms,
        "base_num": g["base_num"].astype("int64"),
        "comp_ms": comp_ms,
        "comp_num": g["comp_num"].astype("int64"),
        "diff": diff(base_ms, comp_ms),
        "ratio": ratio(base_ms, comp_ms),
        "matched_as": as_text(g["matched_as"]),
    })
    return Table(
        name=STAT_SHEET, columns=STAT_COLUMNS, data=rank_rows(data), base_span=(2, 3), comp_span=(4, 5),
        title="Operators: device time per name", default_sort="diff",
        absent_reason=no_ops_reason(match), notes=unlinked_notes(match),
    )


def no_ops_reason(match: OperatorMatch) -> str:
    """Why the operator tables are empty ("" when they are not)."""
    if not match.pairs.empty:
        return ""
    return "no host ops in base or comparison (the traces hold no cpu_op / annotation events)"


def rank_rows(data: pd.DataFrame) -> pd.DataFrame:
    """Stable sort by the unrounded diff, descending, then number rows 1..n as ``top``."""
    order = np.argsort(-data["diff"].to_numpy(), kind="stable")
    data = data.iloc[order].reset_index(drop=True)
    data.insert(0, "top", np.arange(1, len(data) + 1, dtype="int64"))
    return data


#: The reference's placeholder for an NPU kernel line's missing task id / type (HCCL ops):
#: ``hcom_allReduce__101_0_1, None, None [duration: 390.21]``.
_PLACEHOLDERS = re.compile(r"(?:, None)+(?=, \[input shapes: | \[duration: )")


def screen_kernel_text(text: str) -> str:
    """A cell as screens show it: kernel lines without the reference's ``None`` placeholders
    (the workbook keeps them, to stay a drop-in; a screen must not show Python's ``None``)."""
    return _PLACEHOLDERS.sub("", text) if "None" in text and "[duration: " in text else text


def _kernels(forest: OpForest, rows: np.ndarray) -> KernelRows:
    """The subtree kernels of each op row (none for absent rows), one launch entry each."""
    kernel_rows, counts = forest.subtree_gather(forest.kernels, rows)
    return launches(forest.profile, counts, kernel_rows)


def side_text(ops: pd.DataFrame, rows: np.ndarray, column: str) -> np.ndarray:
    """Shape/type text of the pairs' ops: ``N/A`` when the op has none, blank when absent."""
    values = ops[column].to_numpy(dtype=object)
    text = take_rows(values, rows, "")
    return np.where((rows >= 0) & (text == ""), one_text(NA), text)


def detail_table(match: OperatorMatch) -> Table:
    """``OperatorCompare``: one row per pair, with each op's subtree kernels and the step each
    side's op ran in."""
    p = match.pairs
    b, c = p["base_row"].to_numpy(), p["comp_row"].to_numpy()
    bops, cops = match.base.profile.ops, match.comp.profile.ops
    base_us = p["base_device_ns"].to_numpy(dtype="float64") / 1000.0
    comp_us = p["comp_device_ns"].to_numpy(dtype="float64") / 1000.0
    data = object_frame({
        "order": np.arange(1, len(p) + 1, dtype="int64"),
        "base_name": as_text(p["base_name"]),
        "base_shape": side_text(bops, b, "input_dims"),
        "base_type": side_text(bops, b, "input_types"),
        "base_us": base_us,
        "comp_name": as_text(p["comp_name"]),
        "comp_shape": side_text(cops, c, "input_dims"),
        "comp_type": side_text(cops, c, "input_types"),
        "comp_us": comp_us,
        "diff": diff(base_us, comp_us),
        "ratio": ratio(base_us, comp_us),
        "matched_as": as_text(p["matched_as"]),
        "step": step_labels(take_rows(bops["step"].to_numpy(dtype="int64"), b, -1),
                            take_rows(cops["step"].to_numpy(dtype="int64"), c, -1)),
        "_base_row": b,
        "_comp_row": c,
        "_base_stack": op_stacks(match.base.profile, b),
        "_comp_stack": op_stacks(match.comp.profile, c),
    })
    return Table(
        name=DETAIL_SHEET, columns=DETAIL_COLUMNS, data=data, base_span=(1, 5), comp_span=(6, 10),
        title="Operators: matched pairs", absent_reason=no_ops_reason(match),
        children={"base_details": _kernels(match.base, b), "comp_details": _kernels(match.comp, c)},
    )


def op_stacks(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """The Python call stack around each op's start (``rows`` into ``profile.ops``, -1 for no op;
    "" where no frame holds it): the trace's ``Call stack`` argument is rarely recorded, the
    frames are. `c` on the Operators screen shows it; the workbook keeps the reference's columns."""
    out = np.full(len(rows), "", dtype=object)
    ok = rows >= 0
    if ok.any() and not profile.pyfuncs.empty:
        ops, r = profile.ops, rows[ok]
        out[ok] = frame_stacks(profile, thread_key(ops["pid"].to_numpy()[r], ops["tid"].to_numpy()[r]),
                               ops["start_ns"].to_numpy()[r])
    return out


def unlinked_notes(match: OperatorMatch) -> list[str]:
    """Say how much device time no host op accounts for (it is in no operator row), with the
    accounting and reasons of :mod:`perfcmp_core.device_time`."""
    notes = []
    for label, forest in (("base", match.base), ("comparison", match.comp)):
        profile = forest.profile
        note = unlinked_note(label, device_time(profile), profile.meta.kind)
        if note:
            notes.append(note)
    return notes


def compare_operators(base: Profile, comp: Profile, opts: CompareOptions,
                      match: OperatorMatch | None = None,
                      equivalence: Equivalence | None = None) -> tuple[OperatorMatch, list[Table]]:
    """The operator sheets (statistic, then detail unless ``--disable-details``) and the pair list
    (returned so the memory comparison reuses it)."""
    match = match or match_operators(base, comp, opts, equivalence)
    tables = [statistic_table(match)]
    if not opts.disable_details:
        tables.append(detail_table(match))
    return match, tables


def operator_kernels(profile: Profile, op_row: int) -> pd.DataFrame:
    """Kernels counted for ``op_row`` (its subtree, reference breadth-first order), with the name
    of the host op that launched each one — the TUI's drill-in view of an operator row."""
    forest = forest_of(profile)
    rows = forest.subtree_items(forest.kernels, op_row)
    k = profile.kernels.iloc[rows].reset_index(drop=True)
    launch = k["op_row"].to_numpy()
    k.insert(0, "launched_by", profile.ops["name"].to_numpy(dtype=object)[launch])
    k.insert(0, "kernel_row", rows)
    return k
