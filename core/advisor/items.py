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

import numpy as np
import pandas as pd

from ..model import Profile

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
    as its tasks; NPU Text as an HCCL op (``in_trace``) plus a ``kernel_details`` row; GPU as the
    NCCL kernel. One row per collective is kept. Stream waits and profiler markers are not work.
    """
    k = profile.kernels
    is_comm = k["is_comm"].to_numpy()
    in_trace = k["in_trace"].to_numpy()
    if profile.meta.kind == "npu_db":
        comm = is_comm & ~in_trace
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


