"""Cell values as plain Python: the one conversion the workbook and the JSON writers share."""

from __future__ import annotations

import numpy as np
import pandas as pd


def python_values(series: pd.Series) -> list[object]:
    """The column as plain Python values: NaN/None/NA → None, numpy scalars → Python, inf kept.

    The workbook and the JSON document call this on the same columns, so both see exactly the
    same values.
    """
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return series.tolist()
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = series.tolist()
        for i in np.flatnonzero(np.isnan(series.to_numpy())):
            values[i] = None
        return values
    missing = series.isna().to_numpy()
    values = series.to_numpy(dtype=object).tolist()
    for i in np.flatnonzero(missing):
        values[i] = None
    return [v.item() if isinstance(v, np.generic) else v for v in values]
