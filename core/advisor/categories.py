"""What each piece of device work is, and how much time each stage spends per category.

The advisor works on *items*: device work that occupies the accelerator — compute kernels, copy
tasks and collectives — taken from the one profile model so GPU traces, NPU Text and NPU Db
exports are read the same way. An item's category (FA / MatMul / Vector / Comm / Other) comes from
keyword lists matched against its kernel name, NPU op type, launching host op and core / task
type (``advisor.ini``); matching runs once per distinct combination, not per item.

Time per category is a sum of item durations; a stage's *busy time* is the union of its items'
intervals (the wall-clock time the device was working for that stage); *exposed* communication is
the part of the communication intervals during which no compute kernel of any stage runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import Profile
from ..timeline import Spans
from .rules import CATEGORIES, AdvisorConfig

COMM = CATEGORIES.index("Comm")
_OTHER = CATEGORIES.index("Other")
#: Host-op categories that are launch calls, not operators (the operator is their parent).
_RUNTIME_CATS = frozenset({"cuda_runtime", "runtime", "cuda_driver"})
#: Device tasks that are not work: stream waits and profiler markers.
_NOT_WORK = re.compile(r"wait|profiling_(?:en|dis)able", re.IGNORECASE)
#: Trailing instance ids of HCCL op names (``hcom_allGather__101_2_1`` → ``hcom_allGather``).
_INSTANCE_SUFFIX = re.compile(r"_+\d+(?:_\d+)*$")
#: GPU copy-engine work: the kernel name ("Memcpy HtoD …") says more than the host op (aten::copy_).
_COPY_TASKS = ("gpu_memcpy", "gpu_memset")


@dataclass
class Items:
    """Device work of one profile, sorted by start (parallel arrays + the frame they came from)."""

    frame: pd.DataFrame  # start_ns, end_ns, dur_ns, step, is_comm, op_row, host_row
    text: pd.Series  # distinct lower-cased classification texts
    text_code: np.ndarray  # item → row of ``text``
    label: np.ndarray  # operator label per item (object array)


def host_rows(profile: Profile, op_row: np.ndarray) -> np.ndarray:
    """The operator behind each launch: ``op_row`` itself, or for a runtime launch call
    (``cudaLaunchKernel``) its nearest enclosing op that is not one. -1 stays -1."""
    ops = profile.ops
    rows = op_row.copy()
    if len(ops) == 0:
        return np.full(len(rows), -1, dtype="int64")
    runtime = ops["cat"].isin(list(_RUNTIME_CATS)).to_numpy()
    parent = ops["parent"].to_numpy()
    pending = np.flatnonzero((rows >= 0) & runtime[np.clip(rows, 0, None)])
    while len(pending):
        rows[pending] = parent[rows[pending]]
        still = rows[pending] >= 0
        pending = pending[still]
        pending = pending[runtime[rows[pending]]]
    return rows


def work_items(profile: Profile) -> pd.DataFrame:
    """Rows of ``profile.kernels`` that are device work, each counted once.

    Collectives: NPU Db lists a collective as a ``COMMUNICATION_OP`` row (``in_trace`` False) *and*
    as its tasks; NPU Text as an HCCL op row (no task type, merged with its ``kernel_details`` row)
    plus its tasks on the HCCL stream; GPU as the NCCL kernel. One row per collective is kept. Stream waits and profiler markers are not work.
    """
    k = profile.kernels
    is_comm = k["is_comm"].to_numpy()
    in_trace = k["in_trace"].to_numpy()
    if profile.meta.kind == "npu_db":
        comm = is_comm & ~in_trace
    elif profile.meta.kind == "npu_text":  # the HCCL op row; its HCCL-stream tasks lie inside it
        comm = is_comm & in_trace & (k["task_type"].to_numpy() == "")
    else:
        comm = is_comm & in_trace
    compute = ~is_comm & (in_trace | k["has_details"].to_numpy())
    compute &= ~(_matches(k["task_type"], _NOT_WORK) | _matches(k["name"], _NOT_WORK))
    keep = (comm | compute) & (k["dur_ns"].to_numpy() > 0)
    return k[keep].reset_index(drop=True)


def _matches(column: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """``pattern`` searched in every cell, evaluated once per distinct value."""
    codes, uniques = pd.factorize(column.to_numpy(dtype=object))
    if len(uniques) == 0:
        return np.zeros(len(column), dtype=bool)
    hit = pd.Series(uniques, dtype=object).str.contains(pattern, regex=True).to_numpy(dtype=bool)
    return hit[codes]


def _codes(*columns: pd.Series) -> np.ndarray:
    """One dense code per distinct combination of the columns (pairwise factorisation)."""
    code = pd.factorize(columns[0].to_numpy(dtype=object))[0].astype("int64")
    for col in columns[1:]:
        c, uniq = pd.factorize(col.to_numpy(dtype=object))
        code = pd.factorize(code * max(len(uniq), 1) + c)[0].astype("int64")
    return code


def _first_rows(code: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each code 0..max."""
    _, first = np.unique(code, return_index=True)
    return first


