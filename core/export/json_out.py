"""``--json``: the whole comparison as one machine-readable document.

Unlike the workbook, which mirrors the reference's sheets, the JSON carries everything a script
might want: every table (including those the workbook leaves out, such as the module tree) with
all its columns — the unexported ones (``Matched As``) and the hidden ``_``-prefixed ones too, so
tree links and levels survive — and each column's workbook header, role, format, unit and
``export`` flag (whether the sheet holds it), plus the summary figures, notes, options and input
labels.

Values follow one rule everywhere: NaN / missing → ``null``, ±infinity → ``"INF"`` / ``"-INF"``
(JSON has no infinity, and ``null`` would hide a real "base was zero" result), numpy scalars →
plain numbers. The file is written atomically and never replaces an existing one.
"""

from __future__ import annotations

import dataclasses
import math
from os import PathLike
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import orjson
import pandas as pd

from perfcmp_core import __version__
from perfcmp_core.compare import ADVISOR
from perfcmp_core.compare.result import ComparisonResult, Table
from perfcmp_core.export.safe_write import safe_write
from perfcmp_core.export.values import python_values
from perfcmp_core.notes import lines

#: Bumped when the document's layout changes incompatibly.
SCHEMA_VERSION = 1


def write_json(
    result: ComparisonResult, path: str | PathLike[str], *, advisor: Table | None = None
) -> Path:
    """Write ``result`` (and the advisor's findings) to ``path``; return the path written.

    When ``path`` exists a ``_N`` suffix is added instead of overwriting it. ``advisor``
    defaults to the advisor's table in the result, as in the workbook.
    """
    advisor = advisor if advisor is not None else result.tables.get(ADVISOR.name)
    document = {
        "tool": "perfcmp-tui",
        "version": __version__,
        "schema": SCHEMA_VERSION,
        "base_label": result.base_label,
        "comp_label": result.comp_label,
        "options": _plain(result.options),
        "summary": _plain(result.summary),
        "notes": lines(result.notes),
        "tables": {name: _table_document(table) for name, table in result.tables.items()},
        "advisor": None if advisor is None else _table_document(advisor),
    }
    payload = orjson.dumps(
        document,
        default=_fallback,
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE,
    )
    return safe_write(path, lambda fh: fh.write(payload))


def _table_document(table: Table) -> dict[str, Any]:
    """One table: its description and its rows as objects keyed by column key (all columns)."""
    keys = table.keys()  # data's columns in order, child columns (Kernel Details) among them
    position = iter(range(table.data.shape[1]))
    columns = [_json_values(table.values(k) if k in table.children else table.data.iloc[:, next(position)])
               for k in keys]
    keys = [str(k) for k in keys]
    return {
        "name": table.name,
        "title": table.title,
        "columns": [dataclasses.asdict(c) for c in table.columns],
        "base_span": list(table.base_span),
        "comp_span": list(table.comp_span),
        "default_sort": table.default_sort,
        "absent_reason": table.absent_reason,
        "notes": list(table.notes),
        "rows": [dict(zip(keys, row)) for row in zip(*columns)],
    }


def _json_values(series: pd.Series) -> list[object]:
    values = python_values(series)
    for i, v in enumerate(values):
        if isinstance(v, float) and math.isinf(v):
            values[i] = "INF" if v > 0 else "-INF"
    return values


def _plain(value: object) -> object:
    """Summary / option / note values made JSON-safe with the same rules as table cells."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "INF" if value > 0 else "-INF"
        return value
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=str)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, PurePath):
        return str(value)
    return _fallback(value)


def _fallback(value: object) -> object:
    """Anything orjson cannot encode natively (odd cell objects) is written as its text."""
    return str(value)
