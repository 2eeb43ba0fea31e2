"""Module comparison (ModuleCompareStatistic, ModuleCompare, ModuleTree) on hand-built profiles.

The main scenario (SYNTH_BASE / SYNTH_COMP) is the worked example of the spec (§3.10): a
DynamicNet_0 with Linear_0, ReLU_0, Linear_1, one backward flow into Linear_0, an SGD optimizer
step only in the base, and a Dropout_0 only in the comparison. The golden rows were produced by the
reference tool on the same events written as PyTorch-2 Kineto traces (python_function frames,
cpu_op/user_annotation ops, one 2 µs ``cudaLaunchKernel`` + kernel + ``ac2g`` flow per kernel
entry, ``fwdbwd`` flows):

    msprof-analyze compare -d comp.pt.trace.json -bp base.pt.trace.json -o out --force \\
        --enable_operator_compare --enable_communication_compare      # msprof-analyze 26.2.0

They reproduce the spec's §3.10 table (0.085 → 0.1365 ms, 160.59 %, …). The only deliberate
difference is ``Module Level`` (quirk 7): the reference writes the ``/`` count of the path on the
statistic sheet and depth + 1 on the detail sheet; we write the tree depth (top = 1) on both.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.modules import compare_modules
from perfcmp_core.timeline import innermost
from perfcmp_core.compare.result import IS_TOTAL, LEVEL, NODE, PARENT, Table
from perfcmp_core.timeline import nest
from perfcmp_core.model import FWDBWD, KERNELS, OPS, PYFUNCS, Profile, ProfileMeta, frame
from perfcmp_core.options import CompareOptions

# ---------------------------------------------------------------------------------------------
# Scenario (times in µs). Host pid 1: main thread tid 1, autograd thread tid 2.
# ---------------------------------------------------------------------------------------------

SYNTH_BASE = {
    "pyfuncs": [  # (name, tid, start, dur)
        ("train.py(50): <module>", 1, 0, 1000),
        ("train.py(30): step", 1, 10, 980),
        ("nn.Module: DynamicNet_0", 1, 100, 300),
        ("model.py(20): forward", 1, 102, 296),
        ("nn.Module: Linear_0", 1, 110, 70),
        ("nn.Module: ReLU_0", 1, 190, 40),
        ("nn.Module: Linear_1", 1, 300, 80),
    ],
    "ops": [  # (name, cat, tid, start, dur)
        ("ProfilerStep#1", "user_annotation", 1, 5, 990),
        ("aten::zeros", "cpu_op", 1, 20, 10),
        ("aten::linear", "cpu_op", 1, 115, 60),
        ("aten::addmm", "cpu_op", 1, 120, 50),
        ("aten::relu", "cpu_op", 1, 195, 30),
        ("aten::add", "cpu_op", 1, 240, 20),
        ("aten::linear", "cpu_op", 1, 305, 70),
        ("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 2, 500, 100),
        ("AddmmBackward0", "cpu_op", 2, 505, 90),
        ("aten::mm", "cpu_op", 2, 510, 40),
        ("Optimizer.step#SGD.step", "user_annotation", 1, 700, 100),
        ("aten::add_", "cpu_op", 1, 710, 20),
    ],
    # (kernel, launching tid, launch ts, kernel ts, kernel dur): each launch is a 2 µs
    # cudaLaunchKernel op on the launching thread.
    "kernels": [
        ("zeros_kernel", 1, 22, 25, 3),
        ("volta_sgemm_128x64_nn", 1, 125, 130, 30),
        ("relu_kernel", 1, 200, 205, 10),
        ("add_kernel", 1, 245, 250, 5),
        ("volta_sgemm_128x64_nn", 1, 310, 315, 40),
        ("mm_bwd_kernel", 2, 515, 520, 60),
        ("sgd_kernel", 1, 715, 720, 70),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 805, 810, 50),
    ],
    "fwdbwd": [(1, 120, 2, 505)],  # (start tid, start ts, end tid, end ts)
}

SYNTH_COMP = {
    "pyfuncs": [
        ("train.py(50): <module>", 1, 0, 1000),
        ("train.py(30): step", 1, 10, 980),
        ("nn.Module: DynamicNet_0", 1, 100, 300),
        ("model.py(20): forward", 1, 102, 296),
        ("nn.Module: Linear_0", 1, 110, 70),
        ("nn.Module: ReLU_0", 1, 190, 40),
        ("nn.Module: Dropout_0", 1, 232, 6),
        ("nn.Module: Linear_1", 1, 300, 80),
    ],
    "ops": [
        ("ProfilerStep#1", "user_annotation", 1, 5, 990),
        ("aten::zeros", "cpu_op", 1, 20, 10),
        ("aten::linear", "cpu_op", 1, 115, 60),
        ("aten::addmm", "cpu_op", 1, 120, 50),
        ("aten::relu", "cpu_op", 1, 195, 30),
        ("aten::dropout", "cpu_op", 1, 233, 4),
        ("aten::add", "cpu_op", 1, 240, 20),
        ("aten::linear", "cpu_op", 1, 305, 70),
        ("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 2, 500, 100),
        ("AddmmBackward0", "cpu_op", 2, 505, 90),
        ("aten::mm", "cpu_op", 2, 510, 40),
    ],
    "kernels": [
        ("zeros_kernel", 1, 22, 25, 3),
        ("volta_sgemm_128x64_nn", 1, 125, 130, 50),
        ("relu_kernel", 1, 200, 205, 10),
        ("dropout_kernel", 1, 234, 236, 4),
        ("add_kernel", 1, 245, 250, 7.5),
        ("volta_sgemm_128x64_nn", 1, 310, 315, 65),
        ("mm_bwd_kernel", 2, 515, 520, 90),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 805, 810, 60),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 1, 875, 880, 20),
    ],
    "fwdbwd": [(1, 120, 2, 505)],
}

_MAIN = "train.py(50): <module>;\ntrain.py(30): step"
_FWD = _MAIN + ";\nmodel.py(20): forward"

# Reference rows without Order Id (reference levels; ours are checked separately).
GOLDEN_STATISTIC = [
    ('nn.Module: DynamicNet', 1, '/ DynamicNet_0', '[ TOTAL ]', None, 0.005, 1, 0.085, None, 0.0075, 1, 0.1365, 0.05, 0, 1.6059, _MAIN, _MAIN),
    ('nn.Module: DynamicNet', 1, '/ DynamicNet_0', 'aten::add', 'add_kernel, [number: 1], [duration_ms: 0.005]\n', 0.005, 1, None, 'add_kernel, [number: 1], [duration_ms: 0.007]\n', 0.0075, 1, None, None, 0, 1.5, None, None),
    ('nn.Module: Linear', 2, '/ DynamicNet_0/ Linear_0', '[ TOTAL ]', None, 0.03, 1, 0.03, None, 0.05, 1, 0.05, 0.02, 0.02, 1.6667, _FWD, _FWD),
    ('nn.Module: Linear', 2, '/ DynamicNet_0/ Linear_0', 'aten::linear', 'volta_sgemm_128x64_nn, [number: 1], [duration_ms: 0.030]\n', 0.03, 1, None, 'volta_sgemm_128x64_nn, [number: 1], [duration_ms: 0.050]\n', 0.05, 1, None, None, 0.02, 1.6667, None, None),
    ('nn.Module: ReLU', 2, '/ DynamicNet_0/ ReLU_0', '[ TOTAL ]', None, 0.01, 1, 0.01, None, 0.01, 1, 0.01, 0, 0, 1, _FWD, _FWD),
    ('nn.Module: ReLU', 2, '/ DynamicNet_0/ ReLU_0', 'aten::relu', 'relu_kernel, [number: 1], [duration_ms: 0.010]\n', 0.01, 1, None, 'relu_kernel, [number: 1], [duration_ms: 0.010]\n', 0.01, 1, None, None, 0, 1, None, None),
    ('nn.Module: Linear', 2, '/ DynamicNet_0/ Linear_1', '[ TOTAL ]', None, 0.04, 1, 0.04, None, 0.065, 1, 0.065, 0.03, 0.03, 1.625, _FWD, _FWD),
    ('nn.Module: Linear', 2, '/ DynamicNet_0/ Linear_1', 'aten::linear', 'volta_sgemm_128x64_nn, [number: 1], [duration_ms: 0.040]\n', 0.04, 1, None, 'volta_sgemm_128x64_nn, [number: 1], [duration_ms: 0.065]\n', 0.065, 1, None, None, 0.03, 1.625, None, None),
    ('nn.Module: Linear', 3, '/[ BACKWARD ]/ DynamicNet_0/ Linear_0', '[ TOTAL ]', None, 0.06, 1, 0.06, None, 0.09, 1, 0.09, 0.03, 0.03, 1.5, _MAIN, _MAIN),
    ('nn.Module: Linear', 3, '/[ BACKWARD ]/ DynamicNet_0/ Linear_0', 'aten::mm', 'mm_bwd_kernel, [number: 1], [duration_ms: 0.060]\n', 0.06, 1, None, 'mm_bwd_kernel, [number: 1], [duration_ms: 0.090]\n', 0.09, 1, None, None, 0.03, 1.5, None, None),
    ('Optimizer.step#SGD.step', 1, '/Optimizer.step#SGD.step', '[ TOTAL ]', None, 0.07, 1, 0.07, None, 0, 0, 0, -0.07, -0.07, 0, _MAIN, None),
    ('Optimizer.step#SGD.step', 1, '/Optimizer.step#SGD.step', 'aten::add_', 'sgd_kernel, [number: 1], [duration_ms: 0.070]\n', 0.07, 1, None, None, 0, 0, None, None, -0.07, 0, None, None),
    ('nn.Module: Dropout', 2, '/ DynamicNet_0/ Dropout_0', '[ TOTAL ]', None, 0, 0, 0, None, 0.004, 1, 0.004, 0, 0, 'INF', None, _FWD),
    ('nn.Module: Dropout', 2, '/ DynamicNet_0/ Dropout_0', 'aten::dropout', None, 0, 0, None, 'dropout_kernel, [number: 1], [duration_ms: 0.004]\n', 0.004, 1, None, None, 0, 'INF', None, None),
]
OUR_STATISTIC_LEVELS = [1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2]

GOLDEN_DETAIL = [
    ('nn.Module: DynamicNet', 2, '/ DynamicNet_0', 'TOTAL', None, 5, 85, 'TOTAL', None, 7.5, 136.5, 51.5, 2.5, 1.6059, _MAIN, _MAIN),
    ('nn.Module: DynamicNet', 2, '/ DynamicNet_0', 'aten::add', 'add_kernel [duration: 5.0]\n', 5, None, 'aten::add', 'add_kernel [duration: 7.5]\n', 7.5, None, None, 2.5, 1.5, 'N/A', 'N/A'),
    ('nn.Module: Linear', 3, '/ DynamicNet_0/ Linear_0', 'TOTAL', None, 30, 30, 'TOTAL', None, 50, 50, 20, 20, 1.6667, _FWD, _FWD),
    ('nn.Module: Linear', 3, '/ DynamicNet_0/ Linear_0', 'aten::linear', 'volta_sgemm_128x64_nn [duration: 30.0]\n', 30, None, 'aten::linear', 'volta_sgemm_128x64_nn [duration: 50.0]\n', 50, None, None, 20, 1.6667, 'N/A', 'N/A'),
    ('nn.Module: ReLU', 3, '/ DynamicNet_0/ ReLU_0', 'TOTAL', None, 10, 10, 'TOTAL', None, 10, 10, 0, 0, 1, _FWD, _FWD),
    ('nn.Module: ReLU', 3, '/ DynamicNet_0/ ReLU_0', 'aten::relu', 'relu_kernel [duration: 10.0]\n', 10, None, 'aten::relu', 'relu_kernel [duration: 10.0]\n', 10, None, None, 0, 1, None, None),
    ('nn.Module: Dropout', 3, '/ DynamicNet_0/ Dropout_0', 'TOTAL', None, 0, 0, 'TOTAL', None, 4, 4, 4, 4, 'INF', None, _FWD),
    ('nn.Module: Dropout', 3, '/ DynamicNet_0/ Dropout_0', None, None, 0, None, 'aten::dropout', 'dropout_kernel [duration: 4.0]\n', 4, None, None, 4, 'INF', None, 'N/A'),
    ('nn.Module: Linear', 3, '/ DynamicNet_0/ Linear_1', 'TOTAL', None, 40, 40, 'TOTAL', None, 65, 65, 25, 25, 1.625, _FWD, _FWD),
    ('nn.Module: Linear', 3, '/ DynamicNet_0/ Linear_1', 'aten::linear', 'volta_sgemm_128x64_nn [duration: 40.0]\n', 40, None, 'aten::linear', 'volta_sgemm_128x64_nn [duration: 65.0]\n', 65, None, None, 25, 1.625, 'N/A', 'N/A'),
    ('nn.Module: Linear', 2, '/[ BACKWARD ]/ DynamicNet_0/ Linear_0', 'TOTAL', None, 60, 60, 'TOTAL', None, 90, 90, 30, 30, 1.5, _MAIN, _MAIN),
    ('nn.Module: Linear', 2, '/[ BACKWARD ]/ DynamicNet_0/ Linear_0', 'aten::mm', 'mm_bwd_kernel [duration: 60.0]\n', 60, None, 'aten::mm', 'mm_bwd_kernel [duration: 90.0]\n', 90, None, None, 30, 1.5, 'N/A', 'N/A'),
    ('Optimizer.step#SGD.step', 2, '/Optimizer.step#SGD.step', 'TOTAL', None, 70, 70, 'TOTAL', None, 0, 0, -70, -70, 0, _MAIN, None),
    ('Optimizer.step#SGD.step', 2, '/Optimizer.step#SGD.step', 'aten::add_', 'sgd_kernel [duration: 70.0]\n', 70, None, None, None, 0, None, None, -70, 0, None, None),
]
OUR_DETAIL_LEVELS = [1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _ns(us: float) -> int:
    return int(round(us * 1000))


def build(spec: dict, kind: str = "gpu") -> Profile:
    """A Profile as a loader would produce it: ops/pyfuncs sorted by (start, longer first) and
    nested per thread, each kernel linked (op_row) to its cudaLaunchKernel op."""
    pf = sorted(spec["pyfuncs"], key=lambda r: (r[2], -r[3]))
    pstart = np.array([_ns(r[2]) for r in pf], dtype="int64")
    pend = np.array([_ns(r[2] + r[3]) for r in pf], dtype="int64")
    ppar, pdep = nest(np.array([r[1] for r in pf], dtype="int64"), pstart, pend)
    pyfuncs = frame(PYFUNCS, {
        "name": [r[0] for r in pf], "pid": [1] * len(pf), "tid": [r[1] for r in pf],
        "start_ns": pstart, "end_ns": pend,
        "is_module": [r[0].lower().startswith("nn.module:") for r in pf], "parent": ppar, "depth": pdep,
    })
    ops = [(n, c, t, s, d, -1) for n, c, t, s, d in spec["ops"]]
    ops += [("cudaLaunchKernel", "cuda_runtime", k[1], k[2], 2, i) for i, k in enumerate(spec["kernels"])]
    ops.sort(key=lambda r: (r[3], -r[4]))
    ostart = np.array([_ns(r[3]) for r in ops], dtype="int64")
    oend = np.array([_ns(r[3] + r[4]) for r in ops], dtype="int64")
    opar, odep = nest(np.array([r[2] for r in ops], dtype="int64"), ostart, oend)
    launch_row = {r[5]: i for i, r in enumerate(ops) if r[5] >= 0}
    opsdf = frame(OPS, {
        "name": [r[0] for r in ops], "cat": [r[1] for r in ops], "pid": [1] * len(ops),
        "tid": [r[2] for r in ops], "start_ns": ostart, "end_ns": oend, "parent": opar, "depth": odep,
        "is_step": [r[0].startswith("ProfilerStep#") for r in ops],
    })
    ks = spec["kernels"]
    kernels = frame(KERNELS, {
        "name": [k[0] for k in ks], "task_type": ["kernel"] * len(ks), "stream": [7] * len(ks),
        "start_ns": [_ns(k[3]) for k in ks], "dur_ns": [_ns(k[4]) for k in ks],
        "link": list(range(1, len(ks) + 1)), "op_row": [launch_row[i] for i in range(len(ks))],
        "in_trace": [True] * len(ks), "is_comm": [k[0].lower().startswith("nccl") for k in ks],
    })
    fw = spec["fwdbwd"]
    fwdbwd = frame(FWDBWD, {
        "id": list(range(1, len(fw) + 1)), "start_ts_ns": [_ns(f[1]) for f in fw],
        "start_tid": [f[0] for f in fw], "end_ts_ns": [_ns(f[3]) for f in fw],
        "end_pid": [1] * len(fw), "end_tid": [f[2] for f in fw],
    })
    return Profile(ProfileMeta(kind=kind, source="synthetic"), kernels=kernels, ops=opsdf,
                   pyfuncs=pyfuncs, fwdbwd=fwdbwd)


def _cell(value: object, role: str) -> object:
    """Normalise a cell the way the reference writes it: blank → None, inf → 'INF', diffs rounded
    to 2 and ratios to 4 decimals (we keep them unrounded; the writer rounds for display)."""
    if isinstance(value, str):
        return value or None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    v = float(value)
    if math.isinf(v):
        return "INF"
    if role == "diff":
        return round(v, 2) + 0.0
    if role == "ratio":
        return round(v, 4)
    return round(v, 9)


def _rows(table: Table, skip: tuple[str, ...] = ("order", "module_level")) -> list[tuple]:
    cols = [c for c in table.sheet_columns() if c.key not in skip]
    return [tuple(_cell(rec[c.key], c.role) for c in cols) for rec in table.visible().to_dict("records")]


def _golden(rows: list[tuple]) -> list[tuple]:
    """Golden rows without the Module Level column, numbers normalised like ours."""
    out = []
    for row in rows:
        row = row[:1] + row[2:]
        out.append(tuple(round(float(v), 9) if isinstance(v, (int, float)) else v for v in row))
    return out


@pytest.fixture(scope="module")
def result():
    res, reason = compare_modules(build(SYNTH_BASE), build(SYNTH_COMP), CompareOptions())
    assert reason == ""
    return res


# ---------------------------------------------------------------------------------------------
# Reference parity on the worked example
# ---------------------------------------------------------------------------------------------


def test_statistic_matches_reference(result):
    t = result.statistic
    assert t.name == "ModuleCompareStatistic"
    assert [c.header for c in t.sheet_columns()] == [
        "Order Id", "Module Class", "Module Level", "Module Name", "Operator Name", "Kernel Details",
        "Device Self Time(ms)", "Number", "Device Total Time(ms)", "Kernel Details",
        "Device Self Time(ms)", "Number", "Device Total Time(ms)", "Device Total Time Diff(ms)",
        "Device Self Time Diff(ms)", "Diff Total Ratio", "Base Call Stack", "Comparison Call Stack",
    ]
    assert [c.width for c in t.sheet_columns()] == [10, 20, 15, 35, 25, 20, 20, 10, 20, 20, 20, 10, 20, 20, 20, 15, 30, 30]
    assert (t.base_span, t.comp_span) == ((5, 8), (9, 12))  # F1:I1, J1:M1
    assert _rows(t) == _golden(GOLDEN_STATISTIC)
    assert t.data["order"].tolist() == list(range(1, 15))
    assert t.data["module_level"].tolist() == OUR_STATISTIC_LEVELS
    assert t.data[IS_TOTAL].tolist() == [True, False] * 7


def test_detail_matches_reference(result):
    t = result.detail
    assert t.name == "ModuleCompare"
    assert [c.header for c in t.sheet_columns()] == [
        "Order Id", "Module Class", "Module Level", "Module Name", "Operator Name", "Kernel Details",
        "Device Self Time(us)", "Device Total Time(us)", "Operator Name", "Kernel Details",
        "Device Self Time(us)", "Device Total Time(us)", "Device Total Time Diff(us)",
        "Device Self Time Diff(us)", "Diff Total Ratio", "Base Call Stack", "Comparison Call Stack",
    ]
    assert [c.width for c in t.sheet_columns()] == [10, 20, 15, 35, 25, 20, 20, 20, 25, 20, 20, 20, 20, 20, 15, 30, 30]
    assert (t.base_span, t.comp_span) == ((4, 7), (8, 11))  # E1:H1, I1:L1
    assert _rows(t) == _golden(GOLDEN_DETAIL)
    assert t.data["module_level"].tolist() == OUR_DETAIL_LEVELS
    assert t.data[IS_TOTAL].tolist() == [True, False] * 7


def test_unrounded_values_are_kept(result):
    """Self diff of DynamicNet_0 is 2.5 µs = 0.0025 ms; the reference's cell shows 0 (rounded)."""
    st = result.statistic.data
    assert st.loc[0, "diff_self"] == pytest.approx(0.0025)
    assert st.loc[0, "diff_total"] == pytest.approx(0.0515)
    assert st.loc[0, "ratio"] == pytest.approx(136.5 / 85)


