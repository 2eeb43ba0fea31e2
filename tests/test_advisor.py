"""Bottleneck advisor: stages, categories, shares, rules and outputs on hand-built profiles.

The main scenario is a DiT + VAE inference run written by hand (times in µs, one step = 10 ms):

* **DiT** (two blocks, nn.Module ``DiTTransformer2DModel_0``). Variant ``A`` (MatMul-bound), per
  block at offset o: MatMulV3 [o, o+300), LayerNorm [o+300, o+340), FlashAttention [o+340, o+540),
  Add [o+540, o+560), MatMulV2 [o+560, o+760), a stream wait [o+760, o+800) (not work) and an
  all-gather [o+700, o+900) of which [o+760, o+900) = 140 µs is exposed. Variant ``B``
  (attention-bound): MatMulV3 [o, o+200), LayerNorm [o+200, o+300), FA [o+300, o+650), Gelu
  [o+650, o+800) and an all-gather [o+100, o+180) hidden under the MatMul.
* **VAE** (``AutoencoderKL_0``) at 2000: Conv2D 300, GroupNorm 100, Upsample 50, Conv2D 150, back
  to back (busy 600: convolutions are Other 450 = 75 %, Vector 150 = 25 %).
* **Other**: a 50 µs device-to-host copy after the VAE, outside every module.

Hand-derived per-step figures. A stage's busy time is the sum of its work (docs/advisor.md), so
its categories add up to 100 %; its wall-clock time is the union of the work intervals.
(A): DiT busy 2 × (300 + 40 + 200 + 20 + 200 + 200) = 1920 (wall 2 × 900 = 1800, the all-gather
overlaps the MatMul by 60); MatMul 2 × 500 = 1000 → 52.083 % (> 50 %: MatMul rule); FA 400 →
20.833 %; Vector 2 × 60 = 120 → 6.25 %; Comm 400 → 20.833 %; Comm exposed 280 → 14.583 % of DiT
busy time, beside the sum, and 70 % of DiT communication (> 30 %: overlap rule). Whole profile
busy 1920 + 600 + 50 = 2570 (wall 2450). (B): DiT busy 2 × 880 = 1760 (wall 1600); FA 700 →
39.773 % (> 30 %); Vector 500 → 28.409 % (> 20 %); MatMul 400 → 22.727 %; Comm 160 → 9.091 %,
exposed 0.

Steps 1–4 are profiled; steps 1 and 2 are warmup and carry an extra 100 µs MatMulV3 that must not
count; one Add kernel runs before step 1 (outside every step) and must not count either.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

from perfcmp_core.advisor import advisor_tables, analyse, format_findings, load_config, run_advise
from perfcmp_core.advisor.categories import classify
from perfcmp_core.advisor.items import build_items
from perfcmp_core.advisor.rules import CATEGORIES, ROW_CATEGORIES
from perfcmp_core.compare import Context
from perfcmp_core.compare.result import IS_TOTAL, ComparisonResult, Table
from perfcmp_core.errors import InputError
from perfcmp_core.export.json_out import write_json
from perfcmp_core.export.xlsx import write_workbook
from perfcmp_core.model import COMM_OPS, COMM_TASKS, KERNELS, OPS, PYFUNCS, STEPS, Profile, ProfileMeta, empty, frame
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.timeline import nest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
INFER = REPO / "fixtures" / "npu_infer"
US = 1000
T0 = 1_700_000_000_000_000_000
STEP_US = 10_000
PID = TID = 7

# kind → (NPU name, NPU op type, NPU core/task type, NPU host op, GPU name, GPU host op)
KINDS = {
    "mm3": ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", "aclnnMatmul",
            "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_tensor16x8x16_kernel",
            "aten::addmm"),
    "mm2": ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", "aclnnMatmul",
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "aten::mm"),
    "ln": ("aclnnLayerNorm_LayerNormV4_LayerNormV4", "LayerNormV4", "AI_VECTOR_CORE", "aclnnLayerNorm",
           "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, "
           "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
           "c10::BFloat16*)", "aten::native_layer_norm"),
    "fa": ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "FlashAttentionScore", "MIX_AIC",
           "aclnnFlashAttentionScore",
           "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
           "false, cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)",
           "aten::_scaled_dot_product_flash_attention"),
    "add": ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "aclnnAdd",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "at::detail::Array<char*, 3>)", "aten::add"),
    "gelu": ("aclnnGelu_Gelu_Gelu", "Gelu", "AI_VECTOR_CORE", "aclnnGelu",
             "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
             "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}, at::detail::Array<char*, 2> >(int)",
             "aten::gelu"),
    "conv": ("aclnnConvolution_Conv2D_Conv2D", "Conv2D", "AI_CORE", "aclnnConvolution",
             "sm80_xmma_fprop_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4"
             "_warpsize2x2x1_g1_tensor16x8x16_kernel", "aten::cudnn_convolution"),
    "gn": ("aclnnGroupNorm_GroupNormV2_GroupNormV2", "GroupNormV2", "AI_VECTOR_CORE", "aclnnGroupNorm",
           "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::BFloat16>(long, float, "
           "c10::BFloat16 const*, float*, float*)", "aten::native_group_norm"),
    "up": ("aclnnUpsampleNearest2d_UpsampleNearest2d_UpsampleNearest2d", "UpsampleNearest2d", "AI_VECTOR_CORE",
           "aclnnUpsampleNearest2d",
           "void at::native::(anonymous namespace)::upsample_nearest2d_nhwc_out_frame<c10::BFloat16, "
           "&at::native::nearest_idx>(c10::BFloat16 const*, c10::BFloat16*)", "aten::upsample_nearest2d"),
    "copy": ("MEMCPY_ASYNC", "", "SDMA_SQE", "aten::copy_", "Memcpy DtoH (Device -> Pinned)", "aten::copy_"),
    "wait": ("EVENT_WAIT_SQE", "", "EVENT_WAIT_SQE", "", None, ""),
    "ag": ("hcom_allGather__101_2_1", "hcom_allGather__101_2_1", "", "HcclAllgather",
           "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "nccl:all_gather"),
}


#: (kind, platform) → the framework op around the launching op where it is not the GPU host op
#: (NPU: aten op → aclnn launcher). torch_npu's flash attention has no aten op (npu::).
FRAMEWORK_OPS = {("ag", "gpu"): "c10d::allgather_", ("ag", "npu"): "c10d::allgather_",
                 ("fa", "npu"): "npu::npu_fusion_attention", ("copy", "npu"): ""}


def dit_block(variant: str, o: int) -> list[tuple[str, int, int]]:
    """(kind, start µs in step, duration µs) of one DiT block at offset ``o``."""
    if variant == "A":
        return [("mm3", o, 300), ("ln", o + 300, 40), ("fa", o + 340, 200), ("add", o + 540, 20),
                ("mm2", o + 560, 200), ("wait", o + 760, 40), ("ag", o + 700, 200)]
    return [("mm3", o, 200), ("ln", o + 200, 100), ("fa", o + 300, 350), ("gelu", o + 650, 150),
            ("ag", o + 100, 80)]


VAE = [("conv", 2000, 300), ("gn", 2300, 100), ("up", 2400, 50), ("conv", 2450, 150)]
COPY = [("copy", 2600, 50)]
#: Module frames of a step: (name, start, end) in µs; the outer frame is a plain python frame.
FRAMES = [("pipelines/pipeline.py(10): __call__", 0, 2700),
          ("nn.Module: DiTTransformer2DModel_0", 0, 1950),
          ("nn.Module: DiTBlock_0", 0, 950), ("nn.Module: DiTBlock_1", 1000, 1950),
          ("nn.Module: AutoencoderKL_0", 1990, 2550), ("nn.Module: Decoder_0", 1995, 2545)]


def step_items(variant: str, warmup: bool) -> list[tuple[str, int, int]]:
    items = dit_block(variant, 0) + dit_block(variant, 1000) + VAE + COPY
    if warmup:  # JIT-ish extra work that must be excluded with the warmup steps
        items.append(("mm3", 900, 100) if variant == "A" else ("mm3", 800, 100))
    return items


def build(steps: dict[int, list[tuple[str, int, int]]], *, kind: str = "npu_text", frames=FRAMES,
          stacks: dict[str, str] | None = None, outside: list[tuple[str, int, int]] = (),
          framework: str = "pytorch", scope: dict[str, str] | None = None) -> Profile:
    """A profile from per-step item lists (µs, relative to the step start).

    Every item but waits gets a host op at its start on one thread (GPU: a ``cpu_op`` with a nested
    ``cudaLaunchKernel`` that the kernel links to; NPU: an ``aclnn*`` launcher inside its aten op);
    ``frames`` become python_function events per
    step; ``stacks`` (kind → call stack) fill the ops' ``Call stack``; ``scope`` (kind → scope)
    prefixes MindSpore op names.
    """
    gpu = kind == "gpu"
    k_rows, op_rows, pf_rows, step_rows = [], [], [], []

    def add_item(sid: int, base: int, kind_key: str, start: int, dur: int) -> None:
        npu_name, op_type, core, host, gpu_name, gpu_host = KINDS[kind_key]
        if gpu and gpu_name is None:
            return
        t = (base + start) * US
        op_row = -1
        if kind_key != "wait":
            name = gpu_host if gpu else host
            if scope is not None:
                name = f"Kernel::KernelLaunch::{scope[kind_key]}/{op_type or 'Op'}-op{len(op_rows)}"
            else:  # the framework op around the launch: aten::mm → aclnnMm (NPU), c10d:: → nccl: / Hccl
                outer = FRAMEWORK_OPS.get((kind_key, "gpu" if gpu else "npu"), "" if gpu else gpu_host)
                if outer:
                    op_rows.append({"name": outer, "cat": "cpu_op", "start_ns": t, "end_ns": t + 3 * US,
                                    "call_stack": ""})
            op_rows.append({"name": name, "cat": "cpu_op", "start_ns": t, "end_ns": t + 2 * US,
                            "call_stack": (stacks or {}).get(kind_key, "")})
            op_row = len(op_rows) - 1
            if gpu:
                op_rows.append({"name": "cudaLaunchKernel", "cat": "cuda_runtime", "start_ns": t,
                                "end_ns": t + US, "call_stack": ""})
                op_row = len(op_rows) - 1
        comm = kind_key == "ag"
        task = ("kernel" if not kind_key == "copy" else "gpu_memcpy") if gpu else core
        k_rows.append({
            "name": gpu_name if gpu else npu_name, "op_type": "" if gpu else op_type, "task_type": task,
            "core": "" if gpu or comm or kind_key in ("copy", "wait") else core,
            "stream": 9 if comm else 2, "start_ns": t, "dur_ns": dur * US, "step": sid, "op_row": op_row,
            "is_comm": comm, "in_trace": True, "has_details": not (gpu or comm or kind_key in ("copy", "wait")),
        })

    for sid, items in steps.items():
        base = sid * STEP_US
        step_rows.append({"step": sid, "start_ns": (T0 // US + base) * US, "end_ns": (T0 // US + base + 9000) * US})
        for kind_key, start, dur in items:
            add_item(sid, T0 // US + base, kind_key, start, dur)
        for name, start, end in frames:
            pf_rows.append({"name": name, "start_ns": (T0 // US + base + start) * US,
                            "end_ns": (T0 // US + base + end) * US, "is_module": name.startswith("nn.Module:")})
    for kind_key, start, dur in outside:
        add_item(-1, T0 // US - 5000, kind_key, start, dur)

    k = pd.DataFrame(k_rows).sort_values("start_ns", kind="stable").reset_index(drop=True)
    ops = pd.DataFrame(op_rows)
    key = np.full(len(ops), TID, dtype="int64")
    parent, depth = nest(key, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    ops = frame(OPS, {**{c: ops[c] for c in ops}, "pid": np.full(len(ops), PID), "tid": key,
                      "parent": parent, "depth": depth})
    pf = pd.DataFrame(pf_rows) if pf_rows else pd.DataFrame(columns=["name", "start_ns", "end_ns", "is_module"])
    pkey = np.full(len(pf), TID, dtype="int64")
    pparent, pdepth = nest(pkey, pf["start_ns"].to_numpy(dtype="int64"), pf["end_ns"].to_numpy(dtype="int64"))
    pyfuncs = frame(PYFUNCS, {**{c: pf[c] for c in pf}, "pid": np.full(len(pf), PID), "tid": pkey,
                              "parent": pparent, "depth": pdepth}, n=len(pf))
    meta = ProfileMeta(kind=kind, source=f"{kind}-synthetic", framework=framework)
    coll = k[k["is_comm"]]  # every loader lists its collectives in comm_ops as well
    comm_ops = frame(COMM_OPS, {"name": coll["name"], "op_type": coll["name"], "group": ["sp"] * len(coll),
                                "start_ns": coll["start_ns"], "dur_ns": coll["dur_ns"], "step": coll["step"]},
                     n=len(coll))
    profile = Profile(meta=meta, kernels=frame(KERNELS, {c: k[c] for c in k}), ops=ops, pyfuncs=pyfuncs,
                      comm_ops=comm_ops, steps=frame(STEPS, {c: pd.DataFrame(step_rows)[c] for c in STEPS}))
    profile.check()
    return profile


def inference(variant: str, **kw: object) -> Profile:
    steps = {sid: step_items(variant, warmup=sid <= 2) for sid in (1, 2, 3, 4)}
    return build(steps, outside=[("add", 0, 30)], **kw)  # type: ignore[arg-type]


CFG = load_config(None)


def row(analysis, stage: str, category: str) -> pd.Series:
    s = analysis.summary
    hit = s[(s["stage"] == stage) & (s["category"] == category)]
    assert len(hit) == 1, (stage, category, s[["stage", "category"]].values.tolist())
    return hit.iloc[0]


PARTITION = ("FA", "MatMul", "Vector", "Comm", "Other")


def assert_shares(analysis, stage: str, expected_us: dict[str, float], wall_us: float) -> None:
    """Mean per-step µs of each category and its share of the stage busy time, which is the sum
    of the expected categories (missing ones are 0); ``wall_us`` is the union of the work."""
    busy_us = sum(expected_us.get(c, 0) for c in PARTITION)
    total = row(analysis, stage, "Total")
    assert total["time_ns"] == pytest.approx(busy_us * US)
    assert total["wall_ns"] == pytest.approx(wall_us * US)
    for cat, us in expected_us.items():
        r = row(analysis, stage, cat)
        assert r["time_ns"] == pytest.approx(us * US), (stage, cat)
        assert r["share"] == pytest.approx(us / busy_us), (stage, cat)
    assert sum(row(analysis, stage, c)["share"] for c in PARTITION) == pytest.approx(1.0)


DIT_A = {"FA": 400, "MatMul": 1000, "Vector": 120, "Comm": 400, "Comm exposed": 280, "Other": 0}
DIT_B = {"FA": 700, "MatMul": 400, "Vector": 500, "Comm": 160, "Comm exposed": 0, "Other": 0}
VAE_SHARES = {"FA": 0, "MatMul": 0, "Vector": 150, "Comm": 0, "Other": 450}
ALL_A = {"FA": 400, "MatMul": 1000, "Vector": 270, "Comm": 400, "Comm exposed": 280, "Other": 500}


# --------------------------------------------------------------------------- stages and shares


def test_module_names_give_stages_and_hand_derived_shares() -> None:
    a = analyse(inference("A"), CFG)
    assert a.method == "module names"
    assert a.steps == (3, 4) and a.warmup == (1, 2)
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", VAE_SHARES, 600)
    assert_shares(a, "Other", {"Other": 50}, 50)
    assert_shares(a, "All", ALL_A, 2450)
    assert row(a, "DiT", "Total")["share"] == pytest.approx(1920 / 2570)
    assert row(a, "DiT", "Comm exposed")["share"] == pytest.approx(280 / 1920)  # beside the partition
    # warmup (steps 1, 2: 2 × (2 × 2660 + 450 + 50 + 100 − 2 × 40 wait) µs) and the kernel before
    # step 1 (30 µs) are left out and reported
    per_step_work = 2 * (300 + 40 + 200 + 20 + 200 + 200) + 600 + 50
    assert a.excluded_ns == (2 * (per_step_work + 100) + 30) * US


def test_rules_trip_once_each_across_the_two_variants() -> None:
    a, b = analyse(inference("A"), CFG), analyse(inference("B"), CFG)
    assert [f.rule.key for f in a.findings] == ["dit_matmul", "dit_comm_exposed"]
    assert [f.rule.key for f in b.findings] == ["dit_fa", "dit_vector"]
    matmul, exposed = a.findings
    assert matmul.value == pytest.approx(1000 / 1920)
    assert exposed.value == pytest.approx(280 / 400)  # of DiT communication
    assert exposed.share == pytest.approx(280 / 1920)  # of DiT busy time, for the Share column
    fa, vector = b.findings
    assert fa.value == pytest.approx(700 / 1760)
    assert vector.value == pytest.approx(500 / 1760)
    assert_shares(b, "DiT", DIT_B, 1600)
    assert a.top("DiT", "MatMul", 3) == [("MatMulV3", 600 * US), ("MatMulV2", 400 * US)]


def test_per_step_shares_and_mean() -> None:
    """Step 4's Adds last 10 µs instead of 20: per-step Vector 120/1920 and 100/1900; the mean row
    is the time-weighted mean (110 / 1910)."""
    steps = {sid: step_items("A", warmup=sid <= 2) for sid in (1, 2, 3, 4)}
    steps[4] = [(k, s, 10 if k == "add" else d) for k, s, d in steps[4]]
    a = analyse(build(steps), CFG)
    ps = a.per_step[(a.per_step["stage"] == "DiT") & (a.per_step["category"] == "Vector")].set_index("step")
    assert ps.loc[3, "share"] == pytest.approx(120 / 1920)
    assert ps.loc[4, "share"] == pytest.approx(100 / 1900)
    vec = row(a, "DiT", "Vector")
    assert vec["time_ns"] == pytest.approx(110 * US)
    assert vec["share"] == pytest.approx(110 / 1910)
    assert (vec["step_min"], vec["step_max"]) == pytest.approx((100 / 1900, 120 / 1920))


def test_warmup_is_a_config_value_applied_only_with_more_steps(tmp_path: Path) -> None:
    cfg = tmp_path / "adv.ini"
    cfg.write_text("[advisor]\nwarmup_steps = 0\n", encoding="utf-8")
    a = analyse(inference("A"), load_config(cfg))
    assert a.steps == (1, 2, 3, 4) and a.warmup == ()
    assert row(a, "DiT", "MatMul")["time_ns"] == pytest.approx(1050 * US)  # warmup's extra 100 µs × 2 / 4
    two = build({sid: step_items("A", warmup=False) for sid in (3, 4)})
    b = analyse(two, CFG)  # 2 steps, warmup 2: nothing is excluded
    assert b.steps == (3, 4) and b.warmup == ()
    assert_shares(b, "DiT", DIT_A, 1800)


def test_call_stacks_give_stages_outermost_frame_wins() -> None:
    """No python frames; torch_npu call stacks (innermost frame first). The UNet stack's inner
    transformer frame would say DiT, but its outermost frame pins it to Other."""
    dit = ("diffusers/models/attention_processor.py(700): __call__;\n"
           "diffusers/models/transformers/transformer_flux.py(480): forward;\n"
           "diffusers/pipelines/flux/pipeline_flux.py(900): __call__")
    vae = ("diffusers/models/autoencoders/vae.py(300): forward;\n"
           "diffusers/models/autoencoders/autoencoder_kl.py(200): decode;\n"
           "diffusers/pipelines/flux/pipeline_flux.py(950): __call__")
    unet = ("diffusers/models/transformers/transformer_2d.py(400): forward;\n"
            "diffusers/models/unets/unet_2d_condition.py(1200): forward")
    stacks = {k: dit for k in ("mm3", "ln", "fa", "add", "mm2", "ag")} | {k: vae for k in ("conv", "gn", "up")}
    stacks["copy"] = unet
    a = analyse(inference("A", frames=[], stacks=stacks), CFG)
    assert a.method == "call stacks"
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", VAE_SHARES, 600)
    assert_shares(a, "Other", {"Other": 50}, 50)


def test_outermost_module_wins_and_text_encoders_are_pinned_to_other() -> None:
    """A VAE's attention block stays VAE; a DiT-named module inside a CLIP text model is Other."""
    frames = [("nn.Module: AutoencoderKL_0", 0, 1950), ("nn.Module: DiTBlock_0", 0, 950),
              ("nn.Module: CLIPTextModel_0", 1990, 2700), ("nn.Module: SD3Transformer2DModel_0", 1995, 2650)]
    a = analyse(inference("A", frames=frames), CFG)
    assert a.method == "module names"
    assert set(a.summary["stage"]) == {"VAE", "Other", "All"}
    assert_shares(a, "VAE", DIT_A, 1800)
    assert row(a, "Other", "Total")["time_ns"] == pytest.approx(650 * US)


