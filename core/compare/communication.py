"""Communication comparison (``CommunicationCompare``): collectives and their tasks, side by side.

Communication ops are grouped under a collective key (spec comparisons-and-outputs.md §4.2): the
lower-cased op name (Db: op type) split on ``_``; ``hcom_<x>_…`` gives ``x``, anything else its
first part. Two reference quirks (Q8) are fixed:

* NCCL kernels are named ``ncclKernel_AllReduce_RING_LL_Sum_float`` or
  ``ncclDevKernel_AllGather_RING_LL(…)``; their first part (``ncclkernel``/``nccldevkernel``) would
  put every collective in one bucket, so the collective is read from the name instead;
* names without ``_`` (``HcclAllreduce``) keep their own lower-cased name instead of vanishing.

Per key: one summary row over the op durations, then (NPU) one row per task name over the task
durations. Task rows are paired **by task name** (the reference pairs the i-th base name with the
i-th comparison name whatever they are): base names in first-seen order, then comparison-only
names. Hidden ``_node``/``_parent``/``_level`` let the TUI fold a collective's task rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text
from ..model import Profile
from ..options import CompareOptions
from .result import IS_TOTAL, LEVEL, NODE, PARENT, SHOWN, Column, Table, diff, ratio

#: NCCL collectives, longest first where one name contains another (first match wins).
_NCCL_COLLECTIVE = r"(allreduce|allgather|reducescatter|alltoall|broadcast|sendrecv|reduce|send|recv)"


def comm_keys(names: pd.Series) -> pd.Series:
    """Grouping key of each communication op name (see module docstring), worked out once per
    distinct name (a long run repeats a few dozen names tens of thousands of times)."""
    codes, distinct = factorize_text(names, use_na_sentinel=False)  # a missing name is a value
    keys = _distinct_keys(pd.Series(distinct, dtype=object)).to_numpy(dtype=object)
    return pd.Series(keys[codes] if len(codes) else np.zeros(0, dtype=object), index=names.index,
                     dtype=object)


def _distinct_keys(names: pd.Series) -> pd.Series:
    lower = as_text(names).str.lower()
    if lower.empty:
        return lower
    head = lower.str.partition("_")
    first, has_sep = head[0], head[1] != ""
    second = head[2].str.partition("_")[0]
    key = first.where(first != "hcom", second).where(has_sep, lower)
    key = key.where(key != "", lower)
    nccl = lower.str.startswith("nccl")
    collective = lower.str.extract(_NCCL_COLLECTIVE, expand=False)
    kernel_part = lower.str.extract(r"^nccl(?:dev)?kernel_([a-z0-9]+)", expand=False)
    nccl_key = collective.fillna(kernel_part)
    return as_text(key.where(~(nccl & nccl_key.notna()), nccl_key))


def _stats(key: pd.Series, name: pd.Series | None, dur_ns: pd.Series) -> pd.DataFrame:
    """Calls/total/avg/max/min (µs, summed exactly in ns) per key (and task name), groups in
    first-seen order."""
    df = pd.DataFrame({"key": key.to_numpy(), "ns": dur_ns.to_numpy(dtype="int64")})
    by = ["key"]
    if name is not None:
        df["task"] = name.to_numpy()
        by.append("task")
    out = df.groupby(by, sort=False)["ns"].agg(calls="size", total="sum", max="max", min="min").reset_index()
    for col in ("total", "max", "min"):
        out[col] = out[col] / 1000.0
    out["avg"] = out["total"] / out["calls"]
    return out


def _side(profile: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-key op stats, per-key-and-task stats) of one side."""
    ops = profile.comm_ops.sort_values("start_ns", kind="stable")
    text = ops["op_type"].where(ops["op_type"] != "", ops["name"])
    keys = comm_keys(text)
    op_stats = _stats(keys, None, ops["dur_ns"])
    tasks = profile.comm_tasks
    tasks = tasks[tasks["op_row"] >= 0].sort_values("start_ns", kind="stable")
    key_of_row = pd.Series(keys.to_numpy(), index=ops.index)
    task_keys = key_of_row.reindex(tasks["op_row"].to_numpy())
    task_keys.index = tasks.index
    ok = task_keys.notna()
    task_stats = _stats(task_keys[ok], tasks["name"][ok], tasks["dur_ns"][ok])
    return op_stats, task_stats


