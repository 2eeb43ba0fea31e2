"""The OverallMetrics comparison of two sides: the workbook sheet and the terminal summary.

:func:`overall_table` lays two :class:`~.overall_metrics.SideMetrics` out exactly like the
reference's ``OverallMetrics`` sheet (row order, tab-indented labels, ``/`` for uncounted rows,
base-then-comparison merge of the dynamic MC2 / group / overlap rows). :func:`summary_figures`
and :func:`format_summary_table` give the terminal "Model Profiling Time Distribution" table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .overall_metrics import Bucket, SideMetrics
from .result import LEVEL, SHOWN, Column, Table, diff, ratio

TABLE_NAME = "OverallMetrics"
SUMMARY_TITLE = "Model Profiling Time Distribution"

COLUMNS: tuple[Column, ...] = (
    Column("index", "Index", "key", "text", "", 40),
    Column("base_ms", "Duration(ms)", "base", "float", "ms", 20),
    Column("base_ratio", "Duration Ratio", "base", "percent", "", 20),
    Column("base_number", "Number", "base", "int", "count", 10),
    Column("comp_ms", "Duration(ms)", "comparison", "float", "ms", 20),
    Column("comp_ratio", "Duration Ratio", "comparison", "percent", "", 20),
    Column("comp_number", "Number", "comparison", "int", "count", 10),
    Column("diff_ms", "Diff Duration(ms)", "diff", "float", "ms", 20),
    Column("diff_ratio", "Diff Ratio", "ratio", "percent", "", 10),
)

_UNCOUNTED = "/"
_NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class _Cell:
    """One side of one row: duration and count (None → the row is not counted, shown "/")."""

    ns: int = 0
    count: int | None = None


_ABSENT = _Cell()  # a side that lacks a dynamic (MC2 / group / overlap) row


def _counted(b: Bucket) -> _Cell:
    return _Cell(b.ns, b.count)


def _fixed_head(s: SideMetrics) -> list[tuple[str, _Cell]]:
    return [("Computing Time", _Cell(s.compute_ns, s.computing_count))]


def _fixed_classes(s: SideMetrics) -> list[tuple[str, _Cell]]:
    rows: list[tuple[str, _Cell]] = []
    for title, fwd, cube, vector in (
        ("Flash Attention (Forward)", s.fa_fwd, s.fa_fwd_cube, s.fa_fwd_vector),
        ("Flash Attention (Backward)", s.fa_bwd, s.fa_bwd_cube, s.fa_bwd_vector),
        ("Conv (Forward)", s.conv_fwd, s.conv_fwd_cube, s.conv_fwd_vector),
        ("Conv (Backward)", s.conv_bwd, s.conv_bwd_cube, s.conv_bwd_vector),
    ):
        rows += [(f"\t{title}", _counted(fwd)), (f"\t\t{title} (Cube)", _counted(cube)),
                 (f"\t\t{title} (Vector)", _counted(vector))]
    rows += [
        ("\tMatmul", _counted(s.matmul)),
        ("\t\tMatmul (Cube)", _counted(s.matmul_cube)),
        ("\t\tMatmul (Vector)", _counted(s.matmul_vector)),
        ("\tPage Attention", _counted(s.page_attention)),
        ("\tVector", _counted(s.vector)),
        ("\t\tVector (Trans)", _counted(s.vector_trans)),
        ("\t\tVector (No Trans)", _counted(s.vector_notrans)),
        ("\tCube", _counted(s.cube)),
        ("\tSDMA (Tensor Move)", _counted(s.sdma_tensor_move)),
        ("\tOther", _Cell(s.other_ns)),
        ("Uncovered Communication Time", _Cell(s.uncovered_ns)),
    ]
    return rows


def _fixed_tail(s: SideMetrics) -> list[tuple[str, _Cell]]:
    return [
        ("Free Time", _Cell(s.free_time_ns)),
        ("\tSDMA", _Cell(s.sdma_stream.ns)),
        ("\tFree", _Cell(s.free_ns)),
        ("E2E Time", _Cell(s.e2e_ns)),
    ]


def _mc2_block(s: SideMetrics, name: str) -> list[_Cell]:
    m = s.mc2.get(name)
    if m is None:
        return [_ABSENT, _ABSENT, _ABSENT]
    return [_Cell(m.total_ns, m.count), _Cell(m.computing_ns), _Cell(m.communication_ns)]


def _group_block(s: SideMetrics, group: str | None) -> list[_Cell]:
    g = s.groups.get(group) if group is not None else None
    if g is None:
        return [_ABSENT, _ABSENT, _ABSENT]
    return [_Cell(g.uncovered_ns), _Cell(g.wait_ns), _Cell(g.transmit_ns)]


def _pg_groups(s: SideMetrics) -> dict[str, list[str]]:
    """Known process-group name → the side's groups carrying it (in group order)."""
    out: dict[str, list[str]] = {}
    for g in s.groups:
        pg = s.pg_names.get(g, "")
        if pg:
            out.setdefault(pg, []).append(g)
    return out


