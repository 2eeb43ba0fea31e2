"""An NPU ``trace_view.json`` parsed in two processes (core/load/halves.py) gives the single read.

The second part's ``ph`` / ``cat`` codes are renumbered into the first part's tables and its row
positions offset by the first part's count (``npu_trace._Builder.merge``); every column of
:class:`~perfcmp_core.load.npu_trace.Events` must equal the single-process read, on every fixture
Text export cut in small pieces, on the real Text runs when ../shared is present, and on a trace
whose second part brings texts the first never met. A child that fails falls back.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfcmp_core.load import halves, npu_trace, pieces
from perfcmp_core.processes import start_method

ROOT = Path(__file__).resolve().parents[1]
OUT = "ASCEND_PROFILER_OUTPUT"
TRACES = sorted((ROOT / "fixtures").glob(f"npu_*/*/{OUT}/trace_view.json"))
REAL = sorted((ROOT.parent / "shared" / "data" / "npu-real-runs" / "text").glob(f"*/*/{OUT}/trace_view.json"))

pytestmark = pytest.mark.skipif(start_method() != "fork", reason="the split needs fork")


def _assert_same(got: npu_trace.Events, want: npu_trace.Events) -> None:
    for f in fields(npu_trace.Events):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if f.name == "arg_groups":
            assert a.keys() == b.keys()
            for group, (rows, columns) in b.items():
                assert a[group][0].tolist() == rows.tolist(), group
                assert a[group][1].keys() == columns.keys()
                for key, values in columns.items():
                    assert a[group][1][key].dtype == values.dtype, (group, key)
                    assert a[group][1][key].tolist() == values.tolist(), (group, key)
        elif f.name == "id_column":
            for x, y in zip(a, b):
                assert x.dtype == y.dtype and x.tolist() == y.tolist()
        elif isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.tolist() == b.tolist(), f.name
        else:
            assert a == b, f.name


def _split_happens(path: Path, fraction: float) -> bool:
    return npu_trace._in_two(pieces.read_file(path), fraction) is not None


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(ROOT / "fixtures").parts[0:2]))
def test_fixture_traces_read_in_two_processes_as_in_one(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(npu_trace, "PIECE_BYTES", 4096)
    want = npu_trace.read_trace(path)
    assert len(want.name) > 100
    for fraction in (0.2, 0.6):
        assert _split_happens(path, fraction)
        _assert_same(npu_trace.read_trace(path, fraction), want)
    assert mp.active_children() == []


def test_texts_first_met_in_the_second_part_are_numbered_after_the_first_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ph/cat codes number texts in the order the file first shows them: the second part's new
    ones ("f", "s", "hccl") come after the first part's, and texts both parts hold keep the first
    part's code."""
    monkeypatch.setattr(npu_trace, "PIECE_BYTES", 500)
    events: list[Any] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "CANN"}}]
    for i in range(100):
        late = i >= 60
        events.append({"ph": "X", "cat": "HCCL" if late else "cpu_op", "name": f"op{i % 4}",
                       "pid": 1, "tid": 2, "ts": f"{1000 + i}.500", "dur": 1.5,
                       "args": {"Call stack": "a.py(1): f" if not late else None, "Input Dims": "1,2"}})
        if late:
            events.append({"ph": "s" if i % 2 else "f", "cat": "async_npu", "name": "flow", "id": f"{i}",
                           "pid": 1, "tid": 2, "ts": f"{1000 + i}.500"})
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events, indent=1))
    want = npu_trace.read_trace(path)
    assert want.ph_values == ["M", "X", "f", "s"] and want.cat_values == ["", "cpu_op", "hccl", "async_npu"]
    assert _split_happens(path, 0.5)
    got = npu_trace.read_trace(path, 0.5)
    _assert_same(got, want)
    assert len(got.id_column[0]) == 40


def _child_raises(*args: Any) -> None:
    raise RuntimeError("the child's part failed")


def test_a_failing_child_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    path = TRACES[0]
    want = npu_trace.read_trace(path)
    monkeypatch.setattr(halves, "_second", _child_raises)
    assert not _split_happens(path, 0.5)
    _assert_same(npu_trace.read_trace(path, 0.5), want)
    assert mp.active_children() == []


@pytest.mark.skipif(not REAL, reason="../shared/data/npu-real-runs not present")
@pytest.mark.parametrize("path", REAL[:2], ids=lambda p: p.parent.parent.name)
def test_real_traces_read_in_two_processes_as_in_one(path: Path) -> None:
    want = npu_trace.read_trace(path)
    assert _split_happens(path, 0.5)
    _assert_same(npu_trace.read_trace(path, 0.5), want)


def test_an_npu_text_side_counts_by_its_trace_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pair splits the larger NPU Text side as it does a GPU trace (core/pair.py)."""
    from perfcmp_core import pair
    from perfcmp_core.load import detect
    from perfcmp_core.options import LoadOptions

    small = ROOT / "fixtures" / "npu_ms" / "base_ascend_ms" / OUT / "trace_view.json"
    large = ROOT / "fixtures" / "npu_text" / "base_ascend_pt" / OUT / "trace_view.json"
    assert large.stat().st_size >= 1.5 * small.stat().st_size
    monkeypatch.setattr(pair, "SPLIT_RATIO", 1.5)
    sides = [detect(str(p.parent.parent)) for p in (small, large)]
    assert [pair._trace_bytes(s) for s in sides] == [small.stat().st_size, large.stat().st_size]
    monkeypatch.setattr(pair, "SPLIT_MIN_BYTES", 0)
    opts = LoadOptions(use_cache=False)
    assert pair.split_larger(*sides, opts, opts) == (opts, LoadOptions(use_cache=False, split=pair.SPLIT_FRACTION))
