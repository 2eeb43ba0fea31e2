"""Input detection and validation: every accepted level, and one bad-input test per rule."""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from perfcmp_core.errors import InputError
from perfcmp_core.load import detect, load_profile
from perfcmp_core.load import validate
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
#: The smallest trace that holds an event (an empty one is refused: "holds no profiler events").
ONE_OP = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, '
          '"ts": 1, "dur": 2}]}')


def _npu_run(tmp: Path, name: str, *, db: bool = False, text: bool = True) -> Path:
    run = tmp / name
    out = run / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    if text:
        (out / "trace_view.json").write_text("[]")
        (out / "kernel_details.csv").write_text("Name,Type,Start Time(us),Duration(us)\n")
    if db:
        sqlite3.connect(out / "ascend_pytorch_profiler_0.db").close()
    return run


def test_gpu_trace_file_json_and_gz(tmp_path: Path) -> None:
    plain = tmp_path / "a.pt.trace.json"
    plain.write_text('{"traceEvents": []}')
    gz = tmp_path / "b.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(b'  {"traceEvents": []}'))
    assert detect(str(plain)).kind == "gpu"
    src = detect(str(gz))
    assert (src.kind, src.trace) == ("gpu", gz)


def test_gpu_folder_with_one_trace_and_several(tmp_path: Path) -> None:
    (tmp_path / "host_1.pt.trace.json").write_text("{}")
    assert detect(str(tmp_path)).trace == tmp_path / "host_1.pt.trace.json"
    (tmp_path / "host_2.pt.trace.json").write_text("{}")
    with pytest.raises(InputError, match=r"holds 2 traces \(host_1.pt.trace.json, host_2"):
        detect(str(tmp_path))
    assert detect(str(tmp_path), rank=2).trace == tmp_path / "host_2.pt.trace.json"


@pytest.mark.parametrize("level", ["run", "output", "file"])
def test_npu_text_every_level(tmp_path: Path, level: str) -> None:
    run = _npu_run(tmp_path, "x_ascend_pt")
    path = {"run": run, "output": run / "ASCEND_PROFILER_OUTPUT",
            "file": run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"}[level]
    src = detect(str(path))
    assert src.kind == "npu_text"
    assert src.level == {"run": "profiling", "output": "output", "file": "trace"}[level]
    if level != "file":
        assert "kernel_details" in src.files and "memory_record" in src.missing


def test_mindspore_folder_is_named(tmp_path: Path) -> None:
    run = _npu_run(tmp_path, "rank-0_20240101_ascend_ms")
    assert detect(str(run)).framework == "mindspore"


def test_db_wins_over_text_and_says_so(tmp_path: Path) -> None:
    run = _npu_run(tmp_path, "x_ascend_pt", db=True)
    src = detect(str(run))
    assert src.kind == "npu_db" and src.db is not None
    assert any("Db wins" in n.text for n in src.notes)


def test_parent_of_several_ranks(tmp_path: Path) -> None:
    _npu_run(tmp_path, "rank-0_a_ascend_pt")
    _npu_run(tmp_path, "rank-1_b_ascend_pt")
    with pytest.raises(InputError, match="holds 2 rank folders"):
        detect(str(tmp_path))
    assert detect(str(tmp_path), rank=1).run_dir == tmp_path / "rank-1_b_ascend_pt"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: None, "no such file or directory"),
        (lambda p: p.write_text(""), "is empty"),
        (lambda p: p.write_text("  \n"), "is empty"),
        (lambda p: p.write_text('"just a string"'), "is not a profiler trace"),
    ],
)
def test_bad_json_files(tmp_path: Path, make, problem: str) -> None:
    p = tmp_path / "t.json"
    make(p)
    with pytest.raises(InputError) as err:
        detect(str(p))
    assert problem in err.value.message and "t.json" in err.value.message


def test_gz_that_is_not_gzip(tmp_path: Path) -> None:
    p = tmp_path / "t.pt.trace.json.gz"
    p.write_text('{"traceEvents": []}')
    with pytest.raises(InputError, match="not a valid gzip file"):
        detect(str(p))


def test_wrong_suffix_and_wrong_db(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(InputError, match="unsupported file type"):
        detect(str(tmp_path / "x.csv"))
    (tmp_path / "analysis.db").write_bytes(b"SQLite format 3\x00" + b"\0" * 100)
    with pytest.raises(InputError, match="analysis.db is not a profile"):
        detect(str(tmp_path / "analysis.db"))
    (tmp_path / "ascend_pytorch_profiler_0.db").write_text("not sqlite at all")
    with pytest.raises(InputError, match="is not an SQLite database"):
        detect(str(tmp_path / "ascend_pytorch_profiler_0.db"))


def test_folder_without_profile_and_output_without_trace(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds no profile"):
        detect(str(tmp_path))
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "operator_memory.csv").write_text("x")
    with pytest.raises(InputError, match="has no trace_view.json, no kernel_details.csv"):
        detect(str(out))
    # kernel_details.csv alone is an incomplete Text export: compared from what is there
    (out / "kernel_details.csv").write_text("x")
    src = detect(str(out))
    assert (src.kind, src.trace, src.missing[0]) == ("npu_text", None, "trace_view")


def test_size_cap_and_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.pt.trace.json"
    p.write_text(ONE_OP + " " * 100)
    monkeypatch.setitem(validate._CAPS, ".json", 50)
    with pytest.raises(InputError, match=r"over the .* limit for \.json files; pass --force"):
        load_profile(str(p))
    assert load_profile(str(p), LoadOptions(force=True)).meta.kind == "gpu"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to give a file to another user")
def test_owner_check_and_force(tmp_path: Path) -> None:
    p = tmp_path / "t.pt.trace.json"
    p.write_text(ONE_OP)
    os.chown(p, 12345, 12345)
    with pytest.raises(InputError, match="is owned by uid 12345, not by you"):
        load_profile(str(p))
    assert load_profile(str(p), LoadOptions(force=True)).meta.kind == "gpu"


def test_symlink_is_reported_not_refused(tmp_path: Path) -> None:
    target = tmp_path / "real.pt.trace.json"
    target.write_text('{"traceEvents": []}')
    link = tmp_path / "link.json"
    link.symlink_to(target)
    src = detect(str(link))
    assert src.kind == "gpu" and any("symbolic link" in n.text for n in src.notes)
    broken = tmp_path / "broken.json"
    broken.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(InputError, match="broken symbolic link"):
        detect(str(broken))


@pytest.mark.parametrize("pair", ["gpu", "npu_text", "npu_db", "npu_ms"])
def test_fixtures_detected(pair: str) -> None:
    folder = FIX / pair
    if not folder.exists():
        pytest.skip("fixture not generated")
    kinds = {"gpu": "gpu", "npu_text": "npu_text", "npu_db": "npu_db", "npu_ms": "npu_text"}
    for entry in sorted(folder.iterdir()):
        if entry.name.endswith(".gz"):
            continue
        assert detect(str(entry)).kind == kinds[pair], entry


def test_copy_of_fixture_loads_from_any_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = FIX / "npu_text" / "base_ascend_pt"
    if not src.exists():
        pytest.skip("fixture not generated")
    dst = tmp_path / "copy_ascend_pt"
    shutil.copytree(src, dst)
    monkeypatch.chdir(tmp_path)
    prof = load_profile("copy_ascend_pt")
    assert prof.meta.kind == "npu_text" and len(prof.kernels) > 0
