"""API comparison (``ApiCompare``, spec §7): host time per op name, base vs comparison.

Every host op except ``ProfilerStep#N`` markers counts, on every thread. Per pairing name
(:func:`.names.pairing_names`: ``--op-name-map`` applied, MindSpore ``-op<N>`` suffixes dropped)
and side: Total = Σ duration, Self = Σ (duration − Σ durations of its direct children),
Avg = Total ÷ Calls.

Differences from the reference, on purpose:

* children are the loader's same-thread, properly contained ones, so Self time cannot go negative
  (the reference's cross-thread, start-only tree gives e.g. ``aten::empty_strided`` −39.33 ms, quirk
  3). Self is still clamped at 0 per op, which only matters for ops that overlap their own
  children's total, e.g. a child recorded twice on a broken trace;
* the four ratios come from unrounded values (the reference rounds to 0.01 ms first, turning an
  average below 5 µs into 0 and its ratio into ``INF``, quirk 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text
from ..model import Profile
from ..options import CompareOptions
from .equivalence import Equivalence
from .masks import TextIndex, TextIndexes
from .names import by_primitive, other_names, pairing_keys
from .operators import MATCHED_AS
from .result import Column, Table, ratio, screen_diffs

SHEET = "ApiCompare"

COLUMNS = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("name", "api name", "key", "bold", "", 30),
    Column("base_total", "Total Duration(ms)", "base", "float", "ms", 20),
    Column("base_self", "Self Time(ms)", "base", "float", "ms", 20),
    Column("base_avg", "Avg Duration(ms)", "base", "float", "ms", 20),
    Column("base_calls", "Calls", "base", "int", "count", 20),
    Column("comp_total", "Total Duration(ms)", "comparison", "float", "ms", 20),
    Column("comp_self", "Self Time(ms)", "comparison", "float", "ms", 20),
    Column("comp_avg", "Avg Duration(ms)", "comparison", "float", "ms", 20),
    Column("comp_calls", "Calls", "comparison", "int", "count", 20),
    Column("total_ratio", "Diff Total Ratio", "ratio", "float", "", 20),
    Column("self_ratio", "Diff Self Ratio", "ratio", "float", "", 20),
    Column("avg_ratio", "Diff Avg Ratio", "ratio", "float", "", 20),
    Column("calls_ratio", "Diff Calls Ratio", "ratio", "float", "", 20),
    MATCHED_AS,
)
#: The quantities whose absolute change the screens show beside the ratios (and `d` sorts by).
DIFFED = tuple(c for c in COLUMNS if c.key in ("base_total", "base_self", "base_calls"))


def self_ns(ops: pd.DataFrame) -> np.ndarray:
    """Duration minus the direct (same-thread) children's durations, clamped at 0."""
    dur = (ops["end_ns"] - ops["start_ns"]).to_numpy()
    parent = ops["parent"].to_numpy()
    has = parent >= 0
    children = np.bincount(parent[has], weights=dur[has], minlength=len(ops)).round().astype("int64")
    return np.maximum(dur - children, 0)


def per_name(ops: pd.DataFrame, opts: CompareOptions, names: TextIndex | None = None, *,
             primitive: bool = False, other: frozenset[str] | None = None,
             equivalence: Equivalence | None = None) -> pd.DataFrame:
    """Total / self ns and calls per pairing key (:func:`.names.pairing_keys`), in first-seen
    (start) order, with the key's ``label`` (its first pairing name) and equivalence ``cls``
    (""); steps excluded.

    ``names`` is the TextIndex of ``ops["name"]`` when another step already built it: summing
    over its codes avoids hashing half a million names again (a groupby on the text would); the
    pairing keys are derived for the distinct names only.
    """
    names = TextIndex(ops["name"]) if names is None else names
    pk = pairing_keys(names.distinct, opts, equivalence=equivalence, by_primitive=primitive, other=other)
    key_of, keys = pd.factorize(pk.key)
    # Per op: its name's key, except for an op nested in an op of the same class, which keeps its
    # own pairing name (:func:`.names.pairing_keys`); those get key ids after the distinct keys.
    op_key = key_of[names.codes]
    in_class = (pk.cls != "")[names.codes]
    parent = ops["parent"].to_numpy()
    has = (parent >= 0) & in_class
    nested = np.zeros(len(op_key), dtype=bool)
    nested[has] = op_key[parent[has]] == op_key[has]
    op_key = np.where(nested, len(keys) + names.codes, op_key)
    all_keys = np.concatenate([np.asarray(keys, dtype=object), pk.name.astype(object)])
    all_names = np.concatenate([np.empty(len(keys), dtype=object), pk.name.astype(object)])
    keep = ~ops["is_step"].to_numpy()
    codes = op_key[keep]
    k = len(all_keys)
    groups = pd.unique(codes)  # codes in order of their first kept row
    first_kept = pd.Series(names.codes[keep]).groupby(codes).first()  # the first kept name per key
    label_at = np.zeros(k, dtype="int64")
    label_at[first_kept.index.to_numpy()] = first_kept.to_numpy()
    own = groups >= len(keys)
    return pd.DataFrame(
        {
            "total": group_sums(codes, (ops["end_ns"] - ops["start_ns"]).to_numpy()[keep], k)[groups],
            "self_": group_sums(codes, self_ns(ops)[keep], k)[groups],
            "calls": np.bincount(codes, minlength=k).astype("int64")[groups],
            "label": pk.name[label_at][groups],
            "cls": np.where(own, "", pk.cls[label_at][groups]),
        },
        index=pd.Index(np.where(own, all_names[groups], all_keys[groups]), name="key"),
    )


