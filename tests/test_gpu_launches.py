"""GPU launches beyond ``cudaLaunchKernel`` (issue 12, defects 1 and 2).

Recent PyTorch on H100 launches its GEMMs through the CUDA driver API (``cuLaunchKernel`` /
``cuLaunchKernelEx``, category ``cuda_driver``); ROCm files every HIP call under ``cuda_runtime``
and runs every kernel on stream 0. Both must link and be measured like any CUDA launch. Checked by
hand on the pattern fixtures (fixtures/gpu_patterns, values from fixtures/gen/gpu_patterns.py),
then on the real H100 / MI300 traces against what the raw files say.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

import numpy as np
import orjson
import pytest

from perfcmp_core.compare.masks import load_masks
from perfcmp_core.compare.modules import compare_modules
from perfcmp_core.compare.overall_metrics import overall_metrics
from perfcmp_core.device_time import device_time
from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import CompareOptions, LoadOptions

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = ROOT / "fixtures" / "gpu_patterns"
H100 = PATTERNS / "h100_driver_api.pt.trace.json"
MI300 = PATTERNS / "mi300_hip.pt.trace.json"
REAL = ROOT.parent / "shared" / "data" / "gpu-real" / "tracelens"
MASKS = load_masks(None)

# Kernels of the pattern traces (ns, fixtures/gen/gpu_patterns.py): the two Linear GEMMs 5 824 and
# 7 824 (starting at 50 000 and 110 000), attention 9 100 (MI300 only), GELU 3 500, the device copy
# 2 240 (ending at 184 240), and on H100 a 9 000 ns fill kernel launched before recording began.
GEMM = (5_824, 7_824)


@lru_cache(maxsize=None)
def _load(path: Path) -> Profile:
    return load_profile(str(path), LoadOptions(use_cache=False))


def _launcher(p: Profile, kernel: str) -> tuple[str, str, str]:
    """(launch call, its category, the op around it) of the kernel whose name starts with ``kernel``."""
    k = p.kernels
    row = int(k["op_row"][k["name"].str.startswith(kernel)].iloc[0])
    assert row >= 0, f"{kernel} is not linked"
    parent = int(p.ops["parent"].iloc[row])
    return p.ops["name"].iloc[row], p.ops["cat"].iloc[row], p.ops["name"].iloc[parent]


def test_driver_api_launches_link_like_runtime_ones() -> None:
    p = _load(H100)
    assert _launcher(p, "nvjet_tst") == ("cuLaunchKernel", "cuda_driver", "aten::addmm")
    assert _launcher(p, "void cutlass::Kernel2") == ("cuLaunchKernelEx", "cuda_driver", "aten::addmm")
    assert _launcher(p, "void at::native::vectorized_elementwise_kernel<4, at::native::Gelu") == (
        "cudaLaunchKernel", "cuda_runtime", "aten::gelu")
    assert _launcher(p, "Memcpy DtoH") == ("cudaMemcpyAsync", "cuda_runtime", "aten::copy_")
    dt = device_time(p)
    assert dt.to_json() == {"total_ns": 9_000 + sum(GEMM) + 3_500 + 2_240, "linked_ns": sum(GEMM) + 3_500 + 2_240,
                            "communication_ns": 0, "unlinked_ns": 9_000,
                            "unlinked_by_reason": {"launched_before_trace": 9_000}}


def test_driver_api_gemms_are_matmul_and_charged_to_their_linear_module() -> None:
    m = overall_metrics(_load(H100), MASKS)
    assert (m.matmul.ns, m.matmul.count) == (sum(GEMM), 2)  # launched under aten::addmm
    assert m.cube.count == 0  # before: both GEMMs were unlinked, the cutlass one filed as "Cube"
    res, reason = compare_modules(_load(H100), _load(MI300), CompareOptions())
    assert reason == ""
    d = res.statistic.data
    linear = d[d["module_class"].eq("nn.Module: Linear") & d["op"].eq("[ TOTAL ]")]
    assert np.allclose(linear["base_total"], [g / 1e6 for g in GEMM])  # ms; before: 0 and 0
    assert np.allclose(linear["comp_total"], [g / 1e6 for g in GEMM])


def test_hip_launches_and_stream_zero() -> None:
    """Every HIP kernel runs on stream 0: it is a real stream (the compute stream here), so the
    trace gets OverallMetrics (before: E2E 0, "no device activity")."""
    p = _load(MI300)
    assert set(p.kernels["stream"]) == {0}
    assert _launcher(p, "Cijk_Alik_Bljk") == ("hipExtModuleLaunchKernel", "cuda_runtime", "aten::addmm")
    assert _launcher(p, "attn_fwd") == ("hipModuleLaunchKernel", "cuda_runtime", "aten::_flash_attention_forward")
    assert _launcher(p, "Memcpy DtoD") == ("hipMemcpyWithStream", "cuda_runtime", "aten::copy_")
    assert device_time(p).unlinked_ns == 0
    m = overall_metrics(p, MASKS)
    assert m.notes == []
    assert m.e2e_ns == 182_000 + 2_240 - 50_000  # first GEMM start … copy end
    assert m.compute_ns == sum(GEMM) + 9_100 + 3_500  # disjoint kernels
    assert (m.matmul.ns, m.fa_fwd.ns, m.vector.ns) == (sum(GEMM), 9_100, 3_500)
    assert (m.sdma_stream.ns, m.sdma_stream.count) == (2_240, 1)  # DtoD on the compute stream 0
    assert m.free_time_ns == m.e2e_ns - m.compute_ns


# ------------------------------------------------------------------------------------------------
# Real traces (skipped when ../shared is absent)
# ------------------------------------------------------------------------------------------------


def _real(vendor: str) -> list[Path]:
    return sorted((REAL / vendor).glob("*.json.gz")) if REAL.is_dir() else []


def _raw(path: Path) -> list[dict]:
    return orjson.loads(gzip.open(path).read())["traceEvents"]


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/gpu-real/tracelens not present")
@pytest.mark.parametrize("path", _real("h100"), ids=lambda p: p.name)
def test_real_h100_driver_launches_all_link(path: Path) -> None:
    """Every kernel whose correlation id a ``cuda_driver`` launch carries in the raw file is linked
    to exactly that launch (bert-small: the 22 GEMMs that were unlinked before, 61 of 61 now)."""
    events = _raw(path)
    driver = {e["args"]["correlation"]: e["name"] for e in events
              if e.get("cat") == "cuda_driver" and e.get("ph") == "X" and "correlation" in e.get("args", {})}
    p = _load(path)
    k = p.kernels
    hit = k[k["link"].isin(list(driver))]
    assert len(hit) == sum(1 for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] in driver)
    assert len(hit) > 0
    ops = p.ops.iloc[hit["op_row"].to_numpy()]
    assert (ops["cat"] == "cuda_driver").all()
    assert ops["name"].tolist() == [driver[c] for c in hit["link"]]
    assert (ops["link"].to_numpy() == hit["link"].to_numpy()).all()
    if path.name.startswith("gaunernst_bert"):
        assert (len(k), int((k["op_row"] >= 0).sum()), len(hit)) == (61, 61, 22)


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/gpu-real/tracelens not present")
@pytest.mark.parametrize("path", _real("mi300") + _real("inference"), ids=lambda p: p.name)
def test_real_rocm_traces_get_overall_metrics(path: Path) -> None:
    """E2E and compute time of the real ROCm traces, derived from the raw events: E2E spans every
    kernel and copy (all on stream 0), compute is the union of the kernels."""
    events = [e for e in _raw(path) if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]
    assert {e["args"]["stream"] for e in events} == {0}
    # integer ns from the µs text as written (3 decimals at most)
    ns = [(round(e["ts"] * 1000), round(e["dur"] * 1000), e["cat"]) for e in events]
    e2e = max(s + d for s, d, _ in ns) - min(s for s, _, _ in ns)
    spans = sorted((s, s + d) for s, d, c in ns if c == "kernel")
    union, reach = 0, -1
    for s, e in spans:
        if e > reach:
            union += e - max(s, reach)
            reach = e
    m = overall_metrics(_load(path), MASKS)
    assert m.e2e_ns > 0 and m.notes == []
    assert abs(m.e2e_ns - e2e) <= 2 and abs(m.compute_ns - union) <= len(spans)  # float-µs parsing rounding
