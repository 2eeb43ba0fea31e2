"""Pairing across hardware (issue 17, docs/matching.md): the equivalence table, structural pairing
by position, and kernel classes for any pair.

Numbers checked here, with how they were derived:

* the bundled GPU-vs-NPU fixture pair (``fixtures/gpu/base.pt.trace.json`` vs
  ``fixtures/npu_text/comp_ascend_pt``, operators): one-sided device time in
  OperatorCompareStatistic falls from 24.7 % (pairing by recorded name, as the reference does) to
  0.11 % — the only one-sided row left is the comparison's injected Cast backward
  (``NpuDtypeCastBackward0``, 3 × 15 µs + fractions), which has no counterpart by design
  (fixtures/README.md, difference 2);
* the real H100 and MI300 traces of the same models (``../shared/data/gpu-real/tracelens``):
  every counted kernel lands in a class (0 % unclassified; the issue asks ≤ 5 %), the classes add up
  to the device time of :func:`perfcmp_core.device_time.device_time`, and both vendors' GEMMs and
  attention kernels are counted one for one (bert-small: 26 GEMMs, 4 attention kernels per side).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compare.align import fill_by_position
from perfcmp_core.compare.equivalence import Equivalence, load_equivalence
from perfcmp_core.compare.kernel_families import (OTHER, class_of, kernel_class_compare, kernel_classes,
                                                   kernel_op_compare)
from perfcmp_core.compare.names import pairing_keys
from perfcmp_core.compare.operators import compare_operators, match_operators
from perfcmp_core.device_time import device_time
from perfcmp_core.errors import InputError
from perfcmp_core.load import load_profile
from perfcmp_core.options import CompareOptions

from test_operators import make_profile

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
DATA = ROOT.parent / "shared" / "data"
TRACELENS = DATA / "gpu-real" / "tracelens"
REAL_NPU = DATA / "npu-real-runs" / "text" / "level1" / "rank0_ascend_pt"
MODELS = ("gaunernst_bert-small-uncased__1016001", "Qwen_Qwen1.5-0.5B-Chat__1016005")

needs_real = pytest.mark.skipif(not TRACELENS.is_dir(), reason="../shared/data absent")


@pytest.fixture(scope="module")
def gpu_vs_npu() -> tuple:
    return load_profile(str(FIX / "gpu" / "base.pt.trace.json")), load_profile(str(FIX / "npu_text" / "comp_ascend_pt"))


def one_sided_share(stat: pd.DataFrame) -> float:
    """Share of device time in statistic rows where one side has no op (the issue's measure)."""
    total = stat["base_ms"].sum() + stat["comp_ms"].sum()
    lone = stat[(stat["base_num"] == 0) | (stat["comp_num"] == 0)]
    return float((lone["base_ms"].sum() + lone["comp_ms"].sum()) / total)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


def test_builtin_table_pairs_the_names_of_the_issue() -> None:
    lookup = load_equivalence().lookup
    same = [("aten::scaled_dot_product_attention", "npu::npu_fusion_attention"),
            ("aten::_scaled_dot_product_flash_attention", "npu::npu_fusion_attention"),
            ("ScaledDotProductFlashAttentionBackward0", "NpuFusionAttentionBackward0"),
            ("aten::rms_norm", "npu::npu_rms_norm"), ("_C::paged_attention_v1", "atb::_npu_paged_attention"),
            ("Optimizer.step#AdamW.step", "Optimizer.step#NpuFusedAdamW.step"),
            ("nccl:all_reduce", "HcclAllreduce"), ("nccl:all_reduce", "AllReduce"),
            ("NativeDropoutBackward0", "NpuDropoutBackward0"), ("aten::_to_copy", "npu::npu_dtype_cast"),
            ("LinearWithGradAccumulationAndAsyncCommunication", "ColumnSeqParallelLinear")]
    for a, b in same:
        assert lookup[a] is lookup[b], (a, b)
    # Different work never shares a class.
    assert lookup["aten::scaled_dot_product_attention"] is not lookup["ScaledDotProductFlashAttentionBackward0"]
    assert "aten::linear" not in lookup and "aten::mm" not in lookup


def test_keys_see_through_the_autograd_wrapper_and_mindspore_scopes() -> None:
    names = pd.Series(["autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
                       "autograd::engine::evaluate_function: NpuFusionAttentionBackward0",
                       "Kernel::KernelLaunch::Default/net/attn/FlashAttentionScore-op12", "aten::scaled_dot_product_attention",
                       "aten::add"])
    k = pairing_keys(names, CompareOptions(), by_primitive=True)
    assert k.key[0] == k.key[1] and k.key[0].startswith("autograd::engine::evaluate_function: ")
    assert k.key[2] == k.key[3] and k.cls[2] == "flash attention"
    assert k.key[4] == "aten::add" and k.cls[4] == ""
    # Without by_primitive (MindSpore vs MindSpore) the scope stays in the key.
    assert pairing_keys(names, CompareOptions()).key[2] == "Kernel::KernelLaunch::Default/net/attn/FlashAttentionScore"
    # --exact-names: the pairing name is the key.
    assert pairing_keys(names, CompareOptions(exact_names=True)).key.tolist() == [
        n.replace("-op12", "") for n in names]


def _pair(base_name: str, comp_name: str, opts: CompareOptions,
          equivalence: Equivalence | None = None) -> pd.DataFrame:
    """One op per side inside a step, with a neighbour on each side so that nothing is alone."""
    def side(name: str):
        return make_profile([("ProfilerStep#1", 1, 0, 100, -1, 0), ("aten::add", 1, 1, 10, 0, 1),
                             (name, 1, 20, 30, 0, 1), ("aten::add", 1, 40, 50, 0, 1),
                             ("aten::mul", 1, 60, 70, 0, 1), ("aten::add", 1, 80, 90, 0, 1)],
                            [("k", 1, 1), ("k", 2, 5), ("k", 3, 1), ("k", 4, 1), ("k", 5, 1)])
    return match_operators(side(base_name), side(comp_name), opts, equivalence).pairs


def test_user_file_overrides_and_extends_the_builtin_table(tmp_path: Path) -> None:
    sdpa, fa = "aten::scaled_dot_product_attention", "npu::npu_fusion_attention"
    pairs = _pair(sdpa, fa, CompareOptions())
    row = pairs[pairs["base_name"] == sdpa].iloc[0]
    assert row["comp_name"] == fa and row["matched_as"] == "flash attention (table)"
    # A user class that takes npu_fusion_attention away from the built-in one: it no longer
    # pairs with SDPA by the table, but with the user's own op.
    user = tmp_path / "eq.ini"
    user.write_text("[op.mine]\nlabel = my attention\ntorch_npu = npu::npu_fusion_attention\nlibrary = my::attn\n")
    table = load_equivalence(str(user))
    mine = _pair("my::attn", fa, CompareOptions(), table)
    assert mine[mine["base_name"] == "my::attn"]["matched_as"].tolist() == ["my attention (table)"]
    keys = pairing_keys(pd.Series([sdpa, fa, "my::attn"]), CompareOptions(), equivalence=table)
    assert keys.key[1] == keys.key[2] != keys.key[0]
    # Disabling a built-in class.
    off = tmp_path / "off.ini"
    off.write_text("[op.attention]\nenabled = no\n")
    keys = pairing_keys(pd.Series([sdpa, fa]), CompareOptions(), equivalence=load_equivalence(str(off)))
    assert keys.key.tolist() == [sdpa, fa]


def test_op_name_map_wins_over_the_table() -> None:
    # The table says npu_rms_norm is RMSNorm; the user says it is their layer norm.
    opts = CompareOptions(op_name_map=(("npu::npu_rms_norm", "aten::layer_norm"),))
    keys = pairing_keys(pd.Series(["npu::npu_rms_norm", "aten::layer_norm", "aten::rms_norm"]), opts)
    assert keys.key[0] == keys.key[1] == "aten::layer_norm" != keys.key[2]
    pairs = _pair("aten::layer_norm", "npu::npu_rms_norm", opts)
    row = pairs[pairs["base_name"] == "aten::layer_norm"].iloc[0]
    assert row["comp_name"] == "npu::npu_rms_norm" and row["matched_as"] == ""  # the user's own rename


@pytest.mark.parametrize("text, message", [
    ("[op.x]\ntorch = a\nfoo = b\n", "unknown key(s) in [op.x]: foo"),
    ("[stuff]\nlabel = x\n", "unknown section [stuff]"),
    ("[kernel.k]\nnames = re:([\n", "invalid regular expression"),
    ("[op.a]\ntorch = x\n[op.b]\ntorch = x\n", "'x' is listed in both [op.a] and [op.b]"),
    ("[op.a]\nenabled = maybe\n", "enabled must be yes or no"),
])
def test_bad_user_tables_are_input_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.ini"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_equivalence(str(path))


def test_bad_user_table_exits_2_before_loading(tmp_path: Path) -> None:
    path = tmp_path / "bad.ini"
    path.write_text("[op.x]\ntypo = a\n")
    proc = subprocess.run([sys.executable, "-m", "perfcmp_tui", "summary", str(FIX / "gpu" / "base.pt.trace.json"),
                           str(FIX / "gpu" / "comp.pt.trace.json"), "--equivalence", str(path), "--no-cache"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"perfcmp-tui: error: {path}: unknown key(s) in [op.x]: typo "
        "(expected: enabled, label, library, mindspore, source, torch, torch_npu)"]


# ---------------------------------------------------------------------------------------------
# Structural pairing
# ---------------------------------------------------------------------------------------------


def test_fill_by_position_pairs_only_one_each_leftovers() -> None:
    steps = [(0, 0), (1, None), (None, 1), (2, 2), (3, None), (4, None), (None, 3), (None, 4), (5, 5), (6, None)]
    out, flags = fill_by_position(steps)
    assert out == [(0, 0), (1, 1), (2, 2), (3, None), (4, None), (None, 3), (None, 4), (5, 5), (6, None)]
    assert flags == [False, True, False, False, False, False, False, False, False]
    assert fill_by_position([(None, 0), (0, None)]) == ([(0, 0)], [True])


def test_structural_pairs_are_labelled_and_exact_names_turns_them_off() -> None:
    pairs = _pair("aten::cudnn_convolution", "aten::miopen_convolution", CompareOptions())
    row = pairs[pairs["base_name"] == "aten::cudnn_convolution"].iloc[0]
    assert row["comp_name"] == "aten::miopen_convolution" and row["matched_as"] == "by position"
    # The statistic counts the pair under the base's name, one row.
    _, tables = compare_operators(*[make_profile([("a", 1, 0, 10, -1, 0)], [("k", 0, 2)]),
                                    make_profile([("b", 1, 0, 10, -1, 0)], [("k", 0, 3)])], CompareOptions())
    stat = tables[0].data
    assert stat[["name", "base_num", "comp_num", "matched_as"]].values.tolist() == [["a", 1, 1, "by position: b"]]
    exact = _pair("aten::cudnn_convolution", "aten::miopen_convolution", CompareOptions(exact_names=True))
    assert int(((exact["base_row"] >= 0) & (exact["comp_row"] >= 0)).sum()) == 4  # the four neighbours


# ---------------------------------------------------------------------------------------------
# The measured pair (deliverable 4)
# ---------------------------------------------------------------------------------------------


def test_gpu_vs_npu_fixture_one_sided_device_time_at_most_5_percent(gpu_vs_npu: tuple) -> None:
    base, comp = gpu_vs_npu
    opts = CompareOptions(disable_module=True)
    stat = compare_operators(base, comp, opts)[1][0].data
    assert one_sided_share(stat) <= 0.05
    assert one_sided_share(stat) == pytest.approx(0.0011, abs=0.0002)
    lone = stat[(stat["base_num"] == 0) | (stat["comp_num"] == 0)]
    assert lone["name"].tolist() == ["autograd::engine::evaluate_function: NpuDtypeCastBackward0"]
    # Pairing by recorded name only (the reference's way) leaves about a quarter one-sided.
    exact = compare_operators(base, comp, CompareOptions(disable_module=True, exact_names=True))[1][0].data
    assert one_sided_share(exact) == pytest.approx(0.2467, abs=0.002)
    # Each row joined by the table says so and names the other side.
    fa = stat[stat["name"] == "aten::scaled_dot_product_attention"].iloc[0]
    assert fa["matched_as"] == "flash attention (table): npu::npu_fusion_attention"
    assert (fa["base_num"], fa["comp_num"]) == (6, 6)
    assert fa["base_ms"] == pytest.approx(fa["comp_ms"], rel=1e-3)  # both 6 × 150 µs (designed)


def test_matched_as_is_not_exported_and_the_workbook_gets_a_matching_sheet(gpu_vs_npu: tuple, tmp_path: Path) -> None:
    import openpyxl

    from perfcmp_core.compare import run_all
    from perfcmp_core.compare.result import ComparisonResult
    from perfcmp_core.export.xlsx import write_workbook

    base, comp = gpu_vs_npu
    result = ComparisonResult(base.meta.source, comp.meta.source)
    for t in run_all(base, comp, CompareOptions()):
        result.add(t)
    stat = result.tables["ModuleCompareStatistic"]
    assert stat.columns[-1].key == "matched_as" and not stat.columns[-1].export
    wb = openpyxl.load_workbook(write_workbook(result, tmp_path), read_only=True)
    header = next(wb["ModuleCompareStatistic"].iter_rows(min_row=3, max_row=3, values_only=True))
    assert "Matched As" not in header and len(header) == len(stat.sheet_columns())
    rows = list(wb["Matching"].iter_rows(min_row=4, values_only=True))
    assert rows and {r[0] for r in rows} >= {"ModuleCompareStatistic", "ModuleCompare", "ApiCompare"}
    assert any("flash attention (table)" in r[3] for r in rows)
    names = wb.sheetnames
    assert names[names.index("Matching") + 1:] == ["README"]  # our extra sheets come last


def test_the_users_table_reaches_every_comparison_through_the_request(tmp_path: Path) -> None:
    """``--equivalence`` is read once, into the run request, and every consumer pairs by that
    table — operators, memory, modules, API, kernel classes, the advisor (in its own process) and
    the workbook's Matching sheet: the user's file relabels two built-in classes (same names) and
    adds a kernel class, and every table then says the user's labels."""
    import openpyxl

    from perfcmp_tui.cli import main

    builtin = {c.id: c for c in load_equivalence().ops}
    user = tmp_path / "mine.ini"
    user.write_text("".join(f"[op.{i}]\nlabel = my {builtin[i].label}\ntorch = {', '.join(builtin[i].names)}\n\n"
                            for i in ("attention", "tp_linear"))
                    + "[kernel.mine]\nlabel = my matmul\nnames = MatMul\n")
    doc_path, out = tmp_path / "r.json", tmp_path / "out"
    code = main(["export", str(FIX / "gpu" / "base.pt.trace.json"), str(FIX / "npu_text" / "comp_ascend_pt"),
                 "--no-cache", "-o", str(out), "--json", str(doc_path), "--equivalence", str(user)])
    assert code == 0
    doc = json.loads(doc_path.read_text())
    said = {name: {str(r.get("matched_as", "")).split(" (table)")[0] for r in t["rows"]} - {""}
            for name, t in doc["tables"].items()}
    for name in ("OperatorCompareStatistic", "OperatorCompare", "MemoryCompareStatistic", "MemoryCompare",
                 "ModuleCompareStatistic", "ModuleCompare", "ApiCompare"):
        assert "my flash attention" in said[name] and "flash attention" not in said[name], name
    assert "my matmul" in {r["cls"] for r in doc["tables"]["KernelClassCompare"]["rows"]}
    diff = [r for r in doc["advisor"]["rows"] if r["scope"] == "diff"]
    assert any("driven by: my tensor-parallel linear" in str(r["evidence"]) for r in diff)
    book = openpyxl.load_workbook(next(out.glob("*.xlsx")), read_only=True)
    assert any(str(r[3]).startswith("my flash attention (table)")
               for r in book["Matching"].iter_rows(min_row=4, values_only=True))


# ---------------------------------------------------------------------------------------------
# The fixture's names are the ones real profilers write
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not REAL_NPU.is_dir(), reason="../shared/data absent")
def test_fixture_npu_names_are_those_of_a_real_torch_npu_export(gpu_vs_npu: tuple) -> None:
    """The NPU fixture writes, for dropout, cast and collectives, the very names (and nesting) the
    real torch_npu Text export writes; the names the real export cannot show (it is an AlexNet)
    come from torch_npu's derivatives and MindSpeed (equivalence.ini sources S1, S6)."""
    real = load_profile(str(REAL_NPU)).ops
    fixture = gpu_vs_npu[1].ops

    def chains(ops: pd.DataFrame) -> set[tuple[str, str]]:
        names, parent = ops["name"].to_numpy(dtype=object), ops["parent"].to_numpy()
        return {(names[p], names[i]) for i, p in enumerate(parent) if p >= 0}

    for parent, child in [("aten::dropout", "npu::_npu_dropout"), ("NpuDropoutBackward0", "npu::npu_dropout_backward"),
                          ("aten::to", "npu::npu_dtype_cast"), ("npu::npu_dtype_cast", "aclnnCast"),
                          ("c10d::allreduce_", "HcclAllreduce")]:
        assert (parent, child) in chains(real), (parent, child)
        assert (parent, child) in chains(fixture), (parent, child)
    assert not set(fixture["name"]) & {"aten::native_dropout", "NativeDropoutBackward0", "aten::_rms_norm_backward",
                                      "NpuAllGatherBaseMmBackward0"}


# ---------------------------------------------------------------------------------------------
# Kernel classes
# ---------------------------------------------------------------------------------------------


def test_vendor_name_families() -> None:
    cases = {
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NNT": "GEMM",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas": "GEMM",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)": "GEMM",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn": "GEMM",
        "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1": "GEMM",
        "MatMulV3": "GEMM", "AllGatherMatmul": "GEMM",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>": "attention",
        "attn_fwd": "attention", "FlashAttentionScoreGrad": "attention", "PagedAttention": "attention",
        "sm80_xmma_fprop_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_kernel": "convolution",
        "naive_conv_fwd_nchw": "convolution", "Conv2DBackpropFilter": "convolution",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int)": "normalisation",
        "LayerNormV4": "normalisation", "RmsNorm": "normalisation", "groupnorm_kernel_dispatch_down": "normalisation",
        "void at::native::reduce_kernel<512, 1>": "reduction / softmax / sort", "SoftmaxV2": "reduction / softmax / sort",
        "triton_red_fused_sum_1": "reduction / softmax / sort",
        "Memcpy DtoH (Device -> Pinned)": "copy / cast / memset", "TransData": "copy / cast / memset",
        "Cast": "copy / cast / memset",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long>": "indexing / embedding / resize",
        "GatherV2": "indexing / embedding / resize",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>": "element-wise",
        "triton_poi_fused_add_mul_0": "element-wise", "Add": "element-wise", "ApplyAdamWV2": "element-wise",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": "communication",
    }
    table = load_equivalence()
    got = class_of(table, pd.Series(list(cases)), pd.Series([""] * len(cases)), pd.Series([""] * len(cases)))
    assert dict(zip(cases, got)) == cases
    # Nothing in the name: the launching op decides; the task type before it.
    got = class_of(table, pd.Series(["my_kernel", "my_kernel", "my_kernel"]),
                   pd.Series(["kernel", "kernel", "gpu_memcpy"]), pd.Series(["aten::mm", "foo::bar", "aten::mm"]))
    assert got.tolist() == ["GEMM", OTHER, "copy / cast / memset"]


