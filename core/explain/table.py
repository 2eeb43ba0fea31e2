"""Two step explanations side by side: the ``StepTime`` waterfall, the per-step table, and the
sentence that answers "why did the step get longer?".

Every figure is a **per-step mean**: a part's time summed over a side's step windows, divided by
that side's number of windows. Sides that hold different numbers of steps (5 against 12), or one
without step markers (one window: its whole E2E span), are therefore compared like with like,
and the table says how many steps each figure averages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import as_text
from ..compare.result import LEVEL, Column, Table, diff, ratio
from .explanation import COMMUNICATION, COMPUTE, IDLE, StepExplanation, feeding
from .windows import WHOLE_PROFILE
from .idle import CAUSES, COPY_CAUSE, DEVICE, HOST, LAUNCH, SYNC, UNKNOWN

TABLE_NAME = "StepTime"
STEPS_TABLE = "StepTimeSteps"
WHERE_TABLE = "StepTimeWhere"
#: Hidden StepTime columns Enter on a cause or label row narrows StepTimeWhere by.
CAUSE_KEY, LABEL_KEY = "_cause", "_label"
#: A cause row, or its "N more" row, narrows by the cause alone.
ALL_LABELS = "[ TOTAL ]"
_NS_PER_MS = 1e6
#: How many labels a cause lists before the rest are summed into one row.
TOP_LABELS = 8

PART_TITLE = {COMPUTE: "Computing", COMMUNICATION: "Uncovered communication", IDLE: "Idle (free)"}
CAUSE_TITLE = {
    SYNC: "synchronisation (host waited for the device)",
    HOST: "host work outside ops",
    LAUNCH: "launch-bound (host dispatching ops)",
    COPY_CAUSE: "copies",
    DEVICE: "device-side (queued work, stream waits)",
    UNKNOWN: "unknown (the trace cannot tell)",
    "wait": "wait", "transmit": "transmit", "not split": "wait and transmit (not recorded apart)",
}

COLUMNS: tuple[Column, ...] = (
    Column("index", "Where the time went", "key", "text", "", 46),
    Column("base_ms", "Per Step(ms)", "base", "float", "ms", 14),
    Column("base_share", "Share", "base", "percent", "", 10),
    Column("comp_ms", "Per Step(ms)", "comparison", "float", "ms", 14),
    Column("comp_share", "Share", "comparison", "percent", "", 10),
    Column("diff_ms", "Diff(ms)", "diff", "float", "ms", 14),
    Column("diff_ratio", "Diff Ratio", "ratio", "percent", "", 10),
)


@dataclass(frozen=True)
class Means:
    """One side's per-step means, in ns, at every level of the waterfall."""

    steps: int
    total: float
    parts: dict[str, float]  # part → ns
    causes: dict[tuple[str, str], float]  # (part, cause) → ns, largest first within a part
    labels: dict[tuple[str, str], dict[str, float]]  # (part, cause) → label → ns


def means(ex: StepExplanation) -> Means:
    """Per-step means of ``ex`` (a side without windows averages nothing: all zero), made once."""
    if "means" not in ex.memo:
        n = max(ex.step_count, 1)
        p = ex.parts()
        sums = p.groupby(["part", "cause", "label"], sort=False)["ns"].sum() / n
        labels: dict[tuple[str, str], dict[str, float]] = {}
        for (part, cause, label), ns in sums.items():
            labels.setdefault((part, cause), {})[label] = float(ns)
        causes = {k: sum(v.values()) for k, v in labels.items()}
        parts: dict[str, float] = {}
        for (part, _), ns in causes.items():
            parts[part] = parts.get(part, 0.0) + ns
        ex.memo["means"] = Means(ex.step_count, float(ex.window_ns().sum()) / n, parts, causes, labels)
    return ex.memo["means"]  # type: ignore[return-value]


