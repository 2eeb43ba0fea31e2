"""One result builder for the app and the headless commands; the declarations every table carries.

The builder's notes and absent reasons are checked against hand-made event streams; the
declarations against the comparisons of the fixture pairs (tui_support computes them once).
"""

from __future__ import annotations

import threading

import pandas as pd
import pytest

from perfcmp_core.collect import ResultBuilder, collect
from perfcmp_core.compare import CLUSTER_SCREENS, MATCHING, SCREENS, SHEETS, STEPS, declare, screen_of
from perfcmp_core.compare.result import Column, Table
from perfcmp_core.errors import InputError
from perfcmp_core.events import Failed, Finished, Loaded, Skipped, SummaryReady, TableReady
from perfcmp_core.export.xlsx import write_workbook
from perfcmp_core.notes import Note, lines
from tui_support import PAIRS, events, tables

COLS = (Column("name", "Operator Name", "key", "bold"), Column("d", "Diff Duration(ms)", "diff", "float"))


def table(name: str, rows: int = 1) -> Table:
    data = pd.DataFrame({"name": [f"op{i}" for i in range(rows)], "d": [1.0] * rows})
    return declare(Table(name, COLS, data, (0, 0), (1, 1)))


# -- the builder ------------------------------------------------------------------------------
def test_notes_sides_then_skips_then_the_run_each_once() -> None:
    b = ResultBuilder("A", "B")
    b.add(Loaded("base", {}, (Note("no memory_record.csv"),)))
    b.add(Loaded("comparison", {}))
    b.add(Skipped(("KernelCompare", "KernelTypeCompare"), "kernel comparison needs NPU"))
    b.add(Skipped(("MemoryCompare",), "kernel comparison needs NPU"))  # said once
    fallback = ("module comparison: no python_function events — the operators are compared "
                "instead (Operators screen, 2)")
    b.add(Skipped(("ModuleTree", "ModuleCompare"), fallback))
    assert lines(b.notes) == ["base: no memory_record.csv", "kernel comparison needs NPU", fallback]
    b.add(Finished(1.0, notes=[Note("base: 3 kernels are linked to no host op", "operators"),
                               Note(fallback, "operators")]))
    # The fallback is one of the run's notes: it is listed with them, after the unlinked kernels.
    assert lines(b.notes) == ["base: no memory_record.csv", "kernel comparison needs NPU",
                              "base: 3 kernels are linked to no host op", fallback]
    assert b.absent == {"KernelCompare": "kernel comparison needs NPU",
                        "KernelTypeCompare": "kernel comparison needs NPU",
                        "MemoryCompare": "kernel comparison needs NPU",
                        "ModuleTree": fallback, "ModuleCompare": fallback}
    assert b.finished and b.loaded["base"] == {}


def test_snapshot_is_not_changed_by_later_events() -> None:
    b = ResultBuilder("A", "B")
    b.add(TableReady(table("OperatorCompareStatistic")))
    b.add(SummaryReady({"E2E Time": {"base": 1.0}}, "text"))
    snap = b.snapshot()
    b.add(TableReady(table("ApiCompare")))
    b.add(Skipped(("KernelCompare",), "why"))
    b.add(SummaryReady({}, ""))
    assert list(snap.tables) == ["OperatorCompareStatistic"]
    assert snap.summary == {"figures": {"E2E Time": {"base": 1.0}}, "text": "text"}
    assert snap.notes == [] and list(b.snapshot().tables) == ["OperatorCompareStatistic", "ApiCompare"]


def test_collect_turns_a_failure_into_an_input_error() -> None:
    stream = iter([Loaded("base", {}), Failed("x.json: not a profile", is_input=True)])
    with pytest.raises(InputError, match="x.json: not a profile"):
        collect(stream, "x.json", "y.json")