@needs_real
@pytest.mark.parametrize("model", MODELS)
def test_h100_vs_mi300_kernel_classes(model: str) -> None:
    h100 = load_profile(str(TRACELENS / "h100" / f"{model}.json.gz"))
    mi300 = load_profile(str(TRACELENS / "mi300" / f"{model}.json.gz"))
    table = load_equivalence()
    for profile in (h100, mi300):
        df = kernel_classes(profile, table)
        total = device_time(profile).total_ns
        assert int(df["dur_ns"].sum()) == total  # every device nanosecond is in one class
        assert df.loc[df["cls"] == OTHER, "dur_ns"].sum() <= 0.05 * total
        assert (df["cls"] == OTHER).sum() == 0  # in fact none is left over
    t = kernel_class_compare(h100, mi300)
    d = t.data.set_index("cls")
    # The same model launches (nearly: MI300's hipBLASLt splits one more) the same GEMMs and
    # attention kernels on both vendors.
    assert d.loc["GEMM", "base_calls"] == pytest.approx(d.loc["GEMM", "comp_calls"], rel=0.01)
    assert d.loc["attention", "base_calls"] > 0 and d.loc["attention", "comp_calls"] > 0
    assert d.loc["[ TOTAL ]", "base_ms"] == pytest.approx(device_time(h100).total_ns / 1e6)
    assert "sm90_xmma_gemm" in d.loc["GEMM", "base_top"] or "cutlass" in d.loc["GEMM", "base_top"]
    assert "Cijk_" in d.loc["GEMM", "comp_top"] and "attn_fwd" in d.loc["attention", "comp_top"]
    ops = kernel_op_compare(h100, mi300, CompareOptions()).data
    addmm = ops[(ops["op"] == "aten::addmm") & (ops["cls"] == "GEMM")].iloc[0]
    assert addmm["base_calls"] == addmm["comp_calls"] > 0