def step_time_table(base: StepExplanation, comp: StepExplanation) -> Table:
    """The waterfall of both sides' per-step means (an outline: step → part → cause → label)."""
    b, c = means(base), means(comp)
    # (level, text, base ns, comparison ns, the cause key and label a leaf drills to)
    rows: list[tuple[int, str, float, float, str, str]] = [(0, _step_title(b, c), b.total, c.total, "", "")]
    for part in (COMPUTE, COMMUNICATION, IDLE):
        rows.append((1, PART_TITLE[part], _get(b.parts, part), _get(c.parts, part), "", ""))
        for cause in _causes(part, b, c):
            key = _cause_key(part, cause)
            rows.append((2, CAUSE_TITLE.get(cause, cause), _get(b.causes, (part, cause)),
                         _get(c.causes, (part, cause)), key, ALL_LABELS))
            rows.extend((3, label, bv, cv, key, ALL_LABELS if label.endswith(" more") else label)
                        for label, bv, cv in _top_labels(part, cause, b, c))
    level = np.array([r[0] for r in rows], dtype="int64")
    bv = np.array([r[2] for r in rows], dtype="float64")
    cv = np.array([r[3] for r in rows], dtype="float64")
    data = pd.DataFrame({
        "index": pd.Series([r[1] for r in rows], dtype=object),
        "base_ms": bv / _NS_PER_MS, "base_share": _share(bv, b.total),
        "comp_ms": cv / _NS_PER_MS, "comp_share": _share(cv, c.total),
        "diff_ms": diff(bv, cv) / _NS_PER_MS, "diff_ratio": ratio(bv, cv),
        LEVEL: level,
        CAUSE_KEY: pd.Series([r[4] for r in rows], dtype=object),
        LABEL_KEY: pd.Series([r[5] for r in rows], dtype=object),
    })
    return Table(TABLE_NAME, COLUMNS, data, (1, 2), (3, 4), title="Where the time went (per step)",
                 notes=_notes(base, comp, b, c), lead=why(base, comp))


def _step_title(b: Means, c: Means) -> str:
    def count(m: Means) -> str:
        return f"{m.steps} step{'s' if m.steps != 1 else ''}" if m.steps else "no device activity"
    return f"Step time (mean of {count(b)} / {count(c)})" if (b.steps, c.steps) != (1, 1) else "Step time"


def _causes(part: str, b: Means, c: Means) -> list[str]:
    present = list(dict.fromkeys([k[1] for k in (*b.causes, *c.causes) if k[0] == part]))
    if part == IDLE:
        return [x for x in CAUSES if x in present]
    if part == COMMUNICATION:
        return [x for x in ("wait", "transmit", "not split") if x in present]
    total = {x: max(_get(b.causes, (part, x)), _get(c.causes, (part, x))) for x in present}
    return sorted(present, key=lambda x: -total[x])


def _top_labels(part: str, cause: str, b: Means, c: Means) -> list[tuple[str, float, float]]:
    """The cause's labels with the largest time or change; the rest summed in one row."""
    bl = b.labels.get((part, cause), {})
    cl = c.labels.get((part, cause), {})
    keys = list(dict.fromkeys([*bl, *cl]))
    if not keys or keys == [""]:
        return []
    rows = [(k, bl.get(k, 0.0), cl.get(k, 0.0)) for k in keys]
    rows.sort(key=lambda r: -max(r[1], r[2], abs(r[2] - r[1])))
    out = rows[:TOP_LABELS]
    rest = rows[TOP_LABELS:]
    if rest:
        out.append((f"{len(rest)} more", sum(r[1] for r in rest), sum(r[2] for r in rest)))
    return out


def _get(d: dict, key: object) -> float:
    return float(d.get(key, 0.0))


def _share(values: np.ndarray, total: float) -> np.ndarray:
    return values / total if total else np.zeros(len(values))


