"""Why the device was idle: every idle nanosecond of a step gets exactly one cause.

Idle is what a step window holds besides Computing and uncovered communication — OverallMetrics'
Free Time. It is split in three passes (docs/explain.md has the rules with examples):

1. **Device activity that is not compute**: copies and memsets (``copy``, labelled by direction
   and memory kind: ``H2D copy (pageable)``), other tasks and stream waits (``device``).
2. **Nothing ran**: each such gap ends when the next device task starts. If that task's launch
   call had returned before the gap began, the device had work queued and did not start it
   (``device``: the gap between queued kernels, or a wait on another stream). Otherwise the
   device waited for the host: the part of the gap before the launch call began is explained by
   what the host was doing (:mod:`.host`, highest priority first: blocked in a device
   synchronisation → ``sync``; in a copy call → ``copy``; inside an op that launches device work
   → ``launch``, launch-bound; inside an op that launches none, a Python frame or a plain gap
   between ops → ``host``), the part after it began is that op's dispatch (``launch``). A gap
   before a task with no recorded launch is ``unknown``: the trace cannot tell.
3. **The queue a sync drained**: a synchronisation that blocks the host for *D* ns while the
   device works empties the queue the device would otherwise have drawn on later. The next *D* ns
   of the step in which the device then waits for the host (``launch`` or ``host`` time) are the
   sync's cost, and are given to it (``sync``, with the op that asked for it). Without this rule
   a ``.item()`` after the forward pass shows as a few µs of sync and milliseconds of
   "launch-bound" backward, although removing the sync would save the milliseconds.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..compat import factorize_text, one_text
from ..model import Profile
from ..timeline import Spans, first_come, overlaps
from .device import COPY, WAIT, DeviceItems, Pieces
from .host import COPY as COPY_ROLE
from .host import SYNC as SYNC_ROLE
from .host import IN_OP, HostLayers, Layer

SYNC, HOST, LAUNCH, COPY_CAUSE, DEVICE, UNKNOWN = "sync", "host", "launch", "copy", "device", "unknown"
#: Idle causes in the order they are shown.
CAUSES = (SYNC, HOST, LAUNCH, COPY_CAUSE, DEVICE, UNKNOWN)

BEFORE_FIRST_OP = "host gap before the step's first op"
BETWEEN_OPS = "host gap between ops"
AFTER_LAST_OP = "host gap after the step's last op"
QUEUED_SAME_STREAM = "gap between queued kernels (device-side)"
QUEUED_OTHER_STREAM = "queued work waiting on another stream"
NO_LAUNCH = "the next device task has no recorded launch"
NO_HOST = "no host activity recorded"
_NEVER = np.iinfo("int64").max
#: How a label names host time inside an op that launched nothing (``aten::foo (no device
#: work)``); a copy names its op with :data:`.host.IN_OP`. :func:`label_op` reads both back.
NO_DEVICE_WORK = " (no device work)"


class _Cut:
    """Disjoint intervals, each inside one window (``window``: its index)."""

    def __init__(self, start: np.ndarray, end: np.ndarray, window: np.ndarray) -> None:
        self.start, self.end, self.window = start, end, window

    def __len__(self) -> int:
        return len(self.start)

    def rows(self, which: np.ndarray) -> _Cut:
        return _Cut(self.start[which], self.end[which], self.window[which])

    def split(self, layer: Layer) -> tuple[_Cut, np.ndarray, _Cut]:
        """The parts under ``layer`` (with the label of the layer interval over each) and the
        parts outside it."""
        idx, lidx, s, e = overlaps(self.start, self.end, layer.start, layer.end)
        return _Cut(s, e, self.window[idx]), layer.label[lidx], self.minus(Spans.of(layer.start, layer.end))

    def minus(self, spans: Spans) -> _Cut:
        if not len(self) or not len(spans):
            return self
        lo = min(int(self.start.min()), int(spans.start[0]))
        hi = max(int(self.end.max()), int(spans.end[-1]))
        gaps = Spans.of(np.concatenate([[lo], spans.end]), np.concatenate([spans.start, [hi]]))
        idx, _, s, e = overlaps(self.start, self.end, gaps.start, gaps.end)
        return _Cut(s, e, self.window[idx])


Emit = Callable[[_Cut, str, "np.ndarray | str"], None]


def idle_pieces(profile: Profile, ws: np.ndarray, we: np.ndarray, busy: Spans, items: DeviceItems,
                copy_label: np.ndarray, layers: HostLayers) -> tuple[Pieces, np.ndarray]:
    """Every idle nanosecond of the windows ``[ws, we)`` (sorted, disjoint, may touch) — the
    windows minus ``busy`` — with its cause and label, and the window of each piece.
    ``copy_label`` describes each copy of ``items`` (``H2D copy (pageable) in aten::to``)."""
    out: list[Pieces] = []
    win: list[np.ndarray] = []

    def emit(cut: _Cut, cause: str, label: np.ndarray | str) -> None:
        if not len(cut):
            return
        # one_text: every cell holds the one object (np.full would make a str per cell), so the
        # intervals' Categoricals number the pieces by object (text_codes.categorical)
        lab = np.full(len(cut), one_text(label), dtype=object) if isinstance(label, str) else label
        out.append(Pieces(cut.start, cut.end, np.full(len(cut), one_text(cause), dtype=object), lab))
        win.append(cut.window)

    def cut(start: np.ndarray, end: np.ndarray) -> tuple[_Cut, np.ndarray]:
        """Intervals cut by the windows, and which input interval each part came from."""
        idx, w, s, e = overlaps(start, end, ws, we)
        return _Cut(s, e, w), idx

    rest = Spans.of(ws, we) - busy
    rest = _device_activity(profile, items, copy_label, rest, cut, emit)
    gaps, _ = cut(rest.start, rest.end)
    if not layers.has_host:
        emit(gaps, UNKNOWN, NO_HOST)
    else:
        _nothing_ran(profile, gaps, items, layers, ws, we, emit)
    pieces, window = _sorted(out, win)
    return _drain(pieces, window, layers, rest, we)


def _device_activity(profile: Profile, items: DeviceItems, copy_label: np.ndarray, idle: Spans,
                     cut: Callable[[np.ndarray, np.ndarray], tuple[_Cut, np.ndarray]], emit: Emit) -> Spans:
    """Pass 1: idle time in which a copy, another task or a stream wait ran (in that priority);
    returns the idle time in which nothing ran."""
    task = profile.kernels["task_type"].to_numpy(dtype=object)
    passes: tuple[tuple[np.ndarray, str, Callable[[np.ndarray], np.ndarray]], ...] = (
        (items.kind == COPY, COPY_CAUSE, lambda at: copy_label[at]),
        (~np.isin(items.kind, (COPY, WAIT)), DEVICE, lambda at: task[items.row[at]] + " task outside Computing"),
        (items.kind == WAIT, DEVICE, lambda at: "stream waits on an event (" + task[items.row[at]] + ")"),
    )
    for mask, cause, labels in passes:
        rows, s, e = first_come(items.start[mask], items.end[mask])
        idx, _, cs, ce = overlaps(s, e, idle.start, idle.end)
        pieces, part_of = cut(cs, ce)
        emit(pieces, cause, np.asarray(labels(np.flatnonzero(mask)[rows[idx]][part_of]), dtype=object))
        idle = idle - Spans.of(cs, ce)
    return idle


def _nothing_ran(profile: Profile, gaps: _Cut, items: DeviceItems, layers: HostLayers,
                 ws: np.ndarray, we: np.ndarray, emit: Emit) -> None:
    """Pass 2: a gap in which the device ran nothing, by the launch of the task that ended it
    (stream waits, event records and profiler markers are not work the device waited to run)."""
    items = items.take(items.kind != WAIT)
    n = len(items.start)
    nxt = np.searchsorted(items.start, gaps.start, side="left")
    has_next = nxt < n
    at = np.minimum(nxt, max(n - 1, 0))
    l_start = np.where(has_next, items.launch_start[at] if n else -1, _NEVER)
    l_end = np.where(has_next, items.launch_end[at] if n else -1, _NEVER)
    no_launch = has_next & (l_start < 0)
    queued = has_next & ~no_launch & (l_end <= gaps.start)
    waiting = np.flatnonzero(~no_launch & ~queued)

    emit(gaps.rows(no_launch), UNKNOWN, NO_LAUNCH)
    q = np.flatnonzero(queued)
    if len(q):
        stream = profile.kernels["stream"].to_numpy()
        prev = items.row[np.maximum(nxt[q] - 1, 0)]
        same = (nxt[q] > 0) & (stream[prev] == stream[items.row[nxt[q]]])
        emit(gaps.rows(q), DEVICE, np.where(same, one_text(QUEUED_SAME_STREAM), one_text(QUEUED_OTHER_STREAM)))

    g = gaps.rows(waiting)
    split = np.minimum(g.end, np.maximum(g.start, l_start[waiting]))
    host_part = _Cut(g.start, split, g.window)
    _host_state(host_part.rows(split > g.start), layers, ws, we, emit)
    dispatch = split < g.end
    lrow = items.launch_row[at[waiting[dispatch]]]
    role = layers.role[lrow] if len(lrow) else np.empty(0, dtype="int8")
    cause = np.select([role == SYNC_ROLE, role == COPY_ROLE], [one_text(SYNC), one_text(COPY_CAUSE)], one_text(LAUNCH))
    piece = _Cut(split[dispatch], g.end[dispatch], g.window[dispatch])
    for which in (SYNC, COPY_CAUSE, LAUNCH):
        sel = cause == which
        emit(piece.rows(sel), which, layers.label[lrow[sel]])


def _host_state(part: _Cut, layers: HostLayers, ws: np.ndarray, we: np.ndarray, emit: Emit) -> None:
    """The time the device waited for the host, by what the host was doing."""
    taken, label, rest = part.split(layers.sync)
    emit(taken, SYNC, label)
    taken, label, rest = rest.split(layers.copy)
    emit(taken, COPY_CAUSE, label)
    taken, label, rest = rest.split(layers.dispatch)
    emit(taken, LAUNCH, label)
    in_cpu_op, op_label, rest = rest.split(layers.cpu_ops)
    framed, frame_label, bare = in_cpu_op.split(layers.frames)
    emit(framed, HOST, frame_label)
    emit(bare, HOST, _label_of(bare, in_cpu_op, _suffixed(op_label, NO_DEVICE_WORK)))
    framed, frame_label, rest = rest.split(layers.frames)
    emit(framed, HOST, frame_label)
    noted, note_label, rest = rest.split(layers.annotations)
    emit(noted, HOST, _prefixed("host gap in ", note_label))
    emit(rest, HOST, _position(rest, layers, ws, we))


def label_op(cause: str, label: str) -> str:
    """The host op an idle label of ``cause`` names, "" when it names none (a Python frame, a
    host gap, a device task): what the Overall screen's `o` opens on the Operators screen."""
    if label.startswith("host gap"):
        return ""
    if IN_OP in label:
        return label.rpartition(IN_OP)[2]
    if label.endswith(NO_DEVICE_WORK):
        return label[: -len(NO_DEVICE_WORK)]
    return label if cause in (SYNC, LAUNCH) else ""


