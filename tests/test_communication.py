"""CommunicationCompare on hand-built profiles (values derived by hand from the durations)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.communication import compare_communication, comm_keys
from perfcmp_core.compare.result import IS_TOTAL, LEVEL, NODE, PARENT
from perfcmp_core.model import COMM_OPS, COMM_TASKS, Profile, ProfileMeta, frame
from perfcmp_core.options import CompareOptions


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("hcom_allReduce__284_0_1", "allreduce"),
        ("hcom_broadcast__1_0_1", "broadcast"),
        ("hcom_allGather_", "allgather"),
        ("HcclAllreduce", "hcclallreduce"),  # the reference drops names without "_"
        ("Send_Recv", "send"),
        # NCCL: the collective, not "ncclkernel"/"nccldevkernel" (reference quirk Q8)
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "allreduce"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "allgather"),
        ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "reducescatter"),
        ("ncclKernel_Reduce_RING_LL_Sum_float", "reduce"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t", "broadcast"),
        ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv"),
        ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "allreduce"),
        ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "generic"),
    ],
)
def test_comm_keys(name, key):
    assert comm_keys(pd.Series([name])).tolist() == [key]


def test_comm_keys_of_a_column_are_each_names_key_in_place() -> None:
    """Keys are worked out per distinct name and put back on every row, index kept; a missing
    name reads as "" (its own key), a name with a NUL is not taken for its prefix."""
    names = ["hcom_allReduce__284_0_1", "HcclAllreduce", None, "hcom_allReduce__284_0_1",
             "ncclKernel_Reduce_RING_LL_Sum_float", "Hccl\x00x", "Hccl\x00y", "HcclAllreduce", ""]
    col = pd.Series(names, index=range(10, 19), dtype=object)
    got = comm_keys(col)
    assert got.index.tolist() == list(range(10, 19))
    assert got.tolist() == [comm_keys(pd.Series([n], dtype=object)).iloc[0] for n in names]
    assert got.tolist() == ["allreduce", "hcclallreduce", "", "allreduce", "reduce", "hccl\x00x", "hccl\x00y",
                            "hcclallreduce", ""]


def _profile(ops: list[tuple[str, float, float]], tasks: list[tuple[int, str, float, float]] = (),
             kind: str = "npu_text", op_type: list[str] | None = None) -> Profile:
    """ops: (name, start µs, dur µs); tasks: (op index, name, start µs, dur µs)."""
    comm_ops = frame(COMM_OPS, {
        "name": [o[0] for o in ops], "op_type": op_type or [""] * len(ops),
        "start_ns": [int(o[1] * 1000) for o in ops], "dur_ns": [int(round(o[2] * 1000)) for o in ops],
    })
    comm_tasks = frame(COMM_TASKS, {
        "name": [t[1] for t in tasks], "op_row": [t[0] for t in tasks],
        "start_ns": [int(t[2] * 1000) for t in tasks], "dur_ns": [int(round(t[3] * 1000)) for t in tasks],
    })
    return Profile(ProfileMeta(kind=kind, source=kind), comm_ops=comm_ops, comm_tasks=comm_tasks)


BASE = _profile(
    [("hcom_allReduce__1_0_1", 100, 100), ("hcom_broadcast__2_0_1", 300, 20)],
    [(0, "Notify_Wait", 100, 30), (0, "Memcpy", 140, 10), (0, "Notify_Wait", 160, 40)],
)
COMP = _profile(
    [("hcom_allReduce__7_0_1", 100, 140), ("hcom_allGather__3_0_1", 400, 25), ("HcclAllreduce", 500, 8)],
    [(0, "RDMASend", 100, 5), (0, "Notify_Wait", 110, 40), (0, "Notify_Wait", 160, 46)],
)


def _table():
    table, reason = compare_communication(BASE, COMP, CompareOptions())
    assert reason == ""
    return table


def test_layout():
    t = _table()
    assert t.name == "CommunicationCompare"
    assert [c.header for c in t.columns] == [
        "Order Id", "Communication OP Name", "Task Name", "Calls", "Total Duration(us)",
        "Avg Duration(us)", "Max Duration(us)", "Min Duration(us)", "Communication OP Name",
        "Task Name", "Calls", "Total Duration(us)", "Avg Duration(us)", "Max Duration(us)",
        "Min Duration(us)", "Diff Duration(us)", "Diff Ratio",
    ]
    assert [c.width for c in t.columns] == [10, 25, 20, 10, 17, 17, 17, 17, 25, 20, 10, 17, 17, 17, 17, 20, 20]
    assert (t.base_span, t.comp_span) == ((1, 7), (8, 14))  # B1:H1, I1:O1
    assert [c.fmt for c in t.columns if c.header == "Communication OP Name"] == ["bold", "bold"]
    assert t.column("ratio").fmt == "percent"


def test_rows_tasks_paired_by_name():
    d = _table().data
    assert d["order"].tolist() == list(range(1, 8))
    assert d["base_name"].tolist() == ["allreduce", "|", "|", "", "broadcast", "", ""]
    assert d["comp_name"].tolist() == ["allreduce", "|", "", "|", "", "allgather", "hcclallreduce"]
    # Base task names first-seen (Notify_Wait, Memcpy), then comparison-only (RDMASend); the
    # reference would put base Memcpy next to comparison Notify_Wait (pairing by position).
    assert d["base_task"].tolist() == ["", "Notify_Wait", "Memcpy", "", "", "", ""]
    assert d["comp_task"].tolist() == ["", "Notify_Wait", "", "RDMASend", "", "", ""]

    ar, nw = d.iloc[0], d.iloc[1]
    assert (ar["base_calls"], ar["base_total"], ar["base_avg"], ar["base_max"], ar["base_min"]) == (1, 100, 100, 100, 100)
    assert (ar["comp_calls"], ar["comp_total"]) == (1, 140)
    assert ar["diff"] == 40 and ar["ratio"] == pytest.approx(1.4)
    assert (nw["base_calls"], nw["base_total"], nw["base_avg"], nw["base_max"], nw["base_min"]) == (2, 70, 35, 40, 30)
    assert (nw["comp_calls"], nw["comp_total"], nw["comp_avg"], nw["comp_max"], nw["comp_min"]) == (2, 86, 43, 46, 40)
    assert math.isnan(nw["diff"]) and math.isnan(nw["ratio"])  # task rows carry no diff


def test_one_sided_rows():
    d = _table().data
    memcpy, rdma, bc, ag = d.iloc[2], d.iloc[3], d.iloc[4], d.iloc[5]
    # Missing side: blank name/task/calls/avg/max/min, Total Duration 0.
    assert memcpy["comp_total"] == 0 and np.isnan([memcpy["comp_calls"], memcpy["comp_avg"]]).all()
    assert (memcpy["base_calls"], memcpy["base_total"]) == (1, 10)
    assert rdma["base_total"] == 0 and rdma["comp_total"] == 5
    assert (bc["base_total"], bc["comp_total"], bc["diff"], bc["ratio"]) == (20, 0, -20, 0)
    assert np.isnan([bc["comp_calls"], bc["comp_avg"], bc["comp_max"], bc["comp_min"]]).all()
    assert (ag["base_total"], ag["comp_total"], ag["diff"], ag["ratio"]) == (0, 25, 25, math.inf)


def test_tree_links():
    d = _table().data
    assert d[IS_TOTAL].tolist() == [True, False, False, False, True, True, True]
    assert d[NODE].tolist() == list(range(7))
    assert d[PARENT].tolist() == [-1, 0, 0, 0, -1, -1, -1]
    assert d[LEVEL].tolist() == [0, 1, 1, 1, 0, 0, 0]


def test_gpu_nccl_collectives_get_their_own_keys():
    """Same NCCL kernels as the module-test traces. The reference run on them
    (msprof-analyze compare ... --enable_communication_compare) wrote two rows, `ncclkernel`
    50 → 60 µs and a comparison-only `nccldevkernel` 20 µs; we key by collective instead."""
    base = _profile([("ncclKernel_AllReduce_RING_LL_Sum_float", 810, 50)], kind="gpu")
    comp = _profile([("ncclKernel_AllReduce_RING_LL_Sum_float", 810, 60),
                     ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 880, 20)],
                    kind="gpu")
    t, _ = compare_communication(base, comp, CompareOptions())
    d = t.data
    assert d["base_name"].tolist() == ["allreduce", ""]
    assert d["comp_name"].tolist() == ["allreduce", "allgather"]
    assert d["comp_total"].tolist() == [60, 20]
    assert d["ratio"].tolist() == [pytest.approx(1.2), math.inf]


def test_db_op_type_is_the_key_source():
    base = _profile([("hcom_allReduce__1_0_1", 0, 10)], op_type=["hcom_broadcast_"])
    t, _ = compare_communication(base, base, CompareOptions())
    assert t.data["base_name"].tolist() == ["broadcast"]


def test_one_side_without_communication():
    empty = Profile(ProfileMeta(kind="gpu", source="x"))
    t, _ = compare_communication(empty, COMP, CompareOptions())
    d = t.data
    assert d.loc[d[IS_TOTAL], "comp_name"].tolist() == ["allreduce", "allgather", "hcclallreduce"]
    assert (d["base_total"] == 0).all() and (d["base_name"] == "").all()
    assert d.loc[d[IS_TOTAL], "ratio"].tolist() == [math.inf] * 3


def test_absent():
    empty = Profile(ProfileMeta(kind="gpu", source="x"))
    assert compare_communication(empty, empty, CompareOptions()) == (None, "no communication ops on either side")
    assert compare_communication(BASE, COMP, CompareOptions(enabled=frozenset({"operator"}))) == (
        None, "communication comparison is not enabled")
