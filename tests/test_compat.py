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

from perfcmp_core.compat import (NUL_TEXTS_COLLIDE, as_text, factorize_text, object_frame, object_text, one_text,
                                  string_objects, unique_text)
from perfcmp_core.load import load_profile
from perfcmp_core.model import KERNELS, OPS, SCHEMAS, frame
from perfcmp_core.options import LoadOptions

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


@pytest.mark.parametrize("storage", ["python", "pyarrow"])
def test_as_text_of_a_pandas_string_column_is_object(storage: str) -> None:
    """A pandas string column of either storage (a caller's own column may be Arrow-backed) comes
    back as object, its missing value as "" — what pandas 2's object column gives."""
    if storage == "pyarrow":
        pytest.importorskip("pyarrow")  # the CI run with pyarrow added covers it
    s = pd.Series(["a", None, "c"], dtype=f"string[{storage}]", index=[5, 6, 7])
    got = as_text(s)
    assert got.dtype == object and got.tolist() == ["a", "", "c"]
    assert got.index.tolist() == [5, 6, 7]


def test_as_text_of_a_python_storage_column_takes_its_cells_as_they_are() -> None:
    """What pandas infers in our processes (Python storage): ``as_text`` gives the cells' own
    ``str`` objects, a missing one as "", the texts exact (a NUL, non-ASCII), index and name
    kept — the values the per-distinct formatting gave, without a text hashed per row."""
    texts = np.array(["aten::mm", "a\x00b", "a\x00b12", "注意力", "aten::mm"], dtype=object)
    s = pd.Series(np.append(texts, None), dtype="string[python]", index=list(range(10, 16)), name="op")
    got = as_text(s)
    assert got.dtype == object and got.name == "op" and got.index.tolist() == list(range(10, 16))
    assert got.tolist() == [*texts.tolist(), ""]
    assert all(a is b for a, b in zip(got.iloc[:5], texts))


def test_inferred_text_is_kept_as_python_objects_with_or_without_pyarrow() -> None:
    """pandas 3 infers its ``str`` dtype for text in object arrays; with core imported it keeps
    the cells' own objects, in the environment with pyarrow too (CI runs this file there), so a
    frame read back cell by cell costs the same in both. pandas 2 infers ``object``."""
    texts = np.array(["aten::mm", "aten::add", "aten::mm"], dtype=object)
    frame_ = pd.DataFrame({"name": texts})
    column = frame_["name"]
    assert pd.get_option("mode.string_storage") == "python"
    if isinstance(column.dtype, pd.StringDtype):  # dtype-neutral: pandas 3's inferred column
        assert column.dtype.storage == "python"
        assert all(a is b for a, b in zip(column.to_numpy(dtype=object), texts))
    else:
        assert column.dtype == object


def _pandas_users_and_imports() -> tuple[set[str], dict[str, set[str]]]:
    """The core modules that import pandas anywhere, and every core module's core imports."""
    import ast

    from test_architecture import _runtime_imports, core_modules

    found = core_modules()
    modules = set(found) | {"perfcmp_core"}
    users: set[str] = set()
    graph: dict[str, set[str]] = {"perfcmp_core": set()}
    for name, (path, is_package) in found.items():
        graph[name] = _runtime_imports(path, name, is_package, modules)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n.split(".")[0] == "pandas" for n in names):
                users.add(name)
    return users, graph