def _notes(base: StepExplanation, comp: StepExplanation, b: Means, c: Means) -> list[str]:
    notes = []
    if b.steps != c.steps:
        notes.append(f"per-step means: base averages {b.steps} step window(s), comparison {c.steps}"
                     + ("; a profile without step markers is one window (its E2E span)"
                        if not (base.has_steps and comp.has_steps) else ""))
    notes += [f"base: {n}" for n in base.notes] + [f"comparison: {n}" for n in comp.notes]
    if base.lag_ns is not None and comp.lag_ns is not None:
        notes.append(f"launch-bound evidence (medians over compute kernels): launch→start {base.lag_ns / 1e3:,.1f} µs "
                     f"with {base.queue_depth:g} queued ({feeding(base.lag_ns, base.queue_depth)}) → "
                     f"{comp.lag_ns / 1e3:,.1f} µs with {comp.queue_depth:g} queued "
                     f"({feeding(comp.lag_ns, comp.queue_depth)})")
    return notes


# ------------------------------------------------------------------------------ one side (info)

def side_summary(ex: StepExplanation, top: int = 3) -> dict[str, object]:
    """One profile's waterfall, JSON-ready (``info``): per-step means in ms of each part and
    cause with its ``top`` labels, each step's time, and the explanation's notes."""
    m = means(ex)
    parts = []
    for part in (COMPUTE, COMMUNICATION, IDLE):
        causes = []
        for cause in _causes(part, m, m):
            labels = sorted(m.labels.get((part, cause), {}).items(), key=lambda kv: -kv[1])[:top]
            causes.append({"cause": cause, "title": CAUSE_TITLE.get(cause, cause),
                           "ms": _get(m.causes, (part, cause)) / _NS_PER_MS,
                           "top": [{"label": str(k), "ms": v / _NS_PER_MS} for k, v in labels]})
        parts.append({"part": part, "title": PART_TITLE[part], "ms": _get(m.parts, part) / _NS_PER_MS, "causes": causes})
    return {"steps": ex.step_count, "has_steps": ex.has_steps, "step_ms": m.total / _NS_PER_MS,
            "per_step_ms": {str(k): v / _NS_PER_MS for k, v in ex.window_ns().items()},
            "parts": parts, "launch_lag_us": None if ex.lag_ns is None else ex.lag_ns / 1e3,
            "queue_depth": ex.queue_depth, "notes": list(ex.notes)}


def format_side(summary: dict[str, object]) -> list[str]:
    """:func:`side_summary` as indented lines: step time, parts, causes with their top labels."""
    total = float(summary["step_ms"])  # type: ignore[arg-type]
    n = int(summary["steps"])  # type: ignore[call-overload]
    what = (f"per step, mean of {n} step{'s' * (n != 1)}" if summary["has_steps"] else "the whole profile")
    parts: list[dict] = summary["parts"]  # type: ignore[assignment]
    width = max([len(p["title"]) + 2 for p in parts] + [len(c["title"]) for p in parts for c in p["causes"]])
    lines = [f"where the time went ({what})", f"  {'step time':<{width + 4}} {total:10.3f} ms"]

    def pct(ms: float) -> str:
        return f"{100 * ms / total:5.1f} %" if total else ""

    for part in parts:
        lines.append(f"    {part['title']:<{width + 2}} {part['ms']:10.3f} ms  {pct(part['ms'])}")
        for cause in part["causes"]:
            top = " · ".join(f"{t['label']} {t['ms']:.3f}" for t in cause["top"] if t["label"])
            lines.append(f"      {cause['title']:<{width}} {cause['ms']:10.3f} ms  {pct(cause['ms'])}"
                         + (f"  ({top})" if top else ""))
    if summary.get("launch_lag_us") is not None:
        lines.append(f"  launch→start {summary['launch_lag_us']:,.1f} µs, work queued at launch "
                     f"{summary['queue_depth']:g} (medians over compute kernels: "
                     f"{feeding(summary['launch_lag_us'] * 1e3, summary['queue_depth'])})")
    lines += [f"  note: {note}" for note in summary["notes"]]  # type: ignore[attr-defined]
    return lines


# ------------------------------------------------------------------------------ the sentence