#: Real class names of diffusers / xDiT transformers and VAEs (the SD 3.5 trace records
#: ``nn.Module: SD3Transformer2DModel_0`` and, because the pipeline calls ``vae.decode``, only
#: ``nn.Module: Decoder_0`` for the VAE).
DIT_CLASSES = ["SD3Transformer2DModel", "FluxTransformer2DModel", "WanTransformer3DModel",
               "HunyuanVideoTransformer3DModel", "CogVideoXTransformer3DModel", "HunyuanDiT2DModel",
               "LuminaNextDiT2DModel", "QwenImageTransformer2DModel", "xFuserFlux1Transformer2DWrapper",
               "xFuserCogVideoXTransformer3DWrapper", "xFuserHunyuanDiT2DWrapper"]
VAE_CLASSES = ["AutoencoderKL", "AutoencoderKLWan", "AutoencoderKLHunyuanVideo", "AutoencoderKLCogVideoX",
               "AutoencoderDC", "DistVAE", "Decoder"]


@pytest.mark.parametrize("dit, vae", list(zip(DIT_CLASSES, VAE_CLASSES * 2)))
def test_real_diffusers_and_xdit_class_names_give_stages(dit: str, vae: str) -> None:
    frames = [("pipelines/pipeline.py(10): __call__", 0, 2700), (f"nn.Module: {dit}_0", 0, 1950),
              ("nn.Module: Attention_0", 300, 550), (f"nn.Module: {vae}_0", 1990, 2550)]
    a = analyse(inference("A", frames=frames), CFG)
    assert a.stage_note == "stages from module names: DiT, VAE"
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", VAE_SHARES, 600)


