"""What kind of run a profile is — training or inference; an LLM (prefill / decode), a diffusion
model (DiT / VAE), a vision model, a recommender, a text encoder — with the evidence for it.

The advisor's rules and stages depend on the answer: the seed's DiT / VAE stages are for
diffusion inference, and guessing them from kernel regions on an LLM (attention + RMSNorm kernels
look like a DiT) is what labelled Qwen1.5 "DiT" (issue 25). The evidence is, strongest first:

1. **module names** (``nn.Module: LlamaDecoderLayer_3`` frames, ``with_stack``) — the advisor's
   own ``[stage.*] names`` say DiT / VAE; decoder-LLM class names (``…ForCausalLM``,
   ``…DecoderLayer``, ``GPT2Block`` …) say LLM; encoder, vision and recommender classes theirs;
2. **call-stack files** (``transformers/models/llama/modeling_llama.py``), the same way;
3. **op names** when no name says: a token embedding with attention and no convolution is an
   LLM; GroupNorm + upsampling + convolution a VAE, attention + norms without a token embedding a
   DiT; convolutions and pooling without attention a vision model; ``fbgemm::`` / embedding-bag
   ops a recommender.

The kernel classification's GEMM / attention / convolution shares are quoted beside them.

Training vs inference: forward→backward flows, backward ops (``…Backward0``, ``autograd::engine``)
or an optimizer step, per the advisor's ``[training] markers``. LLM inference is split into
prefill and decode by its forward passes: one pass is a prefill; N passes of ``generate`` are one
prefill and N−1 decode steps. Everything is matched once per distinct name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare.api import group_sums
from ..compat import as_text, factorize_text
from ..model import Profile
from .rules import AdvisorConfig

TRAINING, INFERENCE = "training", "inference"
LLM, DIFFUSION, VISION, RECOMMENDER, ENCODER, UNKNOWN = (
    "LLM", "diffusion", "vision", "recommender", "text encoder", "unknown")

#: Encoder-only language models (their ``…LMHeadModel`` is a masked-LM head, not a decoder).
_ENCODER = re.compile(r"^(?:bert|roberta|xlmroberta|electra|deberta\w*|albert|distilbert|camembert|t5encoder)",
                      re.IGNORECASE)
#: Decoder (generative) language models: Hugging Face causal-LM classes and their blocks.
_LLM = re.compile(
    r"forcausallm|lmheadmodel|decoderlayer|gpt2(?:block|model|attention)|gptneox|gptj|bloomblock|"
    r"^(?:llama|qwen\d*(?:moe)?|mistral|mixtral|gemma\d*|phi\d*|falcon|baichuan|chatglm|internlm\d*|deepseek\w*|opt)"
    r"(?:model|attention|mlp|decoderlayer|block|sparsemoeblock)$",
    re.IGNORECASE)
_VISION = re.compile(r"^(?:vit|deit|beit|swin|convnext|resnet|alexnet|vgg|efficientnet|mobilenet|regnet|yolo|"
                     r"detr|densenet|inception|conv2d$|maxpool2d$)", re.IGNORECASE)
_RECOMMENDER = re.compile(r"dlrm|embeddingbag|sparsearch|deepfm|twotower|torchrec", re.IGNORECASE)
#: Call-stack source files of a model family (Hugging Face ``models/<name>/modeling_<name>.py``).
_STACK_FILE = re.compile(r"models/([a-z0-9_]+)/modeling_[a-z0-9_]+\.py", re.IGNORECASE)

#: Op-name evidence (aten / fbgemm / torch_npu names), tested on the distinct op names.
_OPS: dict[str, re.Pattern[str]] = {
    "token embedding": re.compile(r"^aten::embedding$|^npu::npu_embedding|^aten::embedding_dense"),
    "attention": re.compile(r"attention|^aten::_?softmax$|flash", re.IGNORECASE),
    "norm": re.compile(r"layer_norm|rms_norm|^aten::rsqrt$", re.IGNORECASE),
    "group norm": re.compile(r"group_norm", re.IGNORECASE),
    "upsampling": re.compile(r"upsample|interpolate", re.IGNORECASE),
    "convolution": re.compile(r"^aten::(?:conv|cudnn_conv|miopen_conv|_convolution|convolution)|^npu::npu_conv"),
    "pooling": re.compile(r"pool", re.IGNORECASE),
    "recommender": re.compile(r"^fbgemm::|embedding_bag|sparse_features|torchrec", re.IGNORECASE),
    "sampling": re.compile(r"^aten::(?:argmax|multinomial|topk)$"),
}
_MODULE_PREFIX = re.compile(r"^nn\.module:\s*", re.IGNORECASE)
_INSTANCE = re.compile(r"_\d+$")
#: Names listed per piece of evidence.
_EXAMPLES = 3


@dataclass(frozen=True)
class Workload:
    """The advisor's reading of a profile, with what it read it from."""

    mode: str  # TRAINING | INFERENCE
    family: str  # LLM | DIFFUSION | VISION | RECOMMENDER | ENCODER | UNKNOWN
    detail: str  # LLM: "prefill", "prefill + decode", "training"; diffusion: "DiT + VAE" …
    source: str  # "module names" | "call stacks" | "op names" | "" (nothing said)
    evidence: tuple[str, ...]

    @property
    def label(self) -> str:
        """``inference · LLM · prefill + decode``."""
        return " · ".join(x for x in (self.mode, self.family, self.detail) if x)

    @property
    def allows_stage_guess(self) -> bool:
        """Whether DiT / VAE stages may be guessed from kernel regions: only for diffusion
        inference and where nothing identified the model (an LLM is never a DiT)."""
        return self.mode == INFERENCE and self.family in (DIFFUSION, UNKNOWN)


