"""NPU Db loader: synthetic SQLite exports written here with the torch_npu / msprof schema
(column names and types of torch_npu ``TableColumnsManager`` and the msprof export headers).
Every expected value below is derived by hand from the rows inserted by :func:`write_full_db`.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.load import detect, load_profile
from perfcmp_core.load.npu_db import group_hash, load_npu_db
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions

B = 1_700_000_000_000_000_000  # epoch-like ns base: beyond float64's exact-integer range
PID, MAIN, DEQ, BWD = 100, 7, 8, 9
G_MAIN, G_DEQ, G_BWD = (PID << 32) | MAIN, (PID << 32) | DEQ, (PID << 32) | BWD

SCHEMA = {
    "STRING_IDS": "id INTEGER, value TEXT",
    "ENUM_API_TYPE": "id INTEGER, name INTEGER",
    "PYTORCH_API": "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, "
                   "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, "
                   "callchainId INTEGER, type INTEGER",
    "CONNECTION_IDS": "id INTEGER, connectionId INTEGER",
    "PYTORCH_CALLCHAINS": "id INTEGER, stack INTEGER, stackDepth INTEGER",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
            "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, "
            "modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, "
                         "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                         "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, "
                         "outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
    "COMMUNICATION_OP": "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
                        "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, "
                        "algType INTEGER, count NUMERIC, opType INTEGER, deviceId INTEGER",
    "COMMUNICATION_TASK_INFO": "name INTEGER, globalTaskId INTEGER, taskType INTEGER, planeId INTEGER, "
                               "groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER, "
                               "dstRank INTEGER, transportType INTEGER, size INTEGER, dataType INTEGER, "
                               "linkType INTEGER, opId INTEGER, isMaster INTEGER",
    "TASK_PMU_INFO": "globalTaskId INTEGER, name INTEGER, value NUMERIC",
    "MEMORY_RECORD": "component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, "
                     "totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "OP_MEMORY": "name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER, "
                 "activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER, "
                 "allocationTotalAllocated INTEGER, allocationTotalReserved INTEGER, "
                 "allocationTotalActive INTEGER, releaseTotalAllocated INTEGER, releaseTotalReserved INTEGER, "
                 "releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "META_DATA": "name TEXT, value TEXT",
}


class DbWriter:
    """Writes a synthetic Db: tables are created on first use, strings are interned into STRING_IDS."""

    def __init__(self, path: Path, tables: tuple[str, ...] = ()) -> None:
        self.conn = sqlite3.connect(path)
        self.ids: dict[str, int] = {}
        self.created: set[str] = set()
        for table in ("STRING_IDS", *tables):
            self._create(table)

    def _create(self, table: str) -> None:
        if table not in self.created:
            self.conn.execute(f"CREATE TABLE {table} ({SCHEMA[table]})")
            self.created.add(table)

    def sid(self, text: str | None) -> int | None:
        if text is None:
            return None
        if text not in self.ids:
            self.ids[text] = len(self.ids) + 1
            self.conn.execute("INSERT INTO STRING_IDS VALUES (?, ?)", (self.ids[text], text))
        return self.ids[text]

    def add(self, table: str, **row: object) -> None:
        self._create(table)
        cols = ", ".join(row)
        self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))

    def api(self, kind: int, name: str, start: int, end: int, gtid: int, conn: int | None,
            shapes: str | None = None, dtypes: str | None = None, chain: int | None = None) -> None:
        self.add("PYTORCH_API", startNs=str(B + start), endNs=str(B + end), globalTid=gtid, connectionId=conn,
                 name=self.sid(name), inputShapes=self.sid(shapes), inputDtypes=self.sid(dtypes),
                 callchainId=chain, type=kind)

    def task(self, gid: int, start: int, end: int, conn: int | None, task_type: str, stream: int = 5) -> None:
        self.add("TASK", globalTaskId=gid, startNs=B + start, endNs=B + end, connectionId=conn,
                 taskType=self.sid(task_type), streamId=stream, deviceId=3)

    def compute(self, gid: int, name: str, op_type: str, core: str, shapes: str = "", dtypes: str = "") -> None:
        self.add("COMPUTE_TASK_INFO", globalTaskId=gid, name=self.sid(name), opType=self.sid(op_type),
                 taskType=self.sid(core), inputShapes=self.sid(shapes), inputDataTypes=self.sid(dtypes))

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()


OP, QUEUE, TRACE, MSTX = 1, 2, 3, 4


def write_full_db(path: Path) -> Path:
    """One rank of a torch_npu run with two steps; times are ns after ``B``."""
    w = DbWriter(path)
    for kind, name in ((OP, "op"), (QUEUE, "queue"), (TRACE, "trace"), (MSTX, "mstx")):
        w.add("ENUM_API_TYPE", id=kind, name=name)
    # CONNECTION_IDS: list id → connection ids (10 and 14 share 500: a forward/backward pair;
    # 20 and 21 are distinct lists of one enqueue/dequeue correlation, 22 is one list for both).
    for ref, conn in ((10, 500), (11, 1001), (11, 1002), (12, 1003), (13, 2001), (14, 500), (15, 1004),
                      (20, 7001), (21, 7001), (22, 7002), (23, 7003)):
        w.add("CONNECTION_IDS", id=ref, connectionId=conn)
    w.api(OP, "ProfilerStep#1", 0, 10_000, G_MAIN, None)
    w.api(OP, "aten::linear", 100, 3_000, G_MAIN, 10, shapes="8,16;16,8", dtypes="float;float")
    w.api(OP, "aten::addmm", 200, 2_000, G_MAIN, 11, chain=1)
    w.api(OP, "aten::relu", 3_500, 4_000, G_MAIN, 12)
    w.api(OP, "HcclAllreduce", 4_500, 5_000, G_MAIN, 13)
    w.api(OP, "aten::empty", 5_500, 5_600, G_MAIN, None)
    w.api(OP, "ProfilerStep#2", 10_001, 20_000, G_MAIN, None)
    w.api(OP, "AddmmBackward0", 12_000, 14_000, G_BWD, 14)
    w.api(OP, "aten::mm", 12_500, 13_500, G_BWD, 15)
    w.api(QUEUE, "Enqueue", 250, 300, G_MAIN, 20)
    w.api(QUEUE, "Dequeue@AclnnAddmm", 600, 1_500, G_DEQ, 21)
    w.api(QUEUE, "Enqueue", 3_600, 3_650, G_MAIN, 22)
    w.api(QUEUE, "Dequeue@AclnnRelu", 3_700, 3_900, G_DEQ, 22)
    w.api(QUEUE, "Dequeue@Lonely", 5_000, 5_200, G_DEQ, 23)
    w.api(QUEUE, "TaskQueueOther", 5_300, 5_400, G_DEQ, None)
    w.api(TRACE, "nn.Module: Linear_0", 50, 3_100, G_MAIN, None)
    w.api(TRACE, "torch/nn/functional.py(123): linear", 90, 3_050, G_MAIN, None)
    w.api(MSTX, "mark", 10, 20, G_MAIN, None)
    # call chain 1, inserted innermost-first to prove the stackDepth order is used
    w.add("PYTORCH_CALLCHAINS", id=1, stack=w.sid("train.py(20): step"), stackDepth=1)
    w.add("PYTORCH_CALLCHAINS", id=1, stack=w.sid("model.py(5): forward"), stackDepth=0)

    w.task(1, 210, 700, 1001, "KERNEL_AICORE")
    w.compute(1, "aclnnAddmm_MatMulV2", "MatMulV2", "AI_CORE", "8,16;16,8", "FLOAT16;FLOAT16")
    w.task(2, 710, 900, 1002, "KERNEL_AIVEC")
    w.compute(2, "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "8,8;8,8")
    w.task(3, 3_600, 3_800, 1003, "KERNEL_AIVEC")
    w.compute(3, "aclnnRelu_ReluAiCore_Relu", "Relu", "AI_VECTOR_CORE")
    w.task(4, 3_850, 3_900, None, "AI_CPU")  # NULL connectionId (reference bug B4)
    w.compute(4, "NonZero", "NonZero", "AI_CPU")
    w.task(5, 950, 1_000, 4294967295, "SDMA_SQE")  # the Db's invalid-id marker
    w.task(6, 100, 150, 3000, "EVENT_WAIT_SQE")
    w.task(7, 4_600, 4_700, 2001, "NOTIFY_WAIT_SQE")
    w.task(8, 4_710, 4_800, 2001, "SDMA_SQE")
    w.task(9, 12_600, 13_000, 1004, "KERNEL_AICORE")
    w.compute(9, "aclnnMm_MatMulV2", "MatMulV2", "AI_CORE")
    w.task(10, 15_000, 15_100, 5000, "C_CORE_SQE", stream=6)
    w.task(11, 16_000, 16_500, 2002, "RDMA_SQE")
    w.task(12, 18_000, 18_100, 2002, "NOTIFY_WAIT_SQE")
    w.task(13, 25_000, 25_100, 1005, "KERNEL_AICORE")
    w.compute(13, "aclnnMul_MulAiCore_Mul", "Mul", "AI_CORE")
    for gid, metric, value in ((1, "aic_total_time", 450), (1, "aic_mac_time", 300), (1, "aic_mte2_time", 120),
                               (2, "aiv_time", 180)):
        w.add("TASK_PMU_INFO", globalTaskId=gid, name=w.sid(metric), value=value)

    w.add("COMMUNICATION_OP", opName=w.sid("hcom_allReduce__1_0_1"), opType=w.sid("hcom_allReduce_"),
          startNs=B + 4_550, endNs=B + 4_900, groupName=w.sid("g1"), opId=1, connectionId=2001)
    w.add("COMMUNICATION_OP", opName=w.sid("hcom_broadcast__2_0_1"), opType=w.sid("hcom_broadcast_"),
          startNs=B + 15_900, endNs=B + 17_000, groupName=w.sid("g2"), opId=2, connectionId=None)
    for gid, task_type, plane, group, op_id in ((7, "Notify_Wait", 0, "g1", 1), (8, "Memcpy", 1, None, 1),
                                                (11, "RDMASend", 3, "g2", 2), (12, "Notify_Wait", 0, "g2", 99),
                                                (77, "Notify_Wait", 0, "g2", 2)):  # 77: no TASK row
        w.add("COMMUNICATION_TASK_INFO", globalTaskId=gid, taskType=w.sid(task_type), planeId=plane,
              groupName=w.sid(group), opId=op_id)

    for component, ts, allocated, reserved in (("PTA", 1_000, 1024, 2_097_152), ("PTA", 12_000, 4096, 4_194_304),
                                               ("PTA+GE", 12_000, 5120, 6_291_456)):
        w.add("MEMORY_RECORD", component=w.sid(component), timestamp=B + ts, totalAllocated=allocated,
              totalReserved=reserved, deviceId=3)
    for name, size, alloc, release in (("aten::addmm", 4096, 250, 2_500), ("cann::MatMulV2", 8192, 800, None),
                                       ("cann::Relu", 1024, 3_750, 3_950), ("cann::Orphan", 64, 5_100, 5_150),
                                       ("aten::empty", 32, None, None), ("aten::mm", 2048, 12_600, 0)):
        w.add("OP_MEMORY", name=w.sid(name), size=size, allocationTime=None if alloc is None else B + alloc,
              releaseTime=release if not release else B + release)
    w.add("STEP_TIME", id=2, startNs=B + 10_001, endNs=B + 20_000)
    w.add("STEP_TIME", id=1, startNs=B + 0, endNs=B + 10_000)
    w.add("RANK_DEVICE_MAP", rankId=5, deviceId=3)
    w.add("META_DATA", name="parallel_group_info",
          value='{"10.0.0.1%eth0_60000_0_1": {"group_name": "dp", "group_rank": 0, "global_ranks": [0, 1]},'
                ' "ab": {"group_name": "tp", "group_rank": 1, "global_ranks": [0, 1]}}')
    w.close()
    return path


def _load(path: Path, opts: LoadOptions | None = None) -> Profile:
    profile = load_profile(str(path), opts or LoadOptions())
    profile.check()
    return profile


def _ns(*offsets: int) -> list[int]:
    return [B + o for o in offsets]


@pytest.fixture()
def full_db(tmp_path: Path) -> Path:
    return write_full_db(tmp_path / "ascend_pytorch_profiler_3.db")


def test_kernels_join_tasks_compute_info_pmu_and_comm_ops(full_db: Path) -> None:
    k = _load(full_db).kernels
    assert k["name"].tolist() == [
        "EVENT_WAIT_SQE", "aclnnAddmm_MatMulV2", "aclnnAdd_AddAiCore_Add", "SDMA_SQE", "aclnnRelu_ReluAiCore_Relu",
        "NonZero", "hcom_allReduce__1_0_1", "Notify_Wait", "Memcpy", "aclnnMm_MatMulV2", "C_CORE_SQE",
        "hcom_broadcast__2_0_1", "RDMASend", "Notify_Wait", "aclnnMul_MulAiCore_Mul"]
    assert k["start_ns"].tolist() == _ns(100, 210, 710, 950, 3_600, 3_850, 4_550, 4_600, 4_710, 12_600, 15_000,
                                         15_900, 16_000, 18_000, 25_000)
    assert k["dur_ns"].tolist() == [50, 490, 190, 50, 200, 50, 350, 100, 90, 400, 100, 1_100, 500, 100, 100]
    assert k["task_type"].tolist() == [
        "EVENT_WAIT_SQE", "KERNEL_AICORE", "KERNEL_AIVEC", "SDMA_SQE", "KERNEL_AIVEC", "AI_CPU", "",
        "NOTIFY_WAIT_SQE", "SDMA_SQE", "KERNEL_AICORE", "C_CORE_SQE", "", "RDMA_SQE", "NOTIFY_WAIT_SQE",
        "KERNEL_AICORE"]
    assert k["op_type"].tolist() == ["", "MatMulV2", "Add", "", "Relu", "NonZero", "hcom_allReduce_", "", "",
                                     "MatMulV2", "", "hcom_broadcast_", "", "", "Mul"]
    assert k["core"].tolist() == ["", "AI_CORE", "AI_VECTOR_CORE", "", "AI_VECTOR_CORE", "AI_CPU", "", "", "",
                                  "AI_CORE", "", "", "", "", "AI_CORE"]
    assert k["stream"].tolist() == [5, 5, 5, 5, 5, 5, -1, 5, 5, 5, 6, -1, 5, 5, 5]
    # NULL connectionId and 4294967295 both read as "no link"
    assert k["link"].tolist() == [3000, 1001, 1002, -1, 1003, -1, 2001, 2001, 2001, 1004, 5000, -1, 2002, 2002,
                                  1005]
    assert k["has_details"].tolist() == [False, True, True, False, True, True, False, False, False, True, False,
                                         False, False, False, True]
    assert k["is_comm"].tolist() == [False] * 6 + [True] * 3 + [False, False] + [True] * 3 + [False]
    assert k["in_trace"].all()  # HCCL ops count as device work, like the Text loader's
    assert k["task_id"].tolist() == [6, 1, 2, 5, 3, 4, -1, 7, 8, 9, 10, -1, 11, 12, 13]
    assert k["input_shapes"].tolist()[1:3] == ["8,16;16,8", "8,8;8,8"]
    assert k["input_dtypes"].tolist()[1] == "FLOAT16;FLOAT16"
    assert k["step"].tolist() == [1] * 9 + [2] * 5 + [-1]


def test_kernel_pmu_values_are_ns_stored_as_us(full_db: Path) -> None:
    profile = _load(full_db)
    k = profile.kernels
    assert profile.meta.has_pmu
    matmul, add = k.iloc[1], k.iloc[2]
    assert (matmul["aicore_us"], matmul["mac_us"], matmul["mte2_us"]) == (0.45, 0.3, 0.12)
    assert math.isnan(matmul["aiv_us"])
    assert add["aiv_us"] == 0.18 and math.isnan(add["aicore_us"])
    assert k["aiv_vec_us"].isna().all()
    assert k.drop(index=[1, 2])[["aicore_us", "mac_us", "mte2_us", "aiv_us"]].isna().all().all()


def test_ops_one_row_per_op_nested_per_thread(full_db: Path) -> None:
    ops = _load(full_db).ops
    assert ops["name"].tolist() == ["ProfilerStep#1", "aten::linear", "aten::addmm", "aten::relu", "HcclAllreduce",
                                    "aten::empty", "ProfilerStep#2", "AddmmBackward0", "aten::mm"]
    assert ops["start_ns"].tolist() == _ns(0, 100, 200, 3_500, 4_500, 5_500, 10_001, 12_000, 12_500)
    assert ops["end_ns"].tolist() == _ns(10_000, 3_000, 2_000, 4_000, 5_000, 5_600, 20_000, 14_000, 13_500)
    assert set(ops["cat"]) == {"op"}
    assert ops["pid"].tolist() == [PID] * 9
    assert ops["tid"].tolist() == [MAIN] * 7 + [BWD] * 2
    # the backward thread's ops do not nest under ProfilerStep#2 of the main thread
    assert ops["parent"].tolist() == [-1, 0, 1, 0, 0, 0, -1, -1, 7]
    assert ops["depth"].tolist() == [0, 1, 2, 1, 1, 1, 0, 0, 1]
    assert ops["link"].tolist() == [-1, 500, 1001, 1003, 2001, -1, -1, 500, 1004]
    assert ops["step"].tolist() == [1] * 6 + [2] * 3
    assert ops["is_step"].tolist() == [True] + [False] * 5 + [True, False, False]
    assert ops["input_dims"].tolist()[1] == "8,16;16,8" and ops["input_types"].tolist()[1] == "float;float"
    assert ops["call_stack"].tolist()[2] == "model.py(5): forward;\ntrain.py(20): step"
    assert ops["call_stack"].tolist()[1] == ""


def test_kernels_link_to_ops_through_connection_id_lists(full_db: Path) -> None:
    k = _load(full_db).kernels
    # addmm (row 2) launched tasks 1001 and 1002; the HCCL op 2001 belongs to HcclAllreduce (row 4)
    # but its tasks do not (no double counting); aten::mm (row 8) launched 1004.
    assert k["op_row"].tolist() == [-1, 2, 2, -1, 3, -1, 4, -1, -1, 8, -1, -1, -1, -1, -1]


def test_fwdbwd_pairs_ops_sharing_a_connection_id(full_db: Path) -> None:
    profile = _load(full_db)
    fb = profile.fwdbwd
    assert fb.to_dict("list") == {"id": [500], "start_ts_ns": [B + 100], "start_tid": [MAIN],
                                  "end_ts_ns": [B + 12_000], "end_pid": [PID], "end_tid": [BWD]}
    assert profile.meta.backward_tid == BWD


def test_queue_and_python_functions(full_db: Path) -> None:
    profile = _load(full_db)
    q = profile.queue
    assert q["kind"].tolist() == ["enqueue", "dequeue", "enqueue", "dequeue", "dequeue"]
    assert q["correlation"].tolist() == [7001, 7001, 7002, 7002, 7003]
    assert q["start_ns"].tolist() == _ns(250, 600, 3_600, 3_700, 5_000)
    assert q["end_ns"].tolist() == _ns(300, 1_500, 3_650, 3_900, 5_200)
    py = profile.pyfuncs
    assert py["name"].tolist() == ["nn.Module: Linear_0", "torch/nn/functional.py(123): linear"]
    assert py["is_module"].tolist() == [True, False]
    assert py["parent"].tolist() == [-1, 0] and py["depth"].tolist() == [0, 1]
    assert py["tid"].tolist() == [MAIN, MAIN] and py["start_ns"].tolist() == _ns(50, 90)


def test_comm_ops_and_tasks(full_db: Path) -> None:
    profile = _load(full_db)
    co = profile.comm_ops
    assert co.to_dict("list") == {
        "name": ["hcom_allReduce__1_0_1", "hcom_broadcast__2_0_1"], "op_type": ["hcom_allReduce_", "hcom_broadcast_"],
        "group": ["g1", "g2"], "start_ns": _ns(4_550, 15_900), "dur_ns": [350, 1_100], "link": [2001, -1],
        "step": [1, 2]}
    ct = profile.comm_tasks
    # task 77 has no TASK row; task 8 has no group but its opId is unique; opId 99 matches no op
    assert ct.to_dict("list") == {
        "name": ["Notify_Wait", "Memcpy", "RDMASend", "Notify_Wait"], "group": ["g1", "", "g2", "g2"],
        "plane": ["0", "1", "3", "0"], "plane_order": [0, 1, 3, 0], "start_ns": _ns(4_600, 4_710, 16_000, 18_000),
        "dur_ns": [100, 90, 500, 100], "op_row": [0, 0, 1, -1], "step": [1, 1, 2, 2]}


def test_memory_and_op_memory(full_db: Path) -> None:
    profile = _load(full_db)
    mem = profile.memory
    assert mem.to_dict("list") == {
        "ts_ns": _ns(1_000, 12_000, 12_000), "component": ["PTA", "PTA", "PTA+GE"], "device": [3, 3, 3],
        "total_reserved_bytes": [2_097_152, 4_194_304, 6_291_456], "total_allocated_bytes": [1024, 4096, 5120]}
    om = profile.op_memory
    # cann:: rows are placed at the enqueue of their covering dequeue (7001 → 250, 7002 → 3600);
    # the orphan (dequeue without enqueue) and the row without allocation time are dropped.
    assert om.to_dict("list") == {
        "name": ["", "cann::MatMulV2", "cann::Relu", ""],  # only cann:: records keep their name
        "size_bytes": [4096, 8192, 1024, 2048], "place_ns": _ns(250, 250, 3_600, 12_600),
        "alloc_ns": _ns(250, 800, 3_750, 12_600), "release_ns": [B + 2_500, -1, B + 3_950, -1]}
    assert any("2 OP_MEMORY rows dropped" in n.text for n in profile.meta.notes)


def test_load_memory_false_skips_memory_tables(full_db: Path) -> None:
    profile = _load(full_db, LoadOptions(load_memory=False))
    assert profile.memory.empty and profile.op_memory.empty
    assert len(profile.kernels) == 15


def test_steps_and_op_statistic(full_db: Path) -> None:
    profile = _load(full_db)
    assert profile.steps.to_dict("list") == {"step": [1, 2], "start_ns": _ns(0, 10_001),
                                             "end_ns": _ns(10_000, 20_000)}
    st = profile.op_statistic
    assert st[["op_type", "core_type", "count"]].values.tolist() == [
        ["MatMulV2", "AI_CORE", 2], ["Add", "AI_VECTOR_CORE", 1], ["Relu", "AI_VECTOR_CORE", 1],
        ["NonZero", "AI_CPU", 1], ["Mul", "AI_CORE", 1]]
    mm = st.iloc[0]
    assert mm["total_us"] == pytest.approx(0.89) and mm["avg_us"] == pytest.approx(0.445)
    assert (mm["max_us"], mm["min_us"]) == (0.49, 0.4)


def test_meta(full_db: Path) -> None:
    meta = _load(full_db).meta
    assert (meta.kind, meta.export, meta.framework, meta.level) == ("npu_db", "db", "pytorch", "file")
    assert meta.files_used == [str(full_db.resolve())]
    assert meta.rank == 5  # RANK_DEVICE_MAP wins over the _3 of the file name
    assert meta.device == 3
    assert meta.label == "NPU Db"
    # "ab": (97*29 + 98) << 32 | (97*131 + 98) = 2911 * 2**32 + 12805
    assert group_hash("ab") == "12502649811461"
    assert meta.group_names["ab"] == "tp" and meta.group_names["12502649811461"] == "tp"
    assert meta.group_names["10.0.0.1%eth0_60000_0_1"] == "dp"
    assert len(meta.group_names) == 4


def test_step_selection_filters_every_table(full_db: Path) -> None:
    profile = _load(full_db, LoadOptions(step=2))
    assert profile.meta.selected_step == 2
    k = profile.kernels
    assert k["name"].tolist() == ["aclnnMm_MatMulV2", "C_CORE_SQE", "hcom_broadcast__2_0_1", "RDMASend",
                                  "Notify_Wait"]
    assert profile.ops["name"].tolist() == ["ProfilerStep#2", "AddmmBackward0", "aten::mm"]
    assert k["op_row"].tolist() == [2, -1, -1, -1, -1]  # aten::mm renumbered 8 → 2
    assert profile.ops["parent"].tolist() == [-1, -1, 1]
    assert profile.comm_ops["name"].tolist() == ["hcom_broadcast__2_0_1"]
    assert profile.comm_tasks["op_row"].tolist() == [0, -1]
    assert profile.memory["ts_ns"].tolist() == _ns(12_000, 12_000)
    assert profile.op_memory["alloc_ns"].tolist() == _ns(800, 12_600)  # lifetimes overlapping the step
    assert profile.queue.empty and profile.pyfuncs.empty
    st = profile.op_statistic  # the Db statistic honours the step (like the reference)
    assert st[["op_type", "core_type", "count", "total_us"]].values.tolist() == [["MatMulV2", "AI_CORE", 1, 0.4]]
    with pytest.raises(InputError, match=r"has no step 9; available steps: 1, 2"):
        _load(full_db, LoadOptions(step=9))


def test_mindspore_db_without_host_tables_pmu_or_memory_rows(tmp_path: Path) -> None:
    path = tmp_path / "ascend_mindspore_profiler_2.db"
    w = DbWriter(path, tables=("MEMORY_RECORD",))  # present but empty (reference bug B1)
    w.task(1, 100, 400, 11, "KERNEL_AICORE")
    w.compute(1, "MatMul-op1", "MatMul", "AI_CORE")
    w.task(2, 500, 600, None, "KERNEL_AIVEC")
    w.compute(2, "Add-op2", "Add", "AI_VECTOR_CORE")
    w.close()
    profile = _load(path)
    meta = profile.meta
    assert (meta.framework, meta.label, meta.rank, meta.device) == ("mindspore", "NPU Db (MindSpore)", 2, 3)
    assert not meta.has_pmu
    assert any("no TASK_PMU_INFO rows" in n.text for n in meta.notes)
    assert any("COMMUNICATION_OP" in n.text and "STEP_TIME" in n.text and "OP_MEMORY" in n.text for n in meta.notes)
    assert not any("PYTORCH_API" in n.text for n in meta.notes)
    assert profile.ops.empty and profile.queue.empty and profile.memory.empty and profile.steps.empty
    k = profile.kernels
    assert k["name"].tolist() == ["MatMul-op1", "Add-op2"]
    assert k["link"].tolist() == [11, -1] and k["op_row"].tolist() == [-1, -1] and k["step"].tolist() == [-1, -1]
    assert k["aicore_us"].isna().all()
    assert profile.op_statistic[["op_type", "total_us"]].values.tolist() == [["MatMul", 0.3], ["Add", 0.1]]


def test_db_with_empty_tables_is_an_input_error(tmp_path: Path) -> None:
    """No compute tasks and no communication ops (reference bug B2: a crash) is one clear line: the
    file holds no profiler events."""
    path = tmp_path / "ascend_pytorch_profiler.db"
    DbWriter(path, tables=tuple(t for t in SCHEMA if t != "STRING_IDS")).close()
    with pytest.raises(InputError, match=r"ascend_pytorch_profiler\.db: holds no profiler events$"):
        _load(path)


def test_steps_fall_back_to_profiler_step_ops_without_step_time(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    w = DbWriter(path)
    w.add("ENUM_API_TYPE", id=OP, name="op")
    w.api(OP, "ProfilerStep#7", 0, 1_000, G_MAIN, None)
    w.api(OP, "aten::add", 10, 20, G_MAIN, 1)  # connectionId used directly: no CONNECTION_IDS table
    w.task(1, 30, 40, 1, "KERNEL_AIVEC")
    w.close()
    profile = _load(path)
    assert profile.steps.to_dict("list") == {"step": [7], "start_ns": [B], "end_ns": [B + 1_000]}
    assert profile.kernels["step"].tolist() == [7] and profile.kernels["op_row"].tolist() == [1]
    assert any("steps taken from ProfilerStep#N ops" in n.text for n in profile.meta.notes)


def test_a_connection_id_on_nested_ops_links_the_innermost(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    w = DbWriter(path)
    w.add("ENUM_API_TYPE", id=OP, name="op")
    for ref, conn in ((1, 900), (2, 900), (2, 901)):
        w.add("CONNECTION_IDS", id=ref, connectionId=conn)
    w.api(OP, "aten::linear", 0, 100, G_MAIN, 1)
    w.api(OP, "aten::addmm", 10, 90, G_MAIN, 2)
    w.task(1, 20, 30, 900, "KERNEL_AICORE")
    w.task(2, 40, 50, 901, "KERNEL_AICORE")
    w.close()
    profile = _load(path)
    assert profile.kernels["op_row"].tolist() == [1, 1]
    assert profile.fwdbwd.empty  # 900 is on two ops, but a task carries it: a launch, not fwd→bwd


def test_comm_ops_without_task_table_still_link_to_their_op(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    w = DbWriter(path)
    w.add("ENUM_API_TYPE", id=OP, name="op")
    w.add("CONNECTION_IDS", id=1, connectionId=42)
    w.api(OP, "HcclBroadcast", 0, 100, G_MAIN, 1)
    w.add("COMMUNICATION_OP", opName=w.sid("hcom_broadcast__7_0_1"), opType=w.sid("hcom_broadcast_"),
          startNs=B + 50, endNs=B + 80, groupName=w.sid("g"), opId=7, connectionId=42)
    w.add("COMMUNICATION_TASK_INFO", globalTaskId=1, taskType=w.sid("Memcpy"), planeId=0, opId=7)
    w.close()
    profile = _load(path)
    k = profile.kernels
    assert k[["name", "op_row", "is_comm", "in_trace", "dur_ns"]].values.tolist() == [
        ["hcom_broadcast__7_0_1", 0, True, True, 30]]
    assert profile.comm_tasks.empty  # its TASK row is missing
    assert any("TASK" in n.text and "COMPUTE_TASK_INFO" in n.text for n in profile.meta.notes)


def test_strings_stored_inline_without_string_ids(tmp_path: Path) -> None:
    """Older exports keep text in the columns that are interned ids today."""
    path = tmp_path / "msmonitor_1.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE TASK (globalTaskId INTEGER, startNs INTEGER, endNs INTEGER, taskType TEXT)")
    conn.execute("CREATE TABLE COMPUTE_TASK_INFO (globalTaskId INTEGER, name TEXT, opType TEXT, taskType TEXT)")
    conn.executemany("INSERT INTO TASK VALUES (?, ?, ?, ?)", [(1, B + 10, B + 30, "KERNEL_AICORE"),
                                                             (2, B + 40, B + 45, "KERNEL_AIVEC"),
                                                             (3, None, B + 50, "SDMA_SQE")])  # no start: skipped
    conn.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?, ?, ?, ?)", [(1, "MatMul_1", "MatMul", "AI_CORE"),
                                                                          (2, None, "Add", "AI_VECTOR_CORE")])
    conn.commit()
    conn.close()
    profile = _load(path)
    k = profile.kernels
    assert k["name"].tolist() == ["MatMul_1", "KERNEL_AIVEC"]  # a compute task without a name: its type
    assert k["op_type"].tolist() == ["MatMul", "Add"] and k["core"].tolist() == ["AI_CORE", "AI_VECTOR_CORE"]
    assert k["stream"].tolist() == [-1, -1] and k["link"].tolist() == [-1, -1]  # absent columns
    assert profile.meta.framework == "msmonitor" and profile.meta.rank == 1 and profile.meta.device is None


def test_path_with_uri_special_characters(tmp_path: Path) -> None:
    folder = tmp_path / "run #1 ?50% ü"
    folder.mkdir()
    db = write_full_db(folder / "ascend_pytorch_profiler_3.db")
    assert len(_load(db).kernels) == 15


def test_enum_table_missing_skips_host_ops_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    w = DbWriter(path)
    w.api(OP, "aten::add", 10, 20, G_MAIN, None)
    w.task(1, 30, 40, 1, "KERNEL_AIVEC")
    w.close()
    profile = _load(path)
    assert profile.ops.empty and len(profile.kernels) == 1
    assert any("ENUM_API_TYPE absent" in n.text for n in profile.meta.notes)


# ------------------------------------------------------------------------------------ bad inputs


def _rank_dir(tmp_path: Path, content: bytes | None = None) -> tuple[Path, Path]:
    run = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    db = run / "ascend_pytorch_profiler_0.db"
    if content is None:
        write_full_db(db)
    else:
        db.write_bytes(content)
    return run.parent, db


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "is empty"),
    (b"SQLite format 2\x00" + b"x" * 200, "is not an SQLite database"),
    (b"\x8a\x13" * 4096, "is not an SQLite database"),  # e.g. an encrypted file
])
def test_not_sqlite_in_a_folder_is_an_input_error(tmp_path: Path, content: bytes, problem: str) -> None:
    run, db = _rank_dir(tmp_path, content)
    with pytest.raises(InputError, match=problem) as err:
        load_profile(str(run))
    assert str(db) in err.value.message


def test_not_sqlite_given_as_file_is_an_input_error(tmp_path: Path) -> None:
    db = tmp_path / "ascend_pytorch_profiler_1.db"
    db.write_text("id,name\n1,a\n")
    with pytest.raises(InputError, match="is not an SQLite database") as err:
        load_profile(str(db))
    assert str(db) in err.value.message


def _big_db(path: Path) -> bytes:
    w = DbWriter(path)
    for i in range(3_000):
        w.task(i, i * 10, i * 10 + 5, i, f"KERNEL_TYPE_{i}")
    w.close()
    return path.read_bytes()


def test_truncated_db_is_an_input_error(tmp_path: Path) -> None:
    run, db = _rank_dir(tmp_path, b"")
    data = _big_db(tmp_path / "whole.db")
    db.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupted or unreadable|cannot be read") as err:
        load_profile(str(run))
    assert str(db) in err.value.message


def test_corrupted_pages_are_an_input_error(tmp_path: Path) -> None:
    run, db = _rank_dir(tmp_path, b"")
    data = bytearray(_big_db(tmp_path / "whole.db"))
    data[4096:] = b"\xff" * (len(data) - 4096)  # keep the header page, destroy every other page
    db.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupted or unreadable|cannot be read") as err:
        load_profile(str(run))
    assert str(db) in err.value.message


def test_non_utf8_bytes_in_the_schema_are_an_input_error(tmp_path: Path) -> None:
    # SQLite's error message quotes the damaged schema text, which Python then fails to decode
    # (a UnicodeDecodeError instead of an sqlite3.Error; found by the Db byte fuzzer).
    run, db = _rank_dir(tmp_path, b"")
    data = bytearray(_big_db(tmp_path / "whole.db"))
    at = data.find(b"CREATE TABLE")
    assert at > 0
    data[at + 3] = 0xFF  # CR\xffATE TABLE …: SQLite quotes the bytes in its error message
    db.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupted or unreadable|cannot be read") as err:
        load_profile(str(run))
    assert str(db) in err.value.message


def test_a_string_stored_as_invalid_utf8_blob_is_decoded_with_a_note(tmp_path: Path) -> None:
    # A flipped byte can turn a STRING_IDS TEXT cell into a BLOB that is not UTF-8 (found by the
    # Db byte fuzzer): the load goes on, the name shows U+FFFD and a note says why.
    run, db = _rank_dir(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE STRING_IDS SET value = CAST(X'61CEFF80' AS BLOB) WHERE value = 'aten::relu'")
    conn.commit()
    conn.close()
    profile = load_profile(str(run))
    assert "a\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}" in set(profile.ops["name"])
    assert "aten::relu" not in set(profile.ops["name"])
    assert "aten::linear" in set(profile.ops["name"])
    assert any("not valid UTF-8" in n.text for n in profile.meta.notes)


def test_db_wins_over_text_in_one_folder(tmp_path: Path) -> None:
    run, db = _rank_dir(tmp_path)
    (db.parent / "trace_view.json").write_text("[]")
    src = detect(str(run))
    assert (src.kind, src.db, src.level) == ("npu_db", db.resolve(), "profiling")
    profile = _load(run)
    assert profile.meta.kind == "npu_db" and len(profile.kernels) == 15
    assert any("Db wins" in n.text for n in profile.meta.notes)


def test_loader_opens_read_only(full_db: Path) -> None:
    before = full_db.read_bytes()
    mtime = full_db.stat().st_mtime_ns
    load_npu_db(detect(str(full_db)), LoadOptions())
    assert full_db.read_bytes() == before and full_db.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in full_db.parent.iterdir()) == [full_db.name]  # no journal / wal left


def test_ns_precision_survives_epoch_magnitudes(full_db: Path) -> None:
    k = _load(full_db).kernels
    starts = k["start_ns"].to_numpy()
    assert starts.dtype == np.int64 and int(starts[1]) == B + 210  # float64 would give B + 256


def _profiles_equal(a: Profile, b: Profile) -> None:
    import pandas as pd

    from perfcmp_core.model import SCHEMAS

    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), obj=table)
    assert a.meta == b.meta


_REAL_DBS = sorted((Path(__file__).resolve().parents[2] / "shared" / "data" / "npu-real-runs" / "db")
                   .glob("level*/rank*_ascend_pt"))


@pytest.mark.parametrize("which", ["full", "inline-text", "real-in-int",
                                   *[f"real:{p.parent.name}/{p.name}" for p in _REAL_DBS]])
def test_integer_tables_fetched_as_columns_load_like_cell_by_cell(which: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries of integers and string ids only are fetched as one text per column
    (``Db.int_columns``), else block by block into one int64 matrix (``Db._fetch_ints``);
    every table equals the cell-by-cell path's either way — on the synthetic Db, on one whose id
    column holds text and on one whose time column holds a real (the text paths are refused for
    those queries and the others read them), and on the real exports."""
    from perfcmp_core.load import npu_db_sql

    path = write_full_db(tmp_path / "ascend_pytorch_profiler_0.db") if not which.startswith("real:") \
        else next(p for p in _REAL_DBS if which.endswith(f"{p.parent.name}/{p.name}"))
    change = {"inline-text": "UPDATE TASK SET taskType = 'KERNEL_AICORE' WHERE rowid = 1",
              "real-in-int": "UPDATE TASK SET endNs = 123456789.5 WHERE rowid = 2"}.get(which)
    if change:
        conn = sqlite3.connect(path)
        conn.execute(change)
        conn.commit()
        conn.close()
    opts = LoadOptions(use_cache=False)
    calls: dict[str, list[bool]] = {"int_columns": [], "_fetch_ints": []}
    for name, seen in calls.items():
        def spy(self: npu_db_sql.Db, *args: object, _real: object = getattr(npu_db_sql.Db, name),
                _seen: list[bool] = seen) -> object:
            out = _real(self, *args)  # type: ignore[operator]
            _seen.append(out is not None)
            return out

        monkeypatch.setattr(npu_db_sql.Db, name, spy)
    fast = load_profile(str(path), opts)
    assert any(calls["int_columns"])  # the column path was taken for some queries
    if change:
        assert not all(calls["int_columns"])  # and refused for the TASK query
        assert calls["_fetch_ints"]  # which then went to the matrix path
    monkeypatch.setattr(npu_db_sql.Db, "int_columns", lambda self, sql, names: None)
    _profiles_equal(fast, load_profile(str(path), opts))
    monkeypatch.setattr(npu_db_sql.Db, "_fetch_ints", lambda self, sql, width: None)
    _profiles_equal(fast, load_profile(str(path), opts))


