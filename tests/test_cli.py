"""The command line: info / export / summary on every fixture kind, exit codes, one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from perfcmp_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
PAIRS = {
    "gpu": (FIX / "gpu" / "base.pt.trace.json", FIX / "gpu" / "comp.pt.trace.json"),
    "npu_text": (FIX / "npu_text" / "base_ascend_pt", FIX / "npu_text" / "comp_ascend_pt"),
    "npu_db": (FIX / "npu_db" / "base_ascend_pt", FIX / "npu_db" / "comp_ascend_pt"),
    "npu_ms": (FIX / "npu_ms" / "base_ascend_ms", FIX / "npu_ms" / "comp_ascend_ms"),
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("kind", sorted(PAIRS))
def test_info_every_fixture_kind(capsys: pytest.CaptureFixture[str], kind: str) -> None:
    base, _ = PAIRS[kind]
    code, out, err = run(capsys, "info", base, "--json")
    assert code == 0, err
    info = json.loads(out)
    expected_kind = {"npu_ms": "npu_text"}.get(kind, kind)
    assert info["kind"] == expected_kind
    assert info["counts"]["kernels"] > 0 and info["counts"]["host_ops"] > 0
    assert len(info["steps"]) >= 3
    code, text, _ = run(capsys, "info", base)
    assert code == 0 and info["label"] in text and "comparisons" in text


def test_info_step_selection_and_unknown_step(capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = PAIRS["gpu"]
    _, out, _ = run(capsys, "info", base, "--json")
    steps = [s["step"] for s in json.loads(out)["steps"]]
    code, out, _ = run(capsys, "info", base, "--json", "--step", steps[1])
    info = json.loads(out)
    assert code == 0 and info["selected_step"] == steps[1] and len(info["steps"]) == 1
    code, _, err = run(capsys, "info", base, "--step", "999999")
    assert code == 2
    assert err.count("\n") == 1 and "has no step 999999" in err and str(base) in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["info", "/nonexistent/profile.json"], "no such file or directory"),
        (["export", str(PAIRS["gpu"][0])], "need two profiles"),
        (["export", *map(str, PAIRS["gpu"]), "--max-kernel-num", "3"], "greater than 3"),
        (["export", *map(str, PAIRS["gpu"]), "--op-name-map", "[1, 2]"], "must be a dict"),
        (["export", *map(str, PAIRS["gpu"]), "--op-name-map", "__import__('os')"], "dict literal"),
        (["export", *map(str, PAIRS["gpu"]), "--gpu-flow-cat", "x" * 21], "at most 20"),
        (["export", *map(str, PAIRS["gpu"]), "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_exit_2_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                   needle: str) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert needle in err and err.startswith("perfcmp-tui: error:")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_export_writes_workbook_and_never_overwrites(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    base, comp = PAIRS["npu_text"]
    code, out, err = run(capsys, "export", base, comp, "-o", tmp_path, "--json", tmp_path / "r.json")
    assert code == 0, err
    assert "Model Profiling Time Distribution" in out and "Top" in out
    books = sorted(tmp_path.glob("performance_comparison_result_*.xlsx"))
    assert len(books) == 1
    sheets = pd.read_excel(books[0], sheet_name=None, header=2)
    assert list(sheets)[0] == "OverallMetrics"
    assert {"CommunicationCompare", "ApiCompare", "KernelCompare"} <= set(sheets)
    assert json.loads((tmp_path / "r.json").read_text())["tables"]
    # the reference's spelling, same folder: a second workbook, the first one untouched
    before = books[0].read_bytes()
    code, _, _ = run(capsys, "export", "-bp", base, "-d", comp, "-o", tmp_path)
    assert code == 0
    assert len(list(tmp_path.glob("performance_comparison_result_*.xlsx"))) == 2
    assert books[0].read_bytes() == before


def test_export_switches_limit_sheets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base, comp = PAIRS["gpu"]
    code, _, err = run(capsys, "export", base, comp, "-o", tmp_path, "--enable_api_compare")
    assert code == 0, err
    book = next(tmp_path.glob("*.xlsx"))
    names = pd.ExcelFile(book).sheet_names
    assert [n for n in names if n not in ("Advisor", "README")] == ["ApiCompare"]


def test_export_nothing_to_write(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    patterns = ROOT / "fixtures" / "gpu_patterns"  # two GPU traces without any collective
    base, comp = str(patterns / "h100_driver_api.pt.trace.json"), str(patterns / "mi300_hip.pt.trace.json")
    code, out, _ = run(capsys, "export", base, comp, "-o", tmp_path, "--enable-communication-compare")
    assert code == 0 and "no workbook written" in out
    assert not list(tmp_path.glob("*.xlsx"))


def test_output_path_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "taken"
    f.write_text("mine")
    code, _, err = run(capsys, "export", *PAIRS["gpu"], "-o", f)
    assert code == 2 and "is a file" in err and f.read_text() == "mine"


def test_summary_prints_without_writing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "summary", *PAIRS["gpu"])
    assert code == 0 and "Model Profiling Time Distribution" in out
    assert list(tmp_path.iterdir()) == []


def test_internal_error_exit_1_and_debug(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import perfcmp_core.info as info

    def boom(profile: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(info, "profile_info", boom)
    code, _, err = run(capsys, "info", PAIRS["gpu"][0])
    assert code == 1 and "internal error: RuntimeError: kaboom" in err and "Traceback" not in err
    code, _, err = run(capsys, "info", PAIRS["gpu"][0], "--debug")
    assert code == 1 and "Traceback" in err


def test_installed_console_script(tmp_path: Path) -> None:
    exe = shutil.which("perfcmp-tui", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("console script not installed")
    done = subprocess.run([exe, "info", str(PAIRS["npu_db"][0])], capture_output=True, text=True)
    assert done.returncode == 0 and "NPU Db" in done.stdout
    bad = subprocess.run([exe, "info", str(tmp_path / "missing")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_console_script_export_delivers_all_output_before_its_fast_exit(tmp_path: Path) -> None:
    """The console script ends headless commands with os._exit (no interpreter teardown): what
    was printed into a pipe still arrives in full, the workbook is complete and nothing is left
    running."""
    exe = shutil.which("perfcmp-tui", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("console script not installed")
    done = subprocess.run([exe, "export", *map(str, PAIRS["gpu"]), "-o", str(tmp_path / "out"),
                           "--no-cache"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Model Profiling Time Distribution" in done.stdout
    last = done.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith("The comparison result file has been generated: ")
    book = Path(last.split(": ", 1)[1])
    assert book.exists() and openpyxl.load_workbook(book, read_only=True).sheetnames[0]
    picture = book.with_name(book.stem + "_timeline.txt")  # the Timeline beside it, as text and SVG
    svg = book.with_name(book.stem + "_timeline.svg")
    assert f"Timeline of one step per side: {picture} (SVG: {svg})" in done.stdout
    assert sorted((tmp_path / "out").iterdir()) == sorted([book, picture, svg])  # no temporary file left behind


def test_tui_bad_config_fails_before_the_app(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's comparison child starts first (to overlap start-up); a bad config file still
    ends the command with one line and exit 2, before the terminal switches to the app, and the
    child is gone. (In a real terminal: tests/test_tui_lifetime.py.)"""
    import multiprocessing

    from perfcmp_tui import terminal

    monkeypatch.setattr(terminal, "require_terminal", lambda: None)  # as if in a terminal

    bad = tmp_path / "rules.ini"
    bad.write_text("[rule.x]\nthreshold = lots\n")
    code, out, err = run(capsys, *PAIRS["gpu"], "--advisor-config", bad)
    assert code == 2 and str(bad) in err and err.count("\n") == 1
    assert not [p for p in multiprocessing.active_children() if p.name == "perfcmp-compare"]


