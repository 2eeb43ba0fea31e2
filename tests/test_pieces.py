"""Large files are read where needed (core/load/pieces.py ``FileContent``), with exactly the
results of the same operations on the file's bytes; a trace read that way loads like one read
into memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcmp_core.load import load_profile, pieces
from perfcmp_core.model import SCHEMAS
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"


def _content(tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch) -> pieces.FileContent:
    path = tmp_path / "f.json"
    path.write_bytes(data)
    monkeypatch.setattr(pieces, "STREAM_BYTES", 0)
    content = pieces.read_file(path)
    assert isinstance(content, pieces.FileContent)
    return content


#: Whitespace runs are kept below 8 bytes, so that every match is shorter than the overlap tried.
_LONG_SPACE = re.compile(rb"\s{8,}")


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400).map(lambda b: _LONG_SPACE.sub(b" ", b.replace(b"\xef", b"e"))),
       sub=st.sampled_from([b"]", b"}, {", b"ab", b"traceEvents"]),
       a=st.integers(0, 400), b=st.integers(0, 450), chunk=st.integers(1, 64), overlap=st.integers(20, 64))
def test_file_content_finds_what_bytes_find(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                            sub: bytes, a: int, b: int, chunk: int, overlap: int) -> None:
    """find/rfind/search/match/slices over windows as small as one byte, overlapping by little
    more than the longest match, equal those on bytes."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(pieces, "_SCAN_BYTES", chunk)
        m.setattr(pieces, "_MATCH_BYTES", overlap)
        tmp = tmp_path_factory.mktemp("c")
        c = _content(tmp, data, m)
        assert len(c) == len(data) and c[a:b] == data[a:b] and c.whole() == data
        assert c.find(sub, a) == data.find(sub, a)
        assert c.find(sub, a, b) == data.find(sub, a, b)
        assert c.rfind(sub, a, b) == data.rfind(sub, a, b)
        assert c.rfind(sub) == data.rfind(sub)
        pattern = re.compile(rb"\}\s*,\s*\{")
        want = pattern.search(data, a, b)
        got = pieces.search(c, pattern, a, b)
        assert (got is None) == (want is None)
        if want is not None:
            assert (got.start(), got.end()) == want.span()
        opening = re.compile(rb"\s*\[")
        assert (pieces.match(c, opening, a) is None) == (opening.match(data, a) is None)


def test_a_bom_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = _content(tmp_path, b"\xef\xbb\xbf[1, 2]", monkeypatch)
    assert c.whole() == b"[1, 2]" and len(c) == 6 and c.find(b"2") == 4


def _same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = load_profile(str(path), LoadOptions(use_cache=False))
    with monkeypatch.context() as m:
        m.setattr(pieces, "STREAM_BYTES", 0)
        m.setattr(pieces, "_SCAN_BYTES", 777)  # boundaries and keys across chunks
        m.setattr(pieces, "PIECE_BYTES", 5000)
        from perfcmp_core.load import gpu_read, npu_trace

        m.setattr(gpu_read, "PIECE_BYTES", 5000)
        m.setattr(npu_trace, "PIECE_BYTES", 5000)
        got = load_profile(str(path), LoadOptions(use_cache=False))
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    assert got.meta == want.meta


@pytest.mark.parametrize("rel", ["gpu/comp.pt.trace.json", "gpu_patterns/h100_driver_api.pt.trace.json",
                                 "npu_text/comp_ascend_pt", "npu_ms/comp_ascend_ms"])
def test_traces_read_from_disk_load_like_traces_read_into_memory(rel: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _same(FIX / rel, monkeypatch)


def test_a_file_shortened_after_opening_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file cut while it is read (a profiler still writing, a copy in progress) is no SIGBUS as
    with a memory map: the short reads do not parse and the error names the file."""
    from perfcmp_core.errors import InputError
    from perfcmp_core.load import npu_trace

    path = tmp_path / "trace_view.json"
    path.write_bytes((FIX / "npu_text" / "comp_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    monkeypatch.setattr(pieces, "STREAM_BYTES", 0)
    real = pieces.read_file

    def shortened(p: Path) -> Any:
        content = real(p)
        with open(p, "r+b") as fh:
            fh.truncate(len(content) // 3)
        return content

    monkeypatch.setattr(pieces, "read_file", shortened)
    with pytest.raises(InputError) as exc:
        npu_trace.read_trace(path)
    assert "trace_view.json" in str(exc.value.path) and "\n" not in exc.value.message