def test_column_fetch_keeps_the_query_order_and_refuses_what_is_not_an_integer(tmp_path: Path) -> None:
    """``Db.int_columns`` by hand: the columns come in the query's own order (here
    descending, unlike the table's) and aligned, 64-bit extremes exactly; a NULL (which
    ``group_concat`` would skip), a text or a real anywhere refuses the whole query, and an
    empty result is empty columns."""
    from perfcmp_core.load.npu_db_sql import Db

    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE T (a INTEGER, b INTEGER, c)")
    rows = [(1, 2**63 - 1, 7), (2, -(2**63), None), (3, 0, "x"), (4, 10, 2.5)]
    conn.executemany("INSERT INTO T VALUES (?, ?, ?)", rows)
    conn.commit()
    conn.close()
    db = Db(path)
    got = db.int_columns("SELECT a AS a, b AS b FROM T ORDER BY a DESC", ["a", "b"])
    assert got is not None
    assert got["a"].tolist() == [4, 3, 2, 1] and got["a"].dtype == np.int64
    assert got["b"].tolist() == [10, 0, -(2**63), 2**63 - 1]
    for where in ("a = 2", "a = 3", "a = 4"):  # NULL, text, real
        assert db.int_columns(f"SELECT a AS a, c AS c FROM T WHERE a = 1 OR {where}", ["a", "c"]) is None
    assert db.int_columns("SELECT a AS a, c AS c FROM T WHERE a = 1", ["a", "c"])["c"].tolist() == [7]
    empty = db.int_columns("SELECT a AS a FROM T WHERE a > 9", ["a"])
    assert empty is not None and empty["a"].tolist() == [] and empty["a"].dtype == np.int64
    db.close()


