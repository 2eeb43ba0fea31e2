"""Model-building steps shared by every loader: steps and time conversions.

Nesting intervals per thread lives in :mod:`perfcmp_core.timeline` (the comparisons use it too)."""

from __future__ import annotations

import math
import re
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from ..compat import as_text
from ..text_codes import first_seen_codes
from ..model import STEPS, frame

_INT64_MAX = 2**63 - 1
_STEP_RE = re.compile(r"ProfilerStep#(\d+)")
_STEP_MARK = re.compile(r"ProfilerStep#\d+")  # no group: str.contains warns on capturing groups


def steps_from_ops(names: pd.Series, start: pd.Series, end: pd.Series) -> pd.DataFrame:
    """The STEPS table from ``ProfilerStep#N`` host ops (first occurrence of each id wins)."""
    ids = names.str.extract(_STEP_RE, expand=False)
    mask = ids.notna().to_numpy()
    df = pd.DataFrame(
        {"step": ids[mask].astype("int64").to_numpy(), "start_ns": start[mask].to_numpy(),
         "end_ns": end[mask].to_numpy()}
    )
    df = df.drop_duplicates("step").sort_values("start_ns", kind="stable")
    return frame(STEPS, {c: df[c] for c in STEPS})


def steps_of_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """The STEPS table of an OPS table whose ``is_step`` marks its ``ProfilerStep#N`` ops: only
    those rows are parsed (the regex per op of a 0.5M-op trace cost 0.4 s)."""
    markers = ops[ops["is_step"].to_numpy()]  # the only rows steps_from_ops would keep
    return steps_from_ops(markers["name"], markers["start_ns"], markers["end_ns"])


