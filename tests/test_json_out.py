"""``--json`` output: every table with every column, one value rule, never overwriting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

from perfcmp_core import __version__
from perfcmp_core.compare.result import ComparisonResult, Column, Table
from perfcmp_core.notes import ABSENT, Note
from perfcmp_core.errors import InputError
from perfcmp_core.export.json_out import write_json

COLUMNS = (
    Column("name", "Operator Name", "key", "bold", width=30),
    Column("base", "Device Duration(us)", "base", "float", "us"),
    Column("comp", "Device Duration(us)", "comparison", "float", "us"),
    Column("ratio", "Diff Ratio", "ratio", "percent"),
)


def result() -> ComparisonResult:
    ops = pd.DataFrame(
        {
            "name": ["aten::mm", "aten::add", None],
            "base": [2.0, 0.0, np.nan],
            "comp": [3.0, 1.5, np.nan],
            "ratio": [1.5, np.inf, np.nan],
            "_level": np.array([0, 1, 2], dtype=np.int64),
            "_is_total": [True, False, False],
        }
    )
    tree = Table("ModuleTree", COLUMNS, ops.iloc[:1], (1, 1), (2, 2), title="Module tree")
    res = ComparisonResult("gpu/trace.json", "npu/ascend_pt")
    res.add(Table("OperatorCompare", COLUMNS, ops, (1, 1), (2, 2), title="Operators", default_sort="ratio",
                  notes=["kernels linked by correlation id"]))
    res.add(tree)
    res.add(Table("KernelCompare", COLUMNS, ops.iloc[:0], (1, 1), (2, 2),
                  absent_reason="GPU side has no kernel_details"))
    res.summary = {"base": {"E2E Time(ms)": np.float64(20.25), "Cube Num": np.int64(7)},
                   "comparison": {"E2E Time(ms)": float("inf"), "Mem": float("nan")},
                   "text": "Model Profiling Time Distribution\n..."}
    res.notes = [Note("memory comparison skipped: no memory records", ABSENT, screens=("memory",))]
    res.options = {"enabled": frozenset({"operator", "api"}), "op_name_map": (("a", "b"),),
                   "out": Path("/tmp/o")}
    return res


def load(path: Path) -> dict:
    return orjson.loads(path.read_bytes())


def test_document_holds_every_table_and_value(tmp_path: Path) -> None:
    path = write_json(result(), tmp_path / "r.json")
    assert path == tmp_path / "r.json"
    doc = load(path)
    assert doc["tool"] == "perfcmp-tui" and doc["version"] == __version__
    assert (doc["base_label"], doc["comp_label"]) == ("gpu/trace.json", "npu/ascend_pt")
    # UI-only and empty tables too, in result order.
    assert list(doc["tables"]) == ["OperatorCompare", "ModuleTree", "KernelCompare"]
    ops = doc["tables"]["OperatorCompare"]
    assert ops["rows"] == [
        {"name": "aten::mm", "base": 2.0, "comp": 3.0, "ratio": 1.5, "_level": 0, "_is_total": True},
        {"name": "aten::add", "base": 0.0, "comp": 1.5, "ratio": "INF", "_level": 1, "_is_total": False},
        {"name": None, "base": None, "comp": None, "ratio": None, "_level": 2, "_is_total": False},
    ]
    assert ops["columns"][1] == {"key": "base", "header": "Device Duration(us)", "role": "base",
                                 "fmt": "float", "unit": "us", "width": 20, "export": True}
    assert ops["base_span"] == [1, 1] and ops["default_sort"] == "ratio" and ops["title"] == "Operators"
    assert ops["notes"] == ["kernels linked by correlation id"]
    kernel = doc["tables"]["KernelCompare"]
    assert kernel["rows"] == [] and kernel["absent_reason"] == "GPU side has no kernel_details"
    assert doc["summary"] == {"base": {"E2E Time(ms)": 20.25, "Cube Num": 7},
                              "comparison": {"E2E Time(ms)": "INF", "Mem": None},
                              "text": "Model Profiling Time Distribution\n..."}
    assert doc["notes"] == ["memory comparison skipped: no memory records"]
    assert doc["options"] == {"enabled": ["api", "operator"], "op_name_map": [["a", "b"]], "out": "/tmp/o"}
    assert doc["advisor"] is None


def test_advisor_is_included(tmp_path: Path) -> None:
    advisor = Table("Advisor", (Column("finding", "Finding"),), pd.DataFrame({"finding": ["mm slower"]}),
                    (-1, -1), (-1, -1))
    doc = load(write_json(result(), tmp_path / "r.json", advisor=advisor))
    assert doc["advisor"]["rows"] == [{"finding": "mm slower"}]
    inside = result()
    inside.add(advisor)  # the pipeline's way: a table named Advisor
    doc = load(write_json(inside, tmp_path / "r.json"))
    assert doc["advisor"]["rows"] == [{"finding": "mm slower"}] and "Advisor" in doc["tables"]


def test_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("keep me")
    first = write_json(result(), target)
    second = write_json(result(), target)
    assert (first.name, second.name) == ("r_1.json", "r_2.json")
    assert target.read_text() == "keep me"
    assert load(first) == load(second)


def test_missing_parent_is_created(tmp_path: Path) -> None:
    path = write_json(result(), tmp_path / "a" / "b" / "r.json")
    assert load(path)["tables"]["OperatorCompare"]["rows"][0]["name"] == "aten::mm"


def test_path_that_is_a_directory_or_under_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        write_json(result(), tmp_path)
    assert err.value.path == str(tmp_path) and "directory" in err.value.message
    blocker = tmp_path / "f"
    blocker.write_text("x")
    with pytest.raises(InputError) as err:
        write_json(result(), blocker / "r.json")
    assert err.value.path == str(blocker)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
