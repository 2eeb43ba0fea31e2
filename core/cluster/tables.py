"""The reduce of a cluster comparison: rank summaries → the ``ClusterCompare`` and
``ClusterCommGroups`` tables (the Ranks screen, two workbook sheets, ``--json``).

``ClusterCompare`` has one row per rank: E2E, Computing, Uncovered Communication with its Wait
part and Free time per side and their differences (ms), the spread of the rank's per-step E2E, and
a Flag. ``ClusterCommGroups`` has one row per communication group and rank: wait and transmit
time per side. In a job whose collectives synchronise the ranks, every rank's E2E is about the
same — the fast ranks wait for the slow one inside the collectives — so the flags look at what a
rank did *not* spend waiting (E2E − Wait, its "busy" time), and the group view shows who waits:
the rank with the least wait in a group is the one the others wait for.

Flag rules (a rank is singled out only when it stands out from the others by at least
:func:`tolerance`: 1 % of the median comparison E2E, at least 10 µs):

* ``slowest`` — largest comparison busy time (within the tolerance of the largest);
* ``largest regression`` — largest comparison − base busy time, likewise;
* ``only in base`` / ``only in comparison`` / ``base failed to load`` / ``comparison failed to
  load`` — the rank could not be compared (the notes say why);
* groups: ``others wait for it`` — least wait of the group's ranks, when the group's waits spread
  by at least a fifth of its largest wait and 10 µs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compare import CLUSTER_SHEETS, declare
from ..compare.result import Column, ComparisonResult, Table
from ..notes import CLUSTER, Note, once
from .inputs import ClusterInputs
from .ranks import format_ranks, ranks_phrase
from .summary import BASE, COMPARISON, GroupTimes, RankFailure, RankOutcome, RankSummary

CLUSTER_COMPARE, CLUSTER_GROUPS = (s.name for s in CLUSTER_SHEETS)  # declared with the others
NS_PER_MS = 1_000_000
#: A rank stands out when it is this share of the median comparison E2E above the median …
FLAG_SHARE = 0.01
#: … and never by less than this (ns).
FLAG_MIN_NS = 10_000
#: A group's waits must spread by this share of its largest wait to name the rank others wait for.
STRAGGLER_SHARE = 0.2

SLOWEST = "slowest"
LARGEST_REGRESSION = "largest regression"
WAITED_FOR = "others wait for it"

_FIGURES = (("e2e", "E2E Time(ms)"), ("compute", "Computing Time(ms)"),
            ("uncovered", "Uncovered Communication Time(ms)"), ("wait", "Wait Time(ms)"),
            ("free", "Free Time(ms)"))
_SPREAD = ("spread", "Step E2E Spread(ms)")

RANK_COLUMNS: tuple[Column, ...] = (
    Column("rank", "Rank", "key", "bold", "", 8),
    *(Column(f"base_{k}", h, "base", "float", "ms", 16) for k, h in (*_FIGURES, _SPREAD)),
    *(Column(f"comp_{k}", h, "comparison", "float", "ms", 16) for k, h in (*_FIGURES, _SPREAD)),
    *(Column(f"diff_{k}", f"Diff {h}", "diff", "float", "ms", 16) for k, h in _FIGURES),
    Column("flag", "Flag", "flag", "text", "", 30),
)

GROUP_COLUMNS: tuple[Column, ...] = (
    Column("group", "Group", "key", "text", "", 40),
    Column("rank", "Rank", "key", "bold", "", 8),
    Column("base_wait", "Wait Time(ms)", "base", "float", "ms", 16),
    Column("base_transmit", "Transmit Time(ms)", "base", "float", "ms", 16),
    Column("comp_wait", "Wait Time(ms)", "comparison", "float", "ms", 16),
    Column("comp_transmit", "Transmit Time(ms)", "comparison", "float", "ms", 16),
    Column("diff_wait", "Diff Wait Time(ms)", "diff", "float", "ms", 16),
    Column("diff_transmit", "Diff Transmit Time(ms)", "diff", "float", "ms", 16),
    Column("flag", "Flag", "flag", "text", "", 30),
)


@dataclass
class ClusterTables:
    """The reduce's output: both tables and the notes."""

    ranks: Table
    groups: Table
    notes: list[Note] = field(default_factory=list)

    def focus_rank(self) -> int | None:
        return focus_rank(self.ranks)[0]


