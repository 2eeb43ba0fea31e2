"""Issue 25: the advisor says what kind of run a profile is, with evidence, on every real profile.

Labels are asserted for every loadable profile in ``../shared/data`` (each was recorded by its
publisher for the model named in its file name or the data README); an LLM is never a DiT, and
DiT / VAE stages are guessed from kernel regions only for diffusion inference without names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcmp_core.advisor import analyse, load_config, report
from perfcmp_core.advisor.workload import detect_workload

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CFG = load_config(None)

LLM_TRAIN, VISION_TRAIN = "training · LLM", "training · vision"
#: profile → (workload label, how stages were found: "" none, else the method)
EXPECTED: dict[str, tuple[str, str]] = {
    "gpu-real/alexnet.pt.trace.json.gz": ("inference · vision", ""),
    "gpu-real/trace_diff_control.pt.trace.json.gz": ("training · recommender", ""),
    "gpu-real/trace_diff_test.pt.trace.json.gz": ("training · recommender", ""),
    "gpu-real/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz": ("inference · vision", ""),
    "gpu-real/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": ("inference · LLM · prefill", ""),
    "gpu-real/tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": ("inference · LLM · prefill", ""),
    "gpu-real/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz": ("inference · text encoder", ""),
    "gpu-real/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz": ("inference · text encoder", ""),
    "gpu-real/tracelens/inference/xdit_sd_3.5_rank_0.json.gz": ("inference · diffusion · DiT + VAE",
                                                                 "module names"),
    "gpu-real/h200/flux_dit_vae_infer_bf16.pt.trace.json.gz": ("inference · diffusion · DiT + VAE",
                                                               "kernel regions"),
    "gpu-real/h200/flux_dit_vae_infer_bf16_28steps.pt.trace.json.gz": ("inference · diffusion · DiT + VAE",
                                                                       "kernel regions"),
    **{f"gpu-real/h200/{name}.pt.trace.json.gz": (LLM_TRAIN, "") for name in (
        "gpt2_train_bf16_base", "gpt2_train_bf16_base_minimal", "gpt2_train_bf16_hostbound",
        "gpt2_train_bf16_hostbound_minimal", "gpt2_train_fp32_eager", "gpt2_train_bf16_sdpa_fusedadamw",
        "gpt2_train_bf16_ddp_nccl", "llama_train_bf16", "llama16_train_bf16_12steps")},
    "gpu-real/h200/llama_generate_bf16_sdpa.pt.trace.json.gz": ("inference · LLM · prefill + decode", ""),
    "gpu-real/h200/llama_generate_bf16_eager.pt.trace.json.gz": ("inference · LLM · prefill + decode", ""),
    **{f"npu-real-runs/{export}/{level}/{rank}_ascend_pt": (VISION_TRAIN, "")
       for export in ("text", "db") for level, ranks in (("level1", ("rank0", "rank1")), ("level0", ("rank0",)))
       for rank in ranks},
}


def _real(rel: str) -> Path:
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"real profile not found: {path}")
    return path


def test_every_real_profile_has_an_expected_label() -> None:
    """No loadable profile of ../shared/data escapes the table above."""
    if not DATA.is_dir():
        pytest.skip(f"{DATA} not found")
    found = {str(p.relative_to(DATA)) for p in (DATA / "gpu-real").rglob("*.json.gz")}
    found |= {str(p.relative_to(DATA)) for p in (DATA / "npu-real-runs").glob("*/*/*_ascend_pt")}
    assert found <= set(EXPECTED), sorted(found - set(EXPECTED))


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_workload_label_and_stages(rel: str) -> None:
    from perfcmp_core.load import load_profile

    profile = load_profile(str(_real(rel)))
    label, method = EXPECTED[rel]
    w = detect_workload(profile, CFG)
    assert w.label == label
    assert w.evidence and w.evidence[0].startswith(w.mode)  # training / inference, and why
    assert len(w.evidence) >= 2 and w.source  # …and what named the model
    a = analyse(profile, CFG)
    assert a.method == method, a.stage_note
    assert a.workload is not None and a.workload.label == label
    assert any(e.startswith("kernels: GEMM ") for e in a.workload.evidence)  # the kernel mix
    if w.family != "diffusion":
        assert "DiT" not in set(a.summary["stage"]), a.stage_note  # an LLM is never a DiT
    if method == "kernel regions":
        assert "guessed" in a.stage_note
    text = report(a, CFG)
    assert f"Workload: {label}" in text
    assert all(f"  evidence: {e}" in text for e in a.workload.evidence)


def test_qwen_is_an_llm_prefill_and_says_so() -> None:
    """The issue's case: advise on the H100 Qwen1.5-0.5B trace said "Stages from kernel regions:
    DiT" and "DiT Vector share high"."""
    from perfcmp_core.load import load_profile

    a = analyse(load_profile(str(_real("gpu-real/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))), CFG)
    assert a.workload is not None and a.workload.family == "LLM"
    assert a.stage_note.startswith("no DiT/VAE stage: this is an LLM, from module names")
    assert not any(f.rule.stage == "DiT" for f in a.findings)
    assert "module names: Qwen2Model, Qwen2DecoderLayer" in " ".join(a.workload.evidence)
    assert "one forward pass (Qwen2Model calls): a prefill" in a.workload.evidence