def test_xdit_wrapper_name_decides_work_outside_the_wrapped_model() -> None:
    """xFuserFlux1Transformer2DWrapper runs the FluxTransformer2DModel and work of its own (here the
    second block): all of it is DiT, the wrapper being the outermost stage-named module."""
    frames = [("nn.Module: xFuserFlux1Transformer2DWrapper_0", 0, 1950),
              ("nn.Module: FluxTransformer2DModel_0", 0, 950), ("nn.Module: AutoencoderKL_0", 1990, 2550)]
    a = analyse(inference("A", frames=frames), CFG)
    assert_shares(a, "DiT", DIT_A, 1800)


@pytest.mark.parametrize("encoder, inner", [("T5EncoderModel", "T5Stack"), ("UMT5EncoderModel", "UMT5Stack"),
                                            ("BertModel", "BertEncoder"), ("CLIPTextModelWithProjection",
                                                                            "CLIPEncoder")])
def test_text_encoders_are_other_though_their_modules_say_encoder(encoder: str, inner: str) -> None:
    """``…Encoder…`` would look like a VAE encoder; the text encoder's outermost name pins it."""
    frames = [(f"nn.Module: {encoder}_0", 0, 1950), (f"nn.Module: {inner}_0", 0, 1950),
              ("nn.Module: AutoencoderKL_0", 1990, 2550)]
    a = analyse(inference("A", frames=frames), CFG)
    assert set(a.summary["stage"]) == {"VAE", "Other", "All"}
    assert row(a, "Other", "Total")["time_ns"] == pytest.approx((1920 + 50) * US)


def test_torch_compile_wrapper_hides_the_model_its_kernels_place_it() -> None:
    """torch.compile's OptimizedModule records no module frame of the model inside; the eager VAE is
    named. The work inside the wrapper is placed by the kernel-region method (FA + LayerNorm → DiT);
    the copy outside every module stays Other."""
    frames = [("nn.Module: OptimizedModule_0", 0, 1950), ("torch/_dynamo/eval_frame.py(632): _fn", 0, 1950),
              ("nn.Module: AutoencoderKL_0", 1990, 2550)]
    a = analyse(inference("A", frames=frames), CFG)
    assert a.method == "module names"
    assert a.stage_note == "stages from module names: VAE; inside OptimizedModule from kernel regions: DiT"
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", VAE_SHARES, 600)
    assert_shares(a, "Other", {"Other": 50}, 50)


