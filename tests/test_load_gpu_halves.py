"""A GPU trace parsed in two processes (core/load/halves.py) gives exactly the single read.

The larger side of an unbalanced pair has its ``traceEvents`` cut near a fraction: a forked
child parses the rest and sends its columns back. These tests compare every :class:`Events`
array, the field columns, the top-level object and the notes with the single-process read, on
the fixtures cut in small pieces, on a file whose chosen cut lies inside a string (the split
gives up and the single read runs), with pid/tid texts on both sides of the cut, and on the
real A100 trace; and a failing or dying child falls back and leaves no process behind.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfcmp_core import pair
from perfcmp_core.errors import InputError
from perfcmp_core.load import detect, gpu_read, halves, load_profile, pieces
from perfcmp_core.load.gpu_events import Events
from perfcmp_core.notes import Note
from perfcmp_core.options import LoadOptions
from perfcmp_core.processes import start_method

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "gpu"
REAL = ROOT.parent / "shared" / "data" / "gpu-real" / "trace_diff_test.pt.trace.json.gz"

pytestmark = pytest.mark.skipif(start_method() != "fork", reason="the split needs fork")


def _read(path: Path, split: float = 0.0) -> tuple[dict[str, Any], Events, list[Note]]:
    notes: list[Note] = []
    doc, ev = gpu_read.read_trace(path, LoadOptions(split=split), notes)
    return doc, ev, notes


def _assert_same(got: tuple[dict[str, Any], Events, list[Note]],
                 want: tuple[dict[str, Any], Events, list[Note]]) -> None:
    (doc, ev, notes), (want_doc, want_ev, want_notes) = got, want
    assert doc == want_doc
    assert notes == want_notes
    for key in ("role", "ph", "cat", "pid", "tid", "ts", "dur", "order"):
        a, b = getattr(ev, key), getattr(want_ev, key)
        assert a.dtype == b.dtype, key
        assert a.tolist() == b.tolist(), key
    assert ev.fields.keys() == want_ev.fields.keys()
    for role, columns in want_ev.fields.items():
        assert ev.fields[role].keys() == columns.keys()
        for key, want_col in columns.items():
            col = ev.fields[role][key]
            assert col.dtype == want_col.dtype, (role, key)
            assert col.tolist() == want_col.tolist(), (role, key)


def _split_happens(path: Path, fraction: float) -> bool:
    """Whether the two-process read itself succeeds (not its fallback to one process)."""
    return gpu_read._parse_in_two(gpu_read._read_bytes(path, None), LoadOptions(split=fraction)) is not None


@pytest.mark.parametrize("name", ["base.pt.trace.json", "comp.pt.trace.json", "base.pt.trace.json.gz"])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_fixture_traces_read_in_two_processes_as_in_one(name: str, fraction: float,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_read, "PIECE_BYTES", 4096)  # both parts cut in many pieces
    path = FIXTURES / name
    assert _split_happens(path, fraction)
    want = _read(path)
    _assert_same(_read(path, fraction), want)
    assert len(want[1].role) > 2000 and len(want[1].rows(2)) > 200  # kernels on both sides of the cut
    assert mp.active_children() == []


def _text_ids_trace(tmp_path: Path) -> Path:
    """Events with text pids and tids (their codes are numbered over the whole file, the
    positions of the second part's offset by the first's count), names holding ``}, {`` (a cut
    inside a string), a nested ``}, {``, entries that are not objects, and a negative dur."""
    events: list[Any] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "x"}}]
    for i in range(200):
        t = 1000 + i * 100
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op}}, {{{i}", "pid": f"host{i % 3}",
             "tid": f"thread {i % 7}", "ts": t, "dur": 50 if i % 50 else -5,
             "args": {"Input Dims": [[i, 2], []], "Input type": ["float", ""],
                      "nested": [{"x": 1}, {"y": "}, {"}]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": f"host{i % 3}",
             "tid": f"thread {i % 7}", "ts": t + 10, "dur": 5, "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7 if i < 100 else "s9",
             "ts": t + 20, "dur": 30, "args": {"correlation": i, "stream": 7, "device": 0}},
            7 if i % 40 == 0 else {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": t + 1,
                                   "args": {"Device Id": 0, "Bytes": 512, "Total Allocated": 512,
                                            "Total Reserved": 2048, "Addr": 4096}},
        ]
    path = tmp_path / "ids.pt.trace.json"
    path.write_bytes(json.dumps({"traceEvents": events, "traceName": "]x]"}, indent=1).encode())
    return path


def _span(raw: bytes) -> tuple[int, int]:
    """Where the events array's items start, and its closing ``]``."""
    return gpu_read._ARRAY_OPEN.search(raw).end(), raw.rindex(b"]", 0, raw.rindex(b"traceName"))


def _fraction_at(path: Path, position: int) -> float:
    """The split fraction whose cut search starts at ``position`` of the file."""
    start, end = _span(path.read_bytes())
    return (position - start + 0.5) / (end - start)


def test_text_pids_and_tids_keep_their_codes_across_the_cut(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_read, "PIECE_BYTES", 2000)
    path = _text_ids_trace(tmp_path)
    want = _read(path)
    for fraction in (0.25, 0.5, 0.75):
        assert _split_happens(path, fraction)
        got = _read(path, fraction)
        _assert_same(got, want)
    ev = want[1]
    # What was read is what the file says: 3 pid texts and 7 tid texts (+ "s9") as codes ≤ -2.
    assert sorted(set(ev.pid[ev.pid <= -2].tolist())) == [-4, -3, -2]
    assert len(set(ev.tid[ev.tid <= -2].tolist())) == 8
    assert Note("5 traceEvents entries are not objects; ignored") in want[2]
    assert Note("4 events with a negative or non-numeric dur are counted as 0 µs") in want[2]


def test_a_cut_inside_a_string_moves_on_or_falls_back_to_the_single_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_read, "PIECE_BYTES", 2000)
    path = _text_ids_trace(tmp_path)
    raw = path.read_bytes()
    start, end = _span(raw)
    inside = raw.index(b'op}, {100"')  # the name's own "}, {": the first boundary after it
    nested = raw.index(b"\"x\": 1", raw.index(b"op}, {120\"")) + 10
    want = _read(path)
    for at in (inside, nested):
        fraction = _fraction_at(path, at)
        # The cut moves on to the next true boundary: past the string, past the nested object.
        cut = halves.cut_near(raw, start, end, fraction)
        assert cut is not None and raw[cut[1]:cut[1] + 20].startswith(b'{\n   "ph": "X"')
        assert cut[0] > at
        assert _split_happens(path, fraction)
        _assert_same(_read(path, fraction), want)
        # Taken as it is (the check that moves it disabled), the cut is refused by the first
        # part's parse, and the file is read in one process.
        with monkeypatch.context() as m:
            m.setattr(halves, "_starts_events", lambda *args: True)
            assert halves.cut_near(raw, start, end, fraction)[0] < at + 40
            assert not _split_happens(path, fraction)
            _assert_same(_read(path, fraction), want)
    assert mp.active_children() == []


