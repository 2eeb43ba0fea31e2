"""Kernel comparison (NPU vs NPU): ``KernelCompare`` or, with ``use_kernel_type``, ``KernelTypeCompare``.

``KernelCompare`` (spec comparisons-and-outputs.md §6.1) groups the kernels described by
``kernel_details.csv`` / Db compute-task rows by (op type, input shapes) and shows count, total,
average, max and min duration per side. The step filter has already been applied by the loader.
Shapes appear as the model holds them (without the CSV's literal quotes; absent → ``N/A``), and
"first seen" follows the model's kernel order (device time), not the CSV row order.
Totals, averages and both ratios come from unrounded durations: the reference rounds totals to
0.01 µs first and derives the average and the ratios from the rounded values (quirk 10), which
shifts averages of small kernels and can turn a ratio into ``INF``.

``KernelTypeCompare`` (§6.2) compares the ``op_statistic.csv`` rows (op type × core type) as
recorded and is sorted by ``Diff Total Ratio``, worst first. Like the reference it also lists
one-sided rows when only one side has statistics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import Profile
from ..options import CompareOptions
from .result import Column, Table, ratio, screen_diffs

_SIDES = (("base", "base"), ("comp", "comparison"))


def _columns(key: str, key_header: str, second: str, second_header: str) -> tuple[Column, ...]:
    cols = [Column("order", "Order Id", "key", "int", "", 10),
            Column(key, key_header, "key", "bold", "", 30),
            Column(second, second_header, "key", "text", "", 20)]
    for prefix, role in _SIDES:
        cols += [Column(f"{prefix}_total", "Total Duration(us)", role, "float", "us", 20),
                 Column(f"{prefix}_avg", "Avg Duration(us)", role, "float", "us", 20),
                 Column(f"{prefix}_max", "Max Duration(us)", role, "float", "us", 20),
                 Column(f"{prefix}_min", "Min Duration(us)", role, "float", "us", 20),
                 Column(f"{prefix}_calls", "Calls", role, "int", "count", 20)]
    cols += [Column("total_ratio", "Diff Total Ratio", "ratio", "float", "", 20),
             Column("avg_ratio", "Diff Avg Ratio", "ratio", "float", "", 20)]
    return tuple(cols)


KERNEL_COLUMNS = _columns("kernel", "Kernel", "shape", "Input Shape")
KERNEL_TYPE_COLUMNS = _columns("kernel_type", "Kernel Type", "core_type", "Core Type")
#: The quantities whose absolute change the screens show beside the ratios (and `d` sorts by).
DIFFED = tuple(c for c in KERNEL_COLUMNS if c.key in ("base_total", "base_avg"))


def compare_kernels(base: Profile, comp: Profile, opts: CompareOptions) -> tuple[Table | None, str]:
    """The kernel comparison the options ask for, or ``(None, reason)``."""
    if not opts.enables("kernel"):
        return None, "kernel comparison is not enabled"
    if opts.use_kernel_type:
        return kernel_type_compare(base, comp)
    return kernel_compare(base, comp)


def _detail_groups(profile: Profile) -> pd.DataFrame:
    """Per (type, shapes): calls/total/avg/max/min µs (summed exactly in ns), groups ordered by
    type first-seen, then shapes first-seen within the type."""
    k = profile.kernels
    k = k[k["has_details"] & ~k["op_type"].isin(["", "N/A"])]
    df = pd.DataFrame({
        "kernel": k["op_type"].to_numpy(),
        "shape": k["input_shapes"].where(k["input_shapes"] != "", "N/A").to_numpy(),
        "ns": k["dur_ns"].to_numpy(dtype="int64"),
    })
    g = df.groupby(["kernel", "shape"], sort=False)["ns"].agg(
        calls="size", total="sum", max="max", min="min").reset_index()
    for col in ("total", "max", "min"):
        g[col] = g[col] / 1000.0
    type_rank = {t: i for i, t in enumerate(pd.unique(df["kernel"]))}
    g["_rank"] = g["kernel"].map(type_rank)
    g = g.sort_values("_rank", kind="stable").drop(columns="_rank").reset_index(drop=True)
    g["avg"] = g["total"] / g["calls"]
    return g


def kernel_compare(base: Profile, comp: Profile) -> tuple[Table | None, str]:
    """``KernelCompare``: needs kernel details on both sides (as the reference)."""
    for side, p in (("base", base), ("comparison", comp)):
        if not p.meta.is_npu:
            return None, f"KernelCompare needs NPU kernel details on both sides ({side} is GPU)"
    b, c = _detail_groups(base), _detail_groups(comp)
    for side, g, p in (("base", b, base), ("comparison", c, comp)):
        k = p.kernels
        typed = k["has_details"] & ~k["is_comm"] & ~k["op_type"].isin(["", "N/A"])
        if not typed.any() and k["has_details"].any():
            # Level0: only the collectives' types are known (from their names), no kernel's.
            return None, (f"{side} has kernel details without op types (a Level0 export writes Type N/A): "
                          "no KernelCompare")
        if g.empty:
            return None, f"{side} has no kernel details (kernel_details.csv / compute task info)"
    df = _outer(b, c, ["kernel", "shape"])
    df["total_ratio"] = ratio(df["base_total"], df["comp_total"])
    df["avg_ratio"] = ratio(df["base_avg"], df["comp_avg"])
    df.insert(0, "order", np.arange(1, len(df) + 1))
    data = df[[c.key for c in KERNEL_COLUMNS]].copy()
    diffs = screen_diffs(data, DIFFED)
    return Table("KernelCompare", KERNEL_COLUMNS, data, (3, 7), (8, 12),
                 title="Kernels by type and input shape (µs)", default_sort=diffs[0].key,
                 screen_columns=diffs), ""


def _outer(b: pd.DataFrame, c: pd.DataFrame, keys: list[str], zero_missing: bool = False) -> pd.DataFrame:
    """Base groups in their order, then comparison-only groups in theirs; a missing side has
    Total/Avg 0 and blank Max/Min/Calls (all 0 when ``zero_missing``)."""
    stats = ["total", "avg", "max", "min", "calls"]
    bb = b[keys + stats].rename(columns={s: f"base_{s}" for s in stats})
    cc = c[keys + stats].rename(columns={s: f"comp_{s}" for s in stats})
    comp_only = ~pd.MultiIndex.from_frame(c[keys]).isin(pd.MultiIndex.from_frame(b[keys]))
    df = pd.concat([bb.merge(cc, on=keys, how="left"), cc[comp_only]], ignore_index=True)
    for prefix in ("base", "comp"):
        filled = stats if zero_missing else ["total", "avg"]
        df[[f"{prefix}_{s}" for s in filled]] = df[[f"{prefix}_{s}" for s in filled]].fillna(0)
    return df


def kernel_type_compare(base: Profile, comp: Profile) -> tuple[Table | None, str]:
    """``KernelTypeCompare`` from the op statistics, sorted by Diff Total Ratio descending."""
    def groups(p: Profile) -> pd.DataFrame:
        s = p.op_statistic.drop_duplicates(["op_type", "core_type"], keep="last")
        return pd.DataFrame({"kernel_type": s["op_type"].to_numpy(), "core_type": s["core_type"].to_numpy(),
                             "total": s["total_us"].to_numpy(), "avg": s["avg_us"].to_numpy(),
                             "max": s["max_us"].to_numpy(), "min": s["min_us"].to_numpy(),
                             "calls": s["count"].to_numpy()})

    b, c = groups(base), groups(comp)
    if b.empty and c.empty:
        return None, "no op statistics on either side (op_statistic.csv / compute task info)"
    notes = [f"{side} has no op statistics: its columns are 0"
             for side, g in (("base", b), ("comparison", c)) if g.empty]
    df = _outer(b, c, ["kernel_type", "core_type"], zero_missing=True)
    df["total_ratio"] = ratio(df["base_total"], df["comp_total"])
    df["avg_ratio"] = ratio(df["base_avg"], df["comp_avg"])
    df = df.iloc[np.argsort(-df["total_ratio"].to_numpy(), kind="stable")].reset_index(drop=True)
    df.insert(0, "order", np.arange(1, len(df) + 1))
    data = df[[c.key for c in KERNEL_TYPE_COLUMNS]].copy()
    diffs = screen_diffs(data, DIFFED)
    return Table("KernelTypeCompare", KERNEL_TYPE_COLUMNS, data, (3, 7), (8, 12),
                 title="Kernels by op type and core (µs)", default_sort=diffs[0].key, notes=notes,
                 screen_columns=diffs), ""
