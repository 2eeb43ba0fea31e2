"""One side's per-step values of every gated metric, warm-up steps left out.

The values come from the step explanation (:mod:`perfcmp_core.explain`): a step's E2E is its
window, and Computing, Uncovered Communication and Free are the window's three parts, so the
figures a gate checks are the ones ``StepTime`` shows and always add up. Leading warm-up steps
are dropped the way the advisor drops them (``[advisor] warmup_steps``, only when the profile has
more steps than that), and the explanation is cut down to the analysed steps, so the sentence
naming the top contributors (:func:`~perfcmp_core.explain.table.why`) describes the same steps.

``op:`` and ``module:`` metrics are *device time* in the sense of :mod:`perfcmp_core.device_time`
(every counted kernel's full duration, summed over streams) of the kernels launched under a
matching host op (at any depth) or inside a matching ``nn.Module`` frame, each kernel counted once
and in the step window it starts in. ``Mem Usage`` is a step's peak reserved device memory (the
level at the step's start counts: memory reserved earlier is still held).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..device_time import EXCLUDED, classify
from ..explain.explanation import COMMUNICATION, StepExplanation
from ..model import Profile
from ..timeline import innermost, nest, thread_key
from .spec import CAUSE, E2E, KERNEL, MEMORY, NOT_SPLIT, OP, PART, Metric


@dataclass(frozen=True)
class SideSeries:
    """Per-step values (ns, or bytes for memory) of one side, in analysed-step order."""

    label: str
    steps: tuple[int, ...]  # analysed windows (-1: a profile without steps, one window)
    warmup: tuple[int, ...]  # leading steps left out
    explanation: StepExplanation  # cut down to the analysed steps
    values: dict[str, np.ndarray]  # metric name → one value per analysed step
    #: metric name → whether the profile records it (memory samples; a pattern matching a kernel;
    #: communication split into wait and transmit)
    recorded: dict[str, bool]
    #: metric name → contributor label → per-step mean (what a failed check lists)
    parts: dict[str, dict[str, float]] = field(default_factory=dict)


def analysed(ex: StepExplanation, warmup: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(analysed, warm-up) window ids in time order: the first ``warmup`` steps are left out when
    the profile has more steps than that (the advisor's rule)."""
    ids = tuple(int(s) for s in ex.windows["step"])
    if ex.has_steps and len(ids) > warmup:
        return ids[warmup:], ids[:warmup]
    return ids, ()


def restrict(ex: StepExplanation, steps: tuple[int, ...]) -> StepExplanation:
    """``ex`` with only the windows ``steps`` and their pieces."""
    if len(steps) == len(ex.windows):
        return ex
    keep = ex.windows["step"].isin(steps).to_numpy()
    pieces = ex.intervals["step"].isin(steps).to_numpy()
    return StepExplanation(ex.windows[keep].reset_index(drop=True), ex.intervals[pieces].reset_index(drop=True),
                           ex.notes, ex.lag_ns, ex.queue_depth)


def side_series(profile: Profile, ex: StepExplanation, metrics: list[Metric], warmup: int) -> SideSeries:
    """Every metric of ``metrics`` per analysed step of ``profile`` (``ex``: its explanation)."""
    steps, warm = analysed(ex, warmup)
    cut = restrict(ex, steps)
    ids = pd.Index(cut.windows["step"].to_numpy())
    parts = cut.parts()
    values: dict[str, np.ndarray] = {}
    recorded: dict[str, bool] = {}
    contributors: dict[str, dict[str, float]] = {}
    n = max(len(ids), 1)
    kernels: _Kernels | None = None
    for metric in metrics:
        recorded[metric.name] = True
        if metric.kind == E2E:
            values[metric.name] = cut.window_ns().reindex(ids).to_numpy(dtype="float64")
        elif metric.kind in (PART, CAUSE, KERNEL):
            sel = parts["part"] == metric.part
            by = "cause"
            if metric.kind != PART:
                sel &= parts["cause"] == metric.cause
                by = "label"
            rows = parts[sel]
            if metric.kind == CAUSE and metric.part == COMMUNICATION and metric.cause != NOT_SPLIT:
                # wait / transmit exist only where the profile tells them apart
                causes = set(parts.loc[parts["part"] == COMMUNICATION, "cause"])
                recorded[metric.name] = not causes or causes != {NOT_SPLIT}
            values[metric.name] = _per_step(rows["step"], rows["ns"], ids)
            contributors[metric.name] = _means(rows[by], rows["ns"], n)
        elif metric.kind == MEMORY:
            recorded[metric.name] = len(profile.memory) > 0
            values[metric.name] = _peak_memory(profile, cut.windows)
        else:
            kernels = kernels or _Kernels.of(profile, cut.windows)
            names = (_op_matches(profile, kernels, metric.pattern) if metric.kind == OP
                     else _module_matches(profile, kernels, metric.pattern))
            hit = names != ""
            recorded[metric.name] = bool(hit.any())  # a pattern that matches nothing may be a typo
            values[metric.name] = _per_step(pd.Series(kernels.step[hit]), pd.Series(kernels.dur[hit]), ids)
            contributors[metric.name] = _means(pd.Series(names[hit], dtype=object),
                                               pd.Series(kernels.dur[hit]), n)
    return SideSeries(profile.meta.source, steps, warm, cut, values, recorded, contributors)