# ---------------------------------------------------------------------------------------------
# Tree for the TUI
# ---------------------------------------------------------------------------------------------


def test_tree_links_and_values(result):
    t = result.tree
    d = t.data
    assert t.name == "ModuleTree"
    assert d["module"].tolist() == [
        "DynamicNet_0", "Linear_0", "ReLU_0", "Dropout_0", "Linear_1",
        "Optimizer.step#SGD.step", "[ BACKWARD ]", "DynamicNet_0/ Linear_0",
    ]
    by_node = dict(zip(d[NODE], d["module"]))
    parents = [by_node.get(p, None) for p in d[PARENT]]
    # The backward pseudo-modules fold under a [ BACKWARD ] root (its total: theirs).
    assert parents == [None, "DynamicNet_0", "DynamicNet_0", "DynamicNet_0", "DynamicNet_0", None, None,
                       "[ BACKWARD ]"]
    assert d[LEVEL].tolist() == [0, 1, 1, 1, 1, 0, 0, 1]
    assert d["base_self"].tolist() == [5.0, 30.0, 10.0, 0.0, 40.0, 70.0, 0.0, 60.0]
    assert d["base_total"].tolist() == [85.0, 30.0, 10.0, 0.0, 40.0, 70.0, 60.0, 60.0]
    assert d["comp_self"].tolist() == [7.5, 50.0, 10.0, 4.0, 65.0, 0.0, 0.0, 90.0]
    assert d["comp_total"].tolist() == [136.5, 50.0, 10.0, 4.0, 65.0, 0.0, 90.0, 90.0]
    assert d["diff_total"].tolist() == [51.5, 20.0, 0.0, 4.0, 25.0, -70.0, 30.0, 30.0]
    assert d["ratio"].tolist()[3] == math.inf and d["ratio"].tolist()[5] == 0.0
    assert d["_path"].tolist()[1] == "/ DynamicNet_0/ Linear_0"
    assert d["_base_stack"].tolist()[1] == _FWD
    assert d["_comp_stack"].tolist()[5] == ""  # no optimizer step in the comparison


