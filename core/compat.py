"""Where the supported pandas lines (2.2+ and 3.x) and numpy lines (1.26+ and 2.x) differ, core
picks one behaviour here, so that no result depends on which versions are installed.

Three differences matter to the engine:

* **Text dtype.** ``astype(str)`` gives an ``object`` column in pandas 2 and a ``str`` column in
  pandas 3 (Arrow-backed when pyarrow is installed, Python-backed otherwise), and the two treat a
  missing value differently: pandas 2 turns ``None`` into the text ``"None"`` and NaN into
  ``"nan"``, pandas 3 keeps it missing. Core's text columns are ``object`` holding ``str``
  (:func:`as_text`), with a missing value as ``""`` — on every version.
* **Texts with a NUL character.** Before pandas 3, ``factorize`` and ``unique`` on an ``object``
  array of ``str`` hash each text as a C string, cut at its first NUL: ``"a\\x00b"`` and
  ``"a\\x00b12"`` become one value (a cache entry came back changed). :func:`factorize_text` and
  :func:`unique_text` route such arrays through pandas' generic object hash table, which
  compares whole Python strings. Whether the installed pandas has the bug is tested once, at
  import, on two tiny arrays — not guessed from its version number. They serve where a text
  must come back exactly (the cache, workbook cells, kernel shapes); a ``groupby`` on names that
  differ only after a NUL still merges them on pandas 2 (no real profile has such names).
* **Where pandas keeps the text it infers.** pandas 3 makes a ``str`` column of any text it is
  given as an object array (a DataFrame of loader columns, a groupby's keys), backed by Arrow
  when pyarrow is installed (it is in most ML environments) and by Python objects otherwise.
  An Arrow column hands back a new ``str`` per cell each time it is read (a screen, the
  workbook, a result table), which cost +7.6 % CPU and +100 MB of peak memory on the H200 pair
  with the same code. Importing this module sets pandas' ``mode.string_storage`` to
  ``"python"`` (:data:`STRING_STORAGE`), so that an inferred ``str`` column is the same with
  and without pyarrow. It is a process-wide pandas option: perfcmp-tui's processes all import
  this module before they make a table (``tests/test_compat.py`` checks every core module that
  uses pandas reaches it); a script using core as a library and wanting Arrow strings for its
  own frames sets the option back after importing core.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from .text_codes import by_object

#: pandas' storage of the ``str`` columns it infers, in every process of ours (module docstring).
STRING_STORAGE = "python"
pd.set_option("mode.string_storage", STRING_STORAGE)

#: The installed pandas' (major, minor): for the few switches that cannot be feature-tested.
PANDAS_VERSION: tuple[int, int] = tuple(int(p) for p in pd.__version__.split(".")[:2])  # type: ignore[assignment]


def _nul_texts_collide() -> bool:
    """Whether this pandas' factorize merges texts that differ only after a NUL character."""
    codes, _ = pd.factorize(np.array(["a\x00b", "a\x00c"], dtype=object))
    return bool(codes[0] == codes[1])


#: True on the pandas releases whose string hash table stops at NUL (every 2.x tested here).
NUL_TEXTS_COLLIDE: bool = _nul_texts_collide()


def as_text(values: Any) -> pd.Series:
    """``values`` as a text column: ``object`` dtype, every present value through ``str``, every
    missing one (None, NaN, pd.NA) as ``""``.

    Why not ``astype(str)``: its dtype and its missing values depend on the pandas line (module
    docstring). A Series keeps its index, anything else gets 0..n-1. A column that already is
    ``object`` holding only ``str`` is returned as it is, without a copy (loaders' columns are).
    """
    if isinstance(values, pd.Series):
        s = values
    else:
        arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
        s = pd.Series(arr, dtype=object if arr.dtype.kind in "OUS" else None)
    if s.dtype == object and infer_dtype(s, skipna=False) in ("string", "empty"):
        return s
    text_dtype = isinstance(s.dtype, pd.StringDtype)  # dtype-neutral: a test of the input's dtype
    if text_dtype and s.dtype.storage == "python":
        # What pandas infers in our processes (:data:`STRING_STORAGE`): the cells are the ``str``
        # objects the column was made from, taken as they are (no text hashed per row).
        return pd.Series(s.to_numpy(dtype=object, na_value=""), index=s.index, dtype=object, name=s.name)
    if s.dtype.kind in "iub" or (text_dtype and not NUL_TEXTS_COLLIDE):
        # Integers (a Db's plane ids, step numbers) and the texts of a pandas string column (a
        # CSV read with pyarrow installed) repeat: each distinct value is written once and shared
        # by its rows, instead of one new ``str`` per row.
        text = _each_distinct_once(s)
    else:
        text = _formatted(s)
    return pd.Series(text, index=s.index, dtype=object, name=s.name)


def _each_distinct_once(s: pd.Series) -> np.ndarray:
    """The cells of ``s`` as an object array whose every distinct value is formatted once
    (:func:`_formatted`) and shared by its rows; a missing cell holds ``""``."""
    codes, uniques = pd.factorize(s)
    values = np.append(_formatted(pd.Series(uniques, dtype=s.dtype)), one_text(""))  # code -1: missing
    return values[codes]