def group_sums(codes: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Exact int64 Σ ``values`` per code in ``0..k-1``.

    ``np.bincount`` sums in float64, several times faster than ``np.add.at``, and is exact while
    every value and partial sum stays below 2**53 — guaranteed when the sum of absolute values
    does (with a factor-2 margin for that sum's own rounding). The host ops of a trace would need
    52 days of summed duration to miss it; then ``add.at`` sums in int64.
    """
    if float(np.abs(values.astype("float64")).sum()) < 2.0**52:
        return np.bincount(codes, weights=values, minlength=k).astype("int64")
    out = np.zeros(k, dtype="int64")
    np.add.at(out, codes, values)
    return out


def compare_api(base: Profile, comp: Profile, opts: CompareOptions, base_names: TextIndexes | None = None,
                comp_names: TextIndexes | None = None, equivalence: Equivalence | None = None) -> Table:
    """The ``ApiCompare`` table; empty with a reason when a side has no host ops.

    ``base_names`` / ``comp_names``: the sides' shared text indexes, when the caller has them;
    ``equivalence``: the run's table (None: the built-in one).
    """
    b = per_name(base.ops, opts, None if base_names is None else base_names("ops", "name"),
                 primitive=by_primitive(base, comp), other=other_names(comp, opts),
                 equivalence=equivalence)
    c = per_name(comp.ops, opts, None if comp_names is None else comp_names("ops", "name"),
                 primitive=by_primitive(comp, base), other=other_names(base, opts),
                 equivalence=equivalence)
    missing = [label for label, g in (("base", b), ("comparison", c)) if g.empty]
    if missing:
        data = pd.DataFrame({col.key: pd.Series(dtype="float64") for col in COLUMNS})
        return Table(name=SHEET, columns=COLUMNS, data=data, base_span=(2, 5), comp_span=(6, 9),
                     title="API: host time per op name",
                     absent_reason=f"no host ops in {' and '.join(missing)}")
    keys = b.index.union(c.index, sort=False)
    b_label, c_label = b["label"].reindex(keys), c["label"].reindex(keys)
    label = b_label.combine_first(c_label)
    both = b_label.notna() & c_label.notna() & (b_label != c_label)
    cls = b["cls"].reindex(keys).combine_first(c["cls"].reindex(keys)).fillna("")
    b = b.drop(columns=["label", "cls"]).reindex(keys, fill_value=0)
    c = c.drop(columns=["label", "cls"]).reindex(keys, fill_value=0)
    cols: dict[str, object] = {"order": np.arange(1, len(keys) + 1, dtype="int64"),
                               "name": as_text(label).to_numpy()}
    for side, g in (("base", b), ("comp", c)):
        total = g["total"].to_numpy(dtype="float64") / 1e6
        calls = g["calls"].to_numpy(dtype="int64")
        cols[f"{side}_total"] = total
        cols[f"{side}_self"] = g["self_"].to_numpy(dtype="float64") / 1e6
        cols[f"{side}_avg"] = np.divide(total, calls, out=np.zeros_like(total), where=calls > 0)
        cols[f"{side}_calls"] = calls
    for what in ("total", "self", "avg", "calls"):
        cols[f"{what}_ratio"] = ratio(cols[f"base_{what}"], cols[f"comp_{what}"])
    joined = both.to_numpy() & (cls.to_numpy() != "")
    cols["matched_as"] = [f"{k} (table): {n}" if j else "" for j, k, n in
                          zip(joined.tolist(), cls.tolist(), c_label.fillna("").tolist())]
    data = pd.DataFrame(cols)
    diffs = screen_diffs(data, DIFFED)
    return Table(name=SHEET, columns=COLUMNS, data=data, base_span=(2, 5), comp_span=(6, 9),
                 title="API: host time per op name", default_sort=diffs[0].key, screen_columns=diffs)