# ---------------------------------------------------------------------------------------------
# Behaviour beyond the worked example
# ---------------------------------------------------------------------------------------------


def test_kernels_launched_on_another_thread_are_not_charged():
    """A kernel launched from tid 3 while Linear_0 runs on tid 1 is not Linear_0's (the reference,
    nesting across threads by time only, would charge it)."""
    spec = {**SYNTH_BASE, "kernels": SYNTH_BASE["kernels"] + [("side_kernel", 3, 150, 900, 8)]}
    res, _ = compare_modules(build(spec), build(SYNTH_COMP), CompareOptions())
    tree = res.tree.data.set_index("module")
    assert tree.loc["Linear_0", "base_total"] == 30.0
    assert tree.loc["DynamicNet_0", "base_total"] == 85.0
    assert res.statistic.notes[0] == ("base: 3 kernels are charged to no module (0 without a launching host "
                                      "op, 3 launched outside every module)")


def test_unlinked_kernels_are_counted_in_notes():
    base = build(SYNTH_BASE)
    base.kernels.loc[base.kernels["name"] == "relu_kernel", "op_row"] = -1
    res, _ = compare_modules(base, build(SYNTH_COMP), CompareOptions())
    assert res.statistic.notes[0] == ("base: 3 kernels are charged to no module (1 without a launching host "
                                      "op, 2 launched outside every module)")
    tree = res.tree.data.set_index("module")
    assert tree.loc["ReLU_0", "base_total"] == 0.0
    assert tree.loc["DynamicNet_0", "base_total"] == 75.0  # 85 − the 10 µs relu kernel


