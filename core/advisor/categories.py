"""What each piece of device work is: FA, MatMul, Vector, Comm or Other.

An item's category comes first from the profile's one kernel classification
(:func:`perfcmp_core.compare.kernel_families.kernel_classes`, the same table behind
KernelClassCompare, OverallMetrics' GPU classes and the step explanation): a kernel whose own
name or task type puts it in one of the families that decide Overall's classes too is that
family's category (:data:`FAMILY_CATEGORY`: attention → FA, GEMM → MatMul, convolution → Other).
The rest — vector work (split finer by the advisor's own lists: an attention op's softmax is FA
work, a user's keyword may claim a norm kernel), kernels placed only by their launching op,
copies and casts — get ``advisor.ini``'s ``[category.*]`` lists, matched once per distinct
classification text (kernel name | NPU op type | launching host op | core or task type,
:mod:`.items`):

1. collectives are Comm whatever their name;
2. ``kernel_names`` — patterns of the kernel name alone that say what a kernel is even when its
   other texts suggest otherwise: torch.compile's ``triton_poi_fused_addmm_gelu_3`` is the GELU
   epilogue of a GEMM (Vector), not the GEMM, though its name lists the fused aten ops;
3. ``keywords`` on the whole text, in the order FA, Other (convolutions, copies), MatMul, Comm,
   Vector; anything else is Other.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import factorize_text
from .items import Items
from .rules import CATEGORIES, AdvisorConfig

COMM = CATEGORIES.index("Comm")
_OTHER = CATEGORIES.index("Other")
#: Keyword order: FA before MatMul (attention kernels are GEMM-based), convolutions (Other)
#: before MatMul (implicit-GEMM kernels), element-wise (Vector) last.
_ORDER = ("FA", "Other", "MatMul", "Comm", "Vector")


#: Kernel families (:mod:`perfcmp_core.compare.kernel_families` rule ids) whose kernels, placed
#: there by their own name, take this category (the families OverallMetrics maps to Flash
#: Attention, Matmul and Conv on GPU, and the collectives).
FAMILY_CATEGORY: dict[str, str] = {
    "attention": "FA", "gemm": "MatMul", "convolution": "Other", "communication": "Comm",
}


def family_categories(items: Items, classes: pd.DataFrame | None) -> np.ndarray:
    """Category code per item from the kernel classification, -1 where it does not decide."""
    out = np.full(len(items.frame), -1, dtype="int64")
    if classes is None or classes.empty or not len(out):
        return out
    # each distinct family looked up once (a kernel row each: tens of thousands of cells)
    codes, families = factorize_text(classes["family"].to_numpy(dtype=object))
    category = np.array([CATEGORIES.index(FAMILY_CATEGORY[f]) if f in FAMILY_CATEGORY else -1 for f in families]
                        + [-1], dtype="int64")
    comm = np.array([f == "communication" for f in families] + [False], dtype=bool)
    decided = classes["by_name"].to_numpy(dtype=bool) | comm[codes]
    lookup = pd.Series(category[codes[decided]], index=classes["row"].to_numpy()[decided])
    krow = items.frame["kernel_row"].to_numpy()
    found = lookup.reindex(krow).to_numpy()
    hit = ~np.isnan(found)
    out[hit] = found[hit].astype("int64")
    return out


def classify(items: Items, cfg: AdvisorConfig, classes: pd.DataFrame | None = None) -> np.ndarray:
    """Category code (index into :data:`CATEGORIES`) of every item (``classes``: the profile's
    kernel classification, None to use the keyword lists alone)."""
    is_comm = items.frame["is_comm"].to_numpy()
    # Collectives are Comm whatever their text, so only the texts of other items are tried: a
    # Db names every HCCL op apart (23.8k of the 23.9k texts of a 32x92 side), and each text
    # is tested on its own, so leaving those out changes no other text's category.
    asked = np.zeros(len(items.text), dtype=bool)
    asked[items.text_code[~is_comm]] = True
    rows = np.flatnonzero(asked)
    texts = items.text.iloc[rows]
    # Far fewer kernel names than texts (a name comes with many ops and shapes): each list is
    # tried once per distinct name, and on the texts only while they are still unclassified.
    names, distinct = pd.factorize(texts.str.split(" | ", n=1, regex=False).str[0])
    distinct = pd.Series(distinct, dtype=object)
    by_name = np.full(len(distinct), -1, dtype="int64")
    for name in _ORDER:
        open_ = np.flatnonzero(by_name < 0)
        by_name[open_[cfg.kernel_names[name].matches(distinct.iloc[open_])]] = CATEGORIES.index(name)
    asked_code = by_name[names]
    for name in _ORDER:
        open_ = np.flatnonzero(asked_code < 0)
        asked_code[open_[cfg.categories[name].matches(texts.iloc[open_])]] = CATEGORIES.index(name)
    code = np.full(len(items.text), _OTHER, dtype="int64")
    code[rows] = np.where(asked_code < 0, _OTHER, asked_code)
    out = code[items.text_code]
    family = family_categories(items, classes)
    out = np.where(family >= 0, family, out)
    out[is_comm] = COMM
    return out