# -- command-line habits (issue 16, add 6) ------------------------------------------------------
def test_help_lists_every_subcommand_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    block = out.split("commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in block] == ["BASE", "export", "summary", "check", "info", "advise"]
    assert all(len(line) <= 80 for line in out.splitlines()[:12])


@pytest.mark.parametrize("args", [["--version"], ["info", "--version"], ["export", "--version"]])
def test_version(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    from perfcmp_core import __version__

    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0 and capsys.readouterr().out == f"perfcmp-tui {__version__}\n"


@pytest.mark.parametrize(("typo", "meant"), [("exprot", "export"), ("sumary", "summary"),
                                             ("infoo", "info"), ("advice", "advise")])
def test_misspelled_subcommand(capsys: pytest.CaptureFixture[str], typo: str, meant: str) -> None:
    code, _, err = run(capsys, typo, *PAIRS["gpu"])
    assert code == 2
    assert err == f"perfcmp-tui: error: unknown command '{typo}' (did you mean '{meant}'?)\n"


def test_a_profile_named_like_a_subcommand_is_a_path(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing folder called ``exprot`` is BASE, not a typo (the app then needs a terminal)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exprot").mkdir()
    code, _, err = run(capsys, "exprot", PAIRS["gpu"][1])
    assert code == 2 and "unknown command" not in err and "terminal" in err


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_summary_fits_the_terminal_and_speaks_milliseconds(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from perfcmp_core.compare import run_all
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import CompareOptions, LoadOptions

    monkeypatch.setenv("COLUMNS", str(columns))
    base, comp = FIX / "gpu" / "base.pt.trace.json", FIX / "npu_text" / "comp_ascend_pt"
    code, out, err = run(capsys, "summary", base, comp, "--no-cache")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= columns
    # The Computing row in ms with µs precision, as the app's headline prints it, from the
    # OverallMetrics table (ms) of the same pair.
    load = LoadOptions(use_cache=False)
    overall = next(t for t in run_all(load_profile(str(base), load), load_profile(str(comp), load),
                                      CompareOptions(enabled=frozenset({"profiling"})))
                   if t.name == "OverallMetrics").data.set_index("index")
    b, c = overall.loc["Computing Time", "base_ms"], overall.loc["Computing Time", "comp_ms"]
    row = next(line for line in out.splitlines() if line.startswith("Computing Time"))
    assert row.split()[2:7:2] == [f"{b:,.3f}", f"{c:,.3f}", f"{c - b:+,.3f}"]
    assert "0.000s" not in out and "Model Profiling Time Distribution" in out


@pytest.mark.parametrize("columns", [None, 80])
def test_notes_stay_whole_in_a_pipe_and_fold_in_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                           columns: int | None) -> None:
    """Piped (no terminal, no COLUMNS), a note longer than any width stays one greppable line;
    in an 80-column terminal it folds, every piece within 80 columns, nothing lost."""
    from perfcmp_core.compare.result import ComparisonResult
    from perfcmp_core.notes import Note
    from perfcmp_core.report import terminal_report

    note = "comparison: /very/long/" + "folder/" * 30 + "kernel_details.csv points outside the profile"
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    text = terminal_report(ComparisonResult("a", "b", notes=[Note(note)]))  # pytest's stdout: no tty
    lines = text.splitlines()
    if columns is None:
        assert f"note: {note}" in lines
    else:
        folded = lines[next(i for i, ln in enumerate(lines) if ln.startswith("note: ")):]
        assert max(len(ln) for ln in folded) <= columns and len(folded) > 1
        assert "".join(ln.strip() for ln in folded).replace(" ", "") == f"note: {note}".replace(" ", "")