def _child_raises(*args: Any) -> None:
    raise RuntimeError("the child's part failed")


def _child_dies(*args: Any) -> None:
    os._exit(9)


@pytest.mark.parametrize("child", [_child_raises, _child_dies])
def test_a_failing_child_falls_back_and_leaves_no_process(child: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = FIXTURES / "base.pt.trace.json"
    want = _read(path)
    monkeypatch.setattr(halves, "_second", child)
    got = _read(path, 0.5)
    _assert_same(got, want)
    assert mp.active_children() == []


def test_a_first_part_that_gives_up_stops_the_child(tmp_path: Path) -> None:
    """An integer beyond float range in the first part (msgspec takes it, orjson does not): the
    single read falls back to the whole-file parse, which reports it; so does the split read."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 + i,
               "dur": 3, "args": {"stream": 7}} for i in range(400)]
    text = json.dumps({"traceEvents": events}).replace('"ts": 11,', '"ts": 1' + "0" * 400 + ",", 1)
    path = tmp_path / "huge.pt.trace.json"
    path.write_text(text)
    assert not _split_happens(path, 0.5)
    assert mp.active_children() == []
    errors = []
    for split in (0.0, 0.5):
        with pytest.raises(InputError) as caught:
            _read(path, split)
        errors.append(caught.value.message)
    assert errors[0] == errors[1] and "is not valid JSON (number is infinity" in errors[0]


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data/gpu-real not present")
def test_real_trace_reads_in_two_processes_as_in_one() -> None:
    assert _split_happens(REAL, 0.5)
    want = _read(REAL)
    _assert_same(_read(REAL, 0.5), want)
    assert len(want[1].role) > 100_000


# ------------------------------------------------------------------------------- the pair


def test_the_larger_side_of_an_unbalanced_pair_is_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = detect(str(FIXTURES / "base.pt.trace.json"))
    gz = detect(str(FIXTURES / "base.pt.trace.json.gz"))
    doc = json.loads((FIXTURES / "comp.pt.trace.json").read_text())
    doc["traceEvents"] = doc["traceEvents"] * 3
    large_path = tmp_path / "large.pt.trace.json"
    large_path.write_text(json.dumps(doc))
    large = detect(str(large_path))
    # a .gz counts by its content (gzip's recorded size), not its compressed bytes
    assert pair._trace_bytes(gz) == pair._trace_bytes(small) == (FIXTURES / "base.pt.trace.json").stat().st_size
    opts = LoadOptions(use_cache=False)
    assert pair.split_larger(small, large, opts, opts) == (opts, opts)  # below SPLIT_MIN_BYTES
    monkeypatch.setattr(pair, "SPLIT_MIN_BYTES", 1 << 20)
    split = LoadOptions(use_cache=False, split=pair.SPLIT_FRACTION)
    assert pair.split_larger(small, large, opts, opts) == (opts, split)
    assert pair.split_larger(large, gz, opts, opts) == (split, opts)
    assert pair.split_larger(small, gz, opts, opts) == (opts, opts)  # balanced
    # Both sides loaded through the pair as through one process each.
    got = {side: profile for side, profile, _, _ in pair.iter_pair(small, large, opts, opts, parallel=True)}
    assert mp.active_children() == []
    for side, src in (("base", small), ("comparison", large)):
        want = load_profile(src.given, opts)
        for table in ("ops", "kernels", "memory", "pyfuncs", "fwdbwd"):
            assert getattr(got[side], table).equals(getattr(want, table)), (side, table)
        assert got[side].meta == want.meta