def short_label(text: pd.Series) -> pd.Series:
    """Readable operator names: ``void ns::kernel<…>(…)`` → ``ns::kernel``, HCCL instance ids
    dropped, at most 60 characters."""
    out = text.str.replace(r"^void\s+", "", regex=True).str.split(r"[<(]", n=1, regex=True).str[0]
    out = out.str.strip().str.replace(_INSTANCE_SUFFIX, "", regex=True)
    return out.where(out.str.len() <= 60, out.str.slice(0, 57) + "…")


def build_items(profile: Profile) -> Items:
    """The work items with their classification texts and operator labels.

    Label: the NPU op type when there is one, else (GPU copies aside) the launching host operator
    (``aten::mm``), else the kernel name — GPU kernel names are template signatures that say
    little on their own.
    """
    k = work_items(profile)
    host = host_rows(profile, k["op_row"].to_numpy())
    host_name = np.full(len(k), "", dtype=object)
    linked = host >= 0
    host_name[linked] = profile.ops["name"].to_numpy(dtype=object)[host[linked]]
    name = k["name"].to_numpy(dtype=object)
    op_type = k["op_type"].to_numpy(dtype=object)
    core = np.where(k["core"].to_numpy(dtype=object) != "", k["core"].to_numpy(dtype=object),
                    k["task_type"].to_numpy(dtype=object))
    columns = [pd.Series(c, dtype=object) for c in (name, op_type, host_name, core)]
    code = _codes(*columns)
    first = _first_rows(code)
    parts = [c.iloc[first].reset_index(drop=True) for c in columns]
    text = parts[0].str.cat(parts[1:], sep=" | ").str.lower()
    copy = k["task_type"].iloc[first].isin(_COPY_TASKS).to_numpy()
    base = np.where(parts[1] != "", parts[1],
                    np.where((parts[2] != "") & ~copy, parts[2], parts[0]))
    labels = short_label(pd.Series(base, dtype=object)).to_numpy(dtype=object)
    frame = pd.DataFrame({
        "start_ns": k["start_ns"].to_numpy(),
        "end_ns": k["start_ns"].to_numpy() + k["dur_ns"].to_numpy(),
        "dur_ns": k["dur_ns"].to_numpy(),
        "step": k["step"].to_numpy(),
        "is_comm": k["is_comm"].to_numpy(),
        "op_row": k["op_row"].to_numpy(),
        "host_row": host,
    })
    return Items(frame, text, code, labels[code])


def classify(items: Items, cfg: AdvisorConfig) -> np.ndarray:
    """Category code (index into :data:`CATEGORIES`) of every item.

    Collectives flagged by the loader are Comm whatever their name; the rest take the first
    matching list in the order FA, Other (convolutions), MatMul, Comm, Vector, else Other.
    """
    cats = cfg.categories
    n = len(items.text)
    code = np.full(n, -1, dtype="int64")
    for name in ("FA", "Other", "MatMul", "Comm", "Vector"):
        hit = (code < 0) & cats[name].matches(items.text)
        code[hit] = CATEGORIES.index(name)
    code[code < 0] = _OTHER
    out = code[items.text_code]
    out[items.frame["is_comm"].to_numpy()] = COMM
    return out