@needs_real
def test_bert_small_counts_by_hand() -> None:
    """bert-small, one ProfilerStep: 26 Linear GEMMs (4 layers × 6 + pooler + classifier) and 4
    attention kernels per vendor, read from the raw traces' kernel names."""
    import gzip

    counts = {}
    for vendor, gemm in (("h100", ("gemm", "cutlass")), ("mi300", ("Cijk_",))):
        with gzip.open(TRACELENS / vendor / f"{MODELS[0]}.json.gz", "rt") as fh:
            events = json.load(fh)["traceEvents"]
        names = [e["name"] for e in events if e.get("cat") == "kernel"]
        attention = [("flash" in n or "attn_fwd" in n) for n in names]  # FA kernels name cutlass types
        counts[vendor] = (sum(any(g in n for g in gemm) and not a for n, a in zip(names, attention)),
                          sum(attention))
    h100 = load_profile(str(TRACELENS / "h100" / f"{MODELS[0]}.json.gz"))
    mi300 = load_profile(str(TRACELENS / "mi300" / f"{MODELS[0]}.json.gz"))
    d = kernel_class_compare(h100, mi300).data.set_index("cls")
    assert counts == {"h100": (26, 4), "mi300": (26, 4)}
    assert (d.loc["GEMM", "base_calls"], d.loc["GEMM", "comp_calls"]) == (26, 26)
    assert (d.loc["attention", "base_calls"], d.loc["attention", "comp_calls"]) == (4, 4)