def focus_rank(ranks: Table) -> tuple[int | None, str]:
    """The rank pair worth opening first, and why: the largest regression, else the slowest
    rank, else the lowest rank loaded on both sides ((None, "") when no rank was)."""
    df = ranks.data
    for flag in (LARGEST_REGRESSION, SLOWEST):
        hit = df[df["flag"].str.contains(flag, regex=False)]
        if len(hit):
            return int(hit["rank"].iloc[0]), flag
    both = df[df["base_e2e"].notna() & df["comp_e2e"].notna()]
    return (int(both["rank"].iloc[0]), "lowest rank compared") if len(both) else (None, "")


def cluster_result(cluster: ComparisonResult, detail: ComparisonResult, rank: int | None,
          why: str = "") -> ComparisonResult:
    """One result of a cluster comparison: the rank pair's tables first (the reference's
    sheets, in their order), then the cluster's; the cluster's notes, then the pair's."""
    merged = ComparisonResult(cluster.base_label, cluster.comp_label, summary=dict(detail.summary))
    if rank is not None:
        merged.options.update({"detail_rank": rank, **({"detail_reason": why} if why else {})})
    for table in (*detail.tables.values(), *cluster.tables.values()):
        merged.add(table)
    merged.notes = once([*cluster.notes, *detail.notes])
    return merged


def tolerance(comp_e2e_ns: np.ndarray) -> float:
    """How far a rank must stand out to be flagged (ns)."""
    median = float(np.median(comp_e2e_ns)) if len(comp_e2e_ns) else 0.0
    return max(FLAG_MIN_NS, FLAG_SHARE * median)


def cluster_tables(inputs: ClusterInputs, outcomes: list[RankOutcome]) -> ClusterTables:
    """Both tables from every rank's outcome (any order)."""
    summaries = {(o.side, o.rank): o for o in outcomes if isinstance(o, RankSummary)}
    failures = {(o.side, o.rank): o for o in outcomes if isinstance(o, RankFailure)}
    notes = list(inputs.notes) + _failure_notes(failures) + _loader_notes(summaries)
    ranks = declare(_rank_table(inputs, summaries, failures, inputs.base.given, inputs.comp.given))
    groups = declare(_group_table(inputs, summaries))
    return ClusterTables(ranks, groups, notes)


# ---------------------------------------------------------------------------------------------
# ClusterCompare
# ---------------------------------------------------------------------------------------------


def _figures(s: RankSummary | None) -> dict[str, float]:
    if s is None:
        return {k: np.nan for k, _ in (*_FIGURES, _SPREAD)}
    spread = (max(s.step_e2e_ns) - min(s.step_e2e_ns)) / NS_PER_MS if s.step_e2e_ns else np.nan
    return {"e2e": s.e2e_ns / NS_PER_MS, "compute": s.compute_ns / NS_PER_MS,
            "uncovered": s.uncovered_ns / NS_PER_MS, "wait": s.wait_ns / NS_PER_MS,
            "free": s.free_ns / NS_PER_MS, "spread": spread}


def _rank_table(inputs: ClusterInputs, summaries: dict[tuple[str, int], RankSummary],
                failures: dict[tuple[str, int], RankFailure], base_label: str,
                comp_label: str) -> Table:
    rows = []
    for rank in inputs.ranks:
        b, c = summaries.get((BASE, rank)), summaries.get((COMPARISON, rank))
        fb, fc = _figures(b), _figures(c)
        row: dict[str, object] = {"rank": rank}
        row.update({f"base_{k}": v for k, v in fb.items()})
        row.update({f"comp_{k}": v for k, v in fc.items()})
        row.update({f"diff_{k}": fc[k] - fb[k] for k, _ in _FIGURES})
        row["flag"] = "; ".join(_absence(rank, inputs, failures))
        row["_base_path"] = inputs.base.path(rank) or ""
        row["_comp_path"] = inputs.comp.path(rank) or ""
        row["_base_label"] = b.label if b else ""
        row["_comp_label"] = c.label if c else ""
        rows.append(row)
    data = pd.DataFrame(rows, columns=[c.key for c in RANK_COLUMNS]
                        + ["_base_path", "_comp_path", "_base_label", "_comp_label"])
    data["rank"] = data["rank"].astype("int64")
    _flag_ranks(data, summaries)
    n_paired = int((data["base_e2e"].notna() & data["comp_e2e"].notna()).sum())
    return Table(
        name=CLUSTER_COMPARE, columns=RANK_COLUMNS, data=data,
        base_span=(1, 6), comp_span=(7, 12), title="Ranks", default_sort="diff_e2e",
        absent_reason="" if len(data) else "no ranks to compare",
        notes=[f"{n_paired} of {len(data)} ranks compared; base {base_label}, comparison "
               f"{comp_label}"],
    )


