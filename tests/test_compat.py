"""Same results on every supported pandas / numpy / Python line (issue 31).

``core/compat.py`` owns the places where pandas 2.2+ and 3.x differ; these tests pin its
behaviour with values written out by hand, so they say the same on every line CI runs
(``.ci/run`` runs this file in its lowest-versions environment too). Two source scans keep the
rest of the code from reintroducing a version-dependent text dtype or a Python > 3.10 feature.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcmp_core.compat import NUL_TEXTS_COLLIDE, as_text, factorize_text, unique_text
from perfcmp_core.model import KERNELS, OPS, frame

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("values, want", [
    (pd.Series(["a", None, np.nan, "b"], dtype=object), ["a", "", "", "b"]),
    (pd.Series([1, 22, -1]), ["1", "22", "-1"]),
    (np.array([1.5, np.nan]), ["1.5", ""]),
    (np.array(["x", "yy"]), ["x", "yy"]),  # numpy text: pandas 3 would infer its own "str"
    (["q", None, 3], ["q", "", "3"]),
    (pd.Series([True, False]), ["True", "False"]),
    (pd.Series([], dtype=object), []),
])
def test_as_text_is_object_with_missing_as_empty(values: object, want: list[str]) -> None:
    got = as_text(values)
    assert got.dtype == object
    assert got.tolist() == want
    assert all(type(v) is str for v in got)


def test_as_text_of_a_pandas_string_column_is_object() -> None:
    """A pandas string column (pandas 3's default for text, Arrow-backed with pyarrow) comes back
    as object, its missing value as "" — what pandas 2's object column gives."""
    s = pd.Series(["a", None, "c"], dtype="string", index=[5, 6, 7])
    got = as_text(s)
    assert got.dtype == object and got.tolist() == ["a", "", "c"]
    assert got.index.tolist() == [5, 6, 7]


def test_as_text_keeps_an_object_text_column_as_it_is() -> None:
    s = pd.Series(["a", "b"], dtype=object, index=[3, 4], name="n")
    assert as_text(s) is s


def test_factorize_text_tells_texts_apart_after_a_nul() -> None:
    """pandas 2's string hash table cuts a text at NUL: all three would be one value there."""
    values = ["a\x00b", "a", "a\x00b12", "a\x00b", "a"]
    codes, uniques = factorize_text(np.array(values, dtype=object))
    assert codes.tolist() == [0, 1, 2, 0, 1]
    assert uniques.tolist() == ["a\x00b", "a", "a\x00b12"]
    assert unique_text(pd.Series(values, dtype=object)).tolist() == ["a\x00b", "a", "a\x00b12"]


def test_factorize_text_missing_values_as_pandas_gives_them() -> None:
    values = np.array(["x\x00", None, "x", None], dtype=object)
    codes, uniques = factorize_text(values)
    assert codes.tolist() == [0, -1, 1, -1] and uniques.tolist() == ["x\x00", "x"]
    codes, uniques = factorize_text(values, use_na_sentinel=False)
    assert codes.tolist() == [0, 1, 2, 1]
    assert uniques[0] == "x\x00" and uniques[2] == "x" and pd.isna(uniques[1])
    codes, uniques = factorize_text(np.array([], dtype=object))
    assert codes.tolist() == [] and uniques.tolist() == []


def test_nul_probe_matches_this_pandas() -> None:
    """The import-time probe says what plain ``pd.factorize`` does here."""
    codes, _ = pd.factorize(np.array(["a\x00b", "a\x00c"], dtype=object))
    assert NUL_TEXTS_COLLIDE == (codes[0] == codes[1])


def test_model_text_columns_are_object_on_every_pandas_line() -> None:
    df = frame(KERNELS, {"name": pd.Series(["k", None], dtype="string"), "stream": [1, 2]})
    assert df["name"].dtype == object and df["name"].tolist() == ["k", ""]
    assert df["op_type"].dtype == object and df["op_type"].tolist() == ["", ""]
    empty = frame(OPS, n=0)
    assert all(empty[c].dtype == object for c, dt in OPS.items() if dt == "str")


# ---------------------------------------------------------------------------------------------
# Source scans
# ---------------------------------------------------------------------------------------------

#: Ways of asking pandas for its own string dtype, whose kind (object, Python- or Arrow-backed
#: "str") and missing-value handling depend on the installed pandas and pyarrow.
_STRING_DTYPE = re.compile(
    r"""\.astype\(\s*(?:str|["'](?:str|string)["'])\s*\)"""
    r"""|dtype\s*=\s*(?:str\b|["'](?:str|string)["'])"""
    r"""|StringDtype""")
_MARK = "# dtype-neutral:"


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_no_version_dependent_text_dtype_in_core_or_tui() -> None:
    """Text is made object explicitly (``perfcmp_core.compat.as_text``); a line that must use one
    of these forms says why with ``# dtype-neutral: <why>``."""
    found = []
    for path in _python_files("core", "tui"):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split(_MARK)[0]
            if _STRING_DTYPE.search(code) and not re.search(re.escape(_MARK) + r"\s*\S", line):
                if not code.lstrip().startswith("#") and '``' not in code:
                    found.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not found, "use perfcmp_core.compat.as_text, or mark the line:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids() -> None:
    for bad in ['s.astype(str)', 'x.astype("str")', "pd.Series(v, dtype='string')",
                'read_csv(p, dtype=str)', 'isinstance(d, pd.StringDtype)']:
        assert _STRING_DTYPE.search(bad), bad
    for fine in ['as_text(s)', 'pd.Series(v, dtype=object)', 's.astype(strict)']:
        assert not _STRING_DTYPE.search(fine), fine


def test_nothing_needs_more_than_python_3_10() -> None:
    """No syntax or standard-library use newer than the lowest supported Python (``vermin``,
    from the ``test`` extra); CI also runs the lowest-versions suite on 3.10 itself."""
    vermin = shutil.which("vermin", path=str(Path(sys.executable).parent)) or shutil.which("vermin")
    if vermin is None:
        pytest.skip("vermin is not installed (pip install -e '.[test]')")
    folders = [f for f in ("core", "tui", "tests", "bench", "fixtures", ".ci") if (ROOT / f).is_dir()]
    run = subprocess.run([vermin, "--target=3.10-", "--violations", "--no-tips", "--eval-annotations",
                          *folders],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _lowest_pins_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("lowest_pins", ROOT / ".ci" / "lowest_pins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lowest_pins_are_the_declared_lower_bounds() -> None:
    """CI's lowest-versions environment installs exactly pyproject.toml's lower bounds."""
    lowest = _lowest_pins_module()
    text = '''[project]
dependencies = [
    "pandas>=2.2",
    "dask[distributed]>=2024.1",  # a comment
    "tomli>=1.1; python_version < '3.11'",
    "newer>=9.0; python_version >= '3.11'",
]
'''
    old = sys.version_info < (3, 11)
    assert lowest.pins(text) == ["pandas==2.2", "dask==2024.1", *(["tomli==1.1"] if old else []),
                                 *([] if old else ["newer==9.0"])]
    pins = lowest.pins((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pandas==2.2" in pins and "numpy==1.26" in pins
    with pytest.raises(SystemExit):
        lowest.pins('[project]\ndependencies = [\n    "pandas",\n]\n')
