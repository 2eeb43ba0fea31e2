"""Typed decoding (msgspec structs) reads every trace exactly as the orjson dicts do.

The loader decodes each piece of ``traceEvents`` into structs holding only the fields it uses
(core/load/gpu_decode.py) and leaves pieces msgspec refuses to orjson. These tests load the same
trace three ways — typed pieces, orjson pieces, one whole-file orjson parse — and require the
same tables, on every fixture trace, on the real ones, and on hand-made events at each place
where msgspec and orjson could read a value differently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.load import gpu_decode

from test_load_gpu_pieces import _assert_same, _counted_pieces, _whole

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "gpu-real"
#: Every fixture trace but the one with no events at all (an input error, tested elsewhere).
GPU_FIXTURES = [p for p in sorted((ROOT / "fixtures").glob("gpu*/*.pt.trace.json*"))
                if not p.name.startswith("empty.")]


def _three_ways(path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> dict[str, int]:
    """Load ``path`` in typed pieces, in orjson pieces and whole; assert one result; return the
    typed run's piece counts by decoder."""
    want = _whole(path, monkeypatch)
    typed, counts = _counted_pieces(path, monkeypatch, size)
    dicts, dict_counts = _counted_pieces(path, monkeypatch, size, typed=False)
    assert dict_counts["typed"] == 0 and dict_counts["dicts"] > 0
    _assert_same(typed, want)
    _assert_same(dicts, want)
    return counts