def _distinct(values: pd.Series) -> pd.Series:
    return as_text(pd.unique(values.to_numpy(dtype=object)))


def _distinct_of(profile: Profile, table: str, column: str, rows: np.ndarray | None = None) -> pd.Series:
    """The distinct texts of ``profile.<table>[column]`` (of ``rows`` only: a bool mask), in
    first-seen order, from the profile's codes (no text hashed again)."""
    codes, distinct = profile.codes(table, column)
    if rows is not None:
        distinct = distinct[pd.unique(codes[rows])]
    return pd.Series(distinct, dtype=object)


def _examples(names: pd.Series) -> str:
    shown = names.head(_EXAMPLES).tolist()
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" … (+{more})" if more > 0 else "")


def _module_names(profile: Profile) -> pd.Series:
    """Distinct ``nn.Module`` class names (``LlamaDecoderLayer``), first-seen order."""
    py = profile.pyfuncs
    if len(py) == 0:
        return pd.Series(dtype=object)
    names = _distinct_of(profile, "pyfuncs", "name", py["is_module"].to_numpy(dtype=bool))
    return _distinct(names.str.replace(_MODULE_PREFIX, "", regex=True).str.replace(_INSTANCE, "", regex=True))


def _stack_models(profile: Profile) -> pd.Series:
    """Model names from call stacks: a Hugging Face ``models/llama/modeling_llama.py`` frame reads
    as ``llamaModel`` (so the class-name patterns apply), a diffusers source file as its path (the
    ``[stage.*] names`` know ``models/transformers/`` and ``models/autoencoders/``)."""
    stacks = _distinct_of(profile, "ops", "call_stack")
    stacks = stacks[stacks.to_numpy(dtype=object) != ""].reset_index(drop=True)
    if stacks.empty:
        return pd.Series(dtype=object)
    models = stacks.str.extractall(_STACK_FILE)[0] + "Model"
    diffusers = stacks.str.extractall(r"(diffusers/models/[a-z0-9_/]+\.py)")[0]
    return _distinct(pd.concat([models, diffusers], ignore_index=True))


def _mode(profile: Profile, op_names: pd.Series, cfg: AdvisorConfig) -> tuple[str, str]:
    flows = len(profile.fwdbwd)
    markers = op_names[cfg.training.matches(op_names.str.lower())]
    optim = op_names[op_names.str.contains(r"^Optimizer\.step#|_fused_adam|_foreach_add", regex=True)]
    if flows or len(markers) or len(optim):
        parts = []
        if flows:
            parts.append(f"{flows:,} forward→backward flows")
        if len(markers):
            parts.append(f"backward ops ({_examples(markers)})")
        if len(optim):
            parts.append(f"optimizer ({_examples(optim)})")
        return TRAINING, "training: " + "; ".join(parts)
    return INFERENCE, "inference: no backward op, optimizer step or forward→backward flow"


def _stage_hits(names: pd.Series, cfg: AdvisorConfig) -> dict[str, pd.Series]:
    """The names matching each configured stage (DiT, VAE …), excluding names pinned to Other."""
    lower = names.str.lower()
    pinned = cfg.other_names.matches(lower)
    return {s.name: names[s.names.matches(lower) & ~pinned] for s in cfg.stages}


def _by_names(names: pd.Series, cfg: AdvisorConfig, what: str) -> tuple[str, str, list[str]]:
    """(family, detail, evidence) from module / model-file names; family "" when none says."""
    stages = {k: v for k, v in _stage_hits(names, cfg).items() if len(v)}
    encoder = names[names.str.contains(_ENCODER)]
    llm = names[names.str.contains(_LLM) & ~names.str.contains(_ENCODER)]
    # A DiT class name is specific (…Transformer2DModel); a VAE's (Decoder, Upsample2D) is not: an
    # LLM beside a VAE-like name is an LLM, beside a DiT a diffusion model's text encoder.
    if len(llm) and "DiT" not in stages:
        return LLM, "", [f"{what}: {_examples(llm)}"]
    if stages:
        return DIFFUSION, " + ".join(stages), [f"{what}: " + "; ".join(f"{k} {_examples(v)}" for k, v in stages.items())]
    for family, pattern in ((RECOMMENDER, _RECOMMENDER), (VISION, _VISION)):
        hit = names[names.str.contains(pattern)]
        if len(hit):
            return family, "", [f"{what}: {_examples(hit)}"]
    if len(encoder):
        return ENCODER, "", [f"{what}: {_examples(encoder)}"]
    return "", "", []


