"""The one spelling of NPU kernel input shapes in the model, whatever export they came from.

Both torch_npu exports wrap every kernel's shape list in a pair of literal double quotes:
``kernel_details.csv`` holds ``"32,3,224,224"`` *inside* a CSV field (the file doubles each quote
to escape it) and the Db's ``COMPUTE_TASK_INFO.inputShapes`` stores the same
``"32,3,224,224"`` text. The quotes carry no information, and when only one loader dropped them no
kernel of a Text run paired with the same kernel of a Db run (0 of 125 KernelCompare groups on the
real AlexNet exports). Every loader therefore passes its shapes through :func:`normalise_shapes`,
so a shape is spelt the same in the model whichever export recorded it.
"""

from __future__ import annotations

import pandas as pd
from ..compat import as_text, factorize_text

#: What the exporters write where a kernel has no shape (HCCL, AI_CPU rows).
ABSENT = "N/A"


def normalise_shapes(shapes: pd.Series) -> pd.Series:
    """Kernel input shapes as the model keeps them: surrounding whitespace (the exporters' trailing
    tabs) and one pair of enclosing literal quotes removed; ``N/A`` and empty cells → ``""``.
    Each distinct text is rewritten once (a run repeats a few hundred shapes over its kernels)."""
    codes, uniques = factorize_text(as_text(shapes), use_na_sentinel=False)
    text = pd.Series(uniques, dtype=object).str.strip()
    text = text.str.replace(r'^"(.*)"$', r"\1", regex=True).str.strip()
    text = text.mask(text == ABSENT, "").to_numpy(dtype=object)
    return pd.Series(text[codes] if len(codes) else [], index=shapes.index, dtype=object)