def _two_steps(durations: list[float]) -> dict:
    """One Net_0 → Linear_0 → aten::linear → gemm per step (1000 µs apart)."""
    pyfuncs, ops, kernels = [], [], []
    for i, dur in enumerate(durations):
        t = 1000 * i
        pyfuncs += [("nn.Module: Net_0", 1, t + 100, 100), ("nn.Module: Linear_0", 1, t + 110, 50)]
        ops += [("aten::linear", "cpu_op", 1, t + 115, 40)]
        kernels += [("gemm", 1, t + 120, t + 130, dur)]
    return {"pyfuncs": pyfuncs, "ops": ops, "kernels": kernels, "fwdbwd": []}


def test_repeated_instances_group_by_path():
    """Two base calls of the same module path: Number 2, summed times, kernel details merged."""
    res, _ = compare_modules(build(_two_steps([10, 12])), build(_two_steps([15])), CompareOptions())
    st = res.statistic.visible()
    assert st["module_name"].tolist() == ["/ Net_0", "/ Net_0/ Linear_0", "/ Net_0/ Linear_0"]
    assert st["op"].tolist() == ["[ TOTAL ]", "[ TOTAL ]", "aten::linear"]
    net, lin, op = st.iloc[0], st.iloc[1], st.iloc[2]
    assert (net["base_number"], net["base_self"], net["base_total"]) == (2, 0.0, pytest.approx(0.022))
    assert (net["comp_number"], net["comp_total"]) == (1, pytest.approx(0.015))
    assert lin["op"] == "[ TOTAL ]" and lin["base_number"] == 2
    assert lin["base_self"] == pytest.approx(0.022)
    assert op["op"] == "aten::linear" and op["base_number"] == 2 and op["comp_number"] == 1
    assert op["base_kernels"] == "gemm, [number: 2], [duration_ms: 0.022]\n"
    assert op["comp_kernels"] == "gemm, [number: 1], [duration_ms: 0.015]\n"
    # Detail: the second base instance and its child have no partner (one-sided subtree).
    det = res.detail.data
    totals = det[det[IS_TOTAL]]
    assert totals["base_total"].tolist() == [10.0, 10.0, 12.0, 12.0]
    assert totals["comp_total"].tolist() == [15.0, 15.0, 0.0, 0.0]
    assert totals["module_level"].tolist() == [1, 2, 1, 2]


