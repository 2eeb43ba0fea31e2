"""One step of one profile as timeline lanes: what ran where, relative to the step's start.

The Timeline screen draws a step of each side as horizontal lanes, so a user who reads "the
comparison is 8 ms later per step" can see *where in the step* it happens. This module says what
the lanes hold; :mod:`.bins` says what each terminal cell of a lane shows.

Lanes of a side, top to bottom (:data:`KINDS`):

* ``device`` — one per stream that ran work in the step, its items classed ``compute``,
  ``communication``, ``copy`` or ``wait`` (the kinds of :func:`~perfcmp_core.explain.device.
  device_items`), named by the class (GPU) or the task type (NPU: ``AI_CORE``, ``HCCL`` …) that
  holds most of its working time (waits count only on a stream that does nothing else);
  an item without a stream (an NPU HCCL op row) goes to a lane named by its class alone;
* ``host`` — per host thread, its outermost ops (ranges such as ``ProfilerStep#N`` and user
  annotations are not ops, :func:`~perfcmp_core.explain.host.ranges`);
* ``module`` — with stacks, the nn.Module frames of the first two module nesting levels holding
  more than one frame in the step (so a decoder layer that runs late shows as a shift);
* ``idle`` — the step explanation's idle pieces (:mod:`perfcmp_core.explain`), by cause: exactly
  the idle time the StepTime table sums.

Beside the lanes, not drawn: ``span`` rows, every nn.Module frame of the step at any depth
(nested, so not a lane), for `T` on a module row to mark where that module runs.

Lanes are titled short (``compute s7``, ``AI_CORE s2``, ``host t944``, ``modules L2``, ``idle``):
the titles take a fifth of an 80-column terminal.

Within a lane the items are made disjoint the way the step explanation splits overlaps: the one
that began first keeps the overlap (:func:`~perfcmp_core.timeline.first_come`), so a cell's
covered time never exceeds its length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..explain.device import COMMUNICATION, COMPUTE, COPY, WAIT, DeviceItems
from ..explain.explanation import IDLE, StepExplanation
from ..model import Profile
from ..timeline import first_come

#: Lane kinds, in drawing order.
DEVICE, HOST, MODULE, IDLE_LANE = "device", "host", "module", "idle"
KINDS = (DEVICE, HOST, MODULE, IDLE_LANE)
#: Rows that are no lane: every module frame of the step (:func:`_spans`).
SPAN = "span"
#: Device item classes (by :data:`~perfcmp_core.explain.device.COMPUTE` … codes).
CLASS_OF_KIND = {COMPUTE: "compute", COMMUNICATION: "communication", COPY: "copy", WAIT: "wait"}
#: The columns of a side's lane table (and of the Timeline table, which adds ``side``).
COLUMNS = ("lane", "kind", "start_ns", "end_ns", "name", "cls", "stream", "op")
#: Module nesting levels drawn at most.
MODULE_LANES = 2


def median_step(explanation: StepExplanation) -> int | None:
    """The step whose window length is the median of the side's (the lower middle one for an
    even count; the earliest of equal lengths): a typical step, not the warm-up; None without
    windows."""
    w = explanation.windows
    if w.empty:
        return None
    length = (w["end_ns"] - w["start_ns"]).to_numpy()
    order = np.lexsort((np.arange(len(length)), length))
    return int(w["step"].iloc[order[(len(order) - 1) // 2]])


def step_lanes(profile: Profile, explanation: StepExplanation, step: int) -> tuple[pd.DataFrame, int]:
    """The lanes of ``step`` (:data:`COLUMNS`, times relative to the window's start) and the
    window's length in ns."""
    w = explanation.windows
    row = w.index[w["step"].to_numpy() == step]
    if not len(row):
        raise KeyError(f"no step {step} in {profile.meta.source}")
    lo, hi = int(w.at[row[0], "start_ns"]), int(w.at[row[0], "end_ns"])
    top = explanation.outermost_ops(profile)
    parts = [_device(profile, explanation.device_items(profile), lo, hi, top), _host(profile, lo, hi, top),
             _modules(profile, lo, hi),
             _idle(explanation, step, lo), _spans(profile, lo, hi)]
    lanes = pd.concat([p for p in parts if len(p)] or [_frame({})], ignore_index=True)
    return lanes, hi - lo


_INT_COLUMNS = frozenset({"start_ns", "end_ns", "stream"})


def _frame(cols: dict[str, object]) -> pd.DataFrame:
    """A lane table with the fixed columns and dtypes (text as object); a column given as one
    value holds it on every row. Built from arrays of the final dtype: no conversion pass."""
    n = next((len(v) for v in cols.values() if isinstance(v, np.ndarray)), 0)
    out = {}
    for c in COLUMNS:
        v = cols.get(c, "" if c not in _INT_COLUMNS else 0)
        dtype = "int64" if c in _INT_COLUMNS else object
        out[c] = np.asarray(v, dtype=dtype) if isinstance(v, np.ndarray) else np.full(n, v, dtype=dtype)
    return pd.DataFrame(out, copy=False)


def _clip(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows overlapping ``[lo, hi)`` and their parts inside it, relative to ``lo``."""
    keep = np.flatnonzero((start < hi) & (end > lo))
    return keep, np.maximum(start[keep], lo) - lo, np.minimum(end[keep], hi) - lo


def _disjoint(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per lane, each item's first-come share (rows into the inputs, start, end): one loop per
    lane, a handful per step."""
    rows, s, e = [], [], []
    for name in pd.unique(lane):
        mine = np.flatnonzero(lane == name)
        r, a, b = first_come(start[mine], end[mine])
        rows.append(mine[r])
        s.append(a)
        e.append(b)
    if not rows:
        z = np.empty(0, dtype="int64")
        return z, z, z
    return np.concatenate(rows), np.concatenate(s), np.concatenate(e)


def _device(profile: Profile, items: DeviceItems, lo: int, hi: int, top: np.ndarray) -> pd.DataFrame:
    keep, s, e = _clip(items.start, items.end, lo, hi)
    if not len(keep):
        return _frame({})
    k = profile.kernels
    rows = items.row[keep]
    stream = k["stream"].to_numpy()[rows]
    cls = np.array([CLASS_OF_KIND[c] for c in range(4)], dtype=object)[items.kind[keep]]
    word = cls if profile.meta.kind == "gpu" else np.where(
        k["task_type"].to_numpy(dtype=object)[rows] != "", k["task_type"].to_numpy(dtype=object)[rows], cls)
    # A stream is named by the word holding most of its working time in the step: waits count
    # only on a stream that does nothing else (an NPU compute stream waits on events at length).
    work = (e - s) * (cls != "wait") + (cls == "wait")
    by = pd.DataFrame({"stream": stream, "word": word, "ns": work}).groupby(["stream", "word"], sort=True)["ns"].sum()
    main = by.sort_values(ascending=False, kind="stable").reset_index().drop_duplicates("stream").set_index("stream")["word"]
    lane = pd.Series(stream).map({x: f"{main[x]} s{x}" if x >= 0 else str(main[x])
                                  for x in main.index}).to_numpy(dtype=object)
    names = profile.ops["name"].to_numpy(dtype=object)
    lrow = items.launch_row[keep]
    outer = np.where(lrow >= 0, top[np.maximum(lrow, 0)] if len(top) else -1, -1)
    op = np.where(outer >= 0, names[np.maximum(outer, 0)] if len(names) else "", "").astype(object)
    r, s2, e2 = _disjoint(lane, s, e)
    return _frame({"lane": lane[r], "kind": DEVICE, "start_ns": s2, "end_ns": e2,
                   "name": k["name"].to_numpy(dtype=object)[rows[r]], "cls": cls[r], "stream": stream[r],
                   "op": op[r]})


def _host(profile: Profile, lo: int, hi: int, top: np.ndarray) -> pd.DataFrame:
    ops = profile.ops
    if not len(ops):
        return _frame({})
    outermost = np.flatnonzero(top == np.arange(len(top)))
    keep, s, e = _clip(ops["start_ns"].to_numpy()[outermost], ops["end_ns"].to_numpy()[outermost], lo, hi)
    if not len(keep):
        return _frame({})
    rows = outermost[keep]
    tid = ops["tid"].to_numpy()[rows]
    lane = np.array([f"host t{t}" for t in tid], dtype=object)
    r, s2, e2 = _disjoint(lane, s, e)
    names = ops["name"].to_numpy(dtype=object)[rows[r]]
    return _frame({"lane": lane[r], "kind": HOST, "start_ns": s2, "end_ns": e2, "name": names,
                   "cls": "op", "stream": np.full(len(r), -1), "op": names})


def module_level(pyfuncs: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each frame of ``rows``, how many nn.Module frames enclose it (its own not counted);
    walked up the parent links level by level, those frames at once (a step's window holds a
    few of a trace's frames: walking every frame's chain cost more than the rest of the lanes)."""
    parent = pyfuncs["parent"].to_numpy()
    is_module = pyfuncs["is_module"].to_numpy(dtype=bool)
    level = np.zeros(len(rows), dtype="int64")
    at = parent[rows]
    live = np.flatnonzero(at >= 0)
    while len(live):
        level[live] += is_module[at[live]]
        at[live] = parent[at[live]]
        live = live[at[live] >= 0]
    return level


def _module_frames(profile: Profile, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """The nn.Module frames overlapping the window: rows into ``pyfuncs``, their parts inside
    it (relative to ``lo``) and their names without the ``nn.Module:`` prefix."""
    pf = profile.pyfuncs
    mods = np.flatnonzero(pf["is_module"].to_numpy(dtype=bool)) if len(pf) else np.empty(0, dtype="int64")
    keep, s, e = _clip(pf["start_ns"].to_numpy()[mods], pf["end_ns"].to_numpy()[mods], lo, hi) if len(mods) \
        else (mods, mods, mods)
    rows = mods[keep]
    names = pd.Series(pf["name"].to_numpy(dtype=object)[rows], dtype=object)
    short = names.str.replace(r"^nn\.Module:\s*", "", regex=True).to_numpy(dtype=object)
    return rows, s, e, short


def _modules(profile: Profile, lo: int, hi: int) -> pd.DataFrame:
    rows, s, e, short = _module_frames(profile, lo, hi)
    if not len(rows):
        return _frame({})
    lv = module_level(profile.pyfuncs, rows)
    counts = pd.Series(lv).value_counts()
    levels = sorted(int(x) for x in counts.index[counts.to_numpy() > 1])[:MODULE_LANES]
    pick = np.isin(lv, levels)
    lane = np.array([f"modules L{x}" for x in lv[pick]], dtype=object)
    r, s2, e2 = _disjoint(lane, s[pick], e[pick])
    return _frame({"lane": lane[r], "kind": MODULE, "start_ns": s2, "end_ns": e2, "name": short[pick][r],
                   "cls": "module", "stream": np.full(len(r), -1), "op": ""})


def _spans(profile: Profile, lo: int, hi: int) -> pd.DataFrame:
    """Every module frame of the window, nested as they are (the lanes hold two levels, made
    disjoint): where `T` on a module row of any depth finds its module."""
    rows, s, e, short = _module_frames(profile, lo, hi)
    if not len(rows):
        return _frame({})
    return _frame({"lane": "", "kind": SPAN, "start_ns": s, "end_ns": e, "name": short, "cls": "module",
                   "stream": np.full(len(rows), -1), "op": ""})


def _idle(explanation: StepExplanation, step: int, lo: int) -> pd.DataFrame:
    iv = explanation.intervals
    sel = (iv["step"].to_numpy() == step) & (iv["part"].to_numpy(dtype=object) == IDLE)
    if not sel.any():
        return _frame({})
    s = iv["start_ns"].to_numpy()[sel] - lo
    return _frame({"lane": "idle", "kind": IDLE_LANE, "start_ns": s,
                   "end_ns": iv["end_ns"].to_numpy()[sel] - lo,
                   "name": iv["label"].to_numpy(dtype=object)[sel], "cls": iv["cause"].to_numpy(dtype=object)[sel],
                   "stream": np.full(int(sel.sum()), -1), "op": ""})