def test_mindspore_scopes_give_stages() -> None:
    dit = "Default/dit-DiTTransformer/blocks-CellList/0-DiTBlock"
    scope = {k: dit for k in ("mm3", "ln", "fa", "add", "mm2", "ag")}
    scope |= {k: "Default/vae-AutoencoderKL/decoder-Decoder" for k in ("conv", "gn", "up")}
    scope["copy"] = "Default/postprocess"
    a = analyse(inference("A", frames=[], scope=scope, framework="mindspore"), CFG)
    assert a.method == "MindSpore scopes"
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", VAE_SHARES, 600)


@pytest.mark.parametrize("kind", ["npu_text", "gpu"])
def test_kernel_regions_without_names(kind: str) -> None:
    """Without frames or stacks, regions of stage-typical kernels (LayerNorm + FA vs Conv, GroupNorm,
    Upsample) give the same DiT shares. The copy after the VAE joins the VAE region (it is in the
    same step after the VAE's last kernel), so VAE busy is 650 and there is no Other stage."""
    a = analyse(inference("A", frames=[], kind=kind), CFG)
    assert a.method == "kernel regions"
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "VAE", {**VAE_SHARES, "Other": 500}, 650)
    assert "Other" not in set(a.summary["stage"])


def test_region_needs_its_required_kernel() -> None:
    """Convolutions and LayerNorms without GroupNorm/Upsample or attention are no stage (a CNN or
    an MLP); everything is reported under All with the reason."""
    steps = {sid: [("conv", 0, 300), ("ln", 300, 40), ("conv", 340, 100), ("ln", 440, 40), ("conv", 480, 100),
                   ("mm2", 580, 200), ("conv", 780, 100)] for sid in (3, 4)}
    a = analyse(build(steps, frames=[]), CFG)
    assert not a.has_stages and a.method == ""
    # (issue 25: the workload reading — a vision model by its convolutions — rules out a guess)
    assert "no DiT/VAE stage" in a.stage_note and "a vision model" in a.stage_note
    assert set(a.summary["stage"]) == {"All"}
    assert_shares(a, "All", {"Other": 600, "Vector": 80, "MatMul": 200}, 880)


def test_training_profile_has_no_stage_but_reports_categories() -> None:
    """FA + LayerNorm + Conv/GroupNorm kernels would form regions, but backward ops mark training."""
    steps = {sid: step_items("A", warmup=False) for sid in (3, 4)}
    p = build(steps, frames=[])
    ops = p.ops.copy()
    ops.loc[0, "name"] = "autograd::engine::evaluate_function: MmBackward0"
    a = analyse(dataclasses.replace(p, ops=ops), CFG)
    assert not a.has_stages
    assert "training profile" in a.stage_note and "MmBackward0" in a.stage_note
    assert set(a.summary["stage"]) == {"All"}
    all_fa = row(a, "All", "FA")
    assert all_fa["time_ns"] == pytest.approx(400 * US) and all_fa["share"] == pytest.approx(400 / 2570)
    assert a.findings == []