def _reached(module: str, graph: dict[str, set[str]]) -> set[str]:
    """Every core module importing ``module`` imports (its packages' ``__init__`` included)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            parts = name.split(".")
            todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
            todo.extend(graph.get(name, ()))
    return seen


#: Core modules that use pandas without reaching compat, and why no text dtype is inferred there.
MAKE_NO_TEXT_FRAME = {
    "perfcmp_core.text_codes": "numbers object arrays with pd.factorize; compat imports it",
    "perfcmp_core.export.values": "reads the cells of a result table's columns back as Python values",
    "perfcmp_core.timeline": "groups the int64 (pid, tid) ids of the model's tables",
}


def test_every_core_module_using_pandas_pins_its_string_storage() -> None:
    """Whichever core module a process imports first, compat's string storage is set before it
    makes a frame: each module that uses pandas imports compat, directly or through others."""
    users, graph = _pandas_users_and_imports()
    missing = sorted(m for m in users - set(MAKE_NO_TEXT_FRAME)
                     if "perfcmp_core.compat" not in _reached(m, graph))
    assert missing == []
    assert set(MAKE_NO_TEXT_FRAME) <= users  # no stale entry


def test_as_text_keeps_an_object_text_column_as_it_is() -> None:
    s = pd.Series(["a", "b"], dtype=object, index=[3, 4], name="n")
    assert as_text(s) is s


def objects(values: object) -> int:
    """How many distinct Python objects the cells hold (equal texts may be separate objects)."""
    return len({id(v) for v in np.asarray(values, dtype=object)})


def test_one_text_fills_every_cell_with_one_object() -> None:
    """A Python ``str`` given to np.full / np.where / np.select becomes one new object per cell;
    ``one_text`` keeps it one object, in an object array."""
    n = 1000
    assert objects(np.full(n, "cpu_op", dtype=object)) == n  # what it avoids
    full = np.full(n, one_text("cpu_op"))
    assert full.dtype == object and full.tolist() == ["cpu_op"] * n and objects(full) == 1
    other = np.array(["x" * 20], dtype=object)[np.zeros(n, dtype="int64")]
    even = np.arange(n) % 2 == 0
    where = np.where(even, one_text("N/A"), other)
    assert where.dtype == object and objects(where) == 2
    assert where.tolist() == ["N/A" if i % 2 == 0 else "x" * 20 for i in range(n)]
    chosen = np.select([even, ~even], [one_text("enqueue"), one_text("dequeue")], one_text(""))
    assert chosen.dtype == object and objects(chosen) == 2
    assert chosen.tolist() == ["enqueue" if i % 2 == 0 else "dequeue" for i in range(n)]


@pytest.mark.parametrize("values", [
    pd.Series([10, 12, 10, -1] * 50, index=range(100, 300), name="plane"),
    pd.Series(np.array([7, 7, 300], dtype="uint16")),
    pd.Series([True, False, True]),
    pd.Series([2**63 - 1, -2**63, 2**63 - 1]),
])
def test_as_text_of_integers_writes_each_distinct_number_once(values: pd.Series) -> None:
    """Each distinct integer's text is one object shared by its rows, the same text pandas
    writes, with the index and name kept."""
    got = as_text(values)
    assert got.tolist() == [str(v) for v in values.tolist()]
    assert got.index.equals(values.index) and got.name == values.name
    assert objects(got) == values.nunique()


def test_every_loaders_text_columns_hold_one_object_per_distinct_text() -> None:
    """A text column that repeats a value holds that value once: a Text side's 517,776
    ``cpu_op`` cells were 28 MB of copies in every process holding the profile, and a Db side's
    150,328 enqueue/dequeue kinds another 8 MB. Every loader, every table of the schema."""
    paths = [ROOT / "fixtures" / p for p in (
        "gpu/base.pt.trace.json", "gpu_patterns/mi300_hip.pt.trace.json", "npu_text/base_ascend_pt",
        "npu_db/base_ascend_pt", "npu_ms/base_ascend_ms", "npu_variants/ms_db_ascend_ms",
        "npu_db_patterns/level1_ascend_pt", "npu_infer/dit_vae_ascend_pt")]
    checked = 0
    for path in paths:
        profile = load_profile(str(path), LoadOptions(use_cache=False))
        for table in SCHEMAS:
            df = getattr(profile, table, None)
            if df is None:
                continue
            for column in df.columns:
                if df[column].dtype == object and len(df):
                    cells = df[column].to_numpy()
                    assert objects(cells) == len(set(cells)), (path.name, table, column)
                    checked += 1
    assert checked > 100


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


@pytest.mark.parametrize("use_na_sentinel", [True, False])
def test_factorize_text_of_a_large_column_as_cell_by_cell(use_na_sentinel: bool) -> None:
    """A large column is factorised one cell per object (its cells numbered by object first):
    the codes and uniques are those of the whole column's, with equal texts in different
    objects, texts apart after a NUL, None and NaN objects among them, and from a Series."""
    from perfcmp_core import compat, text_codes

    rng = np.random.default_rng(11)
    pool = np.empty(10, dtype=object)
    pool[:] = ["a", "b", "a\x00b", "a\x00c", None, float("nan"), float("nan"), "", "".join(["a"]), "k" * 40]
    values = pool[rng.integers(0, len(pool), size=2 * text_codes.BY_OBJECT_MIN)]
    expected_codes, expected = compat._factorized(values, use_na_sentinel)
    for given in (values, pd.Series(values, dtype=object)):
        codes, uniques = factorize_text(given, use_na_sentinel=use_na_sentinel)
        assert codes.tolist() == expected_codes.tolist()
        assert len(uniques) == len(expected)
        assert all(a is b or (pd.isna(a) and pd.isna(b)) for a, b in zip(uniques, expected))
    assert "a\x00b" in uniques.tolist() and "a\x00c" in uniques.tolist()


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


def test_result_tables_hold_text_as_object_whatever_pandas_infers() -> None:
    """pandas 3 makes its own string dtype of text given as object arrays (pyarrow-backed where
    pyarrow is installed); a result Table keeps such columns as ``object``, each distinct text one
    object, with the values unchanged (a missing one None, as a writer reads it)."""
    from perfcmp_core.compare.result import Column, Table

    names = np.array(["aten::mm", "aten::add", "aten::mm", None, "aten::add"], dtype=object)
    data = pd.DataFrame({"name": names, "us": np.arange(5, dtype="float64")})
    table = Table("T", (Column("name", "Name"), Column("us", "Time")), data, (0, 0), (1, 1))
    column = table.data["name"]
    assert column.dtype == object
    assert column.tolist() == ["aten::mm", "aten::add", "aten::mm", None, "aten::add"]
    assert len({id(v) for v in column if v is not None}) == 2
    assert table.data["us"].dtype == "float64"


def test_object_frame_gives_what_the_inferred_round_trip_gives() -> None:
    """``object_frame`` keeps text-only object arrays as ``object`` holding their own cells: the
    frame a Table ends with after turning pandas' inferred ``str`` columns back
    (``string_objects``); columns with missing or other values take that round trip themselves."""
    names = np.array(["aten::mm", "aten::add", "aten::mm", ""], dtype=object)
    columns = {
        "name": names,
        "missing": np.array(["a", None, "b", np.nan], dtype=object),
        "mixed": np.array(["a", 1, 2.5, "b"], dtype=object),
        "number": np.arange(4, dtype="int64"),
        "empty_text": np.array(["", "", "", ""], dtype=object),
    }
    got = object_frame(columns)
    inferred = pd.DataFrame(columns)
    expected = inferred.assign(**{key: string_objects(inferred[key]) for key, dtype in inferred.dtypes.items()
                                  if isinstance(dtype, pd.StringDtype)})
    kept = {key for key, dtype in got.dtypes.items() if not isinstance(dtype, pd.StringDtype)}
    # pandas 3 infers ``str`` for the text column with missing values (pandas 2 infers nothing)
    inferred_missing = isinstance(inferred["missing"].dtype, pd.StringDtype)  # dtype-neutral: a test
    assert kept == {"name", "mixed", "number", "empty_text"} | (set() if inferred_missing else {"missing"})
    got = got.assign(**{key: string_objects(got[key]) for key in set(got.columns) - kept})
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got["name"].dtype == object
    assert all(a is b for a, b in zip(got["name"].tolist(), names.tolist()))
    # a single column, assigned
    frame = pd.DataFrame({"n": np.arange(4)})
    frame["name"] = object_text(names)
    assert frame["name"].dtype == object and frame["name"].tolist() == names.tolist()
    assert object_text(np.arange(3)) is not None and isinstance(object_text(np.arange(3)), np.ndarray)