def _group_rows(base: SideMetrics, comp: SideMetrics,
                shown: dict[str, str]) -> list[tuple[str, _Cell, _Cell]]:
    """Group blocks (header, Wait, Transmit), matched in three passes: a process-group name that
    names exactly one group on each side; then identical group keys (base order); then the
    comparison-only groups.

    The reference heads an unmatched group with its process-group name *and* its raw key
    (``dp: Group 10.20.0.11%enp…_60000 Communication``); ``shown`` receives the screen label of
    such a header: the name alone (``dp: Communication``), as the gap sentence says it, with the
    key only when that name heads more than one group."""
    rows: list[tuple[str, _Cell, _Cell]] = []
    left_base = list(base.groups)
    left_comp = list(comp.groups)
    names = [s.pg_names.get(g, "") for s in (base, comp) for g in s.groups]

    def emit(header: str, b_group: str | None, c_group: str | None) -> None:
        labels = (header, "\t\tWait", "\t\tTransmit")
        rows.extend(zip(labels, _group_block(base, b_group), _group_block(comp, c_group)))
        side, group = (base, b_group) if b_group is not None else (comp, c_group)
        pg = side.pg_names.get(group or "", "")
        if pg and header.strip() != f"{pg}: Communication":
            unique = names.count(pg) <= (2 if b_group and c_group else 1)
            shown[header] = f"\t{pg}: Communication" if unique else f"\t{pg} ({group})"

    comp_pg = _pg_groups(comp)
    for pg, b_groups in _pg_groups(base).items():
        c_groups = comp_pg.get(pg, [])
        if len(b_groups) == 1 and len(c_groups) == 1:
            emit(f"\t{pg}: Communication", b_groups[0], c_groups[0])
            left_base.remove(b_groups[0])
            left_comp.remove(c_groups[0])
    for g in left_base:
        c_group = g if g in left_comp else None
        if c_group is not None:
            left_comp.remove(c_group)
        emit(f"\t{base.group_label(g)}", g, c_group)
    for g in left_comp:
        emit(f"\t{comp.group_label(g)}", None, g)
    return rows


def _overlap_cells(s: SideMetrics) -> dict[str, _Cell]:
    if not s.pairs:
        return {}
    out = {"\tUncovered Communication Overlapped": _Cell(sum(s.pairs.values()))}
    for (a, b), ns in s.pairs.items():
        out[f"\t\t{s.pg_names.get(a) or a} & {s.pg_names.get(b) or b}"] = _Cell(ns)
    return out


def _merge(base: dict[str, _Cell], comp: dict[str, _Cell]) -> list[tuple[str, _Cell, _Cell]]:
    """Rows keyed by label: base order first, then comparison-only labels."""
    labels = list(dict.fromkeys([*base, *comp]))
    return [(label, base.get(label, _ABSENT), comp.get(label, _ABSENT)) for label in labels]


