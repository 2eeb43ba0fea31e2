"""Parsing a GPU trace in pieces gives exactly what parsing it whole gives.

The loader cuts the ``traceEvents`` array into pieces of ``PIECE_BYTES`` (1 MB) so that a large
trace never holds all its event dicts at once (core/load/gpu_read.py). These tests shrink the
piece size so that the small fixtures are cut hundreds of times, including at ``}, {`` inside
strings and nested objects, and compare every table and the metadata with the whole-file parse
(the loader's own fallback, forced).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from perfcmp_core.load import gpu_events, gpu_read, load_profile
from perfcmp_core.model import SCHEMAS, Profile
from perfcmp_core.notes import Note
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "gpu-real" / "trace_diff_test.pt.trace.json.gz"


def _load(path: Path, **opts: Any) -> Profile:
    return load_profile(str(path), LoadOptions(use_cache=False, **opts))


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch, **opts: Any) -> Profile:
    with monkeypatch.context() as m:
        m.setattr(gpu_read, "_parse_in_pieces", lambda raw, builder: None)
        return _load(path, **opts)


def _pieces(path: Path, monkeypatch: pytest.MonkeyPatch, size: int, *, whole: bool = False,
            typed: bool = True, **opts: Any) -> tuple[Profile, int]:
    """The profile parsed in pieces of ``size`` bytes, and how many pieces were parsed; unless
    ``whole``, falling back to the whole-file parse fails the test. ``typed=False`` reads every
    piece with orjson (the path of pieces msgspec refuses)."""
    profile, counts = _counted_pieces(path, monkeypatch, size, whole=whole, typed=typed, **opts)
    return profile, counts["typed"] + counts["dicts"]


def _counted_pieces(path: Path, monkeypatch: pytest.MonkeyPatch, size: int, *,
                    whole: bool = False, typed: bool = True,
                    **opts: Any) -> tuple[Profile, dict[str, int]]:
    """As :func:`_pieces`, with the pieces counted by decoder: ``typed`` (msgspec structs) and
    ``dicts`` (orjson)."""
    counts = {"typed": 0, "dicts": 0}
    real_add, real_add_typed = gpu_events.Builder.add, gpu_events.Builder.add_typed
    real_parse = gpu_read._parse

    def add(self: Any, events: list[Any], text: bytes) -> None:
        counts["dicts"] += 1
        real_add(self, events, text)

    def add_typed(self: Any, view: Any, text: bytes) -> None:
        counts["typed"] += 1
        real_add_typed(self, view, text)

    def parse(*args: Any) -> Any:
        assert whole, "fell back to parsing the whole file"
        return real_parse(*args)

    with monkeypatch.context() as m:
        m.setattr(gpu_read, "PIECE_BYTES", size)
        m.setattr(gpu_events.Builder, "add", add)
        m.setattr(gpu_events.Builder, "add_typed", add_typed)
        m.setattr(gpu_read, "_parse", parse)
        if not typed:
            m.setattr(gpu_read, "decode", lambda text: None)
        return _load(path, **opts), counts


def _assert_same(got: Profile, want: Profile) -> None:
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    assert got.meta == want.meta


@pytest.mark.parametrize("name", ["base.pt.trace.json", "comp.pt.trace.json",
                                  "base.pt.trace.json.gz"])
def test_fixture_traces_parse_the_same_in_pieces(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = ROOT / "fixtures" / "gpu" / name
    want = _whole(path, monkeypatch)
    got, pieces = _pieces(path, monkeypatch, 4096)
    assert pieces > 50  # ~475 kB in 4 kB pieces: really cut, not one piece
    _assert_same(got, want)
    # A real amount of data compared: every table the fixture fills.
    assert len(want.ops) > 500 and len(want.kernels) > 200 and len(want.memory) > 100
    assert len(want.pyfuncs) > 100 and len(want.fwdbwd) > 0


def _tricky_trace(tmp_path: Path) -> Path:
    """Events whose text holds ``}, {`` inside strings and nested objects, non-object entries,
    string pids/tids, memory events and flows — every one a place where a cut must not stay."""
    events: list[Any] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "x"}}]
    for i in range(40):
        t = 1000 + i * 100
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op}}, {{{i}", "pid": 1, "tid": "main",
             "ts": t, "dur": 50, "args": {"Input Dims": [[i, 2], []], "Input type": ["float", ""],
                                          "Call stack": "a.py(1): f}, {g;b.py(2): h",
                                          "nested": [{"x": 1}, {"y": [{"z": "}, {"}]}]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
             "tid": "main", "ts": t + 10, "dur": 5, "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": t + 20,
             "dur": 30, "args": {"correlation": i, "stream": 7, "device": 0,
                                 "grid": [{"a": 1}, {"b": 2}]}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 1, "tid": "main",
             "ts": t + 10},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 0, "tid": 7, "ts": t + 20,
             "bp": "e"},
            {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": t + 1,
             "args": {"Device Id": 0, "Addr": 4096 + i % 4, "Bytes": 512 if i % 2 else -512,
                      "Total Allocated": 512 * (i % 2), "Total Reserved": 2048}},
            7 if i % 10 == 0 else [1, {"a": "}, {"}],
        ]
    events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1,
                   "tid": "main", "ts": 900, "dur": 5000, "args": {}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A]100"}],
           "traceEvents": events, "traceName": "]x]", "distributedInfo": {"rank": 3},
           "extra": [[1], {"k": "]"}]}
    path = tmp_path / "tricky.pt.trace.json"
    path.write_bytes(json.dumps(doc, indent=1).encode())
    return path


@pytest.mark.parametrize("size", [1, 64, 1000])
def test_cuts_inside_strings_and_nested_objects_move_on(tmp_path: Path, size: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = _tricky_trace(tmp_path)
    want = _whole(path, monkeypatch)
    got, pieces = _pieces(path, monkeypatch, size)
    assert pieces > 20
    _assert_same(got, want)
    # What was read is what the file says (not merely the same as the other path).
    assert got.meta.rank == 3
    assert len(got.ops) == 81 and len(got.kernels) == 40 and len(got.memory) == 40
    assert got.ops["name"].str.contains("}, {", regex=False).sum() == 40
    assert (got.kernels["op_row"] >= 0).all()
    assert Note("40 traceEvents entries are not objects; ignored") in got.meta.notes


def test_unusual_files_fall_back_to_the_whole_parse(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A second ``traceEvents`` key (only the last counts, as in any JSON reader) and NaN tokens
    cannot be cut safely: the whole file is parsed, with the same result as before."""
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 3,
          "args": {"stream": 7}}
    twice = tmp_path / "twice.pt.trace.json"
    twice.write_bytes(b'{"traceEvents": [], "x": 1, "traceEvents": [' + orjson.dumps(ev) + b"]}")
    assert _pieces(twice, monkeypatch, 1, whole=True)[0].kernels["name"].tolist() == ["k"]

    nan = tmp_path / "nan.pt.trace.json"
    nan.write_bytes(b'{"traceEvents": [' + orjson.dumps(ev) + b', {"ph": "X", "cat": "kernel", '
                    b'"name": "k2", "pid": 0, "tid": 7, "ts": 20, "dur": NaN}]}')
    got = _pieces(nan, monkeypatch, 1, whole=True)[0]
    assert got.kernels["name"].tolist() == ["k", "k2"]
    assert got.kernels["dur_ns"].tolist() == [3000, 0]
    assert any("NaN/Infinity" in n.text for n in got.meta.notes)


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data/gpu-real not present")
def test_real_trace_parses_the_same_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    want = _whole(REAL, monkeypatch)
    got, pieces = _pieces(REAL, monkeypatch, 128 << 10)  # 32 MB in 128 kB pieces
    assert pieces >= 250
    _assert_same(got, want)