def test_npu_kernel_details_format():
    spec = {
        "pyfuncs": [("nn.Module: Net_0", 1, 100, 100)],
        "ops": [("aten::matmul", "cpu_op", 1, 110, 50)],
        "kernels": [("MatMulV2", 1, 120, 130, 30), ("hcom_allReduce__1_0_1", 1, 125, 170, 12.25)],
        "fwdbwd": [],
    }
    base = build(spec, kind="npu_text")
    base.kernels["task_id"] = [11, -1]
    base.kernels["task_type"] = ["AI_CORE", ""]
    base.kernels["input_shapes"] = ["8,16;16,32", ""]
    res, _ = compare_modules(base, build(spec), CompareOptions())
    op_row = res.detail.visible().iloc[1]
    assert op_row["base_op"] == "aten::matmul"
    assert op_row["base_kernels"] == (
        "MatMulV2, 11, AI_CORE, [input shapes: 8,16;16,32] [duration: 30.0]\n"
        "hcom_allReduce__1_0_1, None, None [duration: 12.25]\n"
    )
    assert op_row["comp_kernels"] == "MatMulV2 [duration: 30.0]\nhcom_allReduce__1_0_1 [duration: 12.25]\n"


def test_disable_details_keeps_statistic_and_drops_detail(result):
    res, _ = compare_modules(build(SYNTH_BASE), build(SYNTH_COMP), CompareOptions(disable_details=True))
    assert res.detail is None
    pd.testing.assert_frame_equal(res.statistic.visible(), result.statistic.visible())
    # Nothing is paired: 6 base + 6 comparison modules, each row with one side absent.
    tree = res.tree.data
    modules = tree[tree["module"] != "[ BACKWARD ]"]  # the backward pseudo-modules' fold root
    assert len(modules) == 12 and len(tree) == 13
    assert ((modules["_base_stack"] == "") != (modules["_comp_stack"] == "")).all()