def _by_ops(op_names: pd.Series) -> tuple[str, str, list[str]]:
    """(family, detail, evidence) from op names alone."""
    hits = {k: op_names[op_names.str.contains(p)] for k, p in _OPS.items()}
    has = {k: bool(len(v)) for k, v in hits.items()}

    def say(*keys: str) -> list[str]:
        return [f"op names: {k} ({_examples(hits[k])})" for k in keys if has[k]]

    if has["recommender"]:
        return RECOMMENDER, "", say("recommender")
    vae = has["group norm"] and has["upsampling"] and has["convolution"]
    dit = has["attention"] and has["norm"] and not has["token embedding"]
    if vae or dit:
        parts = [p for p, ok in (("DiT", dit), ("VAE", vae)) if ok]
        keys = (("attention", "norm") if dit else ()) + (("group norm", "upsampling", "convolution") if vae else ())
        return DIFFUSION, " + ".join(parts), [*say(*keys), "op names: no token embedding" if dit else ""]
    if has["token embedding"] and has["attention"] and not has["convolution"]:
        return LLM, "", say("token embedding", "attention", "norm", "sampling")
    if has["convolution"] and not has["attention"]:
        return VISION, "", say("convolution", "pooling")
    return UNKNOWN, "", []


def _passes(profile: Profile) -> tuple[int, str]:
    """Forward passes of an LLM: calls of its outermost decoder module, else token embeddings."""
    py = profile.pyfuncs
    if len(py):
        mods = py[py["is_module"].to_numpy(dtype=bool)]
        cls = mods["name"].str.replace(_MODULE_PREFIX, "", regex=True).str.replace(_INSTANCE, "", regex=True)
        llm = cls.str.contains(_LLM).to_numpy(dtype=bool)
        if llm.any():
            outer = mods["depth"].to_numpy()[llm].min()
            top = cls[llm & (mods["depth"].to_numpy() == outer)]
            return int(len(top)), f"{top.iloc[0]} calls"
    n = int((profile.ops["name"].to_numpy(dtype=object) == "aten::embedding").sum())
    return n, "aten::embedding calls"


#: Kernel families (the one kernel classification) quoted as evidence of what the model computes.
_KERNEL_EVIDENCE = (("gemm", "GEMM"), ("attention", "attention"), ("convolution", "convolution"))


def _kernel_mix(classes: pd.DataFrame) -> str:
    """``kernels: GEMM 41.2%, attention 7.9%, convolution 0.0% of device compute``."""
    # summed per distinct family on its codes (a kernel row each: no text hashed per row)
    codes, families = factorize_text(classes["family"].to_numpy(dtype=object))
    sums = group_sums(codes, classes["dur_ns"].to_numpy(dtype="int64"), len(families))
    by = dict(zip(families.tolist(), sums.tolist()))
    total = float(sum(ns for fam, ns in by.items() if fam != "communication"))
    if total <= 0:
        return ""
    parts = [f"{label} {float(by.get(fam, 0)) / total * 100:.1f}%" for fam, label in _KERNEL_EVIDENCE]
    return "kernels: " + ", ".join(parts) + " of device compute"


def detect_workload(profile: Profile, cfg: AdvisorConfig, classes: pd.DataFrame | None = None) -> Workload:
    """Training or inference, the model family and its evidence (see the module docstring);
    ``classes``: the profile's kernel classification, quoted as evidence of what it computes."""
    op_names = _distinct_of(profile, "ops", "name")
    mode, mode_evidence = _mode(profile, op_names, cfg)
    family, detail, evidence, source = UNKNOWN, "", [], ""
    for what, names in (("module names", _module_names(profile)), ("call stacks", _stack_models(profile))):
        if len(names):
            family, detail, evidence = _by_names(names, cfg, what)
            if family:
                source = what
                break
    if not source:
        family, detail, evidence = _by_ops(op_names)
        source = "op names" if family != UNKNOWN else ""
    if family == LLM:
        if mode == INFERENCE:
            n, counted = _passes(profile)
            if n > 1:
                detail = "prefill + decode"
                evidence.append(f"{n} forward passes ({counted}): 1 prefill, {n - 1} decode")
            else:
                detail = "prefill"
                evidence.append(f"one forward pass ({counted}): a prefill")
    if classes is not None and "family" in classes:
        evidence.append(_kernel_mix(classes))
    if family == UNKNOWN:
        evidence.append("no module, call-stack or op name identifies the model")
    return Workload(mode, family, detail, source, tuple(e for e in (mode_evidence, *evidence) if e))


def stage_guess_note(workload: Workload) -> str:
    """Why no DiT / VAE stage is guessed for this workload ("" when a guess is allowed)."""
    if workload.allows_stage_guess:
        return ""
    what = f"{_NOUN.get(workload.family, workload.family)}, from {workload.source or 'its ops'}"
    return f"no DiT/VAE stage: this is {what}, not diffusion inference; kernel regions are not guessed"


_NOUN = {LLM: "an LLM", DIFFUSION: "a diffusion model", VISION: "a vision model", RECOMMENDER: "a recommender",
         ENCODER: "a text encoder", UNKNOWN: "an unidentified model"}