_MIN_SHARE = 0.01  # a contributor is named when it moved at least this share of the total change
_MAX_NAMED = 5
_PER_CAUSE = 2  # labels of one cause named at most (the others make room for other causes)
_AUTOGRAD = "autograd::engine::evaluate_function: "


def why(base: StepExplanation, comp: StepExplanation) -> str:
    """``+8.70 ms/step (38.64 → 47.34 ms): device sync in aten::item +4.17 · …`` — the largest
    contributors to the change of the per-step time, in the direction of the change; launch-bound
    and device-side time are named as a whole (they spread over many ops), the others by label."""
    b, c = means(base), means(comp)
    if not b.steps or not c.steps:
        return ""
    total = (c.total - b.total) / _NS_PER_MS
    head = f"{total:+,.2f} ms/step ({b.total / _NS_PER_MS:,.2f} → {c.total / _NS_PER_MS:,.2f} ms)"
    sign = 1 if total >= 0 else -1
    named = [(key, text, d) for key, text, d in _contributors(b, c)
             if d * sign > 0 and abs(d) >= _MIN_SHARE * abs(total)]
    named.sort(key=lambda x: -abs(x[2]))
    per_cause: dict[tuple[str, str], int] = {}
    picked = []
    for key, text, d in named:
        per_cause[key] = per_cause.get(key, 0) + 1
        if per_cause[key] <= _PER_CAUSE:
            picked.append(f"{text} {d:+,.2f}")
    if not picked:
        return head + ": no single part moved more than 1 % of it"
    return head + ": " + " · ".join(picked[:_MAX_NAMED])


def _contributors(b: Means, c: Means) -> list[tuple[tuple[str, str], str, float]]:
    """(part and cause, phrase, diff in ms) at the level a user acts on."""
    out: list[tuple[tuple[str, str], str, float]] = []
    whole = {(IDLE, LAUNCH), (IDLE, DEVICE), (IDLE, UNKNOWN)}
    for key in dict.fromkeys([*b.causes, *c.causes]):
        part, cause = key
        moved = (_get(c.causes, key) - _get(b.causes, key)) / _NS_PER_MS
        if part == COMPUTE:
            out.append((key, f"{cause} kernels", moved))
        elif key in whole:
            out.append((key, CAUSE_TITLE[cause].split(" (")[0], moved))
        else:
            out += [(key, _phrase(part, cause, label), (cv - bv) / _NS_PER_MS)
                    for label, bv, cv in _top_labels(part, cause, b, c) if not label.endswith(" more")]
    return out


def _phrase(part: str, cause: str, label: str) -> str:
    label = label.replace(_AUTOGRAD, "")
    if part == COMMUNICATION:
        return f"exposed {cause if cause != 'not split' else 'communication'} in {label}"
    if cause == SYNC:
        return f"device sync in {label}"
    if cause == HOST and not label.startswith("host gap"):
        return f"idle while the host ran {label}"
    return label


def _cause_key(part: str, cause: str) -> str:
    return f"{part}: {cause}"


# ------------------------------------------------------------------------------ where it happened

WHERE_COLUMNS: tuple[Column, ...] = (
    Column("cause", "Cause", "key", "text", "", 24),
    Column("label", "Label", "key", "text", "", 40),
    Column("step", "Step", "key", "text", "", 10),
    Column("base_ms", "Time(ms)", "base", "float", "ms", 12),
    Column("base_n", "Intervals", "base", "int", "count", 10),
    Column("base_at", "First At(ms)", "base", "float", "ms", 12),
    Column("comp_ms", "Time(ms)", "comparison", "float", "ms", 12),
    Column("comp_n", "Intervals", "comparison", "int", "count", 10),
    Column("comp_at", "First At(ms)", "comparison", "float", "ms", 12),
    Column("diff_ms", "Diff(ms)", "diff", "float", "ms", 12),
)