def _per_step(step: pd.Series, ns: pd.Series, ids: pd.Index) -> np.ndarray:
    if len(step) == 0:
        return np.zeros(len(ids), dtype="float64")
    sums = pd.Series(np.asarray(ns, dtype="float64")).groupby(np.asarray(step)).sum()
    return sums.reindex(ids, fill_value=0.0).to_numpy(dtype="float64")


def _means(label: pd.Series, ns: pd.Series, n: int) -> dict[str, float]:
    if len(label) == 0:
        return {}
    sums = pd.Series(np.asarray(ns, dtype="float64")).groupby(np.asarray(label, dtype=object)).sum() / n
    return {str(k): float(v) for k, v in sums.items()}


def _peak_memory(profile: Profile, windows: pd.DataFrame) -> np.ndarray:
    """Each window's peak reserved bytes: the largest sample inside it, or the level the last
    sample before it left (0 without samples)."""
    mem = profile.memory.sort_values("ts_ns", kind="stable")
    ts = mem["ts_ns"].to_numpy()
    level = mem["total_reserved_bytes"].to_numpy(dtype="float64")
    out = np.zeros(len(windows), dtype="float64")
    if len(ts) == 0:
        return out
    lo = np.searchsorted(ts, windows["start_ns"].to_numpy(), side="left")
    hi = np.searchsorted(ts, windows["end_ns"].to_numpy(), side="left")
    before = np.where(lo > 0, level[np.maximum(lo - 1, 0)], 0.0)
    for i, (a, b) in enumerate(zip(lo, hi)):  # one iteration per step; numpy over its samples
        out[i] = max(before[i], float(level[a:b].max()) if b > a else 0.0)
    return out


@dataclass(frozen=True)
class _Kernels:
    """The counted kernels that start inside an analysed window and were launched by a host op."""

    op_row: np.ndarray
    step: np.ndarray  # the window's step id
    dur: np.ndarray

    @classmethod
    def of(cls, profile: Profile, windows: pd.DataFrame) -> _Kernels:
        k = profile.kernels
        start = k["start_ns"].to_numpy()
        ws, we = windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy()
        at = np.searchsorted(ws, start, side="right") - 1
        inside = (at >= 0) & (start < we[np.maximum(at, 0)]) if len(ws) else np.zeros(len(k), dtype=bool)
        op_row = k["op_row"].to_numpy()
        keep = inside & (classify(profile) != EXCLUDED) & (op_row >= 0)
        return cls(op_row[keep], windows["step"].to_numpy()[at[keep]], k["dur_ns"].to_numpy()[keep])


def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def _name_hits(names: np.ndarray, pattern: str) -> np.ndarray:
    """Whether each name matches the shell-style ``pattern``, tested once per distinct name."""
    codes, uniques = pd.factorize(pd.Series(names, dtype=object))
    rx = _matcher(pattern)
    ok = np.array([bool(rx.match(str(u))) for u in uniques], dtype=bool)
    return ok[codes] if len(codes) else np.zeros(0, dtype=bool)


def _op_matches(profile: Profile, kernels: _Kernels, pattern: str) -> np.ndarray:
    """Per kernel, the innermost matching host op above its launch ("" for none), walking the op
    tree one level at a time for all kernels together."""
    ops = profile.ops
    names = ops["name"].to_numpy(dtype=object)
    hit = _name_hits(names, pattern)
    parent = ops["parent"].to_numpy()
    out = np.full(len(kernels.op_row), "", dtype=object)
    cur = kernels.op_row.copy()
    todo = cur >= 0
    while todo.any():
        idx = np.flatnonzero(todo)
        rows = cur[idx]
        found = hit[rows]
        out[idx[found]] = names[rows[found]]
        cur[idx] = parent[rows]
        todo[idx] = ~found & (parent[rows] >= 0)
    return out


def _module_matches(profile: Profile, kernels: _Kernels, pattern: str) -> np.ndarray:
    """Per kernel, the innermost matching ``nn.Module`` frame around its launching op's start on
    the op's thread ("" for none)."""
    frames = profile.pyfuncs
    out = np.full(len(kernels.op_row), "", dtype=object)
    if frames.empty or len(out) == 0:
        return out
    names = frames["name"].to_numpy(dtype=object)
    sel = frames["is_module"].to_numpy(dtype=bool) & _name_hits(names, pattern)
    if not sel.any():
        return out
    f = frames[sel]
    key = thread_key(f["pid"].to_numpy(), f["tid"].to_numpy())
    start, end = f["start_ns"].to_numpy(), f["end_ns"].to_numpy()
    parent, _ = nest(key, start, end)
    ops = profile.ops
    rows = kernels.op_row
    at = innermost(key, start, end, parent, thread_key(ops["pid"].to_numpy()[rows], ops["tid"].to_numpy()[rows]),
                   ops["start_ns"].to_numpy()[rows], strict=False)
    found = at >= 0
    out[found] = names[sel][at[found]]
    return out
