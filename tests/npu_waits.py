"""Communication waits of the real torch_npu exports, read straight from the raw files (plain
``json`` / ``sqlite3``, no loader code) so that tests can check :func:`wait_spans` and the
OverallMetrics Wait rows against an independent derivation, and that derivation against the
profiler's own communication analysis.

The rule derived here (docs/differences.md O15): per communication op, the ``Notify_Wait`` tasks
of the lowest-numbered plane on which the op has any. The real exports hold no ``RDMASend``
(asserted), so every ``Notify_Wait`` is an inter-rank wait.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "npu-real-runs"


@dataclass(frozen=True)
class RankWaits:
    """One export's waits: the chosen tasks as ``(start_ns, end_ns)`` and the wait per op (ns),
    next to the profiler's own Wait Time per op (ms) from its communication analysis."""

    spans: list[tuple[int, int]]
    per_op_ns: dict[str, int]
    profiler_ms: dict[str, float]


def _first_plane(tasks: list[tuple[str, int, int, int]]) -> tuple[list[tuple[int, int]], dict[str, int]]:
    """``tasks``: (op, plane, start_ns, end_ns) of every Notify_Wait; the tasks of each op's
    lowest plane."""
    first: dict[str, int] = {}
    for op, plane, _, _ in tasks:
        first[op] = min(first.get(op, plane), plane)
    chosen = [(op, s, e) for op, plane, s, e in tasks if plane == first[op]]
    per_op: dict[str, int] = defaultdict(int)
    for op, s, e in chosen:
        per_op[op] += e - s
    return sorted((s, e) for _, s, e in chosen), dict(per_op)


def _ns(us: object) -> int:
    return int((Decimal(str(us)) * 1000).to_integral_value())


