"""The advisor's unit of account: each piece of device work, counted once, with what it is called.

The advisor works on *items*: device work that occupies the accelerator — compute kernels, copy
tasks and collectives — taken from the one profile model so GPU traces, NPU Text and NPU Db
exports are read the same way. Each item keeps its launching host operator (a runtime launch call
such as ``cudaLaunchKernel`` is resolved to the operator around it) and a classification text
(kernel name | NPU op type | host op | core or task type) that :mod:`.categories` and
:mod:`.stages` match once per distinct text, not per item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..compat import factorize_text
from ..model import KERNELS, Profile, frame

if TYPE_CHECKING:
    from ..compare.equivalence import Equivalence

#: Host-op categories that are launch calls, not operators (the operator is their parent).
_RUNTIME_CATS = frozenset({"cuda_runtime", "runtime", "cuda_driver"})
#: Device tasks that are not work: stream waits, event records and profiler markers.
_NOT_WORK = re.compile(r"wait|event_record|place_holder|profiling_(?:en|dis)able", re.IGNORECASE)
#: Framework operators: the names a kernel's launching op has on every platform.
_FRAMEWORK_OP = re.compile(r"^(?:aten|c10d)::")
#: Trailing instance ids of HCCL op names (``hcom_allGather__101_2_1`` → ``hcom_allGather``).
_INSTANCE_SUFFIX = re.compile(r"_+\d+(?:_\d+)*$")
#: GPU copy-engine work: the kernel name ("Memcpy HtoD …") says more than the host op (aten::copy_).
_COPY_TASKS = ("gpu_memcpy", "gpu_memset")


@dataclass
class Items:
    """Device work of one profile, sorted by start (parallel arrays + the frame they came from)."""

    frame: pd.DataFrame  # start_ns, end_ns, dur_ns, step, is_comm, op_row, host_row, kernel_row
    text: pd.Series  # distinct lower-cased classification texts
    text_code: np.ndarray  # item → row of ``text``
    label: np.ndarray  # operator label per item (object array): NPU op type, host op or kernel name
    operator: np.ndarray  # framework operator per item (``aten::mm``): the same name on GPU and NPU


def climb(rows: np.ndarray, parent: np.ndarray, until: np.ndarray) -> np.ndarray:
    """The nearest row — ``rows`` itself or an ancestor along ``parent`` — where ``until`` holds;
    -1 where none does (and where ``rows`` is -1)."""
    rows = rows.copy()
    pending = np.flatnonzero(rows >= 0)
    while len(pending):
        pending = pending[~until[rows[pending]]]
        rows[pending] = parent[rows[pending]]
        pending = pending[rows[pending] >= 0]
    return rows


def host_rows(profile: Profile, op_row: np.ndarray) -> np.ndarray:
    """The operator behind each launch: ``op_row`` itself, or for a runtime launch call
    (``cudaLaunchKernel``) its nearest enclosing op that is not one. -1 stays -1."""
    ops = profile.ops
    if len(ops) == 0:
        return np.full(len(op_row), -1, dtype="int64")
    runtime = profile.among("ops", "cat", _RUNTIME_CATS)
    return climb(op_row, ops["parent"].to_numpy(), ~runtime)


def _framework_rows(profile: Profile, host: np.ndarray) -> np.ndarray:
    """The innermost ``aten::`` / ``c10d::`` op around each launch, -1 where there is none.

    GPU kernels are launched by the aten op itself (``aten::mm`` → cudaLaunchKernel), NPU kernels
    by an ``aclnn*`` launcher inside it (``aten::mm`` → ``aclnnMm``); collectives by
    ``nccl:*`` / ``Hccl*`` inside ``c10d::allgather_``: the framework op is the name both platforms
    share.
    """
    ops = profile.ops
    if len(ops) == 0:
        return np.full(len(host), -1, dtype="int64")
    return climb(host, ops["parent"].to_numpy(), _matches(profile, "ops", "name", _FRAMEWORK_OP))


def _pair_keys(start: np.ndarray, dur: np.ndarray, *more: np.ndarray) -> list[np.ndarray]:
    """One int64 key per (start, duration) pair, equal exactly where both are, for ``start,
    dur`` and each further (start, duration) couple in ``more``: the values are numbered once
    over all of them (a hash of int64s), where a two-level index hashed every row as a tuple."""
    starts, durs = [start, *more[0::2]], [dur, *more[1::2]]
    s = pd.factorize(np.concatenate(starts))[0].astype(np.int64)
    d = pd.factorize(np.concatenate(durs))[0].astype(np.int64)
    key = s * (int(d.max(initial=0)) + 1) + d
    return np.split(key, np.cumsum([len(x) for x in starts])[:-1])


def _collectives(profile: Profile) -> pd.DataFrame:
    """One row per collective (the item columns of ``kernels``, all of them from ``comm_ops``).

    ``comm_ops`` lists every collective once, for every loader (GPU NCCL kernels, NPU Text HCCL
    ops, NPU Db ``COMMUNICATION_OP``); its launching host op comes from the ``is_comm`` kernel row
    with the same start and duration (the loaders add the collectives to ``kernels`` for that
    link). Without ``comm_ops`` the ``is_comm`` kernel rows are the collectives, one per
    (start, duration).
    """
    k = profile.kernels
    rows = np.flatnonzero(k["is_comm"].to_numpy())
    # A linked row first, so that de-duplication keeps the launching op.
    rows = rows[np.argsort(k["op_row"].to_numpy()[rows] < 0, kind="stable")]
    ops = profile.comm_ops
    if len(ops) == 0:
        comm = pd.DataFrame({c: k[c].to_numpy()[rows] for c in (*_ITEM_COLUMNS, "stream")})  # what the items read
        return comm.drop_duplicates(["start_ns", "dur_ns"])
    # Each op's kernel row: the first (linked first) is_comm row with the op's start and duration.
    key, op_key = _pair_keys(k["start_ns"].to_numpy()[rows], k["dur_ns"].to_numpy()[rows],
                             ops["start_ns"].to_numpy(), ops["dur_ns"].to_numpy())
    keys, first = np.unique(key, return_index=True)
    at = np.minimum(np.searchsorted(keys, op_key), len(keys) - 1)
    hit = keys[at] == op_key if len(keys) else np.zeros(len(ops), dtype=bool)

    def found(column: str, missing: object) -> np.ndarray:
        values = k[column].to_numpy()
        if not len(keys):
            return np.full(len(ops), missing, dtype=values.dtype)
        values = values[rows[first[at]]]
        if values.dtype == object:  # as a missing cell reads after a reindex and fillna
            return pd.Series(np.where(hit, values, None), dtype=object).fillna(missing).to_numpy(dtype=object)
        return np.where(hit, values, missing)

    step = ops["step"].to_numpy()
    step = np.where(step >= 0, step, found("step", -1))
    flag = np.ones(len(ops), dtype=bool)
    return frame(KERNELS, {
        "name": ops["name"], "op_type": found("op_type", ""), "task_type": found("task_type", ""),
        "stream": found("stream", -1).astype("int64"), "start_ns": ops["start_ns"], "dur_ns": ops["dur_ns"],
        "step": step, "link": ops["link"], "op_row": found("op_row", -1).astype("int64"), "is_comm": flag,
        "in_trace": flag,
    }, n=len(ops))


def _collective_tasks(profile: Profile) -> np.ndarray:
    """Kernel rows that are parts of a collective rather than compute (per row of ``kernels``).

    NPU exports list HCCL tasks on the device timeline too: the Db flags them ``is_comm``, the
    Text export does not (its ``Ascend Hardware`` SDMA / Write Value tasks on the HCCL stream are
    the ``comm_tasks`` of the HCCL plane threads, with the same start and duration). Both are
    found here: a row that coincides with a ``comm_tasks`` row, any other ``is_comm`` row that is
    not a collective, a row whose ``kernel_details.csv`` core is HCCL, and every row on a stream
    (id ≥ 0) that carries such tasks — an HCCL stream runs nothing but its collectives' tasks (the
    Db also lists a task there that spans the whole collective).
    """
    k = profile.kernels
    tasks = profile.comm_tasks
    part = np.zeros(len(k), dtype=bool)
    if len(tasks):
        key, task_key = _pair_keys(k["start_ns"].to_numpy(), k["dur_ns"].to_numpy(),
                                   tasks["start_ns"].to_numpy(), tasks["dur_ns"].to_numpy())
        part = pd.Series(key).isin(task_key).to_numpy(copy=True)
    if profile.meta.kind != "gpu":
        # NPU: is_comm rows other than the HCCL op rows are tasks; so is a task that carries an
        # HCCL kernel_details row (Accelerator Core "HCCL").
        part |= k["is_comm"].to_numpy() & (k["task_type"].to_numpy(dtype=object) != "")
        part |= k["core"].to_numpy(dtype=object) == "HCCL"
    stream = k["stream"].to_numpy()
    hccl = np.unique(stream[part & (stream >= 0)])
    return part | np.isin(stream, hccl)


def _envelopes(k: pd.DataFrame, compute: np.ndarray) -> np.ndarray:
    """Compute rows without compute info that contain a compute row with it on the same stream.

    A stream runs its tasks one after another, so a task inside another of the same stream is a
    second description of the same work: the Db lists a mixed AIC/AIV kernel as a ``TASK`` row
    with ``COMPUTE_TASK_INFO`` and a bare ``TASK`` row around it (the Text export has only the
    first). The described row is kept.
    """
    out = np.zeros(len(k), dtype=bool)
    stream = k["stream"].to_numpy()
    details = k["has_details"].to_numpy()
    bare = np.flatnonzero(compute & ~details & (stream >= 0))
    inner = np.flatnonzero(compute & details & (stream >= 0))
    if len(bare) == 0 or len(inner) == 0:
        return out
    start, end = k["start_ns"].to_numpy(), k["start_ns"].to_numpy() + k["dur_ns"].to_numpy()
    outer = pd.DataFrame({"stream": stream[bare], "start_ns": start[bare], "row": bare}).sort_values("start_ns")
    probe = pd.DataFrame({"stream": stream[inner], "start_ns": start[inner], "end": end[inner]}).sort_values("start_ns")
    pairs = pd.merge_asof(probe, outer, on="start_ns", by="stream", direction="backward").dropna(subset=["row"])
    rows = pairs["row"].to_numpy(dtype="int64")
    out[rows[pairs["end"].to_numpy() <= end[rows]]] = True
    return out


#: The ``kernels`` columns of a work item (:func:`work_items`).
_ITEM_COLUMNS = ("name", "op_type", "task_type", "core", "start_ns", "dur_ns", "step", "op_row", "is_comm")


def work_items(profile: Profile) -> pd.DataFrame:
    """The :data:`_ITEM_COLUMNS` of the device work (and ``kernel_row``), each piece counted once.

    Collectives come from :func:`_collectives` (one row each, however many rows an export spends
    on it: Db op + tasks, Text op + ``kernel_details`` row, GPU NCCL kernel); compute is every other
    device task or ``kernel_details`` row that is not part of a collective
    (:func:`_collective_tasks`), a second description of a task (:func:`_envelopes`), a stream
    wait, an event record or a profiler marker.
    """
    k = profile.kernels
    compute = ~k["is_comm"].to_numpy() & (k["in_trace"].to_numpy() | k["has_details"].to_numpy())
    compute &= ~_collective_tasks(profile)
    compute &= ~(_matches(profile, "kernels", "task_type", _NOT_WORK)
                 | _matches(profile, "kernels", "name", _NOT_WORK))
    compute &= ~_envelopes(k, compute)
    collectives = _collectives(profile)
    # kernel_row: the row in ``Profile.kernels`` (-1 for collectives, which come from comm_ops),
    # where the profile's one kernel classification is looked up. Only the columns the items read
    # travel, each taken once in the final order (copying whole kernel rows through a mask, a
    # concatenation and a sort cost 0.25 s of a 500k-task side).
    rows = np.flatnonzero(compute)
    columns = {c: np.concatenate([k[c].to_numpy()[rows], collectives[c].to_numpy()]) for c in _ITEM_COLUMNS}
    columns["kernel_row"] = np.concatenate([rows, np.full(len(collectives), -1, dtype="int64")])
    work = np.flatnonzero(columns["dur_ns"] > 0)
    order = work[np.argsort(columns["start_ns"][work], kind="stable")]
    return pd.DataFrame({c: values[order] for c, values in columns.items()})


def _matches(profile: Profile, table: str, column: str, pattern: re.Pattern[str]) -> np.ndarray:
    """``pattern`` searched in every cell of ``profile.<table>[column]``, once per distinct text."""
    codes, distinct = profile.codes(table, column)
    if len(distinct) == 0:
        return np.zeros(len(codes), dtype=bool)
    hit = pd.Series(distinct, dtype=object).str.contains(pattern, regex=True).to_numpy(dtype=bool)
    return hit[codes]


def combined_codes(*columns: pd.Series | np.ndarray) -> np.ndarray:
    """One dense code per distinct combination of the text columns, numbered by first appearance
    (pairwise factorisation; each column numbered by object, :func:`~perfcmp_core.compat.factorize_text`)."""
    code = factorize_text(columns[0])[0].astype("int64")
    for col in columns[1:]:
        c, uniq = factorize_text(col)
        code = pd.factorize(code * max(len(uniq), 1) + c)[0].astype("int64")
    return code


def first_rows(code: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each code 0..max."""
    _, first = np.unique(code, return_index=True)
    return first