def test_gpu_vs_npu_fixture_kernel_classes(gpu_vs_npu: tuple) -> None:
    """Designed per step (fixtures/README.md): flash attention 150 forward + 320 backward per
    layer on both platforms (GPU: 300 + 20 convert); 2 layers × 3 steps."""
    base, comp = gpu_vs_npu
    d = kernel_class_compare(base, comp).data.set_index("cls")
    fa = d.loc["attention"]
    # FA: 6 × (150 + 320) µs on both sides, + the 12 µs paged-attention probe × 3.
    assert fa["base_ms"] == pytest.approx(6 * 0.470 + 3 * 0.012, abs=0.01)
    assert fa["comp_ms"] == pytest.approx(6 * 0.470 + 3 * 0.012, abs=0.01)
    assert d.loc["GEMM", "base_calls"] == d.loc["GEMM", "comp_calls"]
    for prefix, profile in (("base", base), ("comp", comp)):
        assert d.loc["[ TOTAL ]", f"{prefix}_ms"] == pytest.approx(device_time(profile).total_ns / 1e6)
    # NPU-only work shows up where it belongs: TransData layout changes in copy / cast.
    assert "TransData" in d.loc["copy / cast / memset", "comp_top"]


def test_advisor_diff_names_equivalent_operators_on_the_fixture_pair(gpu_vs_npu: tuple) -> None:
    """The advisor's GPU-vs-NPU diff names categories and the operators both sides share — the
    tensor-parallel linear (Megatron's on GPU, MindSpeed's MC2 on NPU: 180 µs GEMM → 220 µs
    AllGatherMatmul per step) and the all-reduce (+90 µs per step, injected difference 3) —
    instead of leaving them to "operators found on one side only"."""
    from perfcmp_core.advisor.rules import load_config
    from perfcmp_core.advisor.table import advisor_tables
    from perfcmp_core.compare import Context

    t = advisor_tables(Context(*gpu_vs_npu, CompareOptions()), load_config(None))[0]
    diff = t.data[(t.data["scope"] == "diff") & (t.data["stage"] == "All")].set_index("category")
    assert diff.loc["MatMul", "evidence"].startswith(
        "driven by: tensor-parallel linear +0.040 ms (0.180 ms → 0.220 ms)")
    assert "one side only" not in diff.loc["MatMul", "evidence"]
    assert diff.loc["Comm", "evidence"] == "driven by: all-reduce +0.090 ms (0.500 ms → 0.590 ms)"
    # What only the NPU has is named with its side: the TransData inside aten::addmm.
    assert "aten::addmm +0.043 ms (comparison only)" in diff.loc["Vector", "evidence"]