def _pairwise(base: list[tuple[str, _Cell]], comp: list[tuple[str, _Cell]]) -> list[tuple[str, _Cell, _Cell]]:
    return [(label, b, c) for (label, b), (_, c) in zip(base, comp)]


def skip_reason(base: SideMetrics, comp: SideMetrics, base_label: str, comp_label: str) -> str:
    """Why there is no OverallMetrics table ("" when there is one): a side without any device
    activity has no E2E time to relate the rows to."""
    empty = [label for label, s in ((base_label, base), (comp_label, comp)) if s.e2e_ns <= 0]
    if not empty:
        return ""
    return "OverallMetrics skipped: no device activity (E2E time is 0) in " + " and ".join(empty)


def overall_table(base: SideMetrics, comp: SideMetrics, base_label: str, comp_label: str) -> Table | None:
    """The ``OverallMetrics`` sheet, or None when either side's E2E time is 0 (see
    :func:`skip_reason` for the message to record).

    A row is emitted when at least one side's duration is non-zero; durations are exact ns, so
    there are no float-residue rows. ``Number`` holds ints, or ``"/"`` for uncounted rows. ``Index`` keeps the reference's leading tabs (so a pandas
    read of our sheet equals one of the reference's) and ``_level`` carries the same depth.
    """
    if skip_reason(base, comp, base_label, comp_label):
        return None
    rows = _pairwise(_fixed_head(base), _fixed_head(comp))
    mc2_names = list(dict.fromkeys([*base.mc2, *comp.mc2]))
    for name in mc2_names:
        labels = (f"\t{name}", "\t\tComputing", "\t\tCommunication")
        rows += list(zip(labels, _mc2_block(base, name), _mc2_block(comp, name)))
    rows += _pairwise(_fixed_classes(base), _fixed_classes(comp))
    shown: dict[str, str] = {}
    rows += _group_rows(base, comp, shown)
    rows += _merge(_overlap_cells(base), _overlap_cells(comp))
    rows += _pairwise(_fixed_tail(base), _fixed_tail(comp))
    rows = [r for r in rows if r[1].ns != 0 or r[2].ns != 0]

    labels = [r[0] for r in rows]
    # float64, not int64: sums of corrupt (year-2100) durations can pass 2**63 ns; a float keeps
    # them displayable (and is exact below 2**53 ns ≈ 104 days).
    b_ns = np.array([r[1].ns for r in rows], dtype="float64")
    c_ns = np.array([r[2].ns for r in rows], dtype="float64")
    data = pd.DataFrame({
        "index": pd.Series(labels, dtype=object),
        "base_ms": b_ns / _NS_PER_MS,
        "base_ratio": b_ns / base.e2e_ns,
        "base_number": pd.Series([_number(r[1]) for r in rows], dtype=object),
        "comp_ms": c_ns / _NS_PER_MS,
        "comp_ratio": c_ns / comp.e2e_ns,
        "comp_number": pd.Series([_number(r[2]) for r in rows], dtype=object),
        "diff_ms": diff(b_ns, c_ns) / _NS_PER_MS,
        "diff_ratio": ratio(b_ns, c_ns),
        LEVEL: np.array([len(label) - len(label.lstrip("\t")) for label in labels], dtype="int64"),
    })
    if shown:
        data[SHOWN] = [shown.get(label, label) for label in labels]
    notes = [f"{label}: {n}" for label, s in ((base_label, base), (comp_label, comp)) for n in s.notes]
    return Table(
        name=TABLE_NAME,
        columns=COLUMNS,
        data=data,
        base_span=(1, 3),
        comp_span=(4, 6),
        title="Overall metrics",
        notes=notes,
    )


def _number(cell: _Cell) -> int | str:
    """A count, or ``"/"`` for rows that are not counted. The column holds both (object dtype)
    so the workbook gets numeric cells where the reference has them, and text "/" elsewhere."""
    return _UNCOUNTED if cell.count is None else int(cell.count)


# ---------------------------------------------------------------------------------------------
# Terminal summary ("Model Profiling Time Distribution")
# ---------------------------------------------------------------------------------------------


