"""Kernel classification of the OverallMetrics Computing breakdown (spec ``inputs-and-overall.md``
§6.2): which class (Flash Attention / Conv / Matmul forward or backward, cube or vector, Paged
Attention, SDMA Tensor Move, MC2, plain Cube, Vector with or without transposition) each compute
kernel falls in.

A kernel's class comes first from the "cube" host op (FA / Conv / Matmul by the ``[OP_MASK]``
keywords) that was running when it was launched, then from its own name and op type. The per-kind
pipelines of :mod:`.overall_metrics` decide which kernels are compute kernels and what "cube"
means for them (PMU data, task types or kernel names), and sum the durations per class.

On GPU the one kernel classification of a profile (:func:`.kernel_families.kernel_classes`)
decides first (:func:`family_codes`): a kernel whose *own name* makes it a GEMM (cuBLAS / cuBLASLt
``nvjet``, CUTLASS, ``xmma`` / ``wgmma``, Tensile ``Cijk``, Inductor ``triton_tem`` mm), an
attention kernel (FlashAttention, cuDNN SDPA, ``fmha``) or a convolution is Matmul (Cube), Flash
Attention or Conv (Cube) whichever host op launched it; a kernel only its launching op puts in
such a family (a Triton kernel of ``aten::mm``, a layout kernel of cuDNN attention) is that
family's Vector part unless the reference's rules below already filed it under the family; they
decide the rest (its masks miss ``nvjet`` GEMMs and cuDNN attention: docs/differences.md). NPU classes are the
reference's exactly: PMU data says cube or vector there, and the op types are already decisive.

Deliberate difference from the reference (docs/differences.md): a kernel is attributed to the
earliest-starting FA/Conv/Matmul host op whose [start, end] contains its launch time. The reference
finds that op with a forward-only pointer shared by all kernels; processed in launch order (GPU,
Text) that gives exactly this op, but in the Db's connectionId order a late launch can move the
pointer past ops that earlier launches needed.
"""

from __future__ import annotations

import numpy as np

from ..model import Profile
from .masks import BACKWARD_WORDS, Masks, TextIndex, TextIndexes

#: Kernel classes of the Computing breakdown, in the order of the spec's accumulator table.
CLASS_BUCKETS: tuple[str, ...] = (
    "fa_fwd_cube", "fa_fwd_vector", "fa_bwd_cube", "fa_bwd_vector",
    "conv_fwd_cube", "conv_fwd_vector", "conv_bwd_cube", "conv_bwd_vector",
    "matmul_cube", "matmul_vector", "page_attention", "vector_trans", "vector_notrans", "cube",
    "sdma_tensor_move",
)
CODE = {name: i for i, name in enumerate(CLASS_BUCKETS)}
MC2 = len(CLASS_BUCKETS)  # classification code of MC2 kernels (kept per kernel name)

#: Host-op classes of the launch lookup.
NO_CLASS, _FA, _CONV, _MM = 0, 1, 2, 3


def launch_time(profile: Profile, op_row: np.ndarray) -> np.ndarray:
    """Start of the launching host op for each kernel, 0 when unlinked (sorts first)."""
    ops_start = profile.ops["start_ns"].to_numpy()
    linked = (op_row >= 0) & (op_row < len(ops_start))
    out = np.zeros(len(op_row), dtype="int64")
    out[linked] = ops_start[op_row[linked]]
    return out