_JOIN_VARIANTS = {  # change → (task join made in numpy, PMU pivot made in numpy)
    "full": ([], True, True),
    "pmu reals, two rows of a metric": (["UPDATE TASK_PMU_INFO SET value = 120.25 WHERE rowid = 3",
                                         "INSERT INTO TASK_PMU_INFO SELECT globalTaskId, name, 450.5 FROM TASK_PMU_INFO "
                                         "WHERE rowid = 1",
                                         "INSERT INTO TASK_PMU_INFO SELECT globalTaskId, name, 7 FROM TASK_PMU_INFO "
                                         "WHERE rowid = 2"], True, True),
    "pmu text value": (["UPDATE TASK_PMU_INFO SET value = 'n/a' WHERE rowid = 2"], True, False),
    "pmu NULL value": (["UPDATE TASK_PMU_INFO SET value = NULL WHERE rowid = 2"], True, False),
    "pmu real id": (["UPDATE TASK_PMU_INFO SET globalTaskId = 2.5 WHERE rowid = 4"], True, False),
    "compute row twice": (["INSERT INTO COMPUTE_TASK_INFO SELECT * FROM COMPUTE_TASK_INFO WHERE globalTaskId = 3"],
                          False, True),
    "task NULL id": (["UPDATE TASK SET globalTaskId = NULL WHERE globalTaskId = 6"], False, True),
    "task real id": (["UPDATE TASK SET globalTaskId = 3.5 WHERE globalTaskId = 6"], False, True),
    "comm inline type": (["UPDATE COMMUNICATION_TASK_INFO SET taskType = 'Memcpy' WHERE globalTaskId = 8"], False, True),
}


