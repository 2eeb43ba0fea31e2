"""Issue 25: one kernel classification behind every screen.

On every real GPU trace, GEMM and attention kernels — picked out here by their *names*, with
regexes of this test, not by the classifier under test — must all land in OverallMetrics'
Matmul / Flash Attention classes, and the Matmul / Flash Attention time of the sheet must hold
them all. Before issue 25, cuBLASLt ``nvjet`` GEMMs were "Matmul (Vector)" or "Cube" and cuDNN
SDPA attention was "Vector (No Trans)".
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from perfcmp_core.compare.device_sets import device_sets
from perfcmp_core.compare.kernel_classes import CLASS_BUCKETS
from perfcmp_core.compare.masks import DEFAULT_MASKS, TextIndexes
from perfcmp_core.compare.overall_metrics import gpu_codes, overall_metrics

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
GPU_REAL = sorted((DATA / "gpu-real").rglob("*.json.gz")) if (DATA / "gpu-real").is_dir() else []

#: Attention kernels: FlashAttention (pytorch_flash::flash_fwd/bwd), cuDNN SDPA
#: (cudnn_generated_fort_native_sdpa_*_flash_fprop/bprop, cudnn::fusion::fmha_*), xFormers / mem-
#: efficient (fmha_cutlassF/B), ROCm attn_fwd / attn_bwd. Inductor pointwise kernels that merely
#: list the attention op among their fused inputs (triton_poi_fused__scaled_dot_product_…) are not.
ATTENTION = re.compile(r"flash_(fwd|bwd)|_sdpa_|fmha|(^|[^a-z])attn_(fwd|bwd)", re.I)
#: GEMMs: cuBLAS / cuBLASLt (nvjet, *gemm*, *gemv*, cublasLt epilogues), CUTLASS, xmma / wgmma,
#: Tensile (Cijk_) — except convolutions run as implicit GEMMs and the attention kernels above.
GEMM = re.compile(r"nvjet|gemm|gemv|cublas|cutlass|xmma|wgmma|^cijk_", re.I)
CONV = re.compile(r"conv|fprop|dgrad|wgrad|implicit|igemm|winograd|fft", re.I)  # MIOpen igemm_fwd_*: convolutions
PLAIN_ELEMENTWISE = re.compile(r"^triton_(poi|red|per)_", re.I)

MATMUL = {CLASS_BUCKETS.index(b) for b in ("matmul_cube", "matmul_vector")}
FA = {CLASS_BUCKETS.index(b) for b in ("fa_fwd_cube", "fa_fwd_vector", "fa_bwd_cube", "fa_bwd_vector")}


def _name_kinds(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is attention, is GEMM) per kernel name, by this test's regexes."""
    att = np.array([bool(ATTENTION.search(n)) and not PLAIN_ELEMENTWISE.search(n) for n in names], dtype=bool)
    gemm = np.array([bool(GEMM.search(n)) and not CONV.search(n) and not PLAIN_ELEMENTWISE.search(n)
                     for n in names], dtype=bool) & ~att
    return att, gemm


@pytest.mark.parametrize("path", GPU_REAL, ids=lambda p: p.name)
def test_gemm_and_attention_time_is_all_in_matmul_and_flash_attention(path: Path) -> None:
    from perfcmp_core.load import load_profile

    profile = load_profile(str(path))
    texts = TextIndexes(profile)
    compute = device_sets(profile, texts).compute_rows
    codes = gpu_codes(profile, DEFAULT_MASKS, texts, compute)
    names = profile.kernels["name"].to_numpy(dtype=object)[compute]
    dur = profile.kernels["dur_ns"].to_numpy()[compute]
    distinct, inverse = np.unique(names.astype(str), return_inverse=True)
    att, gemm = (a[inverse] for a in _name_kinds(distinct))
    outside_fa = int(dur[att & ~np.isin(codes, list(FA | MATMUL))].sum())
    outside_mm = int(dur[gemm & ~np.isin(codes, list(MATMUL | FA))].sum())
    assert outside_fa == 0 and outside_mm == 0, (outside_fa, outside_mm)
    # attention kernels by name are Flash Attention (never Matmul), GEMMs are Matmul
    assert int(dur[att & ~np.isin(codes, list(FA))].sum()) == 0
    assert int(dur[gemm & ~np.isin(codes, list(MATMUL))].sum()) == 0
    # and the sheet's Matmul + Flash Attention rows hold at least all of that time
    m = overall_metrics(profile, DEFAULT_MASKS)
    assert m.matmul.ns >= int(dur[gemm].sum())
    assert (m.fa_fwd + m.fa_bwd).ns >= int(dur[att].sum())


def test_the_suite_sees_the_h200_traces() -> None:
    if not GPU_REAL:
        pytest.skip(f"real GPU traces not found under {DATA}")
    assert any("nvjet" in p.name or "h200" in str(p) for p in GPU_REAL)