def _side_kind(s: SideMetrics) -> str:
    return "NPU" if s.is_npu else "GPU"


def _secs(ns: int) -> float:
    return ns / _NS_PER_S


def _time_entry(b: Bucket | int, c: Bucket | int) -> dict[str, object]:
    """A seconds column, with counts when given Buckets."""
    entry: dict[str, object] = {"unit": "s"}
    for side, v in (("base", b), ("comparison", c)):
        ns, count = (v.ns, v.count) if isinstance(v, Bucket) else (v, None)
        entry[side] = _secs(ns)
        entry[f"{side}_count"] = count
        entry[f"{side}_text"] = f"{_secs(ns):.3f}s" + ("" if count is None else f"({count})")
    d = float(entry["comparison"]) - float(entry["base"])  # type: ignore[arg-type]
    text = f"{d:+.3f}s"
    if isinstance(b, Bucket) and isinstance(c, Bucket):
        text += f"({c.count - b.count:+d})"
    entry["diff_text"] = text
    return entry


def _value_entry(b: float | None, c: float | None, unit: str, fmt: str) -> dict[str, object]:
    """A figure that is not a time (memory, a bandwidth). A side that does not hold the figure
    (``None``: a Db export has no bandwidth) keeps ``None`` as its value — the app and the report
    print it as absent, never as 0 — while the texts print 0 there, as the reference's table
    does."""
    bt, ct = b or 0.0, c or 0.0
    return {
        "unit": unit,
        "base": b,
        "comparison": c,
        "base_count": None,
        "comparison_count": None,
        "base_text": f"{bt:{fmt}}{unit}",
        "comparison_text": f"{ct:{fmt}}{unit}",
        "diff_text": f"{ct - bt:+{fmt}}{unit}",
    }


def _uncovered_entry(base: SideMetrics, comp: SideMetrics) -> dict[str, object]:
    """Uncovered communication with the wait time in parentheses, ``( / )`` when a side has no
    wait — printed the same way for both sides (the reference always prints ``(0.000s)`` on the
    comparison side)."""
    entry: dict[str, object] = {"unit": "s", "base_count": None, "comparison_count": None}
    for side, s in (("base", base), ("comparison", comp)):
        u, w = _secs(s.uncovered_ns), _secs(s.wait_ns)
        entry[side] = u
        entry[f"{side}_wait"] = w
        entry[f"{side}_text"] = f"{u:.3f}s" + (f"({w:.3f}s)" if s.wait_ns else "( / )")
    du = _secs(comp.uncovered_ns - base.uncovered_ns)
    dw = _secs(comp.wait_ns - base.wait_ns)
    entry["diff_text"] = f"{du:+.3f}s" + (f"({dw:+.3f}s)" if base.wait_ns or comp.wait_ns else "")
    return entry