def launch_classes(
    profile: Profile, op_row: np.ndarray, masks: Masks, texts: TextIndexes, conv_tid: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Class (FA / Conv / Matmul / none) and backward flag of the "cube" host op that was running
    when each kernel was launched.

    The op is the earliest-starting FA/Conv/Matmul host op whose [start, end] (inclusive) holds
    the launch time. Vectorised: over cube ops sorted by start, the running maximum of their ends
    is non-decreasing, so the first op that has not ended before the launch is a binary search
    away; it contains the launch iff it has already started.
    """
    n = len(op_row)
    cls = np.full(n, NO_CLASS, dtype="int8")
    bwd = np.zeros(n, dtype=bool)
    ops = profile.ops
    linked = (op_row >= 0) & (op_row < len(ops))
    if not linked.any():
        return cls, bwd
    names = texts("ops", "name")
    fa = names.contains_any(masks.fa)
    conv = names.contains_any(masks.conv)
    mm = names.contains_any(masks.matmul)
    rows = np.flatnonzero(fa | conv | mm)
    if len(rows) == 0:
        return cls, bwd
    op_cls = np.where(fa, _FA, np.where(conv, _CONV, _MM))[rows].astype("int8")
    op_bwd = names.leaf().contains_any(BACKWARD_WORDS)[rows]
    bwd_tid = profile.meta.backward_tid
    if conv_tid and bwd_tid >= 0:
        op_bwd |= (op_cls == _CONV) & (ops["tid"].to_numpy()[rows] == bwd_tid)
    op_start = ops["start_ns"].to_numpy()[rows]
    order = np.argsort(op_start, kind="stable")
    op_start, op_cls, op_bwd = op_start[order], op_cls[order], op_bwd[order]
    reach = np.maximum.accumulate(ops["end_ns"].to_numpy()[rows][order])

    launch = ops["start_ns"].to_numpy()[op_row[linked]]
    j = np.searchsorted(reach, launch, side="left")
    hit = j < len(reach)
    hit[hit] = op_start[j[hit]] <= launch[hit]
    where = np.flatnonzero(linked)[hit]
    cls[where] = op_cls[j[hit]]
    bwd[where] = op_bwd[j[hit]]
    return cls, bwd


def classify(
    names: TextIndex,
    types: TextIndex,
    masks: Masks,
    cube: np.ndarray,
    trans: np.ndarray,
    launch_cls: np.ndarray,
    launch_bwd: np.ndarray,
    npu: bool,
    fa_types: tuple[str, ...],
) -> np.ndarray:
    """Class code per kernel (index into :data:`CLASS_BUCKETS`, or :data:`MC2`): the spec's rules
    applied in order, each deciding the kernels no earlier rule took."""
    n = len(cube)
    code = np.full(n, -1, dtype="int16")
    open_ = np.ones(n, dtype=bool)

    def take(mask: np.ndarray, value: np.ndarray | int) -> None:
        sel = open_ & mask
        code[sel] = value[sel] if isinstance(value, np.ndarray) else value
        open_[sel] = False

    def pick(flag: np.ndarray, yes: str, no: str) -> np.ndarray:
        return np.where(flag, CODE[yes], CODE[no])

    if npu:
        take(types.contains_any(("pagedattention",)), CODE["page_attention"])
        take(names.startswith("aclnninplacecopy") & names.contains_any(("tensormove",)), CODE["sdma_tensor_move"])
        take(names.leaf().equals_any(masks.mc2), MC2)
    take(launch_cls == _FA, np.where(launch_bwd, pick(cube, "fa_bwd_cube", "fa_bwd_vector"),
                                     pick(cube, "fa_fwd_cube", "fa_fwd_vector")))
    take(launch_cls == _CONV, np.where(launch_bwd, pick(cube, "conv_bwd_cube", "conv_bwd_vector"),
                                       pick(cube, "conv_fwd_cube", "conv_fwd_vector")))
    take(launch_cls == _MM, pick(cube, "matmul_cube", "matmul_vector"))
    if npu:
        # Kernels without a usable launch link: op-type fallbacks, always the cube variant.
        take(types.contains_any(fa_types), pick(types.contains_any(("bwd", "grad")), "fa_bwd_cube", "fa_fwd_cube"))
        take(types.startswith("conv"), pick(types.contains_any(BACKWARD_WORDS), "conv_bwd_cube", "conv_fwd_cube"))
        take(types.contains_any(("matmul",)), CODE["matmul_cube"])
    take(cube, CODE["cube"])
    take(trans, CODE["vector_trans"])
    take(np.ones(n, dtype=bool), CODE["vector_notrans"])
    return code


#: Kernel families (:mod:`.kernel_families` rule ids) that decide a GPU kernel's class when its
#: own name or task type placed it there: forward and backward class.
FAMILY_CLASSES: dict[str, tuple[str, str]] = {
    "attention": ("fa_fwd_cube", "fa_bwd_cube"),
    "convolution": ("conv_fwd_cube", "conv_bwd_cube"),
    "gemm": ("matmul_cube", "matmul_cube"),
}
#: Kernel-name words of backward attention / convolution kernels (cuDNN ``bprop`` / ``dgrad`` /
#: ``wgrad``, FlashAttention ``flash_bwd``, xFormers' backward ``fmha_cutlassB``). Narrower than
#: :data:`BACKWARD_WORDS`: "back" is in kernel names such as ``…fallback…``.
KERNEL_BACKWARD: tuple[str, ...] = ("bwd", "backward", "bprop", "dgrad", "wgrad", "fmha_cutlassb")


#: Kernel-name words of paged-attention kernels (vLLM's ``paged_attention_v1_kernel``): the
#: "Page Attention" row, as the NPU's PagedAttention op type is, not Flash Attention.
PAGED: tuple[str, ...] = ("paged_attention", "pagedattention")


#: The Vector part of each family's class: a kernel its launching op alone puts in the family.
FAMILY_VECTOR: dict[str, tuple[str, str]] = {
    "attention": ("fa_fwd_vector", "fa_bwd_vector"),
    "convolution": ("conv_fwd_vector", "conv_bwd_vector"),
    "gemm": ("matmul_vector", "matmul_vector"),
}


def family_codes(family: np.ndarray, by_name: np.ndarray, backward: np.ndarray, paged: np.ndarray,
                 reference: np.ndarray) -> np.ndarray:
    """Class code per kernel from its kernel family and the reference's code (``reference``).

    ``family``: rule id per kernel (object array, "" where the kernel has none); ``by_name``: the
    kernel's own name decided the family — it is the family's cube class; a kernel placed only by
    its launching op (a Triton kernel of ``aten::mm``, the layout kernels of a convolution or of
    cuDNN attention) keeps the reference's class when that is already one of the family's
    (FA / Conv / Matmul, cube or vector), else becomes the family's Vector part (also when the
    reference's "cube" keywords hit its name: "conv" is in cuDNN's ``convert_dq`` kernels);
    ``backward``, ``paged``: per kernel, from its name and launching op."""
    code = reference.astype("int16", copy=True)
    for fam, (fwd, bwd) in FAMILY_CLASSES.items():
        sel = by_name & (family == fam)
        code[sel] = np.where(backward[sel], CODE[bwd], CODE[fwd])
        loose = ~by_name & (family == fam) & np.isin(reference, [CODE["vector_notrans"], CODE["cube"]])
        vec_fwd, vec_bwd = FAMILY_VECTOR[fam]
        code[loose] = np.where(backward[loose], CODE[vec_bwd], CODE[vec_fwd])
    code[by_name & (family == "attention") & paged] = CODE["page_attention"]
    return code