def test_export_from_a_snapshot_while_tables_keep_arriving(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The app's export worker writes a snapshot while the UI thread adds tables: every
    workbook holds exactly the tables of its snapshot, and no write fails."""
    b = ResultBuilder("A", "B")
    b.add(TableReady(table("OperatorCompareStatistic", 2000)))
    names = [s.name for s in SHEETS.values() if s.export][:8]
    stop = threading.Event()

    def arrive() -> None:
        i = 0
        while not stop.is_set():
            b.add(TableReady(table(names[i % len(names)], 50)))
            i += 1

    feeder = threading.Thread(target=arrive)
    feeder.start()
    try:
        for n in range(5):
            snap = b.snapshot()
            path = write_workbook(snap, tmp_path / str(n))
            import openpyxl

            sheets = openpyxl.load_workbook(path, read_only=True).sheetnames
            assert sheets == [*(t.name for t in snap.tables.values() if t.export), "README"]
    finally:
        stop.set()
        feeder.join()


# -- the declarations -------------------------------------------------------------------------
def test_every_table_a_pair_makes_is_declared_and_carries_its_sheet() -> None:
    made = {name: t for pair in PAIRS for name, t in tables(pair).items()}
    assert set(made) <= set(SHEETS)
    for name, t in made.items():
        sheet = SHEETS[name]
        assert (t.help, t.tree, t.drill, t.stacks) == (sheet.help, sheet.tree, sheet.drill, sheet.stacks)
        if sheet.stacks:
            assert set(sheet.stacks) <= set(t.data.columns), name
        if sheet.drill:
            target = SHEETS[sheet.drill.target]
            assert target.screen == sheet.screen  # Enter stays on the screen
            assert {k for k, _ in sheet.drill.match} <= set(t.data.columns), name
    assert not made["ModuleTree"].export and made["ModuleCompareStatistic"].export


def test_screens_are_numbered_and_hold_every_table_once() -> None:
    assert [s.key for s in SCREENS] == [str(i) for i in range(1, len(SCREENS) + 1)]
    assert [s.key for s in CLUSTER_SCREENS] == ["0", *(s.key for s in SCREENS)]  # Ranks first
    shown = [name for s in CLUSTER_SCREENS for name in s.sheets]
    on_screen = [name for name, sheet in SHEETS.items() if sheet.screen is not None]
    # The Timeline has a screen of its own (T), drawn by the app, not a table pane.
    own = [name for name, sheet in SHEETS.items() if sheet.screen is not None and not sheet.screen.tabbed]
    assert own == ["Timeline"] and screen_of("Timeline") == "timeline" and not SHEETS["Timeline"].export
    assert sorted(shown) == sorted(n for n in on_screen if n not in own) and len(shown) == len(set(shown))
    assert all(screen_of(n) == s.id for s in CLUSTER_SCREENS for n in s.sheets)
    # The one workbook-only table: the Matching sheet, made from the sheets being written.
    assert [n for n in SHEETS if n not in on_screen] == [MATCHING.name]
    with pytest.raises(KeyError, match="workbook-only"):
        screen_of(MATCHING.name)
    assert [s.name for s in STEPS[0].sheets] == ["OverallMetrics"]


def test_an_undeclared_table_is_an_error() -> None:
    with pytest.raises(KeyError, match="no step declares this table"):
        declare(Table("NewCompare", COLS, pd.DataFrame({"name": [], "d": []}), (0, 0), (1, 1)))


def test_module_fallback_is_the_reason_on_the_module_screen() -> None:
    """MindSpore has no python_function frames: the module tables are absent with the reason
    the run's notes give, and the operator tables stand in (and are exported)."""
    skipped = {n: e.reason for e in events("ms") if isinstance(e, Skipped) for n in e.names}
    reason = skipped["ModuleCompareStatistic"]
    assert reason.startswith("module comparison: no python_function events in base")
    assert skipped["ModuleTree"] == skipped["ModuleCompare"] == reason
    finished = next(e for e in events("ms") if isinstance(e, Finished))
    assert reason in lines(finished.notes)
    assert tables("ms")["OperatorCompareStatistic"].export


def test_notes_for_a_screen_are_those_that_concern_it() -> None:
    """A loader's notes concern every screen; an absent table's reason its screen; a run note
    the screens it names (none: all); a table's own notes its screen."""
    b = ResultBuilder("A", "B")
    b.add(Loaded("base", {}, (Note("no memory_record.csv"),)))
    b.add(Skipped(("KernelCompare",), "kernel comparison needs NPU"))
    overall = declare(Table("OverallMetrics", COLS, pd.DataFrame({"name": ["E2E"], "d": [1.0]}),
                            (0, 0), (1, 1), notes=["base: HCCL wait unknown"]))
    b.add(TableReady(overall))
    unlinked = "comparison: 5 kernels are linked to no host op"
    b.add(Finished(1.0, notes=[Note(unlinked, "operators", screens=("operators", "modules")),
                               Note("run-wide", "cluster")]))
    assert lines(b.notes_for("overall")) == ["base: no memory_record.csv", "run-wide",
                                             "base: HCCL wait unknown"]
    assert lines(b.notes_for("operators")) == ["base: no memory_record.csv", unlinked, "run-wide"]
    assert lines(b.notes_for("kernels")) == ["base: no memory_record.csv", "kernel comparison needs NPU",
                                             "run-wide"]


def test_run_notes_name_the_screens_of_the_comparison_that_made_them() -> None:
    finished = next(e for e in events("npu") if isinstance(e, Finished))
    unlinked = [n for n in finished.notes if "linked to no host op" in n.text]
    assert unlinked and all(n.origin == "operators / modules" and n.screens == ("modules", "operators")
                            for n in unlinked)