def text_waits(run: Path) -> RankWaits:
    """A Text export: the HCCL process of ``trace_view.json`` (group threads hold the ops, plane
    threads ``Plane N`` the tasks; a task belongs to the op of its group whose span holds it) and
    ``communication.json``."""
    out = run / "ASCEND_PROFILER_OUTPUT"
    events = json.loads((out / "trace_view.json").read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    hccl = {pid for pid, name in procs.items() if name == "HCCL"}
    ops, tasks = [], []
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in hccl:
            continue
        thread = threads[(e["pid"], e["tid"])]
        start = _ns(e["ts"])
        span = (start, start + _ns(e["dur"]))
        if thread.startswith("Plane "):
            assert e["name"] != "RDMASend"
            if e["name"] == "Notify_Wait":
                tasks.append((int(thread.split()[1]), *span))
        else:
            ops.append((e["name"], *span))
    located = []
    for plane, s, e in tasks:
        (op,) = [name for name, os, oe in ops if os <= s and e <= oe]
        located.append((op, plane, s, e))
    spans, per_op = _first_plane(located)
    comm_file = out / "communication.json"
    comm = json.loads(comm_file.read_text(encoding="utf-8")) if comm_file.exists() else {}
    profiler = {name.split("@")[0]: info["Communication Time Info"]["Wait Time(ms)"]
                for step in comm.values() for name, info in step["collective"].items()
                if name != "Total Op Info"}
    return RankWaits(spans, per_op, profiler)


def db_waits(run: Path) -> RankWaits:
    """A Db export: ``COMMUNICATION_TASK_INFO`` ⋈ ``TASK`` (task name in ``taskType``, op in
    ``opId``) and ``analysis.db`` ``CommAnalyzerTime``."""
    out = run / "ASCEND_PROFILER_OUTPUT"
    (db,) = out.glob("ascend_pytorch_profiler*.db")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        op_names = {op: names[n] for op, n in con.execute("SELECT opId, opName FROM COMMUNICATION_OP")}
        rows = con.execute(
            "SELECT c.taskType, c.planeId, c.opId, t.startNs, t.endNs FROM COMMUNICATION_TASK_INFO c "
            "JOIN TASK t ON t.globalTaskId = c.globalTaskId").fetchall()
    assert not any(names[kind] == "RDMASend" for kind, *_ in rows)
    located = [(op_names[op], plane, s, e) for kind, plane, op, s, e in rows if names[kind] == "Notify_Wait"]
    spans, per_op = _first_plane(located)
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as con:
        profiler = dict(con.execute("SELECT hccl_op_name, wait_time FROM CommAnalyzerTime"))
    return RankWaits(spans, per_op, profiler)


def union_length(spans: list[tuple[int, int]], clip: list[tuple[int, int]] | None = None) -> int:
    """Length of the union of ``spans``, intersected with the union of ``clip`` when given
    (a plain sweep over ns boundaries)."""
    def merged(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for s, e in sorted(i for i in items if i[1] > i[0]):
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        return out

    a = merged(spans)
    if clip is None:
        return sum(e - s for s, e in a)
    total = 0
    for s, e in a:
        for cs, ce in merged(clip):
            total += max(0, min(e, ce) - max(s, cs))
    return total


def text_uncovered(run: Path) -> list[tuple[int, int]]:
    """The ``Communication(Not Overlapped)`` events of a Text export's Overlap Analysis."""
    events = json.loads((run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    pid = next(e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"] == "Overlap Analysis")
    return [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("pid") == pid and e["name"] == "Communication(Not Overlapped)"]


def overall_wait_ms(run: Path, uncovered: list[tuple[int, int]] | None = None) -> float:
    """The OverallMetrics Wait of a real export: its waits clipped to the uncovered
    communication (a Text export's own Overlap Analysis unless ``uncovered`` is given; a Db
    export has none, so the caller gives it)."""
    if "db" in run.parts:
        assert uncovered is not None, run
        return union_length(db_waits(run).spans, uncovered) / 1e6
    return union_length(text_waits(run).spans, text_uncovered(run) if uncovered is None else uncovered) / 1e6


def fold_waits(ours: list[list], ref: list[list], waits_ms: tuple[float, float]) -> list[list]:
    """Our OverallMetrics rows with the O15 wait put back the reference's way, after checking it.

    Each side's ``Wait`` rows (column 1: base, 4: comparison) must add up to ``waits_ms`` (derived
    from the raw files). Then, group by group, our wait beyond the reference's is moved into
    ``Transmit`` (the group's uncovered time stays ours), and a ``Wait`` row the reference does
    not have is dropped; shares (2, 5) and the diff (7) of the rows touched are recomputed from
    the moved values, the ratio (8) too where the base is not 0."""
    for col, expected in zip((1, 4), waits_ms):
        got = sum(r[col] for r in ours if r[0] == "\t\tWait")
        assert abs(got - expected) <= 2e-6, (col, got, expected)
    e2e = next(r for r in ours if r[0] == "E2E Time")

    def blocks(rows: list[list]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        group = ""
        for i, r in enumerate(rows):
            if r[0].startswith("\t") and not r[0].startswith("\t\t"):
                group = r[0]
                out[group] = {}
            elif r[0] in ("\t\tWait", "\t\tTransmit"):
                out[group][r[0]] = i
        return out

    ours = [list(r) for r in ours]
    ref_blocks = blocks(ref)
    drop = set()
    for group, rows in blocks(ours).items():
        if "\t\tWait" not in rows:
            continue
        wait, transmit = ours[rows["\t\tWait"]], ours[rows["\t\tTransmit"]]
        ref_rows = ref_blocks.get(group, {})
        for col in (1, 4):
            ref_wait = ref[ref_rows["\t\tWait"]][col] if "\t\tWait" in ref_rows else 0.0
            transmit[col] += wait[col] - ref_wait
            wait[col] = ref_wait
        if "\t\tWait" not in ref_rows:
            drop.add(rows["\t\tWait"])
        for r in (wait, transmit):
            r[2], r[5], r[7] = r[1] / e2e[1], r[4] / e2e[4], r[4] - r[1]
            if r[1]:
                r[8] = r[4] / r[1]
    return [r for i, r in enumerate(ours) if i not in drop]