def _absence(rank: int, inputs: ClusterInputs, failures: dict[tuple[str, int], RankFailure]) -> list[str]:
    flags = []
    if rank not in inputs.comp.ranks:
        flags.append("only in base")
    elif rank not in inputs.base.ranks:
        flags.append("only in comparison")
    for side in (BASE, COMPARISON):
        if (side, rank) in failures:
            flags.append(f"{side} failed to load")
    return flags


def _flag_ranks(data: pd.DataFrame, summaries: dict[tuple[str, int], RankSummary]) -> None:
    """Add ``slowest`` and ``largest regression`` to the Flag of the ranks that stand out."""
    both = [r for r in data["rank"].tolist()
            if (BASE, r) in summaries and (COMPARISON, r) in summaries]
    if len(both) < 2:
        return
    comp = np.array([summaries[(COMPARISON, r)].busy_ns for r in both], dtype="float64")
    base = np.array([summaries[(BASE, r)].busy_ns for r in both], dtype="float64")
    tol = tolerance(np.array([summaries[(COMPARISON, r)].e2e_ns for r in both], dtype="float64"))
    flags: dict[int, list[str]] = defaultdict(list)
    for name, values in ((SLOWEST, comp), (LARGEST_REGRESSION, comp - base)):
        top = values.max()
        if top - np.median(values) >= tol and (name == SLOWEST or top > 0):
            for r, v in zip(both, values):
                if v >= top - tol:
                    flags[r].append(name)
    pos = {r: i for i, r in enumerate(data["rank"].tolist())}
    for r, names in flags.items():
        data.loc[pos[r], "flag"] = "; ".join(names)


# ---------------------------------------------------------------------------------------------
# ClusterCommGroups
# ---------------------------------------------------------------------------------------------


def _match(base: tuple[GroupTimes, ...], comp: tuple[GroupTimes, ...]) -> list[tuple[GroupTimes | None, GroupTimes | None]]:
    """One rank's groups of both sides, paired: the same process-group name (when it names one
    group on each side), else the same group id, else the only group left on each side — two
    jobs' groups have different ids (they embed the creation time)."""
    left_b, left_c = list(base), list(comp)
    pairs: list[tuple[GroupTimes | None, GroupTimes | None]] = []

    def take(b: GroupTimes, c: GroupTimes) -> None:
        pairs.append((b, c))
        left_b.remove(b)
        left_c.remove(c)

    for b in list(left_b):
        same = [c for c in left_c if b.name and c.name == b.name]
        if len(same) == 1 and sum(x.name == b.name for x in left_b) == 1:
            take(b, same[0])
    for b in list(left_b):
        same = [c for c in left_c if c.group == b.group]
        if same:
            take(b, same[0])
    if len(left_b) == 1 and len(left_c) == 1:
        take(left_b[0], left_c[0])
    pairs += [(b, None) for b in left_b] + [(None, c) for c in left_c]
    return pairs