@pytest.mark.parametrize("path", GPU_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_trace_reads_the_same_typed(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _three_ways(path, monkeypatch, 16 << 10)
    # The typed decoder really read the pieces (a cut inside a string may leave one to orjson).
    assert counts["typed"] > 5 * counts["dicts"]


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data/gpu-real not present")
@pytest.mark.parametrize("name", ["trace_diff_control.pt.trace.json.gz", "alexnet.pt.trace.json.gz",
                                  "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
                                  "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
                                  "tracelens/inference/xdit_sd_3.5_rank_0.json.gz"])
def test_real_traces_read_the_same_typed(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    counts = _three_ways(path, monkeypatch, 1 << 20)
    assert counts["typed"] > 0 and counts["dicts"] <= 1  # the metadata piece may hold odd types


def _trace(tmp_path: Path, events: list[Any], raw_tail: bytes = b"") -> Path:
    """A trace file of ``events`` (plus raw JSON text appended inside the array)."""
    body = json.dumps(events)[1:-1].encode()
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(b'{"schemaVersion": 1, "traceEvents": [' + body + raw_tail + b"]}")
    return path


def _kernel(i: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 100 + 10 * i,
            "dur": 5, "args": {"correlation": i, "stream": 7, "device": 0, **args}}


def _launch(i: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": 95 + 10 * i, "dur": 2, "args": {"correlation": i}}


def _op(i: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 3}", "pid": 1, "tid": 1,
            "ts": 94 + 10 * i, "dur": 4, "args": args}


def test_list_arguments_render_as_python_shows_them(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``Input Dims`` / ``Input type`` are kept as raw JSON and parsed by orjson once per distinct
    text; the column holds ``str()`` of the value, as the dict path renders it."""
    events = [_op(i, **{"Input Dims": [[i % 2, 3], [], [[1]]], "Input type": ["float", "", None],
                        "Call stack": "a.py(1): f;b.py(2): g"}) for i in range(30)]
    events += [_op(30, **{"Input Dims": None, "Input type": "text", "Call stack": None}), _op(31)]
    path = _trace(tmp_path, events)
    counts = _three_ways(path, monkeypatch, 256)
    assert counts["dicts"] == 0
    got = _whole(path, monkeypatch).ops.sort_values("start_ns", kind="stable")
    assert got["input_dims"].tolist()[:2] == ["[[0, 3], [], [[1]]]", "[[1, 3], [], [[1]]]"]
    assert got["input_types"].tolist()[0] == "['float', '', None]"
    assert got["input_types"].tolist()[-2:] == ["text", ""]
    assert got["input_dims"].tolist()[-2:] == ["", ""]
    assert got["call_stack"].tolist()[-2:] == ["", ""]


def test_integers_beyond_64_bits_are_floats_as_orjson_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """msgspec keeps a 2**64 exact where orjson makes it a float; the typed path converts, so a
    huge flow id or correlation reads alike (and, as a float, links nothing)."""
    big = 2**64 + 5
    events = [_kernel(i) for i in range(8)] + [_launch(i) for i in range(8)]
    events += [_kernel(99, correlation=big), {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": big,
                                              "pid": 1, "tid": 1, "ts": 95},
               {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": big, "pid": 0, "tid": 7, "ts": 1090,
                "bp": "e"}]
    path = _trace(tmp_path, events)
    counts = _three_ways(path, monkeypatch, 300)
    assert counts["dicts"] == 0  # read by msgspec, converted
    got = _whole(path, monkeypatch)
    assert got.kernels.loc[got.kernels["name"] == "k99", "link"].tolist() == [-1]


def test_an_integer_past_float_range_is_refused_like_the_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A number orjson cannot read (``1`` followed by 400 zeros) in a field the loader reads:
    both paths stop with the same error, naming the file."""
    path = _trace(tmp_path, [_kernel(0)], raw_tail=b', {"ph": "X", "cat": "kernel", "ts": 1'
                  + b"0" * 400 + b', "dur": 1}')
    errors = []
    for typed in (True, False):
        with pytest.raises(InputError) as exc:
            _counted_pieces(path, monkeypatch, 64, whole=True, typed=typed)
        errors.append(exc.value.message)
    assert errors[0] == errors[1] and "not valid JSON" in errors[0]


def test_bytes_that_are_not_utf8_are_refused_even_in_skipped_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """msgspec does not decode what it skips; orjson refuses invalid UTF-8 anywhere. A piece
    that is not ASCII is checked, so the error is the whole-file parse's."""
    path = _trace(tmp_path, [_kernel(i) for i in range(5)],
                  raw_tail=b', {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, '
                           b'"args": {"grid": "\xff\xfe"}}')
    with pytest.raises(InputError) as typed:
        _counted_pieces(path, monkeypatch, 64, whole=True)
    with pytest.raises(InputError) as whole:
        _whole(path, monkeypatch)
    assert typed.value.message == whole.value.message


def test_non_ascii_utf8_text_is_read_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = [{**_op(i), "name": f"模块::算子{i % 2}"} for i in range(20)]
    counts = _three_ways(_trace(tmp_path, events), monkeypatch, 200)
    assert counts["dicts"] == 0


@pytest.mark.parametrize("odd", [
    {"ts": True},  # a bool where a number belongs
    {"args": [1, 2]},  # args that are not an object
    {"args": {"Call stack": ["a", "b"]}},  # a call stack that is not text
    {"pid": 1.5},  # a float pid (ints() truncates it)
    {"cat": 7},  # a category that is not text
    {"name": None},
    {"args": None},
    {"dur": "12.5"},  # numbers as text are read by both
])
def test_values_msgspec_refuses_or_reads_differently_go_to_orjson(
        odd: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever one odd event holds, the three ways agree; pieces msgspec refuses are read by
    orjson, and only those."""
    events = [_kernel(i) for i in range(6)] + [_launch(i) for i in range(6)]
    events += [{**_op(50, **{"Input Dims": [[1]]}), **odd}] + [_kernel(i) for i in range(6, 12)]
    counts = _three_ways(_trace(tmp_path, events), monkeypatch, 400)
    assert counts["typed"] > 0


def test_schema_holds_exactly_the_fields_the_roles_keep() -> None:
    """One source of truth: the struct fields are the FIELDS of the roles (plus the keys every
    event needs), so a field added to a role is decoded without a second edit."""
    from perfcmp_core.load.gpu_events import _TOP_LEVEL, FIELDS

    arg_keys = {k for keys in FIELDS.values() for k in keys if k not in _TOP_LEVEL}
    args_type = gpu_decode._ARGS
    encoded = {f.encode_name for f in __import__("msgspec").structs.fields(args_type)}
    assert encoded == arg_keys
    event_keys = {f.encode_name for f in __import__("msgspec").structs.fields(gpu_decode._EVENT)}
    assert event_keys == {"ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"}


def test_trace_written_by_python_json_reads_typed(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``json.dumps(indent=1)`` (spaces and newlines between tokens) decodes typed too."""
    doc = {"traceEvents": [_kernel(i) for i in range(10)] + [_launch(i) for i in range(10)]}
    path = tmp_path / "indented.pt.trace.json"
    path.write_text(json.dumps(doc, indent=1))
    counts = _three_ways(path, monkeypatch, 500)
    assert counts["dicts"] == 0