def hccl_layout(kind: str, hccl_stream: int) -> Profile:
    """Variant A as the real exports lay out each all-gather (npu-real-runs, AlexNet DDP):

    * its ``comm_tasks`` (HCCL plane threads): an SDMA copy and a Notify_Record for the first 60 %
      of the op, a Notify_Wait for the rest;
    * Text: the HCCL op kernel row, its ``kernel_details.csv`` row (``in_trace`` False), and the
      same tasks again in Ascend Hardware on the HCCL stream, *not* flagged ``is_comm`` (SDMA,
      Write Value, Notify Wait); the kernel_details row of the op is merged onto the SDMA task
      that starts at the same ns (op type ``hcom_allGather_``, the pattern of defect 3);
    * Db: the ``COMMUNICATION_OP`` row, its ``is_comm`` TASK rows on the HCCL stream, an AI_CORE
      TASK there spanning the whole op with the op's launching op, and a bare KERNEL_AICORE
      TASK around every FlashAttention kernel on the compute stream (a second description).
    """
    p = inference("A")
    k = p.kernels.copy()
    comm = k[k["is_comm"]]
    sdma = comm["dur_ns"] * 6 // 10
    tasks = pd.DataFrame({
        "name": np.repeat(["Memcpy", "Notify_Record", "Notify_Wait"], len(comm)),
        "start_ns": np.concatenate([comm["start_ns"], comm["start_ns"] + sdma // 2, comm["start_ns"] + sdma]),
        "dur_ns": np.concatenate([sdma // 2, sdma - sdma // 2, comm["dur_ns"] - sdma]),
        "step": np.tile(comm["step"], 3)})
    comm_tasks = frame(COMM_TASKS, {**{c: tasks[c] for c in tasks}, "group": ["sp"] * len(tasks)}, n=len(tasks))
    hw = tasks.assign(stream=hccl_stream, in_trace=True, has_details=False, is_comm=kind == "npu_db", op_row=-1,
                      task_type=tasks["name"].map({"Memcpy": "SDMA", "Notify_Record": "Write Value",
                                                   "Notify_Wait": "Notify Wait"}))
    extra = [hw]
    if kind == "npu_text":
        details = comm.assign(in_trace=False, has_details=True, op_row=-1, core="HCCL")
        hw.loc[hw["name"] == "Memcpy", ["op_type", "has_details"]] = ["hcom_allGather_", True]
        extra.append(details)
    else:
        extra.append(comm.assign(is_comm=False, stream=hccl_stream, task_type="AI_CORE", name="AI_CORE"))
        fa = k[k["op_type"] == "FlashAttentionScore"]
        extra.append(fa.assign(start_ns=fa["start_ns"] - 500, dur_ns=fa["dur_ns"] + 1500, has_details=False,
                               op_type="", core="", task_type="KERNEL_AICORE", name="KERNEL_AICORE"))
        k.loc[k["is_comm"], ["stream", "task_type"]] = [-1, ""]
    k = pd.concat([k, *extra], ignore_index=True).sort_values("start_ns", kind="stable").reset_index(drop=True)
    k = frame(KERNELS, {c: k[c] for c in KERNELS if c in k})
    return dataclasses.replace(p, kernels=k, comm_tasks=comm_tasks, meta=dataclasses.replace(p.meta, kind=kind))


@pytest.mark.parametrize("kind, hccl_stream", [("npu_text", 9), ("npu_text", -1), ("npu_db", 9)])
def test_each_collective_counts_once_and_its_tasks_are_not_compute(kind: str, hccl_stream: int) -> None:
    """Defect 8 (issue 12): the HCCL-stream tasks of an NPU export were counted as Other on top of
    the collective's Comm time. Whatever the export lists — with or without a stream id (the real
    Text export writes ``Physic Stream Id``, which the loader reads as -1 today) — the shares are
    those of the profile without the duplicates."""
    a = analyse(hccl_layout(kind, hccl_stream), CFG)
    assert_shares(a, "DiT", DIT_A, 1800)
    assert_shares(a, "All", ALL_A, 2450)


def test_profile_without_device_work() -> None:
    a = analyse(Profile(ProfileMeta(kind="gpu", source="empty")), CFG)
    assert a.stage_note == "no device work in the profile" and a.findings == []
    assert row(a, "All", "Total")["time_ns"] == 0


# ------------------------------------------------------------------------------- categories


def test_gpu_kernel_names_are_classified() -> None:
    p = inference("A", kind="gpu")
    items = build_items(p)
    cats = np.asarray(CATEGORIES, dtype=object)[classify(items, CFG)]
    by_label = dict(zip(items.label, cats))
    assert by_label["aten::addmm"] == "MatMul"  # sm80_xmma_gemm
    assert by_label["aten::mm"] == "MatMul"  # ampere_bf16_s16816gemm
    assert by_label["aten::_scaled_dot_product_flash_attention"] == "FA"
    assert by_label["aten::native_layer_norm"] == "Vector"
    assert by_label["aten::add"] == "Vector"
    assert by_label["aten::cudnn_convolution"] == "Other"  # implicit-GEMM convolution is not MatMul
    assert by_label["aten::native_group_norm"] == "Vector"
    assert by_label["nccl:all_gather"] == "Comm"
    assert by_label["Memcpy DtoH"] == "Other"  # copies are labelled by kernel name, not aten::copy_


def test_npu_op_types_are_classified() -> None:
    items = build_items(inference("A"))
    cats = dict(zip(items.label, np.asarray(CATEGORIES, dtype=object)[classify(items, CFG)]))
    assert cats == {"MatMulV3": "MatMul", "MatMulV2": "MatMul", "LayerNormV4": "Vector", "FlashAttentionScore": "FA",
                    "Add": "Vector", "hcom_allGather": "Comm", "Conv2D": "Other", "GroupNormV2": "Vector",
                    "UpsampleNearest2d": "Vector", "aten::copy_": "Other"}
    assert "EVENT_WAIT_SQE" not in set(items.label)  # waits are not device work


def test_gpu_launch_runtime_op_resolves_to_its_operator() -> None:
    """An opaque cuBLAS kernel name is MatMul because its cudaLaunchKernel sits in aten::mm."""
    p = inference("A", kind="gpu")
    k = p.kernels.copy()
    k["name"] = k["name"].where(~k["name"].str.startswith("ampere_bf16"), "Kernel2")
    items = build_items(dataclasses.replace(p, kernels=k))
    cats = dict(zip(items.label, np.asarray(CATEGORIES, dtype=object)[classify(items, CFG)]))
    assert cats["aten::mm"] == "MatMul"


def gpu_profile(kernels: list[tuple[str, str]]) -> Profile:
    """One GPU kernel per (kernel name, launching aten op; "" = not linked), 10 µs each, in order."""
    k_rows, op_rows = [], []
    for i, (name, host) in enumerate(kernels):
        t = T0 + i * 20 * US
        op_row = -1
        if host:
            op_rows += [{"name": host, "cat": "cpu_op", "start_ns": t, "end_ns": t + 3 * US},
                        {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "start_ns": t, "end_ns": t + US}]
            op_row = len(op_rows) - 1
        k_rows.append({"name": name, "task_type": "gpu_memcpy" if name.startswith("Memcpy") else "kernel",
                       "stream": 7, "start_ns": t + 5 * US, "dur_ns": 10 * US, "op_row": op_row,
                       "is_comm": name.lower().startswith("nccl"), "in_trace": True})
    ops = pd.DataFrame(op_rows)
    key = np.full(len(ops), TID, dtype="int64")
    parent, depth = nest(key, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    ops = frame(OPS, {**{c: ops[c] for c in ops}, "pid": np.full(len(ops), PID), "tid": key,
                      "parent": parent, "depth": depth})
    k = pd.DataFrame(k_rows)
    return Profile(ProfileMeta(kind="gpu", source="gpu-kernels"), kernels=frame(KERNELS, {c: k[c] for c in k}),
                   ops=ops)


#: Kernel names as real traces record them (tracelens SD 3.5 on MI300 under torch.compile, the
#: H100 / MI300 Hugging Face traces, the A100 pair), with the launching aten op or "" where the
#: trace does not link the launch (driver-API / HIP module launches before issue 12's fix).
REAL_KERNELS = [
    # Inductor pointwise / reduction kernels are fused element-wise work, whatever aten ops they list
    ("triton_poi_fused_addmm_gelu_view_15", "triton_poi_fused_addmm_gelu_view_15", "Vector"),
    ("triton_red_fused__unsafe_view_add_addmm_clone_convolution_mul_native_layer_norm_slice_split_"
     "transpose_unsqueeze_view_12", "triton_red_fused__unsafe_view_add_addmm_clone_convolution_mul_native_"
     "layer_norm_slice_split_transpose_unsqueeze_view_12", "Vector"),
    ("triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "", "Vector"),
    ("triton_per_fused__to_copy_add_addmm_mean_mul_pow_rsqrt_transpose_view_8", "", "Vector"),
    # Inductor templates are the GEMM / convolution / attention itself
    ("triton_tem_fused_addmm_relu_0", "", "MatMul"),
    ("triton_tem_fused_convolution_1", "", "Other"),
    ("triton_tem_fused_flex_attention_0", "", "FA"),
    # ROCm flash attention and Tensile GEMMs, linked or not; a Tensile kernel inside a MIOpen conv
    ("attn_fwd", "aten::_flash_attention_forward", "FA"),
    ("attn_fwd", "", "FA"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT320x224x64_MI16x16x1_SN_LDSB0_AFC1", "aten::mm", "MatMul"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1", "", "MatMul"),
    ("Cijk_Ailk_Bljk_BBS_BH_MT256x256x32_MI32x32x8x1_SN_1LDSB1_APM1", "aten::miopen_convolution", "Other"),
    ("batched_transpose_32x32_half", "aten::miopen_convolution", "Other"),
    # cuBLASLt Hopper GEMMs, often launched through cuLaunchKernelEx
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT", "", "MatMul"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
     "kernel__5x_cublas", "", "MatMul"),
    # an element-wise multiply whose launcher is called "…broadcast…" is not a collective
    ("void at::native::elementwise_kernel_manual_unroll<128, 4, at::native::(anonymous namespace)::"
     "type_specialized_broadcast_kernel_launcher<1>::apply<at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> > >(int)", "aten::mul", "Vector"),
    # data layout and gathers are vector work on GPU as on the Ascend vector core
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::"
     "OpaqueType<2u>, unsigned int, 2, 128, 1>(int)", "aten::cat", "Vector"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, "
     "-2, true>(int)", "aten::index_select", "Vector"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int)",
     "aten::max_pool2d_with_indices", "Vector"),
    ("void (anonymous namespace)::groupnorm_kernel_dispatch_down<__hip_bfloat16, 1024u>(unsigned int)",
     "aiter::_groupnorm_run", "Vector"),
    ("Memcpy DtoH (Device -> Pinned)", "aten::copy_", "Other"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl:all_gather", "Comm"),
]


def test_real_kernel_names_are_classified() -> None:
    items = build_items(gpu_profile([(name, host) for name, host, _ in REAL_KERNELS]))
    got = np.asarray(CATEGORIES, dtype=object)[classify(items, CFG)].tolist()
    assert list(zip([n[:40] for n, _, _ in REAL_KERNELS], got)) == [(n[:40], c) for n, _, c in REAL_KERNELS]


def test_kernel_names_decide_before_keywords(tmp_path: Path) -> None:
    """A user's kernel_names pattern wins over a keyword of another category that its host op matches."""
    cfg = tmp_path / "k.ini"
    cfg.write_text("[category.FA]\nkernel_names = re:^my_fused_\n", encoding="utf-8")
    items = build_items(gpu_profile([("my_fused_qkv_gemm", "aten::mm"), ("other_gemm", "aten::mm")]))
    got = np.asarray(CATEGORIES, dtype=object)[classify(items, load_config(cfg))].tolist()
    assert got == ["FA", "MatMul"]


# ----------------------------------------------------------------------------------- config


def test_default_rules_are_the_seed_thresholds() -> None:
    got = {(r.stage, r.category): r.threshold for r in CFG.rules}
    assert got == {("DiT", "MatMul"): 50, ("DiT", "FA"): 30, ("DiT", "Vector"): 20, ("DiT", "Comm exposed"): 30}
    assert CFG.warmup_steps == 2


def test_user_config_overrides_and_extends(tmp_path: Path) -> None:
    cfg = tmp_path / "mine.ini"
    cfg.write_text(
        "[rule.dit_matmul]\nthreshold = 60\n\n"
        "[rule.dit_comm_exposed]\nenabled = no\n\n"
        "[rule.vae_conv]\nstage = VAE\ncategory = Other\nthreshold = 70\nfinding = VAE convolution heavy\n"
        "direction = Conv tiling / NHWC\n\n"
        "[category.FA]\nkeywords = attention, flash, re:^acl\\w*layernorm\n",
        encoding="utf-8")
    c = load_config(cfg)
    a = analyse(inference("A"), c)
    assert [f.rule.key for f in a.findings] == ["vae_conv"]  # 55.6 % < 60 %; exposure rule off
    assert a.findings[0].value == pytest.approx(450 / 600)
    # the user's FA list now also takes the LayerNorm kernels (regex item)
    assert row(a, "DiT", "FA")["time_ns"] == pytest.approx(480 * US)


def test_docs_example_config_loads(tmp_path: Path) -> None:
    doc = (REPO / "docs" / "advisor.md").read_text(encoding="utf-8")
    example = doc.split("```ini\n", 1)[1].split("```", 1)[0]
    cfg = tmp_path / "example.ini"
    cfg.write_text(example, encoding="utf-8")
    c = load_config(cfg)
    rules = {r.key: r for r in c.rules}
    assert rules["dit_matmul"].threshold == 40 and "dit_comm_exposed" not in rules
    assert rules["vae_conv"].stage == "VAE"
    items = pd.Series(["fused_mha_12 | | | ", "my_attn_fwd | | | ", "gemm | | | "], dtype=object)
    assert c.categories["FA"].matches(items).tolist() == [True, True, False]


@pytest.mark.parametrize("text, problem", [
    ("[rule.dit_fa]\ntreshold = 10\n", "unknown key(s) treshold"),
    ("[rules.x]\nstage = DiT\n", "unknown section [rules.x]"),
    ("[category.Conv]\nkeywords = conv\n", "unknown category"),
    ("[category.FA]\nkeywords = re:(unclosed\n", "invalid regex"),
    ("[category.FA]\nkeywords = re:(?P<s0>flash)\n", "named groups"),
    ("[category.FA]\nkeywords = flash, re:(?i)attn\n", "cannot be combined"),
    ("[rule.x]\nstage = DiT\ncategory = MatMul\nthreshold = 150\n", "not a percentage"),
    ("[rule.x]\nstage = Encoder\ncategory = MatMul\nthreshold = 5\n", "is not one of"),
    ("[rule.x]\nstage = DiT\ncategory = MatMul\n", "missing threshold"),
    ("[advisor]\nwarmup_steps = two\n", "not an integer"),
    ("no section header\n", "invalid ini file"),
])
def test_bad_config_is_an_input_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    cfg = tmp_path / "bad.ini"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.path == str(cfg)
    assert problem in err.value.message


def test_run_advise_rejects_a_bad_config_before_loading(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        run_advise(str(tmp_path / "no-such-profile"), LoadOptions(), str(tmp_path / "missing.ini"), None)
    assert "missing.ini" in err.value.message and "cannot read advisor config" in err.value.message


# ---------------------------------------------------------------------------------- outputs


def comparison_table() -> Table:
    ctx = Context(inference("A"), inference("B"), CompareOptions())
    tables = advisor_tables(ctx, load_config(None))
    assert [t.name for t in tables] == ["Advisor"]
    return tables[0]


def test_advisor_table_has_both_sides_and_the_difference() -> None:
    t = comparison_table()
    df = t.data
    assert list(df["scope"].unique()) == ["base", "comparison", "diff"]
    assert t.default_sort == "time_ms" and df[IS_TOTAL].dtype == bool

    def cell(scope: str, stage: str, category: str) -> pd.Series:
        hit = df[(df["scope"] == scope) & (df["stage"] == stage) & (df["category"] == category)]
        assert len(hit) == 1
        return hit.iloc[0]

    mm = cell("base", "DiT", "MatMul")
    assert mm["time_ms"] == pytest.approx(1.0) and mm["share"] == pytest.approx(1000 / 1920)
    assert mm["finding"].startswith("DiT MatMul share high: 52.08%")
    assert "quantisation" in mm["direction"]
    assert "threshold 50%" in mm["evidence"] and "MatMulV3 0.600 ms, MatMulV2 0.400 ms" in mm["evidence"]
    assert mm["steps"] == "52.08%–52.08% over 2 steps"
    ex = cell("base", "DiT", "Comm exposed")
    assert "70.00% of DiT communication 0.400 ms" in ex["evidence"]
    assert cell("comparison", "DiT", "FA")["finding"].startswith("DiT FA share high: 39.77%")
    total = cell("base", "DiT", "Total")
    assert total[IS_TOTAL] and "wall-clock 1.800 ms (streams overlap)" in total["evidence"]

    fa = cell("diff", "DiT", "FA")
    assert fa["time_ms"] == pytest.approx(0.3)
    assert fa["share"] == pytest.approx(700 / 1760 - 400 / 1920)
    assert fa["finding"].startswith("grew 0.300 ms per step")
    assert "FlashAttentionScore +0.300 ms (0.400 ms → 0.700 ms)" in fa["evidence"]
    assert "Attention optimisation" in fa["direction"]
    mm_diff = cell("diff", "DiT", "MatMul")
    assert mm_diff["time_ms"] == pytest.approx(-0.6) and mm_diff["finding"].startswith("shrank 0.600 ms")
    assert cell("diff", "VAE", "Other")["finding"] == "unchanged"


def test_gpu_vs_npu_diff_names_categories_and_shared_operators() -> None:
    """GPU (variant A) vs NPU (variant B): the diff rows name the category that grew and what both
    sides launch it from — the framework op (aten::native_layer_norm), or the equivalence class
    when the platforms name the op differently (flash attention: aten::_scaled_dot_product_flash_
    attention on GPU, npu::npu_fusion_attention on NPU; docs/matching.md) — never a GPU kernel or
    an Ascend op type. Ops found on one side only (aten::gelu only in B, aten::mm only in A) are
    summed and the largest named with the side that has them."""
    t = advisor_tables(Context(inference("A", kind="gpu"), inference("B"), CompareOptions()), load_config(None))[0]
    diff = t.data[t.data["scope"] == "diff"].set_index(["stage", "category"])
    vec = diff.loc[("DiT", "Vector")]
    assert vec["time_ms"] == pytest.approx(0.380) and vec["finding"].startswith("grew 0.380 ms per step")
    # per step: LayerNorm 80 → 200 µs; one-sided: Gelu 0 → 300, Add 40 → 0
    assert vec["evidence"] == ("driven by: aten::native_layer_norm +0.120 ms (0.080 ms → 0.200 ms); "
                               "+0.260 ms in operators found on one side only: GELU +0.300 ms (comparison only)")
    fa = diff.loc[("DiT", "FA")]
    assert fa["evidence"] == "driven by: flash attention +0.300 ms (0.400 ms → 0.700 ms)"
    mm = diff.loc[("DiT", "MatMul")]
    assert mm["evidence"] == ("driven by: aten::addmm −0.200 ms (0.600 ms → 0.400 ms); "
                              "−0.400 ms in operators found on one side only: aten::mm −0.400 ms (base only)")
    names = " ".join(diff["evidence"])
    for kernel in ("vectorized", "gemm", "GeluCUDAKernel", "Gelu ", "LayerNormV4", "FlashAttentionScore", "MatMulV"):
        assert kernel not in names


def test_format_findings_names_rules_and_growth() -> None:
    text = format_findings(comparison_table())
    assert "base: DiT MatMul share high: 52.08% of stage time > 50%" in text
    assert "base: DiT communication exposed: 70.00% of its communication > 30%" in text
    assert "comparison: DiT FA share high: 39.77%" in text
    assert "comparison: DiT Vector share high: 28.41%" in text
    growth = [line for line in text.splitlines() if line.startswith("  diff:")]
    assert growth[0].startswith("  diff: DiT Vector grew 0.380 ms")  # 120 → 500 µs
    assert growth[1].startswith("  diff: DiT FA grew 0.300 ms")


def test_screen_lead_lists_findings_first_each_part_on_its_own_line() -> None:
    """The Advisor screen reads its findings before the shares: headline, what to try, the
    evidence and the top operators, each rule finding's from its row of the table."""
    t = comparison_table()
    lines = t.lead.splitlines()
    assert lines[0].startswith("Findings")
    df = t.data
    hits = df[(df["scope"] != "diff") & ~df[IS_TOTAL] & (df["finding"] != "")]
    assert hits["category"].isin(ROW_CATEGORIES).sum() == 4  # the seed's rules
    # …and the checks beyond them (issue 25), worded the same way: the synthetic profiles have
    # no host ops between their kernels' launches, so the device is idle most of each step
    assert hits.loc[~hits["category"].isin(ROW_CATEGORIES), "category"].tolist() == ["device_idle"] * 2
    for row in hits.itertuples(index=False):
        i = lines.index(f"{row.scope}: {row.finding}")
        evidence, top = row.evidence.split("; top: ")
        assert lines[i + 1:i + 4] == [f"    try: {row.direction}", f"    evidence: {evidence}",
                                      f"    top: {top}"]
    grew = [line for line in lines if line.startswith("what grew: ")]
    assert grew[0].startswith("what grew: DiT Vector grew 0.380 ms")  # 120 → 500 µs
    assert grew[1].startswith("what grew: DiT FA grew 0.300 ms")
    # Rule findings come before what grew; nothing is said to be quiet when all scopes spoke.
    assert lines.index(grew[0]) > max(lines.index(f"{r.scope}: {r.finding}") for r in hits.itertuples())
    assert not any("no rule tripped" in line for line in lines)


def test_table_goes_into_workbook_and_json(tmp_path: Path) -> None:
    t = comparison_table()
    result = ComparisonResult("A", "B")
    result.add(Table("ApiCompare", t.columns[:1], t.data[["scope"]].head(1), (0, 0), (0, -1)))
    result.add(t)
    book = write_workbook(result, tmp_path)
    sheet = pd.read_excel(book, sheet_name="Advisor", header=2)
    assert list(sheet.columns) == [c.header for c in t.columns]
    assert len(sheet) == len(t.data)
    assert sheet["Time(ms)"].iloc[2] == pytest.approx(t.data["time_ms"].iloc[2])
    doc = orjson.loads(write_json(result, tmp_path / "r.json").read_bytes())
    assert doc["advisor"]["rows"][2]["finding"] == t.data["finding"].iloc[2]


# ------------------------------------------------------------------------ real and fixture data


def test_gpu_training_fixture_reports_categories_without_stages() -> None:
    path = REPO / "fixtures" / "gpu" / "base.pt.trace.json"
    if not path.exists():
        pytest.skip("fixtures/gpu not generated")
    from perfcmp_core.load import load_profile

    a = analyse(load_profile(str(path)), CFG)
    assert not a.has_stages and "training profile" in a.stage_note
    shares = a.summary.set_index("category")["share"]
    for cat in ("FA", "MatMul", "Vector", "Comm"):
        assert shares[cat] > 0, cat


def test_real_gpu_training_trace() -> None:
    path = DATA / "gpu-real" / "trace_diff_control.pt.trace.json.gz"
    if not path.exists():
        pytest.skip("real GPU trace not available")
    from perfcmp_core.load import load_profile

    a = analyse(load_profile(str(path)), CFG)
    assert not a.has_stages and "training profile" in a.stage_note
    assert a.steps == (1011, 1012, 1013, 1014) and a.warmup == (1009, 1010)
    mm = a.summary.set_index("category").loc["MatMul"]
    assert 0 < mm["share"] < 1 and mm["step_min"] <= mm["share"] <= mm["step_max"]


def infer_path(name: str) -> Path:
    path = INFER / f"{name}_ascend_pt"
    if not path.exists():
        pytest.skip("fixtures/npu_infer not generated")
    return path


def test_run_advise_prints_the_report_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = infer_path("dit_vae")
    out = tmp_path / "advise.json"
    assert run_advise(str(path), LoadOptions(), None, str(out)) == 0
    text = capsys.readouterr().out
    assert "Stages from module names: DiT, VAE" in text
    assert "warmup excluded" in text and "DiT MatMul share high" in text
    doc = orjson.loads(out.read_bytes())
    assert doc["command"] == "advise" and doc["findings"][0]["rule"] == "dit_matmul"
    assert {r["stage"] for r in doc["summary"]} >= {"DiT", "VAE", "All"}


# fixtures/README.md "DiT + VAE inference": designed µs per step (2 DiT blocks of 1000 µs of work:
# MatMul 54 / FA 23 / Vector 15 / Comm 8 % in dit_vae, 28 / 33 / 23 / 16 % in dit_vae_fa; every
# kernel carries a 0–499 ns fraction, so a category of ≤ 12 kernels may exceed its design by up to
# 6 µs). Wall-clock DiT time is less than its 2000 µs of work where the all-gather overlaps compute
# (dit_vae: 1840; dit_vae_fa: 1870). VAE: Conv2D 150+200+200+250+120 = 920 (Other), GroupNorm 2×40
# + Swish 2×20 + Add 15 + Upsample 30 = 165 (Vector); a 60 µs D2H copy after it.
FIXTURE_DIT = {
    "dit_vae": ({"MatMul": 1080, "FA": 460, "Vector": 300, "Comm": 160, "Comm exposed": 0, "Other": 0}, 1840),
    "dit_vae_fa": ({"MatMul": 560, "FA": 660, "Vector": 460, "Comm": 320, "Comm exposed": 190, "Other": 0}, 1870),
}
FIXTURE_RULES = {"dit_vae": ["dit_matmul"], "dit_vae_fa": ["dit_fa", "dit_vector", "dit_comm_exposed"]}


def assert_fixture_stage(a, stage: str, expected: dict[str, float], wall_us: float) -> None:
    """Designed category µs (± the sub-µs fractions); busy = their sum, shares of it."""
    busy_us = sum(expected.get(c, 0) for c in PARTITION)
    total = row(a, stage, "Total")
    assert total["time_ns"] == pytest.approx(busy_us * US, abs=15 * US)
    assert total["wall_ns"] == pytest.approx(wall_us * US, abs=15 * US)
    for cat, us in expected.items():
        r = row(a, stage, cat)
        assert r["time_ns"] == pytest.approx(us * US, abs=6 * US), (stage, cat)
        assert r["share"] == pytest.approx(us / busy_us, abs=0.003), (stage, cat)


@pytest.mark.parametrize("name", list(FIXTURE_DIT))
def test_inference_fixture_shares_and_rules(name: str) -> None:
    from perfcmp_core.load import load_profile

    a = analyse(load_profile(str(infer_path(name))), CFG)
    assert a.method == "module names"
    assert a.steps == (4, 5, 6) and a.warmup == (2, 3)
    assert_fixture_stage(a, "DiT", *FIXTURE_DIT[name])
    assert_fixture_stage(a, "VAE", {"Other": 920, "Vector": 165, "FA": 0, "MatMul": 0, "Comm": 0}, 1085)
    assert_fixture_stage(a, "Other", {"Other": 60}, 60)
    assert [f.rule.key for f in a.findings] == FIXTURE_RULES[name]
    if name == "dit_vae_fa":
        exposed = a.findings[-1]
        assert exposed.value == pytest.approx(95 / 160, abs=0.005)  # README: 59.4 % designed


def test_inference_fixture_regions_match_module_names() -> None:
    """Without python frames the kernel-region method finds the same DiT; the D2H copy after the
    VAE joins the VAE region."""
    from perfcmp_core.load import load_profile

    p = load_profile(str(infer_path("dit_vae_fa")))
    a = analyse(dataclasses.replace(p, pyfuncs=empty(PYFUNCS)), CFG)
    assert a.method == "kernel regions"
    assert_fixture_stage(a, "DiT", *FIXTURE_DIT["dit_vae_fa"])
    assert_fixture_stage(a, "VAE", {"Other": 980, "Vector": 165}, 1145)


def test_inference_fixture_comparison() -> None:
    """comparison − base is exactly the designed difference per kernel (fixtures/README.md)."""
    from perfcmp_core.load import load_profile

    base = load_profile(str(infer_path("dit_vae")))
    comp = load_profile(str(infer_path("dit_vae_fa")))
    t = advisor_tables(Context(base, comp, CompareOptions()), load_config(None))[0]
    diff = t.data[t.data["scope"] == "diff"].set_index(["stage", "category"])
    assert diff.loc[("DiT", "FA"), "time_ms"] == pytest.approx(0.200, abs=1e-6)
    assert diff.loc[("DiT", "MatMul"), "time_ms"] == pytest.approx(-0.520, abs=1e-6)
    assert diff.loc[("DiT", "Vector"), "time_ms"] == pytest.approx(0.160, abs=1e-6)
    assert diff.loc[("VAE", "Other"), "time_ms"] == pytest.approx(0.0, abs=1e-6)
    assert "FlashAttentionScore +0.200 ms" in diff.loc[("DiT", "FA"), "evidence"]
    text = format_findings(t)
    assert "base: DiT MatMul share high" in text and "comparison: DiT communication exposed" in text


def test_cli_advise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from perfcmp_tui.cli import main

    path = infer_path("dit_vae_fa")
    bad = tmp_path / "bad.ini"
    bad.write_text("[rule.dit_fa]\nthreshold = high\n", encoding="utf-8")
    assert main(["advise", str(path), "--advisor-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "not a number" in err
    assert main(["advise", str(path), "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "DiT FA share high" in out and (tmp_path / "a.json").exists()


# ------------------------------------------------------------------- xDiT Flux on GPU fixture

GPU_INFER = REPO / "fixtures" / "gpu_infer"
#: fixtures/README.md "xDiT Flux inference": designed µs per pipeline call (ProfilerStep).
XDIT_DIT = {
    "flux_eager": {"MatMul": 460, "FA": 200, "Vector": 130, "Comm": 90, "Comm exposed": 70, "Other": 0},
    "flux_compiled": {"MatMul": 460, "FA": 200, "Vector": 95, "Comm": 90, "Comm exposed": 75, "Other": 0},
}
XDIT_NOTES = {"flux_eager": "stages from module names: DiT, VAE",
              "flux_compiled": "stages from module names: VAE; inside OptimizedModule from kernel regions: DiT"}


def xdit(name: str) -> Profile:
    from perfcmp_core.load import load_profile

    path = GPU_INFER / f"{name}.pt.trace.json"
    if not path.exists():
        pytest.skip("fixtures/gpu_infer not generated")
    return load_profile(str(path))


@pytest.mark.parametrize("name", list(XDIT_DIT))
def test_xdit_flux_fixture_stages_shares_and_rules(name: str) -> None:
    """Real module names (xFuserFlux1Transformer2DWrapper → FluxTransformer2DModel, T5EncoderModel →
    T5Stack, Decoder under vae.decode) and, compiled, OptimizedModule with Inductor kernels named
    after the aten ops they fuse: the designed shares come out either way."""
    a = analyse(xdit(name), CFG)
    assert a.stage_note == XDIT_NOTES[name]
    assert a.steps == (4, 5) and a.warmup == (2, 3)
    dit = XDIT_DIT[name]
    # one compute stream and the all-gathers beside it: wall = busy − the hidden communication
    assert_fixture_stage(a, "DiT", dit, sum(dit[c] for c in PARTITION) - dit["Comm"] + dit["Comm exposed"])
    assert_fixture_stage(a, "VAE", {"Other": 670, "Vector": 90, "FA": 0, "MatMul": 0, "Comm": 0}, 760)
    assert_fixture_stage(a, "Other", {"MatMul": 70, "Vector": 10, "Other": 60}, 140)  # T5 + the D2H copy
    assert [f.rule.key for f in a.findings] == ["dit_matmul", "dit_comm_exposed"]
    assert a.findings[0].value == pytest.approx(460 / (sum(dit[c] for c in PARTITION)), abs=0.003)


def test_xdit_flux_eager_vs_compiled_diff() -> None:
    """torch.compile fuses the DiT's norms, RoPE, bias + GELU and residual adds: Vector shrinks
    130 → 95 µs per call. Eager aten ops and Inductor kernels share no name, so the change is summed,
    not attributed to one side's kernels; the GEMMs and the attention are the same work."""
    t = advisor_tables(Context(xdit("flux_eager"), xdit("flux_compiled"), CompareOptions()),
                       load_config(None))[0]
    diff = t.data[t.data["scope"] == "diff"].set_index(["stage", "category"])
    vec = diff.loc[("DiT", "Vector")]
    assert vec["time_ms"] == pytest.approx(-0.035, abs=0.003)
    assert vec["finding"].startswith("shrank 0.03") and "in operators found on one side only" in vec["evidence"]
    assert "driven by" not in vec["evidence"]
    for cat in ("MatMul", "FA", "Comm"):
        assert diff.loc[("DiT", cat), "time_ms"] == pytest.approx(0.0, abs=0.003), cat
    assert "the sides' stages were found differently" not in " ".join(t.notes)  # both: module names


def test_gpu_vs_npu_fixture_diff_names_no_change_too_small_to_print() -> None:
    """GPU training fixture vs its NPU Text rendering: aten::mm moves by < 1 µs per step (the
    sub-µs kernel fractions); an evidence line does not name a change it prints as 0.000 ms."""
    from perfcmp_core.load import load_profile

    base = load_profile(str(REPO / "fixtures" / "gpu" / "base.pt.trace.json"))
    comp = load_profile(str(REPO / "fixtures" / "npu_text" / "comp_ascend_pt"))
    t = advisor_tables(Context(base, comp, CompareOptions()), load_config(None))[0]
    evidence = " ".join(t.data[t.data["scope"] == "diff"]["evidence"])
    assert "operators found on one side only" in evidence
    assert "+0.000 ms" not in evidence and "−0.000 ms" not in evidence


def test_collective_texts_are_not_matched_and_collectives_stay_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collective is Comm whatever its name, so the keyword lists are tried only on the texts
    of other work: ``nccl:all_gather_gemm`` (a collective whose name holds a MatMul keyword) is
    never shown to them, is Comm, and the GEMM beside it is still MatMul."""
    from perfcmp_core.advisor import rules

    items = build_items(gpu_profile([("nccl:all_gather_gemm", "c10d::allgather_"), ("sm80_xmma_gemm", "aten::mm")]))
    shown: list[str] = []
    real = rules.Keywords.matches

    def spy(self: rules.Keywords, lower: pd.Series) -> np.ndarray:
        shown.extend(lower.tolist())
        return real(self, lower)

    monkeypatch.setattr(rules.Keywords, "matches", spy)
    got = dict(zip(items.label, np.asarray(CATEGORIES, dtype=object)[classify(items, CFG)]))
    assert got == {"c10d::allgather_": "Comm", "aten::mm": "MatMul"}
    assert shown and not any("all_gather" in text for text in shown)


@pytest.mark.parametrize("fixture", ["npu_db/comp_ascend_pt", "npu_text/comp_ascend_pt", "gpu/base.pt.trace.json"])
def test_each_collective_takes_the_launching_op_of_its_first_linked_kernel_row(fixture: str) -> None:
    """A ``comm_ops`` row's item takes op row, stream, op and task type from the ``is_comm``
    kernel row of the same start and duration (a linked one first); with half of those rows gone,
    the others read as not found (-1, -1, "", "") — derived here row by row."""
    from perfcmp_core.advisor.items import _collectives
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import LoadOptions

    p = load_profile(str(Path(__file__).resolve().parents[1] / "fixtures" / fixture), LoadOptions(use_cache=False))
    k = p.kernels
    comm_rows = np.flatnonzero(k["is_comm"].to_numpy())
    assert len(comm_rows) and len(p.comm_ops)
    p = dataclasses.replace(p, kernels=k.drop(index=comm_rows[::2]).reset_index(drop=True))
    k = p.kernels
    got = _collectives(p)
    for i, op in enumerate(p.comm_ops.itertuples()):
        same = k[k["is_comm"] & (k["start_ns"] == op.start_ns) & (k["dur_ns"] == op.dur_ns)]
        same = same.iloc[np.argsort(same["op_row"].to_numpy() < 0, kind="stable")]
        want = (same["op_row"].iat[0], same["stream"].iat[0], same["op_type"].iat[0], same["task_type"].iat[0]) \
            if len(same) else (-1, -1, "", "")
        assert (got["op_row"].iat[i], got["stream"].iat[i], got["op_type"].iat[i], got["task_type"].iat[i]) == want


@pytest.mark.parametrize("size", [0, 9, 3 * 4096])  # small, and large enough to number by object
def test_operator_times_are_the_groupby_sums_of_the_texts(size: int) -> None:
    """The operators table's (stage, category, label, operator) sums are the ones a pandas groupby
    of the texts gives, in order of first appearance, with equal texts in different objects and
    non-ASCII texts among them."""
    from perfcmp_core.advisor.analysis import _time_by

    rng = np.random.default_rng(size)
    pool = np.empty(6, dtype=object)
    pool[:] = ["aten::mm", "".join(["aten::", "mm"]), "注意力", "", "b", "a"]
    keys = {name: pool[rng.integers(0, 6 if name != "stage" else 2, size=size)]
            for name in ("stage", "category", "label")}
    time_ns = rng.integers(0, 10**9, size=size)
    want = pd.DataFrame({**keys, "time_ns": time_ns}).groupby(list(keys), sort=False, as_index=False)["time_ns"].sum()
    pd.testing.assert_frame_equal(_time_by(keys, time_ns), want, check_exact=True)