def where_table(base: StepExplanation, comp: StepExplanation) -> Table:
    """Where each cause and label happened: per step (paired by position), its time, how many
    intervals and how far into the step the first began — the rows Enter on a StepTime row
    opens (a cause and a label's intervals are spread over the step; this says when)."""
    b, c = _where(base), _where(comp)
    keys = ["_cause", "label", "pos"]
    both = b.merge(c, on=keys, how="outer", suffixes=("_b", "_c"))
    # Steps are paired by position; a position one side lacks shows "—" for it.
    ids_b, ids_c = base.windows["step"].tolist(), comp.windows["step"].tolist()
    n = max(len(ids_b), len(ids_c))
    names = [_pair(ids_b[i] if i < len(ids_b) else None, ids_c[i] if i < len(ids_c) else None) for i in range(n)]
    step = np.asarray(names, dtype=object)[both["pos"].to_numpy(dtype="int64")] if n else np.empty(0, dtype=object)
    cause = both["_cause"].map(lambda k: CAUSE_TITLE.get(k.split(": ", 1)[1], k.split(": ", 1)[1]))
    data = pd.DataFrame({
        "cause": as_text(cause), "label": as_text(both["label"]), "step": pd.Series(step, dtype=object),
        "base_ms": both["ns_b"].fillna(0) / _NS_PER_MS, "base_n": both["n_b"].fillna(0).astype("int64"),
        "base_at": both["at_b"] / _NS_PER_MS,
        "comp_ms": both["ns_c"].fillna(0) / _NS_PER_MS, "comp_n": both["n_c"].fillna(0).astype("int64"),
        "comp_at": both["at_c"] / _NS_PER_MS,
        CAUSE_KEY: as_text(both["_cause"]),
    })
    data["diff_ms"] = diff(data["base_ms"], data["comp_ms"])
    data = data.sort_values(["diff_ms"], ascending=False, kind="stable").reset_index(drop=True)
    return Table(WHERE_TABLE, WHERE_COLUMNS, data, (3, 5), (6, 8),
                 title="Where each cause happened: per step, time, intervals, first offset (ms)",
                 default_sort="diff_ms")


def _where(ex: StepExplanation) -> pd.DataFrame:
    """Per (part and cause, label, step position): ns, intervals, first start from the step's
    start (made once per explanation)."""
    if "where" not in ex.memo:
        ex.memo["where"] = _where_rows(ex)
    return ex.memo["where"]  # type: ignore[return-value]


def _where_rows(ex: StepExplanation) -> pd.DataFrame:
    """:func:`_where`, grouped on integer codes (a large trace has hundreds of thousands of
    pieces)."""
    iv = ex.intervals
    w = ex.windows
    pos = pd.Index(w["step"].to_numpy()).get_indexer(iv["step"].to_numpy())
    starts = iv["start_ns"].to_numpy()
    part, cause = iv["part"].cat, iv["cause"].cat
    key_codes, keys = pd.factorize(part.codes.to_numpy().astype("int64") * len(cause.categories)
                                   + cause.codes.to_numpy())
    keys = [f"{part.categories[k // len(cause.categories)]}: {cause.categories[k % len(cause.categories)]}"
            for k in keys]
    label_codes, labels = iv["label"].cat.codes.to_numpy(), iv["label"].cat.categories
    df = pd.DataFrame({"k": key_codes, "l": label_codes, "pos": pos, "ns": iv["end_ns"].to_numpy() - starts,
                       "at": starts - w["start_ns"].to_numpy()[pos]})
    g = df.groupby(["k", "l", "pos"], sort=False).agg(ns=("ns", "sum"), n=("ns", "size"), at=("at", "min")).reset_index()
    return pd.DataFrame({"_cause": np.asarray(keys, dtype=object)[g["k"].to_numpy()],
                         "label": np.asarray(labels, dtype=object)[g["l"].to_numpy()],
                         "pos": g["pos"].to_numpy(), "ns": g["ns"].to_numpy(), "n": g["n"].to_numpy(),
                         "at": g["at"].to_numpy()})


