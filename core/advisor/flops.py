"""FLOPs of a GEMM or attention call from its recorded input shapes, for the ``flop_rate`` check.

A profile records shapes as text: GPU ``Input Dims`` of the host op (``[[4096, 768], [768, 2304]]``,
``record_shapes=True``), torch_npu's ``Input Dims`` / Db ``inputShapes`` (``4096,768;768,2304``)
and NPU kernels' ``Input Shapes`` (kernel_details / Db ``COMPUTE_TASK_INFO``). Each distinct
(op, shapes) text is parsed once; calls repeat a handful of shapes over thousands of events.

Formulas (a multiply-add counts 2 FLOPs):

* GEMM ``A[..., M, K] @ B[..., K, N]``: ``2·M·N·K`` × the broadcast batch (``bmm``/``baddbmm``:
  B). Operands: ``mm``, ``bmm``, ``matmul`` (1-D operands count as M or N = 1) — inputs 0, 1;
  ``addmm``, ``baddbmm`` — inputs 1, 2 (input 0 is the added tensor); ``linear`` — ``x[..., K]``
  and ``weight[N, K]``. NPU ``MatMul*`` / ``BatchMatMul*`` kernels: the first two inputs with two
  or more dims (``aclnnAddmm``'s kernel lists the bias first); they do not record their
  transpose flags: K is the dimension the two operands share (A's last against B's first, then
  B's last, then A's first against B's first, then B's last); where two pairings fit (a weight
  gradient ``[32, 4096]``, ``[32, 4096]``) the first wins, which is why the host op's shapes are
  preferred whenever recorded.
* Attention forward ``4·B·H·S_q·S_k·D`` (Q·Kᵀ and P·V), i.e. ``4·|Q|·S_k``; the SDPA ops hold Q, K
  as ``[B, H, S, D]``, the flash / efficient kernels' own ops (``_flash_attention_*``,
  ``_efficient_attention_*``) as ``[B, S, H, D]``. Backward: 2.5 × forward (dQ, dK, dV, dP and
  the recomputed Q·Kᵀ: FlashAttention's convention); its Q, K are inputs 1, 2 (input 0 is the
  output gradient). Causal masking is not read from the profile: a causal call counts the full
  square, the same way for every peer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import as_text

GEMM, ATTENTION = "GEMM", "attention"
#: Host ops whose shapes say a GEMM's work: name → indices of the two operands.
_GEMM_OPS: dict[str, tuple[int, int]] = {
    "aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1), "aten::addmm": (1, 2),
    "aten::baddbmm": (1, 2), "aten::linear": (0, 1),
}
#: Attention host ops: name → (Q index, K index, sequence axis of K, backward).
_ATTENTION_OPS: dict[str, tuple[int, int, int, bool]] = {
    "aten::scaled_dot_product_attention": (0, 1, -2, False),
    "aten::_scaled_dot_product_flash_attention": (0, 1, -2, False),
    "aten::_scaled_dot_product_efficient_attention": (0, 1, -2, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 1, -2, False),
    "aten::_flash_attention_forward": (0, 1, 1, False),
    "aten::_efficient_attention_forward": (0, 1, 1, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 2, -2, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 2, -2, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 2, -2, True),
    "aten::_flash_attention_backward": (1, 2, 1, True),
    "aten::_efficient_attention_backward": (1, 2, 1, True),
}
#: Host op names the check attributes kernels to (the innermost such op above a kernel).
MEASURED_OPS: frozenset[str] = frozenset(_GEMM_OPS) | frozenset(_ATTENTION_OPS)
#: NPU kernel op types whose own input shapes say a GEMM's work.
NPU_GEMM_TYPE = re.compile(r"^(?:Batch)?MatMul(?:V\d+)?$")
_BACKWARD_FACTOR = 2.5
_LIST = re.compile(r"\[([0-9,\s]*)\]")
_FP32 = re.compile(r"^(?:float|float32|dt_float|torch\.float32)$", re.IGNORECASE)


@dataclass(frozen=True)
class Work:
    """One (op, shapes) text's work: its FLOPs, the family, a short shape label and the dims
    (M, N, K or S_q, S_k, D) whose alignment the direction reads."""

    flops: float
    family: str
    label: str
    dims: tuple[int, ...]


def parse_dims(text: str) -> list[list[int]] | None:
    """The input shapes of a ``Input Dims`` / ``Input Shapes`` text, one list per input (``[]``
    for a scalar or an absent input); None when the text holds no shape."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("["):
        found = _LIST.findall(text)
        return [[int(x) for x in part.replace(" ", "").split(",") if x] for part in found] or None
    out = []
    for part in re.split(r";\s*", text.replace('"', "")):
        try:
            out.append([int(x) for x in part.split(",") if x.strip()])
        except ValueError:  # a non-numeric input (a dtype, "N/A"): not a shape
            out.append([])
    return out if any(out) else None


def _fmt(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape) or "scalar"


def _gemm(a: list[int], b: list[int], name: str, npu: bool) -> Work | None:
    if not a or not b:
        return None
    if name == "aten::linear":
        b = b[::-1]  # weight [N, K] → [K, N]
    a2, b2 = ([1, *a] if len(a) == 1 else a), (b + [1] if len(b) == 1 else b)
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    if npu and k != k2:
        if k == n:
            k2, n = n, k2
        elif m == k2:
            m, k = k, m
        elif m == n:
            m, k, k2, n = k, m, n, k2
    if k != k2:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    if name == "aten::linear":
        m, batch_a, batch_b = math.prod(a[:-1]), [], []
    width = max(len(batch_a), len(batch_b))
    pa, pb = [1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b
    batch = math.prod(max(x, y) for x, y in zip(pa, pb))
    lead = "×".join(str(d) for d in (batch,) if batch > 1)
    label = f"{lead + '×' if lead else ''}{m}×{k} @ {k}×{n}"
    return Work(2.0 * batch * m * n * k, GEMM, label, (m, n, k))


def _attention(q: list[int], k: list[int], seq_axis: int, backward: bool) -> Work | None:
    if len(q) < 3 or len(k) < 3 or len(k) != len(q):
        return None
    s_k = k[seq_axis]
    s_q = q[seq_axis]
    flops = 4.0 * math.prod(q) * s_k * (_BACKWARD_FACTOR if backward else 1.0)
    label = f"Q {_fmt(q)}, K {_fmt(k)}{' (backward)' if backward else ''}"
    return Work(flops, ATTENTION, label, (s_q, s_k, q[-1]))


def work_of(name: str, dims_text: str, npu_kernel: bool) -> Work | None:
    """The work of one call: ``name`` a host op (or, ``npu_kernel``, an NPU kernel's op type) and
    its shapes text; None when the op is not measured or the shapes do not fit its formula."""
    shapes = parse_dims(dims_text)
    if shapes is None:
        return None
    if npu_kernel:  # the operands are the first two matrices (an Addmm kernel lists its bias first)
        mats = [s for s in shapes if len(s) >= 2]
        return _gemm(mats[0], mats[1], name, True) if len(mats) >= 2 else None
    if name in _GEMM_OPS:
        ia, ib = _GEMM_OPS[name]
        if len(shapes) <= max(ia, ib):
            return None
        return _gemm(shapes[ia], shapes[ib], name, npu_kernel)
    spec = _ATTENTION_OPS.get(name)
    if spec is None:
        return None
    iq, ik, axis, backward = spec
    if len(shapes) <= ik:
        return None
    return _attention(shapes[iq], shapes[ik], axis, backward)


def works(names: pd.Series, dims: pd.Series, npu_kernel: np.ndarray) -> pd.DataFrame:
    """:func:`work_of` for every row, each distinct (name, shapes, kind) computed once: columns
    ``flops`` (NaN where unmeasured), ``family``, ``label``, ``aligned`` (every dim a multiple
    of 16)."""
    key = pd.DataFrame({"n": names.to_numpy(dtype=object), "d": dims.to_numpy(dtype=object),
                        "k": np.asarray(npu_kernel, dtype=bool)})
    if key.empty:  # pandas 2.2 cannot factorize an empty MultiIndex
        return pd.DataFrame({"flops": np.empty(0, dtype="float64"), "family": np.empty(0, dtype=object),
                             "label": np.empty(0, dtype=object), "aligned": np.empty(0, dtype=bool)})
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(key))
    found = [work_of(str(n), str(d), bool(k)) for n, d, k in uniq]
    flops = np.array([w.flops if w else np.nan for w in found], dtype="float64")
    family = np.array([w.family if w else "" for w in found], dtype=object)
    label = np.array([w.label if w else "" for w in found], dtype=object)
    aligned = np.array([bool(w) and all(d % 16 == 0 for d in w.dims) for w in found], dtype=bool)
    return pd.DataFrame({"flops": flops[codes], "family": family[codes], "label": label[codes],
                         "aligned": aligned[codes]})


def is_fp32(types: pd.Series) -> np.ndarray:
    """Whether a call's first input is fp32 (``Input type`` ``['float', …]``, NPU ``FLOAT;…``),
    each distinct text read once."""
    codes, uniq = pd.factorize(types.to_numpy(dtype=object))
    first = as_text(uniq).str.replace(r"[\[\]'\"]", "", regex=True)
    first = first.str.split(r"[;,]", n=1, regex=True).str[0].str.strip()
    hit = first.str.match(_FP32).to_numpy(dtype=bool)
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)
