"""bench/scale_trace.py: an N× trace is N real copies end to end, still linked and still loadable."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import orjson
import pytest

from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NO_CACHE = LoadOptions(use_cache=False)


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_trace", ROOT / "bench" / "scale_trace.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


scale_trace = _module()

#: One training step: a step marker, an op launching one kernel (correlation 9, flow 9), a
#: python frame (ids 3 ← 2) and a process-name metadata event. Times in µs.
TINY = {
    "schemaVersion": 1,
    "distributedInfo": {"rank": 0},
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1,
         "ts": 100, "dur": 50, "args": {"External id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110, "dur": 20,
         "args": {"External id": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 112, "dur": 3, "args": {"External id": 7, "correlation": 9}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 1, "ts": 112},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 0, "tid": 7, "ts": 130, "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 130, "dur": 10,
         "args": {"correlation": 9, "stream": 7, "device": 0}},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1,
         "ts": 105, "dur": 30, "args": {"Python id": 3, "Python parent id": 2}},
    ],
}


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "tiny.pt.trace.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def test_copies_are_shifted_in_time_ids_and_steps(tmp_path: Path) -> None:
    src = _write(tmp_path, TINY)
    out = tmp_path / "x3.pt.trace.json"
    count = scale_trace.scale_trace(src, 3, out)
    doc = orjson.loads(out.read_bytes())
    events = doc["traceEvents"]
    # 1 metadata event once + 7 timed events × 3.
    assert count == len(events) == 1 + 7 * 3
    assert [e for e in events if e["ph"] == "M"] == [TINY["traceEvents"][0]]
    assert doc["distributedInfo"] == {"rank": 0} and doc["schemaVersion"] == 1
    # By hand: span = last end (step marker 100+50=150) − first start (100) + 1000 µs gap = 1050;
    # id shift = largest id (9) + 1 = 10; step shift = 1 step.
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [k["ts"] for k in kernels] == [130, 1180, 2230]
    assert [k["args"]["correlation"] for k in kernels] == [9, 19, 29]
    flows = [(e["ph"], e["id"], e["ts"]) for e in events if e.get("cat") == "ac2g"]
    assert flows == [("s", 9, 112), ("f", 9, 130), ("s", 19, 1162), ("f", 19, 1180),
                     ("s", 29, 2212), ("f", 29, 2230)]
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep")]
    assert steps == ["ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"]
    frames = [(e["args"]["Python id"], e["args"]["Python parent id"])
              for e in events if e.get("cat") == "python_function"]
    assert frames == [(3, 2), (13, 12), (23, 22)]
    # The source document is not modified by making copies.
    assert orjson.loads(src.read_bytes()) == TINY


def test_scaled_trace_loads_with_every_kernel_linked(tmp_path: Path) -> None:
    out = tmp_path / "x4.pt.trace.json"
    scale_trace.scale_trace(_write(tmp_path, TINY), 4, out)
    profile = load_profile(str(out), NO_CACHE)
    assert profile.steps["step"].tolist() == [5, 6, 7, 8]
    k = profile.kernels
    assert len(k) == 4 and k["link"].tolist() == [9, 19, 29, 39]
    ops = profile.ops
    assert ops.loc[k["op_row"], "name"].tolist() == ["cudaLaunchKernel"] * 4
    assert k["step"].tolist() == [5, 6, 7, 8]


def test_text_flow_ids_get_a_copy_suffix(tmp_path: Path) -> None:
    doc = {"traceEvents": [{"ph": "s", "cat": "ac2g", "id": "a1", "pid": 1, "tid": 1, "ts": 5},
                           {"ph": "f", "cat": "ac2g", "id": "a1", "pid": 0, "tid": 7, "ts": 9}]}
    out = tmp_path / "x2.pt.trace.json"
    scale_trace.scale_trace(_write(tmp_path, doc), 2, out)
    ids = [e["id"] for e in orjson.loads(out.read_bytes())["traceEvents"]]
    assert ids == ["a1", "a1", "a1-1", "a1-1"]


def test_real_trace_doubles(tmp_path: Path) -> None:
    src = DATA / "gpu-real" / "trace_diff_control.pt.trace.json.gz"
    if not src.exists():
        pytest.skip(f"{src} not available")
    out = tmp_path / "x2.pt.trace.json"
    scale_trace.scale_trace(src, 2, out)
    one = load_profile(str(src), NO_CACHE)
    two = load_profile(str(out), NO_CACHE)
    for name, table in one.tables().items():
        assert len(two.tables()[name]) == 2 * len(table), name
    n_steps = len(one.steps)
    assert two.steps["step"].tolist() == list(range(int(one.steps["step"].iloc[0]),
                                                    int(one.steps["step"].iloc[0]) + 2 * n_steps))
    assert (two.kernels["op_row"] >= 0).sum() == 2 * (one.kernels["op_row"] >= 0).sum()
    assert two.kernels["link"].is_unique == one.kernels["link"].is_unique
    # The second copy is the first one shifted by one span: same durations, same kernel names.
    half = len(one.kernels)
    assert two.kernels["dur_ns"].iloc[half:].tolist() == one.kernels["dur_ns"].tolist()
    assert two.kernels["name"].iloc[half:].tolist() == one.kernels["name"].tolist()