@pytest.mark.parametrize("which", [*_JOIN_VARIANTS, *[f"real:{p.parent.name}/{p.name}" for p in _REAL_DBS]])
def test_tasks_joined_and_pmu_pivoted_in_numpy_load_like_sql(which: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The TASK rows' compute info and communication membership are joined, and TASK_PMU_INFO
    pivoted, in numpy when every id is an integer (and, for the pivot, every value a number);
    anything else goes to the SQL join and pivot. Either way every table equals the SQL-only
    load's: duplicated compute rows (the left join repeats the task), a NULL / real task id, an
    inline text type, reals beside integers and two rows of one metric (the largest wins)."""
    from perfcmp_core.load import npu_db_device

    if which.startswith("real:"):
        path = next(p for p in _REAL_DBS if which.endswith(f"{p.parent.name}/{p.name}"))
        changes, joined, pivoted = [], True, "level0" not in which  # level 0 has no PMU rows
    else:
        path = write_full_db(tmp_path / "ascend_pytorch_profiler_0.db")
        changes, joined, pivoted = _JOIN_VARIANTS[which]
        conn = sqlite3.connect(path)
        for change in changes:
            conn.execute(change)
        conn.commit()
        conn.close()
    taken: dict[str, list[bool]] = {"_tasks_joined_here": [], "_pmu_pivoted_here": []}
    for name, seen in taken.items():
        def spy(*args: object, _real: object = getattr(npu_db_device, name), _seen: list[bool] = seen) -> object:
            out = _real(*args)  # type: ignore[operator]
            _seen.append(out is not None)
            return out

        monkeypatch.setattr(npu_db_device, name, spy)
    opts = LoadOptions(use_cache=False)
    here = load_profile(str(path), opts)
    assert taken["_tasks_joined_here"] == [joined]
    assert taken["_pmu_pivoted_here"] == ([pivoted] if "level0" not in which else [])
    monkeypatch.setattr(npu_db_device, "_tasks_joined_here", lambda db, q: None)
    monkeypatch.setattr(npu_db_device, "_pmu_pivoted_here", lambda db, ids: None)
    _profiles_equal(here, load_profile(str(path), opts))
    if which == "pmu reals, two rows of a metric":  # task 1: aic_total_time 450 and 450.5, mte2 120.25
        k = here.kernels.set_index("task_id")
        assert k.loc[1, "aicore_us"] == 0.4505 and k.loc[1, "mte2_us"] == 0.12025


#: TASK keyed by its task id (the project's generated Dbs: SQLite joins by scanning
#: COMMUNICATION_TASK_INFO and looking each task up by row id).
_TASK_BY_ROWID = ["ALTER TABLE TASK RENAME TO TASK_READ",
                  "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
                  "globalTaskId INTEGER PRIMARY KEY, globalPid INTEGER, taskType INTEGER, contextId INTEGER, "
                  "streamId INTEGER, taskId INTEGER, modelId INTEGER)",
                  "INSERT INTO TASK SELECT * FROM TASK_READ ORDER BY startNs", "DROP TABLE TASK_READ"]
#: torch_npu's index (SQLite joins by scanning TASK and looking its rows up in the index).
_TASK_INDEX = ["CREATE INDEX CommunicationTaskIndex ON COMMUNICATION_TASK_INFO (globalTaskId)"]
#: Every cell an integer (the synthetic Db has a NULL group), and two tasks starting together
#: whose communication rows come in the other order than the tasks (the join's order decides
#: theirs), one of them with two rows.
_COMM_INTEGERS = ["UPDATE COMMUNICATION_TASK_INFO SET groupName = -1 WHERE groupName IS NULL",
                  f"INSERT INTO TASK (globalTaskId, startNs, endNs, taskType, streamId) VALUES (31, {B + 4_620}, "
                  f"{B + 4_640}, (SELECT taskType FROM TASK WHERE globalTaskId = 7), 2)",
                  f"INSERT INTO TASK (globalTaskId, startNs, endNs, taskType, streamId) VALUES (32, {B + 4_620}, "
                  f"{B + 4_650}, (SELECT taskType FROM TASK WHERE globalTaskId = 8), 2)",
                  "INSERT INTO COMMUNICATION_TASK_INFO (globalTaskId, taskType, planeId, groupName, opId) "
                  "SELECT 32, taskType, 5, groupName, 1 FROM COMMUNICATION_TASK_INFO WHERE globalTaskId = 7",
                  "INSERT INTO COMMUNICATION_TASK_INFO (globalTaskId, taskType, planeId, groupName, opId) "
                  "SELECT 31, taskType, 4, groupName, 1 FROM COMMUNICATION_TASK_INFO WHERE globalTaskId = 7",
                  "INSERT INTO COMMUNICATION_TASK_INFO (globalTaskId, taskType, planeId, groupName, opId) "
                  "SELECT 32, taskType, 6, groupName, 1 FROM COMMUNICATION_TASK_INFO WHERE globalTaskId = 8"]
_COMM_VARIANTS = {  # changes → COMMUNICATION_TASK_INFO read by one scan
    "task id as row id": (_TASK_BY_ROWID + _COMM_INTEGERS, True),
    "task id index": (_TASK_INDEX + _COMM_INTEGERS, True),
    "task id index, arrow": (_TASK_INDEX + _COMM_INTEGERS, True),
    "no index, no row id (SQLite's own plan)": (_COMM_INTEGERS, False),
    "index of two columns": (["CREATE INDEX CommunicationTaskIndex ON COMMUNICATION_TASK_INFO (globalTaskId, planeId)"]
                             + _COMM_INTEGERS, False),
    "a NULL group": (_TASK_INDEX, False),
    "a task id twice in TASK": (_TASK_INDEX + _COMM_INTEGERS + [
        "INSERT INTO TASK SELECT * FROM TASK WHERE globalTaskId = 31"], False),
}


@pytest.mark.parametrize("which", [*_COMM_VARIANTS, *[f"real:{p.parent.name}/{p.name}" for p in _REAL_DBS]])
def test_communication_tasks_from_one_scan_load_like_sql(which: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """COMMUNICATION_TASK_INFO is scanned once, and the tasks' communication membership and
    COMM_TASKS made from that scan and the TASK rows, where every cell is an integer and SQLite's
    plan for the SQL join is one whose row order the numpy join gives (a scan of the table
    looking tasks up by row id; a scan of TASK looking its rows up in an index of the task id
    alone); anything else is the SQL join. Every table equals the SQL join's either way, in
    particular the order of rows starting together."""
    from perfcmp_core.load import npu_db_device, npu_db_sql

    if which.startswith("real:"):
        path = next(p for p in _REAL_DBS if which.endswith(f"{p.parent.name}/{p.name}"))
        scanned = True
    else:
        path = write_full_db(tmp_path / "ascend_pytorch_profiler_0.db")
        changes, scanned = _COMM_VARIANTS[which]
        conn = sqlite3.connect(path)
        for change in changes:
            conn.execute(change)
        conn.commit()
        conn.close()
    if "arrow" not in which:
        monkeypatch.setattr(npu_db_sql.Db, "_arrow_int_columns", lambda self, sql, names: None)
    joined: list[bool] = []
    real = npu_db_device._comm_joined

    def spy(*args: object) -> object:
        out = real(*args)  # type: ignore[arg-type]
        joined.append(out is not None)
        return out

    monkeypatch.setattr(npu_db_device, "_comm_joined", spy)
    opts = LoadOptions(use_cache=False)
    here = load_profile(str(path), opts)
    assert any(joined) == scanned
    monkeypatch.setattr(npu_db_device, "_comm_info", lambda db: None)
    sql = load_profile(str(path), opts)
    _profiles_equal(here, sql)
    if not which.startswith("real:") and "NULL" not in which:  # the rows starting together, in the join's order
        together = sql.comm_tasks[sql.comm_tasks["start_ns"] == B + 4_620]
        assert len(together) == (4 if "twice" in which else 3)  # a task read twice joins twice


@pytest.mark.parametrize("which", [*_JOIN_VARIANTS, "inline-text", "real-in-int",
                                   *[f"real:{p.parent.name}/{p.name}" for p in _REAL_DBS]])
def test_scans_read_through_arrow_load_like_sqlite3(which: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``adbc-driver-sqlite`` installed, the integer scans of one table (PYTORCH_API, TASK,
    COMPUTE_TASK_INFO, TASK_PMU_INFO, CONNECTION_IDS, the memory tables) are read through Arrow;
    every table equals the one sqlite3 alone reads, on the same variants as the joins above
    (a NULL, text or real cell makes Arrow refuse the scan, and the text path decides)."""
    pytest.importorskip("adbc_driver_sqlite")
    pytest.importorskip("pyarrow")  # the driver's DB-API needs it: without it the loader reads text
    from perfcmp_core.load import npu_db_sql

    if which.startswith("real:"):
        path = next(p for p in _REAL_DBS if which.endswith(f"{p.parent.name}/{p.name}"))
    else:
        path = write_full_db(tmp_path / "ascend_pytorch_profiler_0.db")
        changes = {"inline-text": ["UPDATE TASK SET taskType = 'KERNEL_AICORE' WHERE rowid = 1"],
                   "real-in-int": ["UPDATE TASK SET endNs = 123456789.5 WHERE rowid = 2"]}.get(which) \
            or _JOIN_VARIANTS[which][0]
        conn = sqlite3.connect(path)
        for change in changes:
            conn.execute(change)
        conn.commit()
        conn.close()
    read: list[bool] = []
    real = npu_db_sql.Db._arrow_int_columns

    def spy(self: npu_db_sql.Db, sql: str, names: list[str]) -> object:
        out = real(self, sql, names)
        read.append(out is not None)
        return out

    monkeypatch.setattr(npu_db_sql.Db, "_arrow_int_columns", spy)
    opts = LoadOptions(use_cache=False)
    arrow = load_profile(str(path), opts)
    assert any(read)  # PYTORCH_API at least
    monkeypatch.setattr(npu_db_sql.Db, "_arrow_int_columns", lambda self, sql, names: None)
    _profiles_equal(arrow, load_profile(str(path), opts))


def test_arrow_scan_refuses_what_is_not_an_integer_and_is_optional(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``Db.scan_columns`` by hand: the same columns as ``Db.int_columns`` (64-bit extremes
    exactly), None for a NULL, a text or a real anywhere; without the driver installed the
    Arrow reader is simply absent and the text path reads the scan."""
    import sys

    from perfcmp_core.load.npu_db_sql import Db

    path = tmp_path / "t.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE T (a INTEGER, b INTEGER, c)")
    conn.executemany("INSERT INTO T VALUES (?, ?, ?)",
                     [(1, 2**63 - 1, 7), (2, -(2**63), None), (3, 0, "x"), (4, 10, 2.5)])
    conn.commit()
    conn.close()
    db = Db(path)
    got = db.scan_columns("SELECT a AS a, b AS b FROM T", ["a", "b"])
    assert got is not None and got["b"].tolist() == [2**63 - 1, -(2**63), 0, 10] and got["b"].dtype == np.int64
    for where in ("a = 2", "a = 3", "a = 4"):  # NULL, text, real
        assert db.scan_columns(f"SELECT a AS a, c AS c FROM T WHERE a = 1 OR {where}", ["a", "c"]) is None
    db.close()
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # not installed: import fails
    db = Db(path)
    assert db._arrow_int_columns("SELECT a AS a FROM T", ["a"]) is None
    assert db.scan_columns("SELECT a AS a FROM T", ["a"])["a"].tolist() == [1, 2, 3, 4]
    db.close()
