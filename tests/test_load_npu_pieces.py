"""An NPU ``trace_view.json`` parsed in pieces gives exactly what parsing it whole gives.

The Text loader cuts the trace's top-level array into ≈ 1 MB pieces and decodes each into msgspec
structs of the fields it reads, or into orjson dicts where msgspec cannot read a piece like orjson
(core/load/npu_trace.py, npu_decode.py, pieces.py). These tests shrink the pieces so the fixtures
are cut hundreds of times, and require every table and the metadata to equal the whole-file
parse (the loader's own fallback, forced) — on every fixture Text export and on the real ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.load import load_profile, npu_decode, npu_trace
from perfcmp_core.model import SCHEMAS, Profile
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data"
OUT = "ASCEND_PROFILER_OUTPUT"
TEXT_FIXTURES = sorted(p.parent.parent for p in (ROOT / "fixtures").glob(f"npu_*/*/{OUT}/trace_view.json"))
REAL_RUNS = sorted(p.parent.parent for p in (REAL / "npu-real-runs" / "text").glob(f"*/*/{OUT}/trace_view.json"))


def _load(path: Path, monkeypatch: pytest.MonkeyPatch, *, size: int | None = None, whole: bool = False,
          typed: bool = True) -> tuple[Profile, dict[str, int]]:
    """The profile of ``path`` parsed whole, or in pieces of ``size`` bytes (then falling back to
    the whole-file parse fails the test), and the pieces read by each decoder."""
    counts = {"typed": 0, "dicts": 0}
    real_typed, real_dicts = npu_trace._Builder.add_typed, npu_trace._Builder.add

    def add_typed(self: Any, view: Any, text: bytes) -> None:
        counts["typed"] += 1
        real_typed(self, view, text)

    def add(self: Any, events: list[Any], text: bytes) -> None:
        counts["dicts"] += 1
        real_dicts(self, events, text)

    def no_whole(path: Path, raw: bytes) -> list[Any]:
        raise AssertionError("fell back to parsing the whole file")

    with monkeypatch.context() as m:
        m.setattr(npu_trace._Builder, "add_typed", add_typed)
        m.setattr(npu_trace._Builder, "add", add)
        if whole:
            m.setattr(npu_trace, "_in_pieces", lambda raw, builder: False)
        else:
            m.setattr(npu_trace, "PIECE_BYTES", size)
            m.setattr(npu_trace, "_parse_whole", no_whole)
        if not typed:
            m.setattr(npu_decode, "decode", lambda text: None)
        return load_profile(str(path), LoadOptions(use_cache=False, force=True)), counts


def _assert_same(got: Profile, want: Profile) -> None:
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    assert got.meta == want.meta


def _three_ways(path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> tuple[Profile, dict[str, int]]:
    want, _ = _load(path, monkeypatch, whole=True)
    typed, counts = _load(path, monkeypatch, size=size)
    dicts, dict_counts = _load(path, monkeypatch, size=size, typed=False)
    assert dict_counts["typed"] == 0 and dict_counts["dicts"] > 1
    _assert_same(typed, want)
    _assert_same(dicts, want)
    return want, counts


@pytest.mark.parametrize("run", TEXT_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_trace_view_reads_the_same_in_pieces(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want, counts = _three_ways(run, monkeypatch, 8 << 10)
    assert counts["typed"] > 20 and counts["typed"] > 5 * counts["dicts"]
    assert len(want.ops) > 50 and len(want.kernels) > 20  # a real amount of data compared


@pytest.mark.skipif(not REAL_RUNS, reason="../shared/data/npu-real-runs not present")
@pytest.mark.parametrize("run", REAL_RUNS or [None], ids=lambda p: f"{p.parent.name}/{p.name}" if p else "")
def test_real_text_exports_read_the_same_in_pieces(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want, counts = _three_ways(run, monkeypatch, 64 << 10)
    assert counts["typed"] > 10
    assert len(want.kernels) > 100 and len(want.ops) > 100


@pytest.mark.skipif(not (REAL / "npu-real" / "trace_view.partial.json").exists(),
                    reason="../shared/data/npu-real not present")
def test_real_partial_trace_reads_the_same_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    _three_ways(REAL / "npu-real" / "trace_view.partial.json", monkeypatch, 16 << 10)


def _trace(tmp_path: Path, events: list[Any], raw: bytes | None = None) -> Path:
    path = tmp_path / "trace_view.json"
    path.write_bytes(raw if raw is not None else orjson.dumps(events))
    return path


_META = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}}]


def _task(i: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "name": f"k{i}", "pid": 7, "tid": 2, "ts": f"1736413971{i:06d}.123", "dur": 1.5,
            "args": {"Task Type": "AI_CORE", "Stream Id": 2, "Task Id": i, "connection_id": i, **args}}


@pytest.mark.parametrize("odd", [
    {"ts": 1736413971000007.5},  # a number where the exporter writes text
    {"dur": "2.25"},  # MindSpore writes dur as text
    {"args": {"Task Type": ["AI_CORE"]}},  # a list where text belongs: that piece goes to orjson
    {"args": None},
    {"pid": "7"},
    {"args": {"Stream Id": 2**64 + 1, "Task Type": "AI_CORE"}},  # beyond 64 bits: orjson's float
    {"name": None},
])
def test_odd_values_read_the_same_in_pieces(odd: dict[str, Any], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    events = _META + [_task(i) for i in range(30)] + [{**_task(30), **odd}] + [_task(i) for i in range(31, 60)]
    raw = b"[" + b", ".join(orjson.dumps(e) if "Stream Id" not in str(odd) else
                            __import__("json").dumps(e).encode() for e in events) + b"]"
    path = _trace(tmp_path, events, raw)
    want, counts = _three_ways(path, monkeypatch, 300)
    assert counts["typed"] > 0
    assert len(want.kernels) == 60


def test_a_broken_trace_gives_the_whole_file_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = orjson.dumps(_META + [_task(i) for i in range(40)])
    cut = raw.index(b"},{", len(raw) // 2) + 2  # between two events: not valid JSON there
    path = _trace(tmp_path, [], raw[:cut] + b"!" + raw[cut:])
    with pytest.raises(InputError) as exc:
        load_profile(str(path), LoadOptions(use_cache=False))
    assert "is not valid JSON" in exc.value.message and "trace_view.json" in str(exc.value.path)


@pytest.mark.parametrize("raw", [b'{"events": []}', b"7", b'["a", 1] x'])
def test_what_is_not_an_array_of_events_is_refused_as_before(raw: bytes, tmp_path: Path) -> None:
    path = _trace(tmp_path, [], raw)
    with pytest.raises(InputError) as exc:
        npu_trace.read_trace(path)
    assert "expected a JSON array of events" in exc.value.message or "is not valid JSON" in exc.value.message


def test_an_empty_array_and_non_objects_read_as_no_events(tmp_path: Path) -> None:
    assert len(npu_trace.read_trace(_trace(tmp_path, [], b" [ ] \n")).ts_ns) == 0
    ev = npu_trace.read_trace(_trace(tmp_path, [], b'[1, "x", {"ph": "X", "ts": "1.000"}, [2]]'))
    assert ev.is_ph("X").tolist() == [True] and ev.ts_ns.tolist() == [1000]


def test_trace_args_dropped_once_read(tmp_path: Path) -> None:
    """The loader drops each arg of the trace once its readers are done (memory): the other args
    of the group stay readable, a dropped one is a KeyError rather than a silent "absent", and
    a group with no args left goes with its rows."""
    path = tmp_path / "trace_view.json"
    path.write_bytes(orjson.dumps([
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": "1.000", "dur": 1,
         "args": {"Input Dims": "[[1]]", "Call stack": "a.py"}},
        {"ph": "X", "name": "AI_CORE_TASK", "pid": 3, "tid": 4, "ts": "2.000", "dur": 1,
         "args": {"Task Type": "AI_CORE", "Task Id": 7, "connection_id": 9}},
    ]))
    ev = npu_trace.read_trace(path)
    rows = pd.RangeIndex(2).to_numpy()
    assert ev.arg_texts(rows, "Task Id").tolist() == ["", "7"]
    ev.drop_args("Task Type", "Stream Id", "Physic Stream Id", "Task Id")
    assert ev.arg_values(rows, "connection_id") == [None, 9]
    with pytest.raises(KeyError):
        ev.arg_values(rows, "Task Id")
    ev.drop_args("connection_id", "stream id")
    assert "device" not in ev.arg_groups
    assert ev.arg_texts(rows, "Call stack").tolist() == ["a.py", ""]
