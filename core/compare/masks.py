"""Keyword masks that sort kernels into OverallMetrics classes (Flash Attention, Conv, Matmul …).

The reference reads them from a ``compare_config.ini`` inside its package (no user override).
We ship the same defaults in code and as ``perfcmp_core/compare_config.ini`` (a template users
copy), and let ``--config`` point at an edited copy: a model whose attention op is called
``my_attn`` is otherwise invisible to the Flash Attention rows.

All matching is on lower-cased text: FA/CONV/MATMUL by substring of the *host op* name,
CUBE by substring of the GPU kernel name, TRANS by substring of the NPU kernel name, MC2 by exact
equality with the NPU kernel name.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..ini import read_ini
from ..text_codes import first_seen_codes
from ..model import Profile
from .names import strip_instance

SECTION = "OP_MASK"

#: Words that mark a host op (or an NPU op type, for the Conv fallback) as backward.
BACKWARD_WORDS: tuple[str, ...] = ("bwd", "backward", "back", "grad")


@dataclass(frozen=True)
class Masks:
    """Lower-cased keyword tuples; field name ↔ ini key in :data:`KEYS`."""

    fa: tuple[str, ...] = (
        "flash_attention", "fusion_attention", "flashattn", "xformers_flash", "efficient_attention",
        "flash2attn",
    )
    conv: tuple[str, ...] = ("aten::conv",)
    matmul: tuple[str, ...] = ("aten::addmm", "aten::bmm", "aten::mm", "aten::matmul")
    cube: tuple[str, ...] = ("gemm", "conv", "cutlass", "wgrad", "gemvx")
    trans: tuple[str, ...] = ("cast", "transdata", "transpose")
    mc2: tuple[str, ...] = ("allgathermatmul", "matmulreducescatter", "matmulallreduce")


DEFAULT_MASKS = Masks()

#: ini key → Masks field
KEYS: dict[str, str] = {
    "FA_MASK": "fa",
    "CONV_MASK": "conv",
    "MATMUL_MASK": "matmul",
    "CUBE_MASK": "cube",
    "TRANS_MASK": "trans",
    "MC2_KERNEL": "mc2",
}


def parse_items(value: str) -> tuple[str, ...]:
    """``" A, b ,,c"`` → ``("a", "b", "c")``: comma-separated, trimmed, lower-cased, no empties."""
    return tuple(item.strip().lower() for item in value.split(",") if item.strip())


def load_masks(config_path: str | Path | None, text: str | None = None) -> Masks:
    """The masks from an ini file's ``[OP_MASK]`` section; ``None`` → the defaults (``text``:
    that section already in hand, from the TOML configuration, :mod:`perfcmp_core.settings`).

    A key that is absent keeps its default (so a user can override just ``FA_MASK``); a key that
    is present but empty disables that class. Unknown keys are rejected because a typo such as
    ``FA_MASKS`` would otherwise silently change nothing.
    """
    if config_path is None:
        return DEFAULT_MASKS
    path = Path(config_path)
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str.upper  # type: ignore[assignment, method-assign]
    read_ini(parser, path, "mask config", text)
    if not parser.has_section(SECTION):
        raise InputError(path, f"no [{SECTION}] section (expected keys: {', '.join(KEYS)})")
    unknown = [k for k in parser[SECTION] if k not in KEYS]
    if unknown:
        raise InputError(path, f"unknown key(s) in [{SECTION}]: {', '.join(unknown)} (expected: {', '.join(KEYS)})")
    overrides = {KEYS[k]: parse_items(v) for k, v in parser[SECTION].items()}
    return Masks(**{f.name: overrides.get(f.name, getattr(DEFAULT_MASKS, f.name)) for f in fields(Masks)})


class TextIndex:
    """A text column reduced to its distinct values, for keyword tests and grouping.

    Profiles repeat the same few hundred op/kernel names tens of thousands of times, so every
    test runs on the distinct values and is broadcast back through the factorisation codes.
    ``codes`` (per row) and ``distinct`` (the values, first-appearance order) also serve to group
    rows by their exact text.
    """

    codes: np.ndarray
    distinct: pd.Series
    _lower: pd.Series

    def __init__(self, text: pd.Series) -> None:
        self.codes, distinct = first_seen_codes(text.to_numpy(dtype=object))
        self.distinct = pd.Series(distinct, dtype=object)
        self._lower = self.distinct.str.lower()

    @classmethod
    def _of(cls, codes: np.ndarray, distinct: pd.Series, lower: pd.Series) -> TextIndex:
        out = cls.__new__(cls)
        out.codes, out.distinct, out._lower = codes, distinct, lower
        return out

    def subset(self, rows: np.ndarray) -> TextIndex:
        """The index of ``text[rows]`` (bool mask or positions) without re-factorising."""
        return TextIndex._of(self.codes[rows], self.distinct, self._lower)  # tested on its own

    def leaf(self) -> TextIndex:
        """The same rows keyed by their *own* name: the last ``/`` segment without a MindSpore
        ``-op<n>`` suffix (``Default/network-WithLossCell/_backbone-Net/AllGatherMatmul-op12`` →
        ``allgathermatmul``), lower-cased (also in ``distinct``). Keyword tests on full MindSpore
        scope paths misfire: every op under ``_backbone`` would contain "back" and count as
        backward."""
        leaves = strip_instance(self._lower.str.rsplit("/", n=1).str[-1])
        codes, uniques = pd.factorize(leaves)
        keys = pd.Series(uniques, dtype=object)
        return TextIndex._of(codes[self.codes], keys, keys)

    def _back(self, hit: pd.Series | np.ndarray) -> np.ndarray:
        return np.asarray(hit, dtype=bool)[self.codes]

    def contains_any(self, words: tuple[str, ...]) -> np.ndarray:
        """Contains any of ``words`` (lower-case) as a substring; no words → all False."""
        if not words or len(self.codes) == 0:
            return np.zeros(len(self.codes), dtype=bool)
        pattern = "|".join(re.escape(w) for w in words)
        return self._back(self._lower.str.contains(pattern, regex=True))

    def equals_any(self, words: tuple[str, ...]) -> np.ndarray:
        if len(self.codes) == 0:
            return np.zeros(0, dtype=bool)
        return self._back(self._lower.isin(list(words)))

    def startswith(self, prefix: str) -> np.ndarray:
        if len(self.codes) == 0:
            return np.zeros(0, dtype=bool)
        return self._back(self._lower.str.startswith(prefix))


class TextIndexes:
    """The :class:`TextIndex` of each text column of one profile, built on first use.

    Factorising a column touches every cell's string object, which is the costliest part of
    OverallMetrics and ApiCompare on a large trace (half a million host-op names): the codes are
    the profile's (:meth:`~perfcmp_core.model.Profile.codes`, made once, or stored by the cache);
    steps that share one instance (through :class:`~perfcmp_core.compare.Context`) also share
    the lower-cased distinct values.
    """

    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        self._built: dict[tuple[str, str], TextIndex] = {}
        #: Row masks of the tests the cuts asked for, over the whole profile (:meth:`cut`).
        self._tested: dict[tuple[str, str, str, object], np.ndarray] = {}

    def __call__(self, table: str, column: str) -> TextIndex:
        """The index of ``profile.<table>[column]``."""
        index = self._built.get((table, column))
        if index is None:
            codes, distinct = self._profile.codes(table, column)
            names = pd.Series(distinct, dtype=object)
            index = self._built[(table, column)] = TextIndex._of(codes, names, names.str.lower())
        return index

    def cut(self, rows: dict[str, slice | np.ndarray]) -> TextIndexes:
        """The indexes of a cut of this profile (``rows``: the rows kept of each table, a slice
        or a bool mask), taken from this profile's: no text of the cut is numbered again, and
        each text test runs once on the whole profile, each cut taking its rows of the result
        (StepCompare cuts a profile once per step: a hundred steps test the distinct names once,
        not a hundred times)."""
        return _CutIndexes(self, rows)

    def _tested_rows(self, table: str, column: str, test: str, arg: object) -> np.ndarray:
        key = (table, column, test, arg)
        if key not in self._tested:
            self._tested[key] = getattr(self(table, column), test)(arg)
        return self._tested[key]


class _CutIndexes(TextIndexes):
    """:meth:`TextIndexes.cut`: the index of each column is the whole profile's at the cut's
    rows, its tests the whole profile's tests at those rows."""

    def __init__(self, whole: TextIndexes, rows: dict[str, slice | np.ndarray]) -> None:
        self._whole, self._rows = whole, rows

    def __call__(self, table: str, column: str) -> TextIndex:
        rows = self._rows[table]
        sub = self._whole(table, column).subset(rows)
        index = _CutIndex._of(sub.codes, sub.distinct, sub._lower)
        index._whole, index._key, index._rows = self._whole, (table, column), rows
        return index


class _CutIndex(TextIndex):
    """A cut's :class:`TextIndex` (:class:`_CutIndexes`): its tests are the whole profile's
    (made once, :meth:`TextIndexes._tested_rows`) at the cut's rows."""

    _whole: TextIndexes
    _key: tuple[str, str]
    _rows: slice | np.ndarray

    def contains_any(self, words: tuple[str, ...]) -> np.ndarray:
        return self._whole._tested_rows(*self._key, "contains_any", words)[self._rows]

    def equals_any(self, words: tuple[str, ...]) -> np.ndarray:
        return self._whole._tested_rows(*self._key, "equals_any", words)[self._rows]

    def startswith(self, prefix: str) -> np.ndarray:
        return self._whole._tested_rows(*self._key, "startswith", prefix)[self._rows]