def per_distinct(col: pd.Series, convert: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """``convert`` (a vectorised conversion of text: to numbers, stripped, …) of every cell of
    ``col``, run once per distinct text: the columns of a Text export's CSV files repeat a few
    thousand values over hundreds of thousands of rows, and pandas' string methods and
    ``to_numeric`` cost a Python call per cell."""
    codes, distinct = first_seen_codes(col.to_numpy(dtype=object))
    out = convert(pd.Series(distinct, dtype=object)).to_numpy()
    return pd.Series(out[codes] if len(codes) else out[:0], index=col.index)


def per_name(names: pd.Series | np.ndarray, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """``test`` (a vectorised text test, e.g. ``lambda s: s.str.startswith("x")``) of each name,
    run once per distinct name: names repeat every step, and a regex per row of a 0.5M-op
    profile cost 1.5 s."""
    if not len(names):
        return np.zeros(0, dtype=bool)
    hit = per_distinct(pd.Series(names, dtype=object), lambda distinct: test(as_text(distinct)))
    return hit.to_numpy(dtype=bool, copy=True)  # writeable, the caller's own (a table may take it)


def is_step_name(names: pd.Series | np.ndarray) -> np.ndarray:
    """Which names mark a step (``ProfilerStep#N``)."""
    return per_name(names, lambda s: s.str.contains(_STEP_MARK, regex=True))


def is_cann_allocation(names: pd.Series | np.ndarray) -> np.ndarray:
    """Which memory records are CANN's own allocations (``cann::…``): both NPU exports re-time
    them to the dequeue they lie in, and only they keep their name."""
    return per_name(names, lambda s: s.str.contains("cann::", regex=False))


def is_module_name(names: pd.Series | np.ndarray) -> np.ndarray:
    """Which python frames are ``nn.Module`` calls (``nn.Module: Linear_0``, any case)."""
    return per_name(names, lambda s: s.str.lower().str.startswith("nn.module:"))


def assign_step(start_ns: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Step id of each time point (-1 outside every step window); windows assumed disjoint."""
    if steps.empty or len(start_ns) == 0:
        return np.full(len(start_ns), -1, dtype="int64")
    st = steps.sort_values("start_ns")
    lo = st["start_ns"].to_numpy()
    hi = st["end_ns"].to_numpy()
    ids = st["step"].to_numpy()
    idx = np.searchsorted(lo, start_ns, side="right") - 1
    ok = idx >= 0
    inside = np.zeros(len(start_ns), dtype=bool)
    inside[ok] = start_ns[ok] <= hi[idx[ok]]
    out = np.full(len(start_ns), -1, dtype="int64")
    out[inside] = ids[idx[inside]]
    return out


def float_us_to_ns(arr: np.ndarray) -> np.ndarray:
    """float64 µs → int64 ns without the 2**53 overflow of ``arr * 1000`` at epoch magnitudes
    (whole µs and the fraction are converted separately). NaN/inf and values beyond int64 ns
    (≈ 9.2e15 µs) → -1."""
    out = np.full(len(arr), -1, dtype="int64")
    ok = np.isfinite(arr) & (np.abs(arr) < 9.2e15)
    a = arr[ok]
    whole = np.floor(a)
    out[ok] = whole.astype("int64") * 1000 + np.round((a - whole) * 1000.0).astype("int64")
    return out


def us_to_ns(values: pd.Series) -> np.ndarray:
    """µs values (numbers, or strings such as ``"1736413971558972.912\\t"``) → int64 ns, exactly.

    Strings are split at the decimal point (:func:`us_text_to_ns`) so ns precision survives at
    epoch magnitudes, where a float64 µs value would round to 0.25 µs steps. Unparsable or
    negative cells become -1.
    """
    if values.dtype.kind in "iu":
        return values.to_numpy(dtype="int64") * 1000
    if values.dtype.kind == "f":
        return float_us_to_ns(values.to_numpy(dtype="float64"))
    return us_text_to_ns(values)


def _one_us_to_ns(value: object) -> int:
    """One µs value → int ns, exactly; -1 when it is not a non-negative number."""
    if isinstance(value, str):
        whole, _, frac = value.strip().partition(".")
        if whole.isascii() and whole.isdigit() and (not frac or (frac.isascii() and frac.isdigit())):
            return int(whole) * 1000 + int(frac[:3].ljust(3, "0"))
        return -1
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return -1
    if isinstance(value, int):
        return value * 1000 if value >= 0 else -1
    if not math.isfinite(value) or value < 0:
        return -1
    whole = math.floor(value)
    return int(whole) * 1000 + round((value - whole) * 1000.0)


def us_text_to_ns(values: Iterable[object]) -> np.ndarray:
    """µs values as the export writes them → exact int64 ns (-1 for anything unparsable).

    ``trace_view.json`` ``ts`` and the CSV time columns are µs *strings* with ns digits
    (``"1736413971558972.912\\t"``); splitting at the decimal point keeps every digit, where a
    float64 µs value would round to 0.25 µs at epoch magnitudes and break the exact joins.
    Strings written like most of them (an exporter writes every timestamp alike) are converted
    as one digit matrix (:func:`_plain_us_to_ns`: ≈ 0.05 µs a value, against 1 µs for one
    ``int()`` per value, 7.7 µs for a pandas regex extract); any other value goes through
    :func:`_one_us_to_ns`. Values past int64 become -1.
    """
    values = values.tolist() if isinstance(values, (pd.Series, np.ndarray)) else list(values)
    out = np.full(len(values), -1, dtype="int64")
    todo: Iterable[int] = range(len(values))
    if values and set(map(type, values)) == {str}:
        uniform = _uniform_us_to_ns(values)
        if uniform is not None:
            return uniform
        ns, ok = _plain_us_to_ns(values)
        out[ok] = ns[ok]
        todo = np.flatnonzero(~ok).tolist()
    for i in todo:
        v = _one_us_to_ns(values[i])
        out[i] = v if v <= _INT64_MAX else -1
    return out


#: Largest whole µs whose ns (with three decimals) fits int64.
_MAX_WHOLE_US = (_INT64_MAX - 999) // 1000


def _uniform_us_to_ns(texts: list[str]) -> np.ndarray | None:
    """ns of texts that are all written like the first one (see :func:`_plain_us_to_ns`), or None
    when any is not (the caller then sorts them out).

    The usual case, at half the cost: the texts are joined with a newline after each, so that
    the bytes are one row per text exactly when every row holds the first text's characters and
    ends in that newline — the row checks below cannot pass otherwise, since a valid row has no
    newline before its last byte — and no pass over the texts' lengths is needed. The digits are
    summed row by row (Horner), which numpy runs faster than an integer matrix product."""
    n = len(texts)
    model = texts[0]
    body = model.rstrip(" \t")
    point = body.find(".")
    digits_end = len(body)
    whole_end = point if point >= 0 else digits_end
    width = len(model) + 1
    if not 0 < whole_end <= 16:
        return None
    joined = "\n".join(texts).encode("ascii", "replace") + b"\n"
    if len(joined) != n * width:
        return None
    t = np.frombuffer(joined, dtype=np.uint8).reshape(n, width).T.copy()
    d = t - np.uint8(48)  # digits become 0..9, anything else > 9
    good = (d[:whole_end].max(axis=0) <= 9) & (t[width - 1] == 10)
    if point >= 0:
        good &= t[point] == 46
        if digits_end > point + 1:
            good &= d[point + 1:digits_end].max(axis=0) <= 9
    if digits_end < width - 1:
        tail = t[digits_end:width - 1]
        good &= ((tail == 9) | (tail == 32)).all(axis=0)
    if not good.all():
        return None
    whole = np.zeros(n, dtype=np.int64)
    for row in d[:whole_end]:
        whole *= 10
        whole += row
    if whole_end == 16 and int(whole.max()) > _MAX_WHOLE_US:
        return None
    frac = np.zeros(n, dtype=np.int64)
    frac_rows = d[point + 1:min(point + 4, digits_end)] if point >= 0 else d[:0]
    for k in range(3):
        frac *= 10
        if k < len(frac_rows):
            frac += frac_rows[k]
    return whole * 1000 + frac


def _plain_us_to_ns(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ns, ok) of the texts written like the most common one — same length, the decimal point
    in the same place, digits around it, the same trailing tabs/spaces (an exporter writes every
    timestamp of a file alike: ``1736413971558972.912``, or with a tab in CSV files) — computed
    as one digit matrix; ``ok`` is False for every other text, which the caller converts one by
    one."""
    n = len(texts)
    ns = np.zeros(n, dtype="int64")
    ok = np.zeros(n, dtype=bool)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    width = int(np.bincount(lengths).argmax())
    rows = np.flatnonzero(lengths == width)
    model = texts[int(rows[0])]
    body = model.rstrip(" \t")
    point = body.find(".")
    digits_end = len(body)
    if width == 0 or not 0 < (point if point >= 0 else digits_end) <= 16:
        return ns, ok
    group = texts if len(rows) == n else [texts[i] for i in rows.tolist()]
    m = np.frombuffer("".join(group).encode("ascii", "replace"), dtype=np.uint8).reshape(len(group), width)
    whole_end = point if point >= 0 else digits_end
    # One row per character position (reductions over rows run vectorised; over the short
    # rows of the text matrix they cost 30 ns a text); digits become 0..9, anything else > 9.
    t = np.ascontiguousarray(m.T)
    d = t - np.uint8(48)
    good = (d[:whole_end].max(axis=0) <= 9) & (d[whole_end + 1:digits_end].max(axis=0, initial=0) <= 9)
    if point >= 0:
        good &= t[point] == 46
    tail = t[digits_end:]
    good &= ((tail == 9) | (tail == 32)).all(axis=0)
    whole = (10 ** np.arange(whole_end - 1, -1, -1, dtype=np.int64)) @ d[:whole_end].astype(np.int64)
    frac_digits = d[whole_end + 1:min(whole_end + 4, digits_end)] if point >= 0 else d[:0]
    scale = 10 ** np.arange(2, 2 - len(frac_digits), -1, dtype=np.int64)
    frac = scale @ frac_digits.astype(np.int64) if len(frac_digits) else np.zeros(len(group), dtype=np.int64)
    good &= whole <= _MAX_WHOLE_US
    ns[rows] = np.where(good, whole * 1000 + frac, 0)
    ok[rows] = good
    return ns, ok


#: The call instance at the end of an HCCL op name (``hcom_allReduce__868_0_1``: ``_868_0_1``).
_HCCL_INSTANCE = r"_\d+_\d+_\d+$"


def hccl_op_types(names: pd.Series) -> pd.Series:
    """The collective type an HCCL op name spells (``hcom_allReduce__868_0_1`` → ``hcom_allReduce_``):
    what level 1 writes as the op's type, and the only trace of it at level 0 (``N/A`` there), in
    both exports."""
    return per_distinct(names, lambda distinct: as_text(distinct).str.replace(_HCCL_INSTANCE, "", regex=True))