def summary_figures(base: SideMetrics, comp: SideMetrics) -> dict[str, dict[str, object]]:
    """Terminal figures, column header → per-side values (seconds / GB / GB/s), counts and texts.

    Columns appear under the reference's conditions (spec §6.8). The first entry, ``""``, holds
    the side kinds (``GPU`` / ``NPU``) as texts.
    """
    sides = (base, comp)
    out: dict[str, dict[str, object]] = {
        "": {"unit": "", "base_text": _side_kind(base), "comparison_text": _side_kind(comp), "diff_text": "Diff"},
    }
    if not base.hide_op_details and not comp.hide_op_details:
        out["Cube Time(Num)"] = _time_entry(base.cube_time, comp.cube_time)
        out["Vector Time(Num)"] = _time_entry(base.vector, comp.vector)
    for header, attr in (
        ("Conv Time(Forward)(Num)", "conv_fwd"),
        ("Conv Time(Backward)(Num)", "conv_bwd"),
        ("Flash Attention Time(Forward)(Num)", "fa_fwd"),
        ("Flash Attention Time(Backward)(Num)", "fa_bwd"),
        ("Paged Attention Time(Num)", "page_attention"),
        ("Lccl Time(Num)", "lccl"),
    ):
        b, c = getattr(base, attr), getattr(comp, attr)
        if b.ns or c.ns:
            out[header] = _time_entry(b, c)
    other = [s.other_ns if s.is_npu else 0 for s in sides]  # the terminal has no GPU Other
    if any(other):
        out["Other Time"] = _time_entry(other[0], other[1])
    out["Computing Time"] = _time_entry(base.compute_ns, comp.compute_ns)
    if base.memory_gb or comp.memory_gb:
        out["Mem Usage"] = _value_entry(base.memory_gb, comp.memory_gb, "G", ".2f")
    out["Uncovered Communication Time(Wait Time)"] = _uncovered_entry(base, comp)
    if base.rdma_bandwidth_gbps or comp.rdma_bandwidth_gbps:
        out["RDMA Bandwidth"] = _value_entry(base.rdma_bandwidth_gbps, comp.rdma_bandwidth_gbps, "GB/s", ".3f")
    if base.sdma_bandwidth_gbps or comp.sdma_bandwidth_gbps:
        out["SDMA Bandwidth"] = _value_entry(base.sdma_bandwidth_gbps, comp.sdma_bandwidth_gbps, "GB/s", ".3f")
    if base.sdma.ns or comp.sdma.ns:
        out["SDMA Time(Num)"] = _time_entry(base.sdma, comp.sdma)
    out["Free Time"] = _time_entry(base.free_time_ns, comp.free_time_ns)
    suffix = "(Not minimal profiling)" if base.is_npu or comp.is_npu else ""
    out["E2E Time" + suffix] = _time_entry(base.e2e_ns, comp.e2e_ns)
    return out


def per_step_figures(figures: dict[str, dict[str, object]], base_steps: int,
                     comp_steps: int) -> dict[str, dict[str, object]]:
    """``figures`` as per-step means: every time divided by its side's number of steps (a side
    without step markers counts as one), so that 5 steps against 12 compare like with like; peak
    memory and bandwidths are not sums and stay; kernel counts are dropped (a mean count reads as
    a kernel that does not exist). The ``""`` entry records the step counts (``per_step``)."""
    out: dict[str, dict[str, object]] = {}
    n = {"base": max(base_steps, 1), "comparison": max(comp_steps, 1)}
    for key, entry in figures.items():
        e = dict(entry)
        if key == "":
            e.update(per_step=True, base_steps=base_steps, comparison_steps=comp_steps)
        elif e.get("unit") == "s":
            for side in n:
                e[side] = float(e[side]) / n[side]  # type: ignore[arg-type]
                e[f"{side}_count"] = None
                if f"{side}_wait" in e:
                    e[f"{side}_wait"] = float(e[f"{side}_wait"]) / n[side]  # type: ignore[arg-type]
                e[f"{side}_text"] = f"{float(e[side]):.3f}s"
            e["diff_text"] = f"{float(e['comparison']) - float(e['base']):+.3f}s"  # type: ignore[arg-type]
        out[key] = e
    return out


def format_summary_table(figures: dict[str, dict[str, object]]) -> str:
    """Plain-text grid of :func:`summary_figures`: header, base row, comparison row, diff row."""
    headers = list(figures)
    lines = [[str(figures[h].get(key, "")) for h in headers] for key in ("base_text", "comparison_text", "diff_text")]
    grid = [headers, *lines]
    widths = [max(len(row[i]) for row in grid) + 2 for i in range(len(headers))]
    rule = "+" + "+".join("-" * w for w in widths) + "+"
    inner = len(rule) - 2

    def fmt(row: list[str]) -> str:
        return "|" + "|".join(cell.center(w) for cell, w in zip(row, widths)) + "|"

    title = "|" + SUMMARY_TITLE.center(inner) + "|"
    top = "+" + "-" * inner + "+"
    return "\n".join([top, title, rule, fmt(headers), rule, *(fmt(r) for r in lines), rule])
