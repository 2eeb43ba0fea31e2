"""The key two profiles' ops are paired by: one owner for every comparison that pairs by name.

Operators (and the memory sheets, which reuse the operator pairs), the ops inside modules, the API
rows and the kernel-by-op comparison pair a base op with a comparison op by a key derived here:

1. ``--op-name-map`` renames ops of one side to the other's spelling (``{'a': 'b'}``); a map entry
   may name an op in full or without its instance suffix;
2. MindSpore numbers every graph node, and the numbers change from run to run:
   ``Kernel::KernelLaunch::Default/…/AllReduce-op230`` in one run is ``…/AllReduce-op231`` in the
   next, so the ``-op<N>`` suffix is not part of the key. The result is the op's *pairing name*;
3. the equivalence table (:mod:`.equivalence`) gives ops that do the same work under another name
   on other hardware one key: ``aten::scaled_dot_product_attention`` (CUDA, ROCm) and
   ``npu::npu_fusion_attention`` (torch_npu) are both "flash attention". A backward node matches
   inside its ``autograd::engine::evaluate_function:`` wrapper too. MindSpore launch names are
   looked up by their primitive (the last ``/`` part) when the other side is not MindSpore, whose
   names carry no scope to pair by.

Only the key changes: sheets keep showing the recorded names wherever a row is one op, and a row
that groups ops by key (statistic sheets, API rows) is labelled with a pairing name. ``Matched
As`` columns say when a pair was joined by the table (see :func:`matched_as`).
``--exact-names`` skips step 3 (the reference's pairing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compat import factorize_text
from ..model import Profile
from ..options import CompareOptions
from .equivalence import Equivalence, builtin_equivalence

#: MindSpore's per-run graph-node number at the end of an op or kernel name (``…/MatMul-op12``).
OP_INSTANCE_SUFFIX = re.compile(r"-op\d+$")
#: The wrapper the autograd engine records around every backward node it runs.
AUTOGRAD_WRAPPER = "autograd::engine::evaluate_function: "
#: MindSpore's launch prefix (``Kernel::KernelLaunch::<scope>/<primitive>``).
MINDSPORE_LAUNCH = "Kernel::KernelLaunch::"
#: Keys derived from an equivalence class start with this (never part of a recorded name).
CLASS_MARK = "\x1e"
#: ``Matched As`` text of a pair joined by position (:func:`.align.fill_by_position`).
BY_POSITION = "by position"


def strip_instance(names: pd.Series) -> pd.Series:
    """``names`` without a trailing MindSpore ``-op<N>`` suffix."""
    return names.astype(object).str.replace(OP_INSTANCE_SUFFIX, "", regex=True)


def table_of(opts: CompareOptions, equivalence: Equivalence | None) -> Equivalence | None:
    """The equivalence table to pair by: the run's (None: the built-in one), or none at all with
    ``--exact-names``."""
    if opts.exact_names:
        return None
    return equivalence if equivalence is not None else builtin_equivalence()


def pairing_names(names: pd.Series, opts: CompareOptions) -> pd.Series:
    """The pairing name of every name (same index as ``names``): ``--op-name-map`` applied, the
    MindSpore instance suffix dropped — what rows are labelled with.

    An ``--op-name-map`` entry for the full name wins, then one for the name without its
    instance suffix; a mapped name loses its suffix too. Computed once per distinct name
    (profiles repeat a few hundred names hundreds of thousands of times).
    """
    codes, distinct = factorize_text(names.to_numpy(dtype=object))
    out = _distinct_names(pd.Series(distinct, dtype=object), opts).to_numpy(dtype=object)
    return pd.Series(out[codes] if len(codes) else np.zeros(0, dtype=object), index=names.index, dtype=object)


def _distinct_names(full: pd.Series, opts: CompareOptions) -> pd.Series:
    key = strip_instance(full)
    if opts.op_name_map:
        mapping = opts.name_map
        mapped_full = strip_instance(full.map(mapping).dropna())
        mapped_key = key.map(mapping).dropna()
        key = strip_instance(mapped_key).combine_first(key)
        key.loc[mapped_full.index] = mapped_full
    return key


@dataclass(frozen=True)
class PairingKeys:
    """Per op (arrays aligned with the names given): the key ops pair and group by, the pairing
    name rows are labelled with, and the label of the equivalence class that made the key ("" when
    the key is the pairing name itself)."""

    key: np.ndarray
    name: np.ndarray
    cls: np.ndarray


def pairing_keys(names: pd.Series, opts: CompareOptions, *, equivalence: Equivalence | None = None,
                 by_primitive: bool = False, parent: np.ndarray | None = None,
                 other: frozenset[str] | None = None) -> PairingKeys:
    """:class:`PairingKeys` of ``names``.

    ``equivalence``: the run's table (the request's, parsed once; None for the built-in one).

    ``by_primitive``: look MindSpore launch names up by their primitive (set it for a MindSpore
    side compared with a side of another framework).

    ``other`` (the other side's pairing names): a name the other side has too pairs by itself and
    keeps its own key — the table only joins names that differ between the sides, so a profile
    holding both ``aten::_to_copy`` and ``npu::npu_dtype_cast`` keeps them apart when compared
    with one that holds them too.

    ``parent`` (the ops' parent rows, when ``names`` are a profile's ``ops["name"]``): an op whose
    parent has the same class keeps its pairing name as key. A class lists every level one
    platform writes for the work (``aten::scaled_dot_product_attention`` →
    ``aten::_scaled_dot_product_flash_attention`` → ``aten::_flash_attention_forward``); only the
    outermost of them stands for the class, so a per-name table (ApiCompare) never sums an op
    and the ops inside it into one row.
    """
    codes, distinct = factorize_text(names.to_numpy(dtype=object))
    return _pairing_keys(codes, distinct, opts, equivalence, by_primitive, parent, other)


def _pairing_keys(codes: np.ndarray, distinct: np.ndarray, opts: CompareOptions,
                  equivalence: Equivalence | None, by_primitive: bool, parent: np.ndarray | None,
                  other: frozenset[str] | None) -> PairingKeys:
    """:func:`pairing_keys` of the names ``distinct[codes]`` (each distinct name looked up
    once)."""
    plain = _distinct_names(pd.Series(distinct, dtype=object), opts)
    key = plain.to_numpy(dtype=object).copy()
    cls = np.full(len(key), "", dtype=object)
    table = table_of(opts, equivalence)
    if table is not None and table.lookup:
        lookup = table.lookup
        for i, name in enumerate(plain.tolist()):
            if other is not None and name in other:
                continue
            prefix, bare = (AUTOGRAD_WRAPPER, name[len(AUTOGRAD_WRAPPER):]) if name.startswith(AUTOGRAD_WRAPPER) \
                else ("", name)
            hit = lookup.get(bare)
            if hit is None and by_primitive and bare.startswith(MINDSPORE_LAUNCH):
                hit = lookup.get(bare.rsplit("/", 1)[-1])
            if hit is not None:
                key[i] = f"{prefix}{CLASS_MARK}{hit.id}"
                cls[i] = hit.label
    empty = np.zeros(0, dtype=object)
    take = (lambda a: a[codes]) if len(codes) else (lambda a: empty)
    out = PairingKeys(take(key), take(plain.to_numpy(dtype=object)), take(cls))
    if parent is not None and len(codes) and (cls != "").any():
        parent = np.asarray(parent)
        has = parent >= 0
        nested = np.zeros(len(codes), dtype=bool)
        nested[has] = (out.cls[has] != "") & (out.key[parent[has]] == out.key[has])
        if nested.any():
            out.key[nested] = out.name[nested]
            out.cls[nested] = ""
    return out


def side_keys(profile: Profile, other: Profile, opts: CompareOptions,
              equivalence: Equivalence | None = None) -> PairingKeys:
    """The pairing keys of ``profile``'s ops when compared with ``other``: MindSpore launches
    looked up by primitive when the other side is not MindSpore, names the other side has kept,
    ops nested in an op of their own class kept (see :func:`pairing_keys`)."""
    codes, distinct = profile.codes("ops", "name")  # the profile's, made once (or cached)
    return _pairing_keys(codes, distinct, opts, equivalence, by_primitive(profile, other),
                         profile.ops["parent"].to_numpy(), other_names(other, opts))


def by_primitive(profile: Profile, other: Profile) -> bool:
    """Look ``profile``'s MindSpore launch names up by primitive (the other side has no scopes)."""
    return profile.meta.framework == "mindspore" and other.meta.framework != "mindspore"


def other_names(profile: Profile, opts: CompareOptions) -> frozenset[str]:
    """The pairing names of ``profile``'s ops (the set :func:`pairing_keys` takes as ``other``)."""
    distinct = pd.Series(profile.codes("ops", "name")[1], dtype=object)
    return frozenset(_distinct_names(distinct, opts).tolist())


def matched_as(base_name: np.ndarray, comp_name: np.ndarray, base_cls: np.ndarray, comp_cls: np.ndarray,
               positional: np.ndarray | None = None) -> np.ndarray:
    """``Matched As`` text per pair: ``"<class> (table)"`` when the two pairing names differ but
    the equivalence table gave them one key, ``"by position"`` for structural pairs, else ``""``
    (same name, an ``--op-name-map`` rename, or one-sided)."""
    b, c = np.asarray(base_name, dtype=object), np.asarray(comp_name, dtype=object)
    both = (b != "") & (c != "")
    cls = np.where(np.asarray(base_cls, dtype=object) != "", base_cls, comp_cls)
    out = np.where(both & (b != c) & (cls != ""), cls.astype(object) + " (table)", "").astype(object)
    if positional is not None:
        out = np.where(np.asarray(positional, dtype=bool), BY_POSITION, out).astype(object)
    return out
