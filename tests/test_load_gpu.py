"""GPU torch.profiler trace loader: every table on hand-built traces, bad inputs, real traces.

Expected values on the tiny traces are worked out by hand from the events written in each test
(times in the traces are µs, the model's are ns, so every expected time is ``µs * 1000``).
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcmp_core.errors import InputError
from perfcmp_core.load import load_profile
from perfcmp_core.load.detect import Source
from perfcmp_core.load.gpu import load_gpu
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gpu-real"
#: Epoch µs (old Kineto): in ns (~1.7e18) beyond float64's exact integers, so a float detour shows.
BASE_US = 1_661_203_462_598_000


def _write(tmp_path: Path, events: list[Any], name: str = "t.pt.trace.json",
           extra: dict[str, Any] | None = None) -> Path:
    doc = {"schemaVersion": 1, **(extra or {}), "traceEvents": events}
    path = tmp_path / name
    text = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return path


def _load(path: Path, **opts: Any) -> Profile:
    # No profile cache: these tests are about reading the file.
    profile = load_profile(str(path), LoadOptions(use_cache=False, **opts))
    profile.check()
    return profile


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1,
       **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _flow(ph: str, cat: str, fid: int, ts: float, pid: int, tid: int) -> dict[str, Any]:
    return {"ph": ph, "cat": cat, "name": cat, "id": fid, "pid": pid, "tid": tid, "ts": ts}


def _kernel(name: str, ts: float, dur: float, corr: int | None = None, stream: int | None = 7,
            cat: str = "kernel", tid: int = 7) -> dict[str, Any]:
    args: dict[str, Any] = {"device": 0}
    if corr is not None:
        args["correlation"] = corr
    if stream is not None:
        args["stream"] = stream
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


# ---------------------------------------------------------------------------------------------
# Host ops, kernels, steps, communication
# ---------------------------------------------------------------------------------------------

# Ops (start, end µs) and the rows they get once sorted by (start, longer first):
#  0 ProfilerStep#3   100-200 t1          6 aten::relu        150-210 t1 (outlives the step)
#  1 aten::linear     110-150 t1          7 ProfilerStep#4    300-350 t1
#  2 aten::mul        112-122 t2          8 cudaLaunchKernel  305-307 t1 corr 9
#  3 cudaLaunchKernel 113-115 t2 corr 8   9 aten::copy_       306-316 t1
#  4 aten::addmm      115-145 t1         10 cudaMemcpyAsync   306-308 t1 (flow s, my_flow)
#  5 cudaLaunchKernel 120-125 t1 corr 7  11 cudaMemcpyAsync   330-332 t1 (flow s, ac2g)
HOST_EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
    _x("user_annotation", "ProfilerStep#3", 100, 100),
    _x("cpu_op", "aten::linear", 110, 40, **{
        "Input Dims": [[8, 16], [32, 16], []], "Input type": ["float", "float", ""],
        "Call stack": "train.py(12): forward"}),
    _x("cpu_op", "aten::addmm", 115, 30, correlation=7),  # only runtime ops' correlation counts
    _x("cuda_runtime", "cudaLaunchKernel", 120, 5, correlation=7),
    _x("cpu_op", "aten::relu", 150, 60),
    _x("cpu_op", "aten::mul", 112, 10, tid=2),
    _x("cuda_runtime", "cudaLaunchKernel", 113, 2, tid=2, correlation=8),
    _x("user_annotation", "ProfilerStep#4", 300, 50),
    _x("CUDA_Runtime", "cudaLaunchKernel", 305, 2, correlation=9),
    _x("cpu_op", "aten::copy_", 306, 10),
    _x("cuda_runtime", "cudaMemcpyAsync", 306, 2),
    _x("cuda_runtime", "cudaMemcpyAsync", 330, 2),
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
     "tid": "PyTorch Profiler", "ts": 0, "dur": 1000},
]
DEVICE_EVENTS = [
    _kernel("gemm_kernel", 130, 10, corr=7),
    _kernel("mul_kernel", 125, 3, corr=8),
    _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 310, 20, corr=9, stream=20, tid=20),
    # No op carries correlation 10 or 11: linked only through flows.
    _kernel("Memcpy HtoD (Pinned -> Device)", 320, 4, corr=10, cat="gpu_memcpy"),
    _flow("s", "my_flow", 10, 306, 1, 1), _flow("f", "my_flow", 10, 320, 0, 7),
    _kernel("Memcpy DtoH (Device -> Pinned)", 340, 4, corr=11, cat="gpu_memcpy"),
    _flow("s", "ac2g", 11, 330, 1, 1), _flow("f", "ac2g", 11, 340, 0, 7),
    # The flow ends at ts 360 on tid 7, the kernel runs on tid 8: no link.
    _kernel("orphan_kernel", 360, 2, corr=12, stream=8, tid=8),
    _flow("s", "ac2g", 12, 330, 1, 1), _flow("f", "ac2g", 12, 360, 0, 7),
    _kernel("Memset (Device)", 400, 1, stream=None, cat="gpu_memset"),
]


@pytest.fixture
def host_trace(tmp_path: Path) -> Path:
    return _write(tmp_path, HOST_EVENTS + DEVICE_EVENTS, extra={"distributedInfo": {"rank": 5}})


def test_ops_rows_nesting_per_thread_and_steps(host_trace: Path) -> None:
    ops = _load(host_trace).ops
    assert ops["name"].tolist() == [
        "ProfilerStep#3", "aten::linear", "aten::mul", "cudaLaunchKernel", "aten::addmm",
        "cudaLaunchKernel", "aten::relu", "ProfilerStep#4", "cudaLaunchKernel", "aten::copy_",
        "cudaMemcpyAsync", "cudaMemcpyAsync"]
    assert ops["tid"].tolist() == [1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    assert ops["start_ns"].tolist() == [t * 1000 for t in
                                        (100, 110, 112, 113, 115, 120, 150, 300, 305, 306, 306, 330)]
    assert ops["end_ns"].tolist() == [t * 1000 for t in
                                      (200, 150, 122, 115, 145, 125, 210, 350, 307, 316, 308, 332)]
    # aten::mul (t2) starts inside aten::linear (t1) but lives on another thread; aten::relu
    # starts inside ProfilerStep#3 but ends after it; aten::copy_ starts inside the launch at
    # 305 but outlives it. None of them nests there.
    assert ops["parent"].tolist() == [-1, 0, -1, 2, 1, 4, -1, -1, 7, 7, 9, 7]
    assert ops["depth"].tolist() == [0, 1, 0, 1, 2, 3, 0, 0, 1, 1, 2, 1]
    assert ops["cat"].tolist()[8] == "cuda_runtime"  # "CUDA_Runtime" lower-cased
    assert ops["link"].tolist() == [-1, -1, -1, 8, -1, 7, -1, -1, 9, -1, -1, -1]
    assert ops["step"].tolist() == [3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4]
    assert ops["is_step"].tolist() == [True] + [False] * 6 + [True] + [False] * 4
    assert ops.loc[1, "input_dims"] == "[[8, 16], [32, 16], []]"
    assert ops.loc[1, "input_types"] == "['float', 'float', '']"
    assert ops.loc[1, "call_stack"] == "train.py(12): forward"
    assert (ops.drop(index=1)[["input_dims", "input_types", "call_stack"]] == "").all().all()


def test_steps_table(host_trace: Path) -> None:
    steps = _load(host_trace).steps
    assert steps.to_dict("list") == {"step": [3, 4], "start_ns": [100_000, 300_000],
                                     "end_ns": [200_000, 350_000]}


def test_kernels_linked_by_correlation_then_default_flows(host_trace: Path) -> None:
    k = _load(host_trace).kernels
    assert k["name"].tolist() == [
        "mul_kernel", "gemm_kernel", "ncclKernel_AllReduce_RING_LL_Sum_float",
        "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)", "orphan_kernel",
        "Memset (Device)"]
    assert k["task_type"].tolist() == ["kernel", "kernel", "kernel", "gpu_memcpy", "gpu_memcpy",
                                       "kernel", "gpu_memset"]
    assert k["start_ns"].tolist() == [125_000, 130_000, 310_000, 320_000, 340_000, 360_000, 400_000]
    assert k["dur_ns"].tolist() == [3000, 10_000, 20_000, 4000, 4000, 2000, 1000]
    assert k["stream"].tolist() == [7, 7, 20, 7, 7, 8, -1]
    assert k["link"].tolist() == [8, 7, 9, 10, 11, 12, -1]
    # mul → row 3 (t2 launch), gemm → row 5, nccl → row 8 by correlation; the DtoH copy through
    # its ac2g flow → row 11; the my_flow copy is not followed by default; the orphan's flow
    # ends on another tid.
    assert k["op_row"].tolist() == [3, 5, 8, -1, 11, -1, -1]
    assert k["step"].tolist() == [3, 3, 4, 4, 4, -1, -1]  # 360 and 400 are after step 4 (300-350)
    assert k["is_comm"].tolist() == [False, False, True, False, False, False, False]
    assert k["in_trace"].all() and not k["has_details"].any()
    assert (k[["op_type", "core", "input_shapes"]] == "").all().all() and (k["task_id"] == -1).all()
    assert k["aicore_us"].isna().all()


def test_custom_flow_category_replaces_defaults(host_trace: Path) -> None:
    k = _load(host_trace, gpu_flow_cat="MY_FLOW").kernels
    # The HtoD copy's my_flow s-end sits at 306 on t1, where aten::copy_ (depth 1) and
    # cudaMemcpyAsync (depth 2) both start: the innermost op (row 10) launched it. ac2g is no
    # longer a flow category, so the DtoH copy loses its link.
    assert k["op_row"].tolist() == [3, 5, 8, 10, -1, -1, -1]


def test_flow_fallback_at_epoch_timestamps(tmp_path: Path) -> None:
    events = [
        _x("cpu_op", "aten::copy_", BASE_US + 1, 10),
        _x("cuda_runtime", "cudaMemcpyAsync", BASE_US + 2, 2),
        _x("cuda_runtime", "cudaMemcpyAsync", BASE_US + 3, 2),
        _kernel("Memcpy DtoD (Device -> Device)", BASE_US + 20, 1, cat="gpu_memcpy"),
        _kernel("never_launched", BASE_US + 30, 1),
        _flow("s", "ac2g", 1, BASE_US + 3, 1, 1), _flow("f", "ac2g", 1, BASE_US + 20, 0, 7),
    ]
    p = _load(_write(tmp_path, events))
    assert p.ops["start_ns"].tolist() == [(BASE_US + t) * 1000 for t in (1, 2, 3)]
    assert p.kernels["start_ns"].tolist() == [(BASE_US + t) * 1000 for t in (20, 30)]
    assert p.kernels["op_row"].tolist() == [2, -1]


def test_nccl_kernels_become_comm_ops(host_trace: Path) -> None:
    comm = _load(host_trace).comm_ops
    assert comm.to_dict("list") == {
        "name": ["ncclKernel_AllReduce_RING_LL_Sum_float"],
        "op_type": ["ncclKernel_AllReduce_RING_LL_Sum_float"],
        "group": [""], "start_ns": [310_000], "dur_ns": [20_000], "link": [9], "step": [4]}


def test_meta(host_trace: Path) -> None:
    meta = _load(host_trace).meta
    assert (meta.kind, meta.framework, meta.export, meta.level) == ("gpu", "pytorch", "json", "file")
    assert meta.source == str(host_trace)
    assert meta.files_used == [str(host_trace.resolve())]
    assert (meta.rank, meta.device) == (5, 0)
    assert meta.with_stack is True  # a non-empty Call stack
    assert meta.record_shapes is True
    assert meta.profile_memory is False
    assert meta.backward_tid == -1
    assert meta.notes == []


def test_gzip_trace_loads_the_same(tmp_path: Path) -> None:
    plain = _load(_write(tmp_path, HOST_EVENTS + DEVICE_EVENTS))
    packed = _load(_write(tmp_path, HOST_EVENTS + DEVICE_EVENTS, name="t.pt.trace.json.gz"))
    for name, table in plain.tables().items():
        assert table.equals(packed.tables()[name]), name


# ---------------------------------------------------------------------------------------------
# Python functions, fwdbwd flows, odd events
# ---------------------------------------------------------------------------------------------


def test_pyfuncs_fwdbwd_and_backward_tid(tmp_path: Path) -> None:
    events = [
        _x("python_function", "nn.Module: Net_0", 0, 100),
        _x("python_function", "train.py(5): step", 0, 200),
        _x("python_function", "nn.Module: Linear_0", 10, 20),
        _x("python_function", "NN.MODULE: Other_0", 20, 5, tid=2),
        # The first fwdbwd flow end in the file is an orphan on tid 11: it still names the
        # backward thread (as in the reference); only complete pairs become rows.
        _flow("f", "fwdbwd", 4, 450, 1, 11),
        _flow("s", "fwdbwd", 1, 15, 1, 1),
        _flow("s", "fwdbwd", 2, 16, 1, 1),
        _flow("s", "fwdbwd", 3, 40, 1, 1),
        _flow("f", "fwdbwd", 3, 600, 1, 9),
        _flow("f", "fwdbwd", 1, 500, 1, 9),
        _x("cpu_op", "aten::empty", 1, 1, pid="Spans", tid="PyTorch Profiler"),
        {"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 3},
        5,  # not an object
    ]
    p = _load(_write(tmp_path, events))
    py = p.pyfuncs
    assert py["name"].tolist() == ["train.py(5): step", "nn.Module: Net_0", "nn.Module: Linear_0",
                                   "NN.MODULE: Other_0"]
    assert py["is_module"].tolist() == [False, True, True, True]
    assert py["parent"].tolist() == [-1, 0, 1, -1]
    assert py["depth"].tolist() == [0, 1, 2, 0]
    assert py["tid"].tolist() == [1, 1, 1, 2]
    assert py["end_ns"].tolist() == [200_000, 100_000, 30_000, 25_000]
    assert p.fwdbwd.to_dict("list") == {
        "id": [1, 3], "start_ts_ns": [15_000, 40_000], "start_tid": [1, 1],
        "end_ts_ns": [500_000, 600_000], "end_pid": [1, 1], "end_tid": [9, 9]}
    assert p.meta.backward_tid == 11
    assert p.meta.with_stack is True  # python_function events, no Call stack
    assert p.meta.record_shapes is False
    # A string pid/tid gets its own negative id instead of colliding with "missing" (-1).
    assert p.ops["name"].tolist() == ["aten::empty"]
    assert p.ops["pid"].iloc[0] <= -2 and p.ops["tid"].iloc[0] <= -2
    assert p.kernels.empty
    assert any("no kernel" in n.text for n in p.meta.notes)
    assert any("1 traceEvents entries are not objects" in n.text for n in p.meta.notes)
    assert any("1 events without a numeric ts ignored" in n.text for n in p.meta.notes)


def test_epoch_fractional_timestamps_are_exact(tmp_path: Path) -> None:
    # 1712195495519701.123 is not a float64 (step 0.25 µs there): parsed as a float it would
    # become ...701.0 or ...701.25 µs. The loader re-reads the digits. An extra "ts" key inside
    # args must not shift the alignment.
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, '
        '"ts": 1712195495519701.123, "dur": 2.5, "args": {"ts": 3}},'
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
        '"ts": 1712195495519701.456, "dur": 1.25, "args": {"correlation": 1}},'
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1712195495519710.987, "dur": 0.001, "args": {"correlation": 1, "stream": 7}}'
        "]}"
    )
    path = tmp_path / "epoch.pt.trace.json"
    path.write_text(text)
    p = _load(path)
    assert p.ops["start_ns"].tolist() == [1712195495519701123, 1712195495519701456]
    assert p.ops["end_ns"].tolist() == [1712195495519703623, 1712195495519702706]
    assert p.kernels["start_ns"].tolist() == [1712195495519710987]
    assert p.kernels["dur_ns"].tolist() == [1]
    assert p.kernels["op_row"].tolist() == [1]
    assert p.ops["parent"].tolist() == [-1, 0]
    assert p.meta.notes == []


def test_nan_tokens_written_by_python_json_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "nan.pt.trace.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, '
                    '"tid": 7, "ts": 10, "dur": 2, "args": {"stream": 7, "occupancy": NaN}},'
                    '{"ph": "X", "cat": "cpu_op", "name": "aten::full", "pid": 1, "tid": 1, '
                    '"ts": 5, "dur": 1, "args": {"Input Dims": [[18446744073709551617]]}}]}')
    p = _load(path)
    assert p.kernels["start_ns"].tolist() == [10_000]
    assert p.ops["input_dims"].tolist() == ["[[18446744073709551617]]"]  # beyond 64 bits
    assert any("NaN/Infinity" in n.text for n in p.meta.notes)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def _mem(ts: int, addr: int, size: int, device: int = 0, name: str = "[memory]") -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": name, "pid": 1, "tid": 1,
            "ts": BASE_US + ts, "args": {"Total Reserved": 2048 + ts, "Total Allocated": 1000 + ts,
                               "Bytes": size, "Addr": addr, "Device Id": device, "Device Type": 1}}


def _ns(ts: int) -> int:
    return (BASE_US + ts) * 1000


MEMORY_EVENTS = [
    _mem(10, 100, 512),
    _mem(20, 100, -512),  # file order is not time order
    _mem(12, 200, 256),
    _mem(14, 300, 64, device=-1),  # CPU sample: ignored everywhere
    _mem(25, 200, 128),  # second allocation on an open address: the 256 B one stays unreleased
    _mem(30, 200, -100),  # size differs from the 128 B allocation
    _mem(35, 400, -64),  # free without an allocation: ignored
    _mem(40, 100, 1024, name="[Memory]"),  # never freed
]


def test_memory_samples(tmp_path: Path) -> None:
    p = _load(_write(tmp_path, MEMORY_EVENTS))
    assert p.memory.to_dict("list") == {
        "ts_ns": [_ns(t) for t in (10, 12, 20, 25, 30, 35, 40)],
        "component": [""] * 7, "device": [0] * 7,
        "total_reserved_bytes": [2058, 2060, 2068, 2073, 2078, 2083, 2088],
        "total_allocated_bytes": [1010, 1012, 1020, 1025, 1030, 1035, 1040]}
    assert p.meta.profile_memory is True


def test_op_memory_pairs_by_address_keeping_size_mismatches(tmp_path: Path) -> None:
    p = _load(_write(tmp_path, MEMORY_EVENTS))
    assert p.op_memory.to_dict("list") == {
        "name": ["", "", "", ""],
        "size_bytes": [512, 256, 128, 1024],
        "place_ns": [_ns(10), _ns(12), _ns(25), _ns(40)],
        "alloc_ns": [_ns(10), _ns(12), _ns(25), _ns(40)],
        # The reference drops the 128 B allocation (freed as 100 B); we keep it with its release.
        "release_ns": [_ns(20), -1, _ns(30), -1]}
    assert any("1 memory frees differ in size" in n.text for n in p.meta.notes)


@pytest.mark.parametrize("spell", [lambda a: f"0x{a:x}", lambda a: 2**63 - a],
                         ids=["text", "near-int64-max"])
def test_op_memory_pairs_alike_whatever_the_addresses_are_written_as(tmp_path: Path, spell: Any) -> None:
    """The same events with each address written otherwise (hex text, large ints that fit
    int64) pair exactly as with the small ints above: an address is a key, only its equality
    matters. A hex text beside an int of the same value stays another address."""
    events = [{**e, "args": {**e["args"], "Addr": spell(e["args"]["Addr"])}} for e in MEMORY_EVENTS]
    p = _load(_write(tmp_path, events))
    assert p.op_memory["size_bytes"].tolist() == [512, 256, 128, 1024]
    assert p.op_memory["release_ns"].tolist() == [_ns(20), -1, _ns(30), -1]
    mixed = events[:1] + MEMORY_EVENTS[1:2]  # 512 B allocated at "0x64", freed at 100
    q = _load(_write(tmp_path, mixed))
    assert q.op_memory["release_ns"].tolist() == ([-1] if spell(100) != 100 else [_ns(20)])


def test_memory_tables_skipped_when_not_needed(tmp_path: Path) -> None:
    p = _load(_write(tmp_path, MEMORY_EVENTS), load_memory=False)
    assert p.memory.empty and p.op_memory.empty
    assert p.meta.profile_memory is True


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def _error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_profile(str(path), LoadOptions(use_cache=False))
    message = str(info.value)
    assert path.name in message and "\n" not in message
    return message


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "cut.pt.trace.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "é", "ts": 1')
    message = _error(path)
    # 49 characters, 50 bytes (é is two bytes in UTF-8): the offset is in bytes.
    assert "is not valid JSON (unexpected end of data at byte 50)" in message


def test_garbage_after_document(tmp_path: Path) -> None:
    path = tmp_path / "two.pt.trace.json"
    path.write_text('{"traceEvents": []} {"traceEvents": []}')
    assert "is not valid JSON (unexpected content after document at byte 20)" in _error(path)


@pytest.mark.parametrize("content", ['{"foo": 1}', '{"traceEvents": 5}', '{"traceEvents": {}}'])
def test_no_trace_events_list(tmp_path: Path, content: str) -> None:
    path = tmp_path / "odd.pt.trace.json"
    path.write_text(content)
    assert "no traceEvents list" in _error(path)


def test_top_level_not_an_object(tmp_path: Path) -> None:
    # detect() sends a top-level array to the NPU loader, so call the GPU loader directly.
    path = tmp_path / "list.pt.trace.json"
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match=r"list\.pt\.trace\.json: .*top level is an array"):
        load_gpu(Source("gpu", str(path), trace=path), LoadOptions())


def test_gz_that_is_not_gzip(tmp_path: Path) -> None:
    path = tmp_path / "plain.pt.trace.json.gz"
    path.write_text('{"traceEvents": []}')
    assert "is not a valid gzip file" in _error(path)
    with pytest.raises(InputError, match="plain.pt.trace.json.gz: is not a valid gzip file"):
        load_gpu(Source("gpu", str(path), trace=path), LoadOptions())


def test_truncated_gzip(tmp_path: Path) -> None:
    events = [_x("cpu_op", f"aten::op{i}", i, 1) for i in range(3000)]
    packed = gzip.compress(json.dumps({"traceEvents": events}).encode())
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(packed[: len(packed) // 2])  # the head still decompresses (detect passes)
    assert "is truncated" in _error(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.pt.trace.json"
    path.write_bytes(b"")
    assert "is empty" in _error(path)


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=False), st.text(max_size=5))
EVENT_VALUES = st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=3),
                         st.dictionaries(st.sampled_from(["correlation", "stream", "Input Dims",
                                                          "Device Id", "Bytes", "Addr"]),
                                         st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=2)),
                                         max_size=3))
EVENTS = st.lists(st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "s", "f", "i", "M", 3])},
    optional={"cat": st.sampled_from(["cpu_op", "kernel", "ac2g", "fwdbwd", "python_function",
                                      "gpu_memcpy", None]),
              "name": st.one_of(st.sampled_from(["[memory]", "ProfilerStep#2", "nccl_x"]),
                                JSON_SCALARS),
              "pid": EVENT_VALUES, "tid": EVENT_VALUES, "ts": EVENT_VALUES,
              "dur": EVENT_VALUES, "id": EVENT_VALUES, "args": EVENT_VALUES}), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS)
def test_arbitrary_event_fields_load(tmp_path: Path, events: list[Any]) -> None:
    # Whatever the field types, the loader yields a schema-conforming profile (never a
    # KeyError/TypeError/ValueError).
    path = _write(tmp_path, events)
    try:
        _load(path)
    except InputError as exc:  # nothing the loader keeps: the one accepted error
        assert "holds no profiler events" in str(exc)


# ---------------------------------------------------------------------------------------------
# Real traces (skipped when the shared data is absent)
# ---------------------------------------------------------------------------------------------


def _real(name: str) -> Path:
    path = DATA / f"{name}.pt.trace.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} not available")
    return path


@functools.lru_cache(maxsize=None)
def _real_profile(name: str) -> Profile:
    return _load(_real(name))


@functools.lru_cache(maxsize=None)
def _scan(name: str) -> dict[str, Any]:
    """Independent plain-json read of the whole trace."""
    with gzip.open(_real(name), "rt") as fh:
        return json.load(fh)


@pytest.mark.parametrize("name", ["trace_diff_control", "trace_diff_test", "alexnet"])
def test_real_trace_counts_and_links(name: str) -> None:
    doc = _scan(name)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kern = [e for e in xs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ops_ev = [e for e in xs if e.get("cat", "").lower() in
              ("cpu_op", "user_annotation", "cuda_runtime", "operator", "runtime")]
    op_corr = {e["args"]["correlation"] for e in ops_ev if "correlation" in e.get("args", {})}
    linked = sum(1 for e in kern if e["args"].get("correlation") in op_corr)

    p = _real_profile(name)
    assert len(p.kernels) == len(kern)
    assert len(p.ops) == len(ops_ev)
    assert sorted(p.kernels["start_ns"].tolist()) == sorted(e["ts"] * 1000 for e in kern)
    assert (p.kernels["op_row"] >= 0).sum() >= linked
    by_corr = p.kernels[p.kernels["link"].isin(op_corr)]
    assert len(by_corr) == linked
    assert (p.ops["link"].to_numpy()[by_corr["op_row"].to_numpy()] == by_corr["link"].to_numpy()).all()
    assert len(p.comm_ops) == sum(1 for e in kern if e["name"].lower().startswith("nccl"))
    assert len(p.steps) == len({e["name"] for e in ops_ev if e["name"].startswith("ProfilerStep#")})
    assert p.meta.rank == doc["distributedInfo"]["rank"]


def test_real_control_trace_golden_counts() -> None:
    p = _real_profile("trace_diff_control")
    # From a plain gzip+json scan of the file (see _scan): 8568 X/kernel, 228 gpu_memcpy,
    # 654 gpu_memset; 40506 cpu_op + 288 user_annotation + 24692 cuda_runtime ops; steps 1009-1014.
    assert (p.kernels["task_type"] == "kernel").sum() == 8568
    assert p.kernels["task_type"].value_counts().to_dict() == {
        "kernel": 8568, "gpu_memset": 654, "gpu_memcpy": 228}
    assert len(p.ops) == 65486
    assert p.ops["cat"].value_counts().to_dict() == {
        "cpu_op": 40506, "cuda_runtime": 24692, "user_annotation": 288}
    assert p.steps["step"].tolist() == [1009, 1010, 1011, 1012, 1013, 1014]
    assert (p.kernels["op_row"] >= 0).all()  # every kernel's correlation has a runtime op
    assert (p.meta.rank, p.meta.device) == (3, 3)
    assert p.meta.record_shapes is True and p.meta.with_stack is False
    assert p.meta.profile_memory is False


def test_real_test_trace_correlation_link_rate() -> None:
    p = _real_profile("trace_diff_test")
    # Plain json scan of the file: 15018 of 15632 device events carry a correlation that a host op
    # also carries; each of the other 614 has only a lone flow `f` event (no `s`), so the flow
    # fallback cannot link them either.
    assert len(p.kernels) == 15632
    assert (p.kernels["op_row"] >= 0).sum() == 15018


FLOW_IDS = st.one_of(st.integers(-3, 6), st.integers(2**63, 2**64), st.sampled_from(["1", "2", "x"]),
                     st.none(), st.just(float("nan")))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FLOW_IDS, st.sampled_from(["s", "f"]), st.integers(0, 3)), max_size=14),
       st.booleans())
def test_flow_pairs_match_the_last_ends_of_each_id(ends: list[tuple[Any, str, int]], ints_only: bool) -> None:
    """The columnar pairing against its definition, walked in Python: per id the last ``s``
    and the last ``f`` (ids compared as text — 7 and "7" are one id — unless every id is an
    int, missing ids never pair), pairs ordered by their ``s`` end's position."""
    import numpy as np

    from perfcmp_core.load.gpu import _flow_pairs
    from perfcmp_core.load.gpu_events import FWDBWD, Events

    if ints_only:
        ends = [(i if type(i) is int else n, ph, n) for i, ph, n in ends]
    ids = np.empty(len(ends), dtype=object)
    ids[:] = [e[0] for e in ends]
    ph = np.array([e[1] for e in ends], dtype=object)
    ts = np.array([e[2] * 10 + k for k, e in enumerate(ends)], dtype="int64")
    n = len(ends)
    ev = Events(np.full(n, FWDBWD), ph, ph, np.arange(n) + 100, np.arange(n) + 200, ts, ts,
                {FWDBWD: {"id": ids}})
    as_int = all(type(i) is int for i in ids) and all(-2**63 <= i < 2**63 for i in ids)
    key = [i if as_int else (None if i is None or i != i else str(i)) for i in ids]
    last: dict[tuple[str, Any], int] = {}
    for k, (id_, p) in enumerate(zip(key, ph)):
        if id_ is not None:
            last[(p, id_)] = k
    want = sorted((s, last[("f", id_)]) for (p, id_), s in last.items() if p == "s" and ("f", id_) in last)
    got = _flow_pairs(ev, FWDBWD)
    assert got["s_pid"].tolist() == [100 + s for s, _ in want]
    assert got["f_tid"].tolist() == [200 + f for _, f in want]
    assert got["f_ts"].tolist() == [int(ts[f]) for _, f in want]
    assert [str(i) for i in got["id"]] == [str(key[s]) for s, _ in want]


def test_every_column_of_the_tables_is_writeable(host_trace: Path) -> None:
    """The tables are built on the loader's own fresh arrays (``frame(owned=True)``): none may be
    a read-only view (pandas' ``to_numpy`` gives those), or an in-place edit of the table would
    fail, here or in the process the profile is sent to."""
    p = _load(host_trace)
    for name, table in p.tables().items():
        for block in table._mgr.blocks:
            assert block.values.flags.writeable, (name, list(table.columns[block.mgr_locs.indexer]))
