"""Memory comparison when a side has memory records but no host ops (issue 28: a Text export
whose ``trace_view.json`` was not copied still has ``operator_memory.csv``).

:mod:`.memory` attributes each record to the innermost host op open when it was made and sums op
subtrees; without a timeline there is no op to attribute to. The csv names each record after the
operator that allocated it, so the records are compared by that name instead, on both sides (a
complete side's records are named as :func:`.memory.record_table` names them, by their op):

* ``MemoryCompareStatistic``: per name, the summed lifetime, summed size and number of records;
* ``MemoryCompare``: the k-th record of a name on the base side beside the k-th record of that
  name on the comparison side (each side in allocation order), rows in base allocation order,
  then the comparison's unpaired records. No shapes (the csv has none) and no step (the record
  times are host times; the only step windows are the kernels').

Both tables say, in a note, which side had no trace and what a complete export would add.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import Profile
from ..options import CompareOptions
from .memory import DETAIL_COLUMNS, DETAIL_SHEET, detail_lines, record_table, statistic_table
from .operators import NA, take_rows
from .result import Table, diff, ratio


def _records(profile: Profile) -> pd.DataFrame:
    """One side's records in allocation order, each with ``k``: its rank among its name's."""
    rec = record_table(profile)
    rec = rec.iloc[np.argsort(rec["alloc_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    return rec.assign(k=rec.groupby("name", sort=False).cumcount().to_numpy())


def _note(base: Profile, comp: Profile) -> str:
    sides = [label for label, p in (("base", base), ("comparison", comp)) if p.ops.empty]
    return (f"{' and '.join(sides)} {'have' if len(sides) > 1 else 'has'} no host ops (no trace_view.json): memory records are grouped by their own "
            "operator names (operator_memory.csv Name); a complete export attributes each record to "
            "the host op enclosing its allocation and sums each op's subtree")


def _per_name(rec: pd.DataFrame, side: str) -> pd.DataFrame:
    g = rec.groupby("name", sort=False).agg(bytes=("size_bytes", "sum"), life=("lifetime_ns", "sum"),
                                            num=("size_bytes", "size"))
    return g.add_prefix(f"{side}_")


def compare_memory_by_name(base: Profile, comp: Profile, opts: CompareOptions) -> list[Table]:
    """The memory sheets over the records' own names (both sides have records)."""
    brec, crec = _records(base), _records(comp)
    note = _note(base, comp)
    b, c = _per_name(brec, "base"), _per_name(crec, "comp")
    names = b.index.append(c.index[~c.index.isin(b.index)])
    g = pd.concat([b.reindex(names), c.reindex(names)], axis=1).fillna(0)
    g.insert(0, "name", names.to_numpy(dtype=object))
    g.insert(1, "matched_as", "")
    tables = [statistic_table(g.reset_index(drop=True), [note])]
    if not opts.disable_details:
        tables.append(_detail(brec, crec, base.meta.is_npu, comp.meta.is_npu, note))
    return tables


def _detail(brec: pd.DataFrame, crec: pd.DataFrame, b_npu: bool, c_npu: bool, note: str) -> Table:
    bkey = pd.MultiIndex.from_arrays([brec["name"].to_numpy(dtype=object), brec["k"].to_numpy()])
    ckey = pd.MultiIndex.from_arrays([crec["name"].to_numpy(dtype=object), crec["k"].to_numpy()])
    keys = bkey.append(ckey[~ckey.isin(bkey)])
    b, c = bkey.get_indexer(keys), ckey.get_indexer(keys)
    base_kb = take_rows(brec["size_bytes"].to_numpy(), b, 0).astype("float64") / 1024.0
    comp_kb = take_rows(crec["size_bytes"].to_numpy(), c, 0).astype("float64") / 1024.0

    def side(rec: pd.DataFrame, rows: np.ndarray, npu: bool) -> dict[str, np.ndarray]:
        present = np.where(rows >= 0, NA, "").astype(object)
        return {"name": take_rows(rec["name"].to_numpy(dtype=object), rows, ""), "shape": present,
                "type": present, "details": take_rows(detail_lines(rec, npu), rows, "")}

    bs, cs = side(brec, b, b_npu), side(crec, c, c_npu)
    data = pd.DataFrame({
        "order": np.arange(1, len(keys) + 1, dtype="int64"),
        **{f"base_{k}": v for k, v in bs.items()},
        "base_kb": base_kb,
        **{f"comp_{k}": v for k, v in cs.items()},
        "comp_kb": comp_kb,
        "diff": diff(base_kb, comp_kb),
        "ratio": ratio(base_kb, comp_kb),
        "matched_as": "",
        "step": "",
    })
    data = data[[col.key for col in DETAIL_COLUMNS]]
    return Table(name=DETAIL_SHEET, columns=DETAIL_COLUMNS, data=data, base_span=(1, 5), comp_span=(6, 10),
                 title="Memory: records paired by name", notes=[note])