def is_training(profile: Profile, items: Items, cfg: AdvisorConfig) -> str:
    """An example of backward / optimizer work when the profile has any (forward-backward flows,
    host ops or device items matching ``[training] markers``), else ``""``."""
    if len(profile.fwdbwd):
        return "forward→backward flows"
    names = pd.Series(pd.unique(profile.ops["name"].to_numpy(dtype=object)), dtype=object)
    hit = cfg.training.matches(names.str.lower())
    if hit.any():
        return str(names[hit].iloc[0])
    hit = cfg.training.matches(items.text)
    if hit.any():
        return str(items.text[hit].iloc[0]).split(" | ")[0]
    return ""


@dataclass
class Window:
    """Device time per analysis window (a step; the whole profile when there are no steps) and stage.

    Axis 0 is the window, axis 1 the stage code; the last stage index is the whole profile ("All").
    """

    cat_ns: np.ndarray  # (windows, stages + 1, categories): summed item durations
    busy_ns: np.ndarray  # (windows, stages + 1): union of the stage's item intervals
    exposed_ns: np.ndarray  # (windows, stages + 1): communication during which no compute runs


def _blocks(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-key interval unions in one pass: (key, start, end) of every merged block.

    Items are sorted by (key, start); a block ends where the next item of the same key starts
    after everything before it ended (touching intervals merge, as in :class:`Spans`).
    """
    if len(key) == 0:
        empty = np.empty(0, dtype="int64")
        return empty, empty, empty
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    reach = pd.Series(e).groupby(k).cummax().to_numpy()
    new = np.ones(len(k), dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(k) - 1)
    return k[first], s[first], reach[last]


def _covered(spans: Spans, x: np.ndarray) -> np.ndarray:
    """Length of ``spans`` before each time point ``x`` (a prefix sum over the normalised spans)."""
    if len(spans) == 0:
        return np.zeros(len(x), dtype="int64")
    length = spans.end - spans.start
    before = np.concatenate([[0], np.cumsum(length)])
    i = np.searchsorted(spans.start, x, side="right") - 1
    inside = np.where(i >= 0, np.minimum(x - spans.start[np.clip(i, 0, None)], length[np.clip(i, 0, None)]), 0)
    return before[np.clip(i, 0, None)] * (i >= 0) + inside


def measure(start: np.ndarray, end: np.ndarray, window: np.ndarray, stage: np.ndarray, cat: np.ndarray,
            n_windows: int, n_stages: int) -> Window:
    """Category sums, busy time and exposed communication per (window, stage), vectorised.

    Exposure is measured against the compute of all given items, so communication hidden behind
    another stage's (or step's) kernels counts as hidden.
    """
    width = n_stages + 1
    cat_ns = np.zeros((n_windows, width, len(CATEGORIES)), dtype="int64")
    np.add.at(cat_ns, (window, stage, cat), end - start)
    cat_ns[:, n_stages] = cat_ns[:, :n_stages].sum(axis=1)
    # Keys: (window, stage) for every stage, and (window, All) for the whole profile.
    key = np.concatenate([window * width + stage, window * width + n_stages])
    s2, e2 = np.concatenate([start, start]), np.concatenate([end, end])
    busy = np.zeros(n_windows * width, dtype="int64")
    bk, bs, be = _blocks(key, s2, e2)
    np.add.at(busy, bk, be - bs)
    is_comm = np.concatenate([cat, cat]) == COMM
    compute = Spans.of(start[cat != COMM], end[cat != COMM])
    ck, cs, ce = _blocks(key[is_comm], s2[is_comm], e2[is_comm])
    exposed = np.zeros(n_windows * width, dtype="int64")
    np.add.at(exposed, ck, (ce - cs) - (_covered(compute, ce) - _covered(compute, cs)))
    return Window(cat_ns, busy.reshape(n_windows, width), exposed.reshape(n_windows, width))