def _formatted(s: pd.Series) -> np.ndarray:
    """Numbers and booleans through pandas' own formatting (the same in 2.x and 3.x), text
    dtypes back to object; the missing cells, which pandas 2 spelt "nan" / "None", as ""."""
    missing = s.isna().to_numpy(dtype=bool)
    text = s.astype(str).to_numpy(dtype=object)  # dtype-neutral: made object on this line
    if missing.any():
        text = np.where(missing, "", text)  # a new array: ``text`` may share the column's memory
    return text


def one_text(text: str) -> np.ndarray:
    """``text`` as a 0-d ``object`` array, to fill text cells with: given a Python ``str``,
    ``np.full``, ``np.where`` and ``np.select`` make a numpy string of it and one new ``str`` per
    cell back (a Text side's 517,776 ops each held their own ``"cpu_op"``: 28 MB in every process
    holding the profile, and as many objects to pickle); given this, every cell holds the one
    object."""
    out = np.empty((), dtype=object)
    out[()] = text
    return out


def _object_array(values: Any) -> np.ndarray:
    return values.to_numpy(dtype=object) if isinstance(values, (pd.Series, pd.Index)) \
        else np.asarray(values, dtype=object)


def factorize_text(values: Any, use_na_sentinel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of a text column that is exact for texts holding a NUL character.

    Returns ``(codes, uniques)`` with ``uniques`` an ``object`` array in order of first
    appearance, as ``pd.factorize`` gives them. Where the installed pandas is affected (module
    docstring), one ``None`` appended to the array makes pandas pick its generic object hash
    table, which compares whole strings; the ``None`` is taken off the result again. A large
    object array is numbered by object first and one cell per object factorised
    (:func:`~perfcmp_core.text_codes.by_object`): the same codes and uniques (cells holding one
    object hold one value, and the objects come in their cells' order), without hashing every
    cell's text.
    """
    if isinstance(values, (pd.Series, pd.Index)) and values.dtype == object:
        values = values.to_numpy()
    grouped = by_object(values)
    if grouped is not None:  # the cells' distinct objects numbered, one cell per object factorised
        numbered, firsts = grouped
        codes, uniques = _factorized(firsts, use_na_sentinel)
        return codes[numbered], uniques
    return _factorized(values, use_na_sentinel)


def _factorized(values: Any, use_na_sentinel: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize_text` cell by cell."""
    if not NUL_TEXTS_COLLIDE:
        codes, uniques = pd.factorize(values, use_na_sentinel=use_na_sentinel)
        return codes, np.asarray(uniques, dtype=object)
    arr = _object_array(values)
    codes, uniques = pd.factorize(np.append(arr, None), use_na_sentinel=use_na_sentinel)
    uniques = np.asarray(uniques, dtype=object)
    last = codes[-1]
    codes = codes[:-1]
    if last >= 0 and not (codes == last).any():  # the appended None made its own value: drop it
        uniques = uniques[:last] if last == len(uniques) - 1 else np.delete(uniques, last)
        codes = np.where(codes > last, codes - 1, codes)
    return codes, uniques


def object_text(values: Any) -> Any:
    """A 1-d ``object`` array holding only ``str`` as a Series that a frame keeps as ``object``
    (its cells, as they are); anything else as given.

    Why: given a text column as an object array, a pandas 3 frame first infers and builds its
    own ``str`` array of it (a scan for missing values, a copy), which :class:`~perfcmp_core.
    compare.result.Table` then turns back into ``object`` (:func:`string_objects`, another scan):
    a tenth of the operators / modules step on the H200 pair. A column holding only ``str`` comes
    back from that round trip as the very objects it held, so it may skip it; one with missing or
    other values takes the round trip (missing values become ``None`` there)."""
    if (isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1
            and infer_dtype(values, skipna=False) == "string"):
        return pd.Series(values, dtype=object, copy=False)
    return values


def object_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """``pd.DataFrame(columns)`` with its text-only object arrays kept as ``object``
    (:func:`object_text`): what a :class:`~perfcmp_core.compare.result.Table` holds, without the
    round trip through an inferred ``str`` column."""
    return pd.DataFrame({key: object_text(values) for key, values in columns.items()})


def string_objects(column: pd.Series) -> pd.Series:
    """A pandas string column (what pandas 3 infers from text in object arrays) as ``object``, a
    missing value ``None`` as before (a writer still tells it from ""), index and name kept.

    With Python storage (:data:`STRING_STORAGE`) the column holds the ``str`` objects it was made
    from: they are taken as they are, shared as they were (no text is hashed: results are remade
    at every step change)."""
    values = column.to_numpy(dtype=object, na_value=None)
    return pd.Series(values, index=column.index, dtype=object, name=column.name)


def unique_text(values: Any) -> np.ndarray:
    """``pd.unique`` of a text column (order of first appearance, missing values kept), exact for
    texts holding a NUL character on every pandas line."""
    codes, uniques = factorize_text(values, use_na_sentinel=False)
    return uniques
