"""What is behind a number: the rows of another table that make up a row of the Overall or the
Kernels screen (issue 30 #14) — a kernel class's launching ops and kernels, a collective's
communication ops, an idle cause's host ops, a kernel's launching operators.

The app's `o` (and Enter where :data:`ENTER_OPENS` says so) shows what :func:`behind` returns
and nothing else: the correspondence is decided here, from the tables and the owners of their
row keys — the kernel classification (:mod:`.kernel_families`: every kernel has one class, and
``KernelOpCompare`` keys its time by launching op and class, so a class's rows there add up to
its ``KernelClassCompare`` row and to its StepTime computing row), and the step explanation's
idle labels (:func:`perfcmp_core.explain.idle.label_op` reads the op back out of a label).

OverallMetrics' classes are the reference's (Flash Attention / Conv forward and backward,
Matmul, Vector …; :mod:`.kernel_classes`): they are opened as the kernel classes they are made
of (:func:`overall_classes`). On GPU these are exactly the kernels of the row, except that a
copy kernel the device runs as a compute kernel (not a DMA: ``unrolled_elementwise_kernel`` of
``aten::copy_``) is Vector there and ``copy / cast / memset`` here (docs/tui.md says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from ..compat import as_text
from ..explain.idle import label_op
from ..explain.table import ALL_LABELS, CAUSE_KEY, LABEL_KEY
from .kernel_families import CLASS_SHEET, COMMUNICATION, OP_SHEET, OTHER
from .masks import BACKWARD_WORDS
from .result import IS_TOTAL, LEVEL, PARENT, Table

#: Tables on which Enter opens what is behind the row (elsewhere Enter folds a tree node or
#: opens the row's own detail; `o` opens what is behind on every table :func:`behind` knows).
ENTER_OPENS = frozenset({"OverallMetrics", CLASS_SHEET, OP_SHEET})


def enter_opens(table: Table, row: int) -> bool:
    """Whether Enter on row ``row`` of ``table`` opens what is behind it: on the tables of
    :data:`ENTER_OPENS`, except OverallMetrics' top rows that hold others (Computing Time, Free
    Time: Enter folds them, as in every outline)."""
    if table.name not in ENTER_OPENS:
        return False
    if table.name != "OverallMetrics" or LEVEL not in table.data:
        return True
    level = table.data[LEVEL].to_numpy()
    return bool(level[row] > 0 or row + 1 >= len(level) or level[row + 1] == 0)

COMMUNICATION_SHEET = "CommunicationCompare"
OPERATOR_SHEET = "OperatorCompareStatistic"
API_SHEET = "ApiCompare"
#: The built-in kernel classes (:mod:`.equivalence`, ``[kernel.*]`` labels) that OverallMetrics
#: names apart; every other class is its Vector.
ATTENTION, CONVOLUTION, GEMM, COPY = "attention", "convolution", "GEMM", "copy / cast / memset"
_NOT_VECTOR = frozenset({ATTENTION, CONVOLUTION, GEMM, COPY, COMMUNICATION, OTHER})
#: Kernel / op name words of paged attention (vLLM's ``paged_attention_v1``, the NPU's
#: PagedAttention): OverallMetrics' "Page Attention", not Flash Attention.
_PAGED = re.compile(r"paged_?attention", re.IGNORECASE)
_BACKWARD = re.compile("|".join(BACKWARD_WORDS), re.IGNORECASE)


@dataclass(frozen=True)
class Behind:
    """The rows behind a row: ``rows`` (positions into ``tables[table].data``), named ``label``
    on the screen that shows them."""

    table: str
    rows: np.ndarray
    label: str


def behind(tables: Mapping[str, Table], name: str, row: int) -> Behind | str:
    """The rows behind row ``row`` of table ``name``, or why there are none (one line)."""
    table = tables.get(name)
    if table is None or not 0 <= row < len(table.data):
        return "no row here"
    df = table.data
    if name in ("StepTime", "StepTimeWhere") and CAUSE_KEY in df:
        label_key = LABEL_KEY if name == "StepTime" else "label"
        return _cause(tables, str(df[CAUSE_KEY].iat[row]), str(df[label_key].iat[row]))
    if name == "OverallMetrics":
        return _overall(tables, str(df["index"].iat[row]).strip())
    if name == CLASS_SHEET:
        cls = str(df["cls"].iat[row])
        total = IS_TOTAL in df and bool(df[IS_TOTAL].iat[row])
        return _kernel_rows(tables, None if total else {cls},
                            "every kernel class" if total else f"{cls} kernels")
    if name == OP_SHEET:
        return _operators(tables, {str(df["op"].iat[row])}, str(df["op"].iat[row]))
    return f"{table.title or name}: no other table breaks this row down"


# ------------------------------------------------------------------------------ the step explanation
def _cause(tables: Mapping[str, Table], key: str, label: str) -> Behind | str:
    """A StepTime row (a cause and one of its labels, or ``[ TOTAL ]``): the kernels of a
    computing class, the collectives of uncovered communication, the host ops of an idle cause."""
    part, _, cause = key.partition(": ")
    whole = label == ALL_LABELS or not label
    if part == "compute":
        return _kernel_rows(tables, {cause}, f"{cause} kernels")
    if part == "communication":
        return _collectives(tables, None if whole else label)
    if part == "idle":
        labels = [label] if not whole else _labels_of(tables, key)
        ops = {op for op in (label_op(cause, lab) for lab in labels) if op}
        if not ops:
            return f"{label if not whole else cause}: no host op behind this idle time"
        return _operators(tables, ops, label if not whole else f"the ops of idle time ({cause})")
    return "a part of the step: o on one of its causes opens what is behind it"


def _labels_of(tables: Mapping[str, Table], key: str) -> list[str]:
    """Every label of cause ``key`` (StepTimeWhere lists all of them; StepTime the largest)."""
    where = tables.get("StepTimeWhere")
    if where is not None and CAUSE_KEY in where.data:
        df = where.data
        return list(pd.unique(as_text(df["label"][as_text(df[CAUSE_KEY]) == key])))
    step = tables["StepTime"].data
    labels = as_text(step[LABEL_KEY][as_text(step[CAUSE_KEY]) == key])
    return [lab for lab in pd.unique(labels) if lab != ALL_LABELS]


# ------------------------------------------------------------------------------ OverallMetrics
def overall_classes(row: str) -> tuple[frozenset[str] | None, str, bool | None] | None:
    """The kernel classes an OverallMetrics Computing row is made of, the launching ops' kind
    (``"paged"``, ``"flash"`` (not paged) or ``""``: any) and direction (True backward, False
    forward, None both); None for a row that is no kernel class. ``None`` classes: every class
    but communication (the Vector row: every class OverallMetrics does not name apart)."""
    head = row.split(" (")[0] if not row.startswith("SDMA") else "SDMA"
    backward = True if "(Backward)" in row else False if "(Forward)" in row else None
    if head == "Flash Attention":
        return frozenset({ATTENTION}), "flash", backward
    if head == "Page Attention":
        return frozenset({ATTENTION}), "paged", None
    if head == "Conv":
        return frozenset({CONVOLUTION}), "", backward
    if head in ("Matmul", "Cube"):
        return frozenset({GEMM}), "", None
    if head == "SDMA":
        return frozenset({COPY}), "", None
    if head == "Other":
        return frozenset({OTHER}), "", None
    if head == "Vector":
        return None, "", None
    return None if head != "Computing Time" else (None, "all", None)


def _overall(tables: Mapping[str, Table], row: str) -> Behind | str:
    if "Communication" in row or row in ("Wait", "Transmit") or " & " in row:
        return _collectives(tables, None)
    found = overall_classes(row)
    if found is None:
        return f"{row}: no kernels behind it (the idle causes are in StepTime, v)"
    classes, kind, backward = found
    ops = tables.get(OP_SHEET)
    if ops is None:
        return "the Kernels screen's KernelOpCompare has not arrived"
    df = ops.data
    cls = as_text(df["cls"])
    keep = ~(cls == COMMUNICATION).to_numpy() & ~_total(df)
    if classes is not None:
        keep &= cls.isin(list(classes)).to_numpy()
    else:  # Vector: what no other row names; Computing Time: every compute kernel
        keep &= ~cls.isin(list(_NOT_VECTOR if kind != "all" else (COMMUNICATION, COPY))).to_numpy()
    names = as_text(df["op"])
    if kind:
        paged = names.str.contains(_PAGED).to_numpy()
        if kind in ("paged", "flash"):
            keep &= paged if kind == "paged" else ~paged
    if backward is not None:
        bwd = names.str.rpartition("::")[2].str.contains(_BACKWARD).to_numpy()
        keep &= bwd if backward else ~bwd
    return Behind(OP_SHEET, np.flatnonzero(keep), f"{row} kernels")


# ------------------------------------------------------------------------------ the targets
def _total(df: pd.DataFrame) -> np.ndarray:
    return df[IS_TOTAL].to_numpy(dtype=bool) if IS_TOTAL in df else np.zeros(len(df), dtype=bool)


def _kernel_rows(tables: Mapping[str, Table], classes: set[str] | None, label: str) -> Behind | str:
    """KernelOpCompare's rows of ``classes`` (None: every row): the launching ops of those
    kernels with their kernels' time."""
    ops = tables.get(OP_SHEET)
    if ops is None:
        return "the Kernels screen's KernelOpCompare has not arrived"
    keep = ~_total(ops.data)
    if classes is not None:
        keep &= as_text(ops.data["cls"]).isin(list(classes)).to_numpy()
    if not keep.any():
        return f"{label}: no kernel of this class was launched"
    return Behind(OP_SHEET, np.flatnonzero(keep), label)