def _label_of(parts: _Cut, whole: _Cut, label: np.ndarray) -> np.ndarray:
    """The label of the interval of ``whole`` (disjoint) that holds each part."""
    if not len(parts):
        return np.empty(0, dtype=object)
    order = np.argsort(whole.start, kind="stable")
    at = np.searchsorted(whole.start[order], parts.start, side="right") - 1
    return label[order][at]


def _position(rest: _Cut, layers: HostLayers, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Where a host gap outside every op lies in its step: before the first op, after the last,
    or between ops."""
    if not len(rest):
        return np.empty(0, dtype=object)
    _, w, s, e = overlaps(layers.op_start, layers.op_end, ws, we)
    first = np.full(len(ws), _NEVER, dtype="int64")
    last = np.full(len(ws), -_NEVER, dtype="int64")
    np.minimum.at(first, w, s)
    np.maximum.at(last, w, e)
    out = np.full(len(rest), one_text(BETWEEN_OPS), dtype=object)
    out[rest.end <= first[rest.window]] = BEFORE_FIRST_OP
    out[rest.start >= last[rest.window]] = AFTER_LAST_OP
    return out


def _prefixed(prefix: str, label: np.ndarray) -> np.ndarray:
    return _each(label, lambda text: prefix + text)


def _suffixed(label: np.ndarray, suffix: str) -> np.ndarray:
    return _each(label, lambda text: text + suffix)


def _each(label: np.ndarray, edit: Callable[[str], str]) -> np.ndarray:
    """``edit`` applied once per distinct label (pieces repeat a few hundred labels)."""
    if not len(label):
        return label
    codes, uniq = factorize_text(label)
    return np.asarray([edit(str(u)) for u in uniq], dtype=object)[codes]


def _sorted(out: list[Pieces], win: list[np.ndarray]) -> tuple[Pieces, np.ndarray]:
    pieces = Pieces.concat(out)
    window = np.concatenate(win) if win else np.empty(0, dtype="int64")
    order = np.argsort(pieces.start, kind="stable")
    return pieces.take(order), window[order]


def _drain(pieces: Pieces, window: np.ndarray, layers: HostLayers, nothing_ran: Spans,
           we: np.ndarray) -> tuple[Pieces, np.ndarray]:
    """Pass 3: give each sync the waiting-for-host time its drained queue would have covered, in
    time order, within the sync's window (first come, first served among syncs)."""
    sync = layers.calls
    eligible = np.flatnonzero(np.isin(pieces.cause, (LAUNCH, HOST)))
    if not len(sync.start) or not len(eligible):
        return pieces, window
    # The device ran during this much of each sync call: the queue the call drained. Calls are
    # taken in time order; one made while an earlier one still blocked drained nothing more.
    order = np.argsort(sync.start, kind="stable")
    c_start, c_end = sync.start[order], sync.end[order]
    c_start = np.maximum(c_start, np.concatenate([[c_start[0]], np.maximum.accumulate(c_end)[:-1]]))
    c_end = np.maximum(c_end, c_start)
    idx, _, s, e = overlaps(c_start, c_end, nothing_ran.start, nothing_ran.end)
    idle_in = np.zeros(len(c_start), dtype="int64")
    np.add.at(idle_in, idx, e - s)
    debt = (c_end - c_start) - idle_in
    es, ee = pieces.start[eligible], pieces.end[eligible]
    length = ee - es
    cum = np.concatenate([[0], np.cumsum(length)])

    def before(t: np.ndarray) -> np.ndarray:
        """Eligible time before each instant ``t``."""
        i = np.maximum(np.searchsorted(es, t, side="right") - 1, 0)
        return np.where(t > es[0], cum[i] + np.clip(t - es[i], 0, length[i]), 0)

    owner = np.minimum(np.searchsorted(we, c_end, side="left"), len(we) - 1)
    begin, cap = before(c_end), before(we[owner])
    p = np.zeros(len(debt), dtype="int64")
    q = np.zeros(len(debt), dtype="int64")
    reached = 0
    # Sequential by nature (each sync's share starts where the previous one's ended); one
    # iteration per sync call, a handful per step.
    for j, (b, d, c) in enumerate(zip(begin.tolist(), debt.tolist(), cap.tolist())):
        p[j] = max(b, reached)
        q[j] = max(p[j], min(p[j] + max(d, 0), c))
        reached = max(reached, int(q[j]))
    take = q > p
    if not take.any():
        return pieces, window
    p, q = p[take], q[take]
    causes, labels = sync.cause[order][take], sync.label[order][take]
    # Cut the eligible time at every piece boundary and every share boundary.
    cuts = np.unique(np.concatenate([cum, p, q]))
    lo, hi = cuts[:-1], cuts[1:]
    piece = np.searchsorted(cum, lo, side="right") - 1
    src = eligible[piece]
    t0 = pieces.start[src] + (lo - cum[piece])
    j = np.searchsorted(p, lo, side="right") - 1
    owed = (j >= 0) & (lo < q[np.maximum(j, 0)])
    relabelled = Pieces(t0, t0 + (hi - lo), np.where(owed, causes[np.maximum(j, 0)], pieces.cause[src]).astype(object),
                        np.where(owed, labels[np.maximum(j, 0)], pieces.label[src]).astype(object))
    others = np.setdiff1d(np.arange(len(pieces.start)), eligible)
    return _sorted([pieces.take(others), relabelled], [window[others], window[src]])