def _side_columns(prefix: str, role: str, name_width: float) -> list[Column]:
    return [
        Column(f"{prefix}_name", "Communication OP Name", role, "bold", "", name_width),
        Column(f"{prefix}_task", "Task Name", role, "text", "", 20),
        Column(f"{prefix}_calls", "Calls", role, "int", "count", 10),
        Column(f"{prefix}_total", "Total Duration(us)", role, "float", "us", 17),
        Column(f"{prefix}_avg", "Avg Duration(us)", role, "float", "us", 17),
        Column(f"{prefix}_max", "Max Duration(us)", role, "float", "us", 17),
        Column(f"{prefix}_min", "Min Duration(us)", role, "float", "us", 17),
    ]


COMMUNICATION_COLUMNS: tuple[Column, ...] = (
    Column("order", "Order Id", "key", "int", "", 10),
    *_side_columns("base", "base", 25),
    *_side_columns("comp", "comparison", 25),
    Column("diff", "Diff Duration(us)", "diff", "float", "us", 20),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 20),
)


def _cells(prefix: str, label: str, task: str, rec: dict[str, float] | None) -> dict[str, object]:
    """One side's seven cells; a missing side is blank except Total Duration 0."""
    if rec is None:
        return {f"{prefix}_name": "", f"{prefix}_task": "", f"{prefix}_calls": np.nan,
                f"{prefix}_total": 0.0, f"{prefix}_avg": np.nan, f"{prefix}_max": np.nan,
                f"{prefix}_min": np.nan}
    return {f"{prefix}_name": label, f"{prefix}_task": task, f"{prefix}_calls": rec["calls"],
            f"{prefix}_total": rec["total"], f"{prefix}_avg": rec["avg"], f"{prefix}_max": rec["max"],
            f"{prefix}_min": rec["min"]}


def _records(stats: pd.DataFrame, by: list[str]) -> dict[object, dict[str, float]]:
    return {tuple(r[b] for b in by) if len(by) > 1 else r[by[0]]: r for r in stats.to_dict("records")}


def compare_communication(base: Profile, comp: Profile, opts: CompareOptions) -> tuple[Table | None, str]:
    """``CommunicationCompare``, or ``(None, reason)`` when there is nothing to compare."""
    if not opts.enables("communication"):
        return None, "communication comparison is not enabled"
    if base.comm_ops.empty and comp.comm_ops.empty:
        return None, "no communication ops on either side"
    bops, btasks = _side(base)
    cops, ctasks = _side(comp)
    bo, co = _records(bops, ["key"]), _records(cops, ["key"])
    bt, ct = _records(btasks, ["key", "task"]), _records(ctasks, ["key", "task"])
    keys = list(bo) + [k for k in co if k not in bo]
    rows: list[dict[str, object]] = []
    for key in keys:
        summary = len(rows)
        rows.append({**_cells("base", key, "", bo.get(key)), **_cells("comp", key, "", co.get(key)),
                     IS_TOTAL: True, NODE: summary, PARENT: -1, LEVEL: 0, SHOWN: key})
        names = [t for k, t in bt if k == key]
        names += [t for k, t in ct if k == key and (k, t) not in bt]
        for task in names:
            rows.append({**_cells("base", "|", task, bt.get((key, task))),
                         **_cells("comp", "|", task, ct.get((key, task))),
                         IS_TOTAL: False, NODE: len(rows), PARENT: summary, LEVEL: 1,
                         # The screen's pinned label names the task, not the sheet's "|".
                         SHOWN: task})
    df = pd.DataFrame(rows)
    df.insert(0, "order", np.arange(1, len(df) + 1))
    summary_rows = df[IS_TOTAL].to_numpy()
    df["diff"] = np.where(summary_rows, diff(df["base_total"], df["comp_total"]), np.nan)
    df["ratio"] = np.where(summary_rows, ratio(df["base_total"], df["comp_total"]), np.nan)
    visible = [c.key for c in COMMUNICATION_COLUMNS]
    df = df[visible + [IS_TOTAL, NODE, PARENT, LEVEL, SHOWN]]
    return Table("CommunicationCompare", COMMUNICATION_COLUMNS, df, (1, 7), (8, 14),
                 title="Communication (µs)", default_sort="diff"), ""
