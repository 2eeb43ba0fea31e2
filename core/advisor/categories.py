"""What each piece of device work is: FA, MatMul, Vector, Comm or Other.

An item's category comes from the ``[category.*]`` keyword lists of ``advisor.ini`` matched
against its classification text (kernel name | NPU op type | launching host op | core or task
type, :mod:`.items`); matching runs once per distinct text.
"""

from __future__ import annotations

import numpy as np

from .items import Items
from .rules import CATEGORIES, AdvisorConfig

COMM = CATEGORIES.index("Comm")
_OTHER = CATEGORIES.index("Other")


def classify(items: Items, cfg: AdvisorConfig) -> np.ndarray:
    """Category code (index into :data:`CATEGORIES`) of every item.

    Collectives flagged by the loader are Comm whatever their name; the rest take the first
    matching list in the order FA, Other (convolutions), MatMul, Comm, Vector, else Other.
    """
    cats = cfg.categories
    n = len(items.text)
    code = np.full(n, -1, dtype="int64")
    for name in ("FA", "Other", "MatMul", "Comm", "Vector"):
        hit = (code < 0) & cats[name].matches(items.text)
        code[hit] = CATEGORIES.index(name)
    code[code < 0] = _OTHER
    out = code[items.text_code]
    out[items.frame["is_comm"].to_numpy()] = COMM
    return out


