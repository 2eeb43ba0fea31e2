"""The name two profiles' ops are paired by: one owner for every comparison that pairs by name.

Operators (and the memory sheets, which reuse the operator pairs), the ops inside modules and the
API rows pair a base op with a comparison op by name. The recorded name is not always the right
key, so every one of them derives its key here:

* ``--op-name-map`` renames ops of one side to the other's spelling (``{'a': 'b'}``); a map entry
  may name an op in full or without its instance suffix;
* MindSpore numbers every graph node, and the numbers change from run to run:
  ``Kernel::KernelLaunch::Default/…/AllReduce-op230`` in one run is ``…/AllReduce-op231`` in the
  next, so the ``-op<N>`` suffix is not part of the key.

Only the key changes: sheets keep showing the full recorded names wherever a row is one op, and a
row that groups ops by key (the statistic sheets, API rows) is labelled with the key.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..options import CompareOptions

#: MindSpore's per-run graph-node number at the end of an op or kernel name (``…/MatMul-op12``).
OP_INSTANCE_SUFFIX = re.compile(r"-op\d+$")


def strip_instance(names: pd.Series) -> pd.Series:
    """``names`` without a trailing MindSpore ``-op<N>`` suffix."""
    return names.astype(object).str.replace(OP_INSTANCE_SUFFIX, "", regex=True)


def pairing_names(names: pd.Series, opts: CompareOptions) -> pd.Series:
    """The pairing key of every name (same index as ``names``).

    An ``--op-name-map`` entry for the full name wins, then one for the name without its
    instance suffix; a mapped name loses its suffix too. Computed once per distinct name
    (profiles repeat a few hundred names hundreds of thousands of times).
    """
    codes, distinct = pd.factorize(names.to_numpy(dtype=object))
    full = pd.Series(distinct, dtype=object)
    key = strip_instance(full)
    if opts.op_name_map:
        mapping = opts.name_map
        mapped_full = strip_instance(full.map(mapping).dropna())
        mapped_key = key.map(mapping).dropna()
        key = strip_instance(mapped_key).combine_first(key)
        key.loc[mapped_full.index] = mapped_full
    out = key.to_numpy(dtype=object)[codes] if len(codes) else np.zeros(0, dtype=object)
    return pd.Series(out, index=names.index, dtype=object)