def _letters(texts: pd.Series) -> pd.Series:
    return texts.str.lower().str.replace(r"[^a-z]", "", regex=True)


def _collectives(tables: Mapping[str, Table], collective: str | None) -> Behind | str:
    """CommunicationCompare's communication ops (not their task rows), those of
    ``collective`` (``AllReduce`` matches ``allreduce`` and ``hcom_allReduce_``) when given."""
    comm = tables.get(COMMUNICATION_SHEET)
    if comm is None:
        return "no CommunicationCompare table in this run"
    df = comm.data
    keep = (df[PARENT].to_numpy() < 0) if PARENT in df else (
        df[LEVEL].to_numpy() == 0 if LEVEL in df else np.ones(len(df), dtype=bool))
    if collective is not None:
        want = re.sub(r"[^a-z]", "", collective.lower())
        hit = np.zeros(len(df), dtype=bool)
        for key in ("base_name", "comp_name"):
            hit |= _letters(as_text(df[key])).str.contains(want, regex=False).to_numpy()
        keep &= hit
    if not keep.any():
        return f"{collective}: no communication op of that kind"
    return Behind(COMMUNICATION_SHEET, np.flatnonzero(keep), collective or "communication")


def _operators(tables: Mapping[str, Table], ops: set[str], label: str) -> Behind | str:
    """The Operators screen's rows of ``ops`` (top-level operators by name), else the API
    screen's (every host op by name: an op that only runs inside others)."""
    for name in (OPERATOR_SHEET, API_SHEET):
        table = tables.get(name)
        if table is None:
            continue
        keep = as_text(table.data["name"]).isin(list(ops)).to_numpy() & ~_total(table.data)
        if keep.any():
            return Behind(name, np.flatnonzero(keep), label)
    return f"{label}: no operator row of that name"
