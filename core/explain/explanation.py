"""One profile's step explanation: every nanosecond of every step window, with what it was.

:func:`explain_profile` cuts the profile into step windows (:mod:`.windows`) and splits each into
three parts that add up to the window exactly, in integer ns:

* ``compute`` — OverallMetrics' Computing Time inside the window, by kernel class (``cause``) and
  kernel (``label``);
* ``communication`` — uncovered (exposed) communication, by ``wait`` / ``transmit`` (``not split``
  where the profile cannot tell them apart) and by ``group · collective``;
* ``idle`` — everything else (OverallMetrics' Free Time), by cause (:mod:`.idle`).

The result keeps the pieces themselves (``intervals``), so a screen can drill from a cause to
where it happened, and sums them per step (:meth:`StepExplanation.parts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compare.comm_groups import records_waits, wait_spans
from ..compare.device_sets import device_sets
from ..compare.equivalence import Equivalence, builtin_equivalence
from ..compare.kernel_families import kernel_classes
from ..compat import one_text
from ..model import Profile
from ..timeline import Spans, overlaps
from ..text_codes import categorical
from .device import COMPUTE as COMPUTE_TASK
from .device import COPY, DeviceItems, Pieces, communication_pieces, compute_pieces, copy_kinds, device_items
from .host import IN_OP, HostLayers, host_layers, outermost_ops, ranges
from .idle import idle_pieces
from .windows import WHOLE_PROFILE, step_windows

COMPUTE, COMMUNICATION, IDLE = "compute", "communication", "idle"
#: The parts of a step, in the order they are shown.
PARTS = (COMPUTE, COMMUNICATION, IDLE)
#: Memo keys of what the explanation made of its profile on the way.
ITEMS, TOP = "device items", "outermost ops"


@dataclass(frozen=True)
class StepExplanation:
    """Every window of a profile split into labelled pieces (see the module docstring)."""

    windows: pd.DataFrame  # step, start_ns, end_ns — in time order
    intervals: pd.DataFrame  # step, start_ns, end_ns, part, cause, label — in time order
    notes: tuple[str, ...] = field(default=())
    #: evidence for launch-bound time: the median over the kernels with a recorded launch of
    #: launch→start lag (ns) and queue depth (work launched and not yet started when it was
    #: launched); None without such kernels
    lag_ns: float | None = None
    queue_depth: float | None = None
    #: sums made once and read by every table (:meth:`parts`, :func:`.table.means`), and what
    #: the Timeline draws of the same profile (:meth:`device_items`, :meth:`outermost_ops`)
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def device_items(self, profile: Profile) -> DeviceItems:
        """:func:`~.device.device_items` of ``profile`` (the explained one), made once."""
        if ITEMS not in self.memo:
            self.memo[ITEMS] = device_items(profile)
        return self.memo[ITEMS]  # type: ignore[return-value]

    def outermost_ops(self, profile: Profile) -> np.ndarray:
        """:func:`~.host.outermost_ops` of ``profile`` (the explained one), made once."""
        if TOP not in self.memo:
            self.memo[TOP] = outermost_ops(profile, ranges(profile))
        return self.memo[TOP]  # type: ignore[return-value]

    @property
    def has_steps(self) -> bool:
        return bool(len(self.windows)) and int(self.windows["step"].iloc[0]) != WHOLE_PROFILE

    @property
    def step_count(self) -> int:
        return len(self.windows)

    def window_ns(self) -> pd.Series:
        """Length of each window, indexed by step."""
        w = self.windows
        return pd.Series((w["end_ns"] - w["start_ns"]).to_numpy(), index=w["step"].to_numpy(), dtype="int64")

    def parts(self) -> pd.DataFrame:
        """``step, part, cause, label, ns``: the pieces summed per step (int64 ns; for every step
        the rows add up to its window's length)."""
        if "parts" not in self.memo:
            iv = self.intervals
            ns = (iv["end_ns"] - iv["start_ns"]).astype("int64")
            parts = (iv.assign(ns=ns).groupby(["step", "part", "cause", "label"], sort=False,
                                              observed=True)["ns"].sum().reset_index())
            self.memo["parts"] = parts.astype({"part": object, "cause": object, "label": object})
        return self.memo["parts"]  # type: ignore[return-value]


def explain_profile(profile: Profile, equivalence: Equivalence | None = None,
                    classes: pd.DataFrame | None = None) -> StepExplanation:
    """The step explanation of ``profile``: kernel classes as ``classes`` gives them (the
    :func:`~perfcmp_core.compare.kernel_families.kernel_classes` table a comparison already
    made), else from ``equivalence``, by default the built-in table."""
    sets = device_sets(profile)
    windows = step_windows(profile, sets)
    if windows.empty:
        return StepExplanation(windows, _intervals([], []), ("no device activity and no steps: nothing to explain",))
    ws, we = windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy()
    items = device_items(profile)
    if classes is None:
        classes = kernel_classes(profile, equivalence or builtin_equivalence())
    compute = compute_pieces(profile, sets, items, classes.set_index("row"))
    comm = communication_pieces(profile, sets, _waits(profile))
    top = outermost_ops(profile, ranges(profile))
    copy_label, layers = _host(profile, items, top)
    idle, idle_window = idle_pieces(profile, ws, we, sets.compute | sets.uncovered, items, copy_label, layers)
    frames = []
    for part, pieces in ((COMPUTE, compute), (COMMUNICATION, comm)):
        idx, w, s, e = overlaps(pieces.start, pieces.end, ws, we)
        frames.append((part, Pieces(s, e, pieces.cause[idx], pieces.label[idx]), w))
    frames.append((IDLE, idle, idle_window))
    steps = windows["step"].to_numpy()
    intervals = _intervals([(part, p, steps[w]) for part, p, w in frames], list(sets.notes))
    notes = [*sets.notes, *_collection_notes(profile)]
    lag, depth = _queue(items, ws[0], we[-1])
    # Kept for the Timeline, which draws the same device items and outermost ops.
    return StepExplanation(windows, intervals, tuple(notes), lag, depth, memo={ITEMS: items, TOP: top})


def _waits(profile: Profile) -> Spans | None:
    """Where the profile waited for other ranks, when it can tell
    (:func:`~perfcmp_core.compare.comm_groups.records_waits`): the NPU communication tasks'
    counted ``Notify_Wait`` time. None — wait and transmit not told apart — otherwise."""
    return wait_spans(profile) if records_waits(profile) else None


def _queue(items: DeviceItems, lo: int, hi: int) -> tuple[float | None, float | None]:
    """Median launch→start lag and queue depth of the compute kernels started in ``[lo, hi)``:
    a device that starts each kernel microseconds after its launch with nothing else queued is
    waiting for the host (launch-bound); a long lag and a deep queue mean the host is ahead."""
    launched = items.launch_end >= 0
    if not launched.any():
        return None, None
    l_end = items.launch_end[launched]
    start = items.start[launched]
    mine = (items.kind[launched] == COMPUTE_TASK) & (start >= lo) & (start < hi)
    if not mine.any():
        return None, None
    t = l_end[mine]
    # Work launched by t (this kernel included) minus work started by t.
    depth = (np.searchsorted(np.sort(l_end), t, side="right") - np.searchsorted(np.sort(start), t, side="right") - 1)
    return float(np.median(np.maximum(start[mine] - t, 0))), float(np.median(np.maximum(depth, 0)))


#: a kernel queued behind at least this many others, or started this long after its launch, was
#: not waiting for the host
_QUEUED = 2
_LAG_NS = 100_000


def feeding(lag_ns: float, depth: float) -> str:
    """How the host fed the device, read from the launch evidence of :func:`_queue`: one owner for
    the verdict the StepTime notes and ``info`` print."""
    if depth < 1 and lag_ns < _LAG_NS:
        return "the device waits for the host"
    if depth >= _QUEUED or lag_ns >= _LAG_NS:
        return "the host runs ahead of the device"
    return "the host just keeps up"


def _host(profile: Profile, items: DeviceItems, top: np.ndarray) -> tuple[np.ndarray, HostLayers]:
    """Each copy task's description (``H2D copy (pageable) in aten::to``) and the host layers,
    which need to know the ops that copied host memory to the device (``top``: each op's
    outermost op, :func:`~.host.outermost_ops`)."""
    copy_label = np.full(len(items.row), "", dtype=object)
    is_copy = np.flatnonzero(items.kind == COPY)
    lrow = items.launch_row[is_copy]
    frame = top < 0
    outer = np.where(lrow >= 0, top[np.maximum(lrow, 0)] if len(top) else -1, -1)
    names = profile.ops["name"].to_numpy(dtype=object)
    where = np.where(outer >= 0, names[np.maximum(outer, 0)] if len(names) else "", "").astype(object)
    kind, h2d = copy_kinds(profile, items.row[is_copy], where)
    copy_label[is_copy] = np.where(where != "", kind + IN_OP + where, kind)
    launched = items.launch_row[items.launch_row >= 0]
    h2d &= lrow >= 0
    return copy_label, host_layers(profile, frame, top, launched, lrow[h2d], kind[h2d])


def _intervals(frames: list[tuple[str, Pieces, np.ndarray]], _notes: list[str]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame({"step": pd.Series(dtype="int64"), "start_ns": pd.Series(dtype="int64"),
                             "end_ns": pd.Series(dtype="int64"), "part": pd.Categorical([]),
                             "cause": pd.Categorical([]), "label": pd.Categorical([])})
    # Dictionary-encoded text: a large trace has hundreds of thousands of pieces and a few
    # hundred distinct labels, and every table groups by them.
    df = pd.DataFrame({
        "step": np.concatenate([f[2] for f in frames]).astype("int64"),
        "start_ns": np.concatenate([f[1].start for f in frames]).astype("int64"),
        "end_ns": np.concatenate([f[1].end for f in frames]).astype("int64"),
        "part": categorical(np.concatenate([np.full(len(f[1].start), one_text(f[0]), dtype=object) for f in frames])),
        "cause": categorical(np.concatenate([f[1].cause for f in frames]).astype(object)),
        "label": categorical(np.concatenate([f[1].label for f in frames]).astype(object)),
    })
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _collection_notes(profile: Profile) -> list[str]:
    """Profiler overhead: with stacks, shapes or memory recorded, host time per op is inflated,
    so launch-bound and host time are overstated against a minimal profile (the reference calls
    this "Not minimal profiling")."""
    meta = profile.meta
    on = [name for name, flag in (("with_stack", meta.with_stack), ("record_shapes", meta.record_shapes),
                                  ("profile_memory", meta.profile_memory)) if flag]
    if not on:
        return []
    frames = len(profile.pyfuncs)
    ops = int(np.count_nonzero(profile.among("ops", "cat", ("cpu_op",))))
    evidence = f"; {frames:,} Python frames recorded for {ops:,} ops" if frames else ""
    return [f"not minimal profiling ({', '.join(on)}{evidence}): the profiler's own host work inflates "
            "launch-bound and host time"]


def spans_of(explanation: StepExplanation, part: str) -> Spans:
    """The union of one part's intervals (for tests and drills)."""
    iv = explanation.intervals
    sel = iv["part"].to_numpy(dtype=object) == part
    return Spans.of(iv["start_ns"].to_numpy()[sel], iv["end_ns"].to_numpy()[sel])