def _pair(b: int | None, c: int | None) -> str:
    """A step position's label: its id, or both ids when they differ ("—" for a side without)."""
    if b == c and b is not None:
        return "whole profile" if b == WHOLE_PROFILE else str(b)
    return f"{'—' if b is None else b} / {'—' if c is None else c}"


# ------------------------------------------------------------------------------ per step

STEP_COLUMNS: tuple[Column, ...] = (
    Column("step", "Step", "key", "text", "", 12),
    Column("base_ms", "Step Time(ms)", "base", "float", "ms", 14),
    Column("comp_ms", "Step Time(ms)", "comparison", "float", "ms", 14),
    Column("diff_ms", "Diff(ms)", "diff", "float", "ms", 12),
    Column("diff_ratio", "Diff Ratio", "ratio", "percent", "", 10),
    Column("diff_compute", "Computing Diff(ms)", "diff", "float", "ms", 14),
    Column("diff_communication", "Communication Diff(ms)", "diff", "float", "ms", 14),
    *(Column(f"diff_{cause}", f"{cause.capitalize()} Diff(ms)", "diff", "float", "ms", 12) for cause in CAUSES),
)


def steps_table(base: StepExplanation, comp: StepExplanation) -> Table | None:
    """Per step (paired by position, as StepCompare pairs them): both step times and where the
    difference went; None when a side has no steps or both have one."""
    if not (base.has_steps and comp.has_steps) or (base.step_count == 1 and comp.step_count == 1):
        return None
    b, c = _per_step(base), _per_step(comp)
    n = max(len(b), len(c))
    b, c = b.reindex(range(n)), c.reindex(range(n))
    labels = [str(int(x)) if x == y else f"{_id(x)} / {_id(y)}" for x, y in zip(b["step"], c["step"])]
    data = pd.DataFrame({"step": labels, "base_ms": b["total"] / _NS_PER_MS, "comp_ms": c["total"] / _NS_PER_MS})
    data["diff_ms"] = diff(data["base_ms"], data["comp_ms"])
    data["diff_ratio"] = ratio(data["base_ms"], data["comp_ms"])
    for key in (COMPUTE, COMMUNICATION, *CAUSES):
        data[f"diff_{key}"] = diff(b[key], c[key]) / _NS_PER_MS
    return Table(STEPS_TABLE, STEP_COLUMNS, data, (1, 1), (2, 2),
                 title="Per step: step time and where its difference went (ms)",
                 notes=[] if len(base.windows) == len(comp.windows) else
                 [f"steps paired by position: base has {base.step_count}, comparison {comp.step_count}"])


def _id(x: float) -> str:
    return "—" if x != x else str(int(x))


def _per_step(ex: StepExplanation) -> pd.DataFrame:
    """One row per window: step id, window length, compute, communication and each idle cause
    (made once per explanation)."""
    if "per step" not in ex.memo:
        ex.memo["per step"] = _per_step_rows(ex)
    return ex.memo["per step"]  # type: ignore[return-value]


def prepare(ex: StepExplanation) -> None:
    """Make the one-side aggregates the StepTime tables read (:func:`means`, per step, where)
    now, in the explanation's memo: a comparison calls this where each side loads, so the
    tables themselves only put two sides together."""
    means(ex)
    _per_step(ex)
    _where(ex)


def _per_step_rows(ex: StepExplanation) -> pd.DataFrame:
    p = ex.parts()
    key = np.where(p["part"] == IDLE, p["cause"], p["part"])
    wide = p.assign(key=key).pivot_table(index="step", columns="key", values="ns", aggfunc="sum", fill_value=0)
    w = ex.window_ns()
    out = pd.DataFrame({"step": w.index.to_numpy(), "total": w.to_numpy()})
    for k in (COMPUTE, COMMUNICATION, *CAUSES):
        out[k] = wide[k].reindex(w.index).fillna(0).to_numpy() if k in wide else 0
    return out