def short_label(text: pd.Series) -> pd.Series:
    """Readable operator names: ``void ns::kernel<…>(…)`` → ``ns::kernel``, HCCL instance ids
    dropped, at most 60 characters."""
    out = text.str.replace(r"^void\s+", "", regex=True).str.split(r"[<(]", n=1, regex=True).str[0]
    out = out.str.strip().str.replace(_INSTANCE_SUFFIX, "", regex=True)
    return out.where(out.str.len() <= 60, out.str.slice(0, 57) + "…")


def _class_rows(profile: Profile, host: np.ndarray,
                equivalence: Equivalence | None) -> tuple[np.ndarray, np.ndarray]:
    """The nearest op around each launch that belongs to a class of the equivalence table
    (docs/matching.md; -1 where none does), and the label of every op's class ("" for none)."""
    from ..compare.names import pairing_keys
    from ..options import CompareOptions

    ops = profile.ops
    if len(ops) == 0:
        return np.full(len(host), -1, dtype="int64"), np.zeros(0, dtype=object)
    cls = pairing_keys(ops["name"], CompareOptions(), equivalence=equivalence).cls
    return climb(host, ops["parent"].to_numpy(), cls != ""), cls


def build_items(profile: Profile, equivalence: Equivalence | None = None) -> Items:
    """The work items with their classification texts and operator labels.

    Label: the NPU op type when there is one, else (GPU copies aside) the launching host operator
    (``aten::mm``), else the kernel name — GPU kernel names are template signatures that say
    little on their own. Operator — what a GPU-vs-NPU difference can name on both sides: the
    class of the nearest op around the launch that the equivalence table knows
    (``flash attention`` for ``aten::_scaled_dot_product_flash_attention`` and for
    ``npu::npu_fusion_attention``; ``equivalence``: the run's table, None for the built-in one),
    else the framework op around the launch (:func:`_framework_rows`), else the launching op,
    else the label.
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
    code = combined_codes(*columns)
    first = first_rows(code)
    parts = [c.iloc[first].reset_index(drop=True) for c in columns]
    text = parts[0].str.cat(parts[1:], sep=" | ").str.lower()
    copy = k["task_type"].iloc[first].isin(_COPY_TASKS).to_numpy()
    base = np.where(parts[1] != "", parts[1],
                    np.where((parts[2] != "") & ~copy, parts[2], parts[0]))
    labels = short_label(pd.Series(base, dtype=object)).to_numpy(dtype=object)
    fw = _framework_rows(profile, host)
    operator = labels[code].copy()
    operator[linked] = host_name[linked]
    operator[fw >= 0] = profile.ops["name"].to_numpy(dtype=object)[fw[fw >= 0]]
    in_class, cls = _class_rows(profile, host, equivalence)
    operator[in_class >= 0] = cls[in_class[in_class >= 0]]
    table = pd.DataFrame({
        "start_ns": k["start_ns"].to_numpy(),
        "end_ns": k["start_ns"].to_numpy() + k["dur_ns"].to_numpy(),
        "dur_ns": k["dur_ns"].to_numpy(),
        "step": k["step"].to_numpy(),
        "is_comm": k["is_comm"].to_numpy(),
        "op_row": k["op_row"].to_numpy(),
        "host_row": host,
        "kernel_row": k["kernel_row"].to_numpy(dtype="int64"),
    })
    return Items(table, text, code, labels[code], operator)


