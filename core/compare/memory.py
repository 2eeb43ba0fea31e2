"""Memory comparison (``MemoryCompareStatistic``, ``MemoryCompare``, spec §5).

Each per-op memory record (``Profile.op_memory``) is attached to the innermost host op open at its
placement time, then summed over op subtrees and compared over the operator pair list (the same
pairs as the operator sheets, drill-down included).

Attribution: records carry no thread, so the innermost op of *any* thread whose interval contains
``place_ns`` (ends inclusive) wins: the latest-starting one, the shorter on a tie — what the
reference's single cross-thread stack picks in the common case. Per thread the candidate is found
with one ``searchsorted`` (last op starting at or before the record) and a vectorised walk up that
thread's ancestors; records outside every op are reported, not attributed. A record without a
name takes the name of its op.

Differences from the reference, on purpose:

* when a side has records but no host ops (a Text export without trace_view.json), both sides'
  records are grouped by their own names instead (:mod:`.memory_by_name`);
* when a side has no memory records at all, no sheet is produced and the tables say why (the
  reference writes both sheets full of zeros, quirk 9);
* the statistic groups by the mapped name and sorts by the unrounded diff (quirks 5 and 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text
from ..model import Profile
from ..options import CompareOptions
from ..timeline import innermost, thread_key
from .kernel_rows import float_text, join_runs
from .operators import MATCHED_AS, OperatorMatch, grouped, match_operators, rank_rows, side_text, take_rows
from .optree import Items, OpForest
from .result import Column, Table, diff, ratio
from .step_column import STEP, step_labels

STAT_SHEET = "MemoryCompareStatistic"
DETAIL_SHEET = "MemoryCompare"

STAT_COLUMNS = (
    Column("top", "Top", "key", "int", "", 10),
    Column("name", "Operator Name", "key", "bold", "", 30),
    Column("base_ms", "Base Allocated Duration(ms)", "base", "float", "ms", 25),
    Column("base_mb", "Base Allocated Memory(MB)", "base", "float", "MB", 30),
    Column("base_num", "Base Operator Number", "base", "int", "count", 25),
    Column("comp_ms", "Comparison Allocated Duration(ms)", "comparison", "float", "ms", 27),
    Column("comp_mb", "Comparison Allocated Memory(MB)", "comparison", "float", "MB", 33),
    Column("comp_num", "Comparison Operator Number", "comparison", "int", "count", 25),
    Column("diff", "Diff Memory(MB)", "diff", "float", "MB", 20),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 20),
    MATCHED_AS,
)

DETAIL_COLUMNS = (
    Column("order", "Order Id", "key", "int", "", 10),
    Column("base_name", "Operator Name", "base", "bold", "", 30),
    Column("base_shape", "Input Shape", "base", "text", "", 20),
    Column("base_type", "Input Type", "base", "text", "", 20),
    Column("base_details", "Allocated Details", "base", "text", "", 20),
    Column("base_kb", "Size(KB)", "base", "float", "KB", 20),
    Column("comp_name", "Operator Name", "comparison", "bold", "", 30),
    Column("comp_shape", "Input Shape", "comparison", "text", "", 20),
    Column("comp_type", "Input Type", "comparison", "text", "", 20),
    Column("comp_details", "Allocated Details", "comparison", "text", "", 20),
    Column("comp_kb", "Size(KB)", "comparison", "float", "KB", 20),
    Column("diff", "Diff Size(KB)", "diff", "float", "KB", 20),
    Column("ratio", "Diff Ratio", "ratio", "percent", "", 20),
    MATCHED_AS,
    STEP,
)


#: Most (thread, point) queries :func:`attach` hands to one :func:`.timeline.innermost` call.
_ATTACH_CHUNK = 1 << 22


def attach(ops: pd.DataFrame, place_ns: np.ndarray) -> np.ndarray:
    """Row of the innermost op (any thread) containing each time point, -1 when none does: the
    innermost one of each thread, then across threads the latest start (the shortest on ties).
    Several threads' queries go to one :func:`.timeline.innermost` call (one sort of the ops
    for them all)."""
    best = np.full(len(place_ns), -1, dtype="int64")
    if ops.empty or len(place_ns) == 0:
        return best
    start = ops["start_ns"].to_numpy()
    end = ops["end_ns"].to_numpy()
    parent = ops["parent"].to_numpy()
    key = thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy())
    threads = np.sort(pd.unique(key))  # a hash of a few threads, not a sort of every op's key
    per_call = max(1, _ATTACH_CHUNK // len(place_ns))
    for lo in range(0, len(threads), per_call):
        chunk = threads[lo : lo + per_call]
        found = innermost(key, start, end, parent, np.repeat(chunk, len(place_ns)), np.tile(place_ns, len(chunk)),
                          strict=False).reshape(len(chunk), len(place_ns))
        for cand in found:  # threads in ascending key order, as one call per thread would go
            c, p = np.maximum(cand, 0), np.maximum(best, 0)
            better = (cand >= 0) & ((best < 0) | (start[c] > start[p]) |
                                    ((start[c] == start[p]) & (end[c] < end[p])))
            best[better] = cand[better]
    return best


#: The µs text's fraction per remainder of ns ÷ 1000: "" for 0, else ``.5``, ``.204``, ``.001``.
_FRACTIONS = np.array([""] + [f".{f:03d}".rstrip("0") for f in range(1, 1000)], dtype=object)


def _us_text(ns: np.ndarray) -> np.ndarray:
    """ns → µs text without float noise: 131000 → ``131``, 1704161511422904204 → ``…904.204``."""
    whole, frac = np.divmod(np.asarray(ns, dtype="int64"), 1000)
    out = np.empty(len(whole), dtype=object)
    out[:] = list(map(str, whole.tolist()))
    return out + _FRACTIONS[frac]


def record_table(profile: Profile) -> pd.DataFrame:
    """Per record: attached op row, display name (its own, else its op's), size and lifetime
    (release − allocation when both are known, else 0, as the reference computes it)."""
    om = profile.op_memory
    op = attach(profile.ops, om["place_ns"].to_numpy())
    rec_names = om["name"].to_numpy(dtype=object)
    names = np.where(rec_names == "", take_rows(profile.ops["name"].to_numpy(dtype=object), op, ""), rec_names)
    alloc = om["alloc_ns"].to_numpy()
    release = om["release_ns"].to_numpy()
    return pd.DataFrame({"op_row": op, "name": names, "size_bytes": om["size_bytes"].to_numpy(),
                         "alloc_ns": alloc, "release_ns": release,
                         "lifetime_ns": np.where((alloc > 0) & (release > 0), release - alloc, 0),
                         "place_ns": om["place_ns"].to_numpy()})


def detail_lines(records: pd.DataFrame, is_npu: bool) -> np.ndarray:
    """``Allocated Details`` line per record: ``<name>, (<alloc µs>, <release µs>), [duration:
    <µs>], [size: <KB>]``; an unknown release prints ``0`` on NPU (csv ``N/A``) and ``None`` on GPU
    (never freed), like the reference."""
    never = "0" if is_npu else "None"
    release = records["release_ns"].to_numpy()
    release_text = np.where(release > 0, _us_text(np.maximum(release, 0)), never)
    parts = (records["name"].tolist(), _us_text(records["alloc_ns"].to_numpy()).tolist(), release_text.tolist(),
             float_text(records["lifetime_ns"].to_numpy() / 1000.0).tolist(),
             float_text(records["size_bytes"].to_numpy() / 1024.0).tolist())
    out = np.empty(len(records), dtype=object)
    out[:] = [f"{n}, ({a}, {r}), [duration: {d}], [size: {s}]\n" for n, a, r, d, s in zip(*parts)]
    return out


#: Table rows whose ``Allocated Details`` are made together (:meth:`_SideMemory.details`).
_DETAIL_CHUNK = 8192


class _SideMemory:
    """One side's records indexed on its op forest, with subtree sums per op."""

    def __init__(self, forest: OpForest) -> None:
        self.forest = forest
        rec = record_table(forest.profile)
        self.records = rec
        self.unattached = int((rec["op_row"] < 0).sum())
        self.items: Items = forest.group(rec["op_row"].to_numpy(), rec["place_ns"].to_numpy())
        n = len(forest.profile.ops)
        own = rec[rec["op_row"] >= 0]
        rows = own["op_row"].to_numpy()
        self.count = forest.subtree_sum(np.bincount(rows, minlength=n).astype("int64"))
        self.bytes = forest.subtree_sum(np.bincount(rows, weights=own["size_bytes"].to_numpy(), minlength=n)
                                        .round().astype("int64"))
        self.lifetime_ns = forest.subtree_sum(np.bincount(rows, weights=own["lifetime_ns"].to_numpy(),
                                                          minlength=n).round().astype("int64"))

    def details(self, rows: np.ndarray) -> list[str]:
        """Concatenated subtree ``Allocated Details`` lines per op row ("" without records).

        Made a chunk of rows at a time, each chunk's lines from its own records: every record's
        line at once (five text parts per record, then the line) was the largest moment of the
        worker that runs this step."""
        out: list[str] = []
        is_npu = self.forest.profile.meta.is_npu
        for lo in range(0, len(rows), _DETAIL_CHUNK):
            picked, counts = self.forest.subtree_gather(self.items, rows[lo:lo + _DETAIL_CHUNK])
            out += join_runs(detail_lines(self.records.iloc[picked], is_npu), counts).tolist()
        return out


def _absent(label: str, profile: Profile) -> str:
    return f"no memory records in {label} ({profile.meta.source}): collect with profile_memory=True"


def _empty_tables(reason: str, disable_details: bool) -> list[Table]:
    tables = [Table(name=STAT_SHEET, columns=STAT_COLUMNS, data=pd.DataFrame({c.key: [] for c in STAT_COLUMNS}),
                    base_span=(2, 4), comp_span=(5, 7), title="Memory: allocations per op name",
                    absent_reason=reason)]
    if not disable_details:
        tables.append(Table(name=DETAIL_SHEET, columns=DETAIL_COLUMNS,
                            data=pd.DataFrame({c.key: [] for c in DETAIL_COLUMNS}), base_span=(1, 5),
                            comp_span=(6, 10), title="Memory: matched pairs", absent_reason=reason))
    return tables


def compare_memory(base: Profile, comp: Profile, opts: CompareOptions,
                   match: OperatorMatch | None = None) -> list[Table]:
    """The memory sheets over the operator pair list (computed here when not given)."""
    missing = [_absent(label, p) for label, p in (("base", base), ("comparison", comp)) if p.op_memory.empty]
    if missing:
        return _empty_tables("; ".join(missing), opts.disable_details)
    if base.ops.empty or comp.ops.empty:
        from .memory_by_name import compare_memory_by_name

        return compare_memory_by_name(base, comp, opts)
    match = match or match_operators(base, comp, opts)
    bm, cm = _SideMemory(match.base), _SideMemory(match.comp)
    p = match.pairs
    b, c = p["base_row"].to_numpy(), p["comp_row"].to_numpy()
    per_pair = p.assign(
        base_bytes=take_rows(bm.bytes, b, 0), comp_bytes=take_rows(cm.bytes, c, 0),
        base_life=take_rows(bm.lifetime_ns, b, 0), comp_life=take_rows(cm.lifetime_ns, c, 0),
    )
    notes = [f"{label}: {side.unattached} memory records lie outside every host op and are not attributed"
             for label, side in (("base", bm), ("comparison", cm)) if side.unattached]
    tables = [_statistic(per_pair, notes)]
    if not opts.disable_details:
        tables.append(_detail(match, per_pair, bm, cm))
    return tables


def _statistic(per_pair: pd.DataFrame, notes: list[str]) -> Table:
    g = grouped(per_pair, {"bytes": ("base_bytes", "comp_bytes"), "life": ("base_life", "comp_life")})
    return statistic_table(g, notes)


def statistic_table(g: pd.DataFrame, notes: list[str]) -> Table:
    """``MemoryCompareStatistic`` from per-name sums: ``name``, ``matched_as`` and, per side,
    ``*_bytes``, ``*_life`` (ns) and ``*_num`` (records)."""
    base_mb = g["base_bytes"].to_numpy(dtype="float64") / 1024.0**2
    comp_mb = g["comp_bytes"].to_numpy(dtype="float64") / 1024.0**2
    data = pd.DataFrame({
        "name": as_text(g["name"]),
        "base_ms": g["base_life"].to_numpy(dtype="float64") / 1e6,
        "base_mb": base_mb,
        "base_num": g["base_num"].astype("int64"),
        "comp_ms": g["comp_life"].to_numpy(dtype="float64") / 1e6,
        "comp_mb": comp_mb,
        "comp_num": g["comp_num"].astype("int64"),
        "diff": diff(base_mb, comp_mb),
        "ratio": ratio(base_mb, comp_mb),
        "matched_as": as_text(g["matched_as"]),
    })
    return Table(name=STAT_SHEET, columns=STAT_COLUMNS, data=rank_rows(data), base_span=(2, 4), comp_span=(5, 7),
                 title="Memory: allocations per op name", default_sort="diff", notes=notes)


def _detail(match: OperatorMatch, per_pair: pd.DataFrame, bm: _SideMemory, cm: _SideMemory) -> Table:
    b, c = per_pair["base_row"].to_numpy(), per_pair["comp_row"].to_numpy()
    base_kb = per_pair["base_bytes"].to_numpy(dtype="float64") / 1024.0
    comp_kb = per_pair["comp_bytes"].to_numpy(dtype="float64") / 1024.0
    bops, cops = match.base.profile.ops, match.comp.profile.ops
    data = pd.DataFrame({
        "order": np.arange(1, len(per_pair) + 1, dtype="int64"),
        "base_name": as_text(per_pair["base_name"]),
        "base_shape": side_text(bops, b, "input_dims"),
        "base_type": side_text(bops, b, "input_types"),
        "base_details": bm.details(b),
        "base_kb": base_kb,
        "comp_name": as_text(per_pair["comp_name"]),
        "comp_shape": side_text(cops, c, "input_dims"),
        "comp_type": side_text(cops, c, "input_types"),
        "comp_details": cm.details(c),
        "comp_kb": comp_kb,
        "diff": diff(base_kb, comp_kb),
        "ratio": ratio(base_kb, comp_kb),
        "matched_as": as_text(per_pair["matched_as"]),
        "step": step_labels(take_rows(bops["step"].to_numpy(dtype="int64"), b, -1),
                            take_rows(cops["step"].to_numpy(dtype="int64"), c, -1)),
        "_base_row": b,
        "_comp_row": c,
    })
    return Table(name=DETAIL_SHEET, columns=DETAIL_COLUMNS, data=data, base_span=(1, 5), comp_span=(6, 10),
                 title="Memory: matched pairs")