@pytest.mark.parametrize(
    ("mutate", "opts", "reason"),
    [
        (lambda p: None, CompareOptions(disable_module=True), "module comparison turned off (--disable_module)"),
        (lambda p: setattr(p, "pyfuncs", p.pyfuncs.iloc[0:0]), CompareOptions(),
         "no python_function events in comparison: collect with with_stack=True"),
        (lambda p: p.pyfuncs.__setitem__("is_module", False), CompareOptions(),
         "no nn.Module python_function events in comparison"),
        (lambda p: None, CompareOptions(enabled=frozenset({"communication"})), "operator comparison is not enabled"),
    ],
)
def test_absent_reasons(mutate, opts, reason):
    comp = build(SYNTH_COMP)
    mutate(comp)
    res, why = compare_modules(build(SYNTH_BASE), comp, opts)
    assert res is None and why == reason


def test_innermost_strict_and_inclusive():
    # Intervals on thread 1: A [0,100] ⊃ B [10,50] ⊃ C [10,20]; D [60,80] ⊂ A. Thread 2: E [0,100].
    key = np.array([1, 1, 1, 1, 2])
    start = np.array([0, 10, 10, 60, 0])
    end = np.array([100, 50, 20, 80, 100])
    parent, _ = nest(key, start, end)
    pts_key = np.array([1, 1, 1, 1, 1, 2, 3])
    pts = np.array([10, 15, 30, 55, 100, 5, 5])
    assert innermost(key, start, end, parent, pts_key, pts, strict=False).tolist() == [2, 2, 1, 0, 0, 4, -1]
    assert innermost(key, start, end, parent, pts_key, pts, strict=True).tolist() == [0, 2, 1, 0, -1, 4, -1]