def _group_table(inputs: ClusterInputs, summaries: dict[tuple[str, int], RankSummary]) -> Table:
    rows = []
    for rank in inputs.ranks:
        b, c = summaries.get((BASE, rank)), summaries.get((COMPARISON, rank))
        for gb, gc in _match(b.groups if b else (), c.groups if c else ()):
            shown = gc or gb
            assert shown is not None
            rows.append({
                "group": shown.group,
                "rank": rank,
                "base_wait": gb.wait_ns / NS_PER_MS if gb else np.nan,
                "base_transmit": gb.transmit_ns / NS_PER_MS if gb else np.nan,
                "comp_wait": gc.wait_ns / NS_PER_MS if gc else np.nan,
                "comp_transmit": gc.transmit_ns / NS_PER_MS if gc else np.nan,
                "_base_group": gb.group if gb else "",
                "_comp_group": gc.group if gc else "",
            })
    cols = [c.key for c in GROUP_COLUMNS if c.key != "flag"] + ["_base_group", "_comp_group"]
    data = pd.DataFrame(rows, columns=cols)
    # One communicator has one id on all its ranks; its process-group name may be recorded by
    # some ranks only (Text exports read it from profiler_metadata.json, Db exports do not).
    names: dict[str, str] = {}
    for rank in inputs.ranks:
        for side in (COMPARISON, BASE):
            s = summaries.get((side, rank))
            for g in s.groups if s else ():
                if g.name:
                    names.setdefault(g.group, g.name)
    data["group"] = [f"{names[g]} ({g})" if g in names else g for g in data["group"]]
    data["diff_wait"] = data["comp_wait"] - data["base_wait"]
    data["diff_transmit"] = data["comp_transmit"] - data["base_transmit"]
    data["flag"] = _waited_for(data)
    data["rank"] = data["rank"].astype("int64")
    order = {g: i for i, g in enumerate(dict.fromkeys(data["group"].tolist()))}
    data = data.sort_values(["group", "rank"], key=lambda s: s.map(order) if s.name == "group" else s,
                            kind="stable").reset_index(drop=True)
    data = data[[c.key for c in GROUP_COLUMNS] + ["_base_group", "_comp_group"]]
    return Table(
        name=CLUSTER_GROUPS, columns=GROUP_COLUMNS, data=data, base_span=(2, 3), comp_span=(4, 5),
        title="Communication groups", default_sort="diff_wait",
        absent_reason="" if len(data) else
        "no communication group has wait / transmit times (NPU exports record them; GPU traces do not)",
    )


def _waited_for(data: pd.DataFrame) -> list[str]:
    """Per row: ``others wait for it`` where that rank has the least wait of its group."""
    marks = {BASE: _least_wait(data, "_base_group", "base_wait"),
             COMPARISON: _least_wait(data, "_comp_group", "comp_wait")}
    out = []
    for i in range(len(data)):
        comp, base = i in marks[COMPARISON], i in marks[BASE]
        out.append(f"{WAITED_FOR} (as in base)" if comp and base else WAITED_FOR if comp
                   else "others waited for it in base" if base else "")
    return out


def _least_wait(data: pd.DataFrame, group_col: str, wait_col: str) -> set[int]:
    rows: set[int] = set()
    for group, idx in data.groupby(group_col, sort=False).indices.items():
        waits = data[wait_col].to_numpy()[idx]
        keep = ~np.isnan(waits)
        if not group or keep.sum() < 2:
            continue
        idx, waits = idx[keep], waits[keep]
        spread = waits.max() - waits.min()
        if spread * NS_PER_MS >= FLAG_MIN_NS and spread >= STRAGGLER_SHARE * waits.max():
            rows.add(int(idx[int(np.argmin(waits))]))
    return rows


# ---------------------------------------------------------------------------------------------
# Notes
# ---------------------------------------------------------------------------------------------


def _failure_notes(failures: dict[tuple[str, int], RankFailure]) -> list[Note]:
    return [Note(f"{side} rank {rank} not compared: {f.message}", origin=CLUSTER)
            for (side, rank), f in sorted(failures.items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def _loader_notes(summaries: dict[tuple[str, int], RankSummary]) -> list[Note]:
    """Each loader note once, with the ranks it applies to (64 ranks, one line each)."""
    where: dict[tuple[str, str], list[int]] = defaultdict(list)
    for (side, rank), s in sorted(summaries.items(), key=lambda kv: kv[0][1]):
        for note in dict.fromkeys(s.notes):
            where[(side, note)].append(rank)
    return [Note(f"{side} {ranks_phrase(format_ranks(ranks))}: {note}", origin=CLUSTER)
            for (side, note), ranks in where.items()]