REAL_PROFILES = [
    "gpu-real/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "gpu-real/tracelens/inference/xdit_sd_3.5_rank_0.json.gz",
    "gpu-real/alexnet.pt.trace.json.gz",
    "gpu-real/trace_diff_control.pt.trace.json.gz",
    "npu-real-runs/text/level1/rank0_ascend_pt",
    "npu-real-runs/text/level0/rank0_ascend_pt",
    "npu-real-runs/db/level1/rank0_ascend_pt",
    "npu-real-runs/db/level0/rank0_ascend_pt",
]


@needs_real
@pytest.mark.parametrize("path", REAL_PROFILES)
def test_real_profiles_leave_almost_nothing_unclassified(path: str) -> None:
    """Every real profile in ../shared/data: the kernel classes add up to its device time and at
    most 0.1 % of it is in no class (measured: 0 %, the A100 trace 0.01 %)."""
    profile = load_profile(str(DATA / path))
    df = kernel_classes(profile, load_equivalence())
    total = device_time(profile).total_ns
    assert int(df["dur_ns"].sum()) == total > 0
    assert df.loc[df["cls"] == OTHER, "dur_ns"].sum() <= 0.001 * total


def test_matching_names_join_the_row_columns_leaving_out_empty_and_missing_ones() -> None:
    import numpy as np
    import pandas as pd

    from perfcmp_core.compare.matching_sheet import _joined_names

    rows = pd.DataFrame({"a": ["x", "", "nan", None, "y"], "b": ["p", "q", "", "w", np.nan],
                         "c": [1, 2, 3, 4, 5]}, dtype=object)
    assert _joined_names(rows, ("a", "b", "c")).tolist() == ["x | p | 1", "q | 2", "3", "w | 4", "y | 5"]
    assert _joined_names(rows.iloc[:0], ("a", "b")).tolist() == []
