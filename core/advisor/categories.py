"""What each piece of device work is: FA, MatMul, Vector, Comm or Other.

An item's category comes from ``advisor.ini``'s ``[category.*]`` lists, matched once per distinct
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

from .items import Items
from .rules import CATEGORIES, AdvisorConfig

COMM = CATEGORIES.index("Comm")
_OTHER = CATEGORIES.index("Other")
#: Keyword order: FA before MatMul (attention kernels are GEMM-based), convolutions (Other)
#: before MatMul (implicit-GEMM kernels), element-wise (Vector) last.
_ORDER = ("FA", "Other", "MatMul", "Comm", "Vector")


def classify(items: Items, cfg: AdvisorConfig) -> np.ndarray:
    """Category code (index into :data:`CATEGORIES`) of every item."""
    n = len(items.text)
    code = np.full(n, -1, dtype="int64")
    # Far fewer kernel names than texts (a name comes with many ops and shapes): each list is
    # tried once per distinct name, and on the texts only while they are still unclassified.
    names, distinct = pd.factorize(items.text.str.split(" | ", n=1, regex=False).str[0])
    distinct = pd.Series(distinct, dtype=object)
    by_name = np.full(len(distinct), -1, dtype="int64")
    for name in _ORDER:
        open_ = np.flatnonzero(by_name < 0)
        by_name[open_[cfg.kernel_names[name].matches(distinct.iloc[open_])]] = CATEGORIES.index(name)
    code[:] = by_name[names]
    for name in _ORDER:
        open_ = np.flatnonzero(code < 0)
        code[open_[cfg.categories[name].matches(items.text.iloc[open_])]] = CATEGORIES.index(name)
    code[code < 0] = _OTHER
    out = code[items.text_code]
    out[items.frame["is_comm"].to_numpy()] = COMM
    return out
