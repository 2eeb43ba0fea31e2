"""The screens (panes) of the app, which comparison tables each one shows, and how Enter drills."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaneSpec:
    id: str
    key: str  # digit that switches to it
    title: str
    tables: tuple[str, ...]  # table names it shows, first = default view (`v` cycles)
    hint: str  # why it is empty when none of its tables exist
    #: Run notes starting with this explain why the screen is empty (shown when it is).
    note_prefix: str = ""


PANES: tuple[PaneSpec, ...] = (
    PaneSpec("overall", "1", "Overall", ("OverallMetrics",),
             "needs device kernels on both sides (the profiling comparison)"),
    PaneSpec("operators", "2", "Operators", ("OperatorCompareStatistic", "OperatorCompare"),
             "needs host ops (cpu_op events) on both sides"),
    PaneSpec("modules", "3", "Modules", ("ModuleTree", "ModuleCompareStatistic", "ModuleCompare"),
             "no python_function events on both sides: collect with with_stack=True",
             note_prefix="module comparison:"),
    PaneSpec("communication", "4", "Comm", ("CommunicationCompare",),
             "needs communication ops (NCCL / HCCL)"),
    PaneSpec("memory", "5", "Memory", ("MemoryCompareStatistic", "MemoryCompare"),
             "needs per-op memory records: collect with profile_memory=True"),
    PaneSpec("kernels", "6", "Kernels", ("KernelCompare", "KernelTypeCompare", "KernelClassCompare",
                                         "KernelOpCompare"),
             "needs device kernels on both sides"),
    PaneSpec("api", "7", "API", ("ApiCompare",), "needs host ops on both sides"),
    PaneSpec("advisor", "8", "Advisor", ("Advisor",), "the advisor runs after the comparisons"),
)


def panes_of(table: str) -> tuple[str, ...]:
    """Ids of the panes that can show ``table``."""
    return tuple(p.id for p in PANES if table in p.tables)


@dataclass(frozen=True)
class Drill:
    """Enter on a row of ``source`` opens ``target`` narrowed to the rows of that entry.

    ``match`` pairs a source column key with the target column keys that must hold the same value
    (any of them: an operator name may sit on the base or the comparison side). A source value of
    ``[ TOTAL ]`` matches everything (the module's total row opens all of the module's rows).
    """

    source: str
    target: str
    match: tuple[tuple[str, tuple[str, ...]], ...]


DRILLS: dict[str, Drill] = {d.source: d for d in (
    Drill("OperatorCompareStatistic", "OperatorCompare", (("name", ("base_name", "comp_name")),)),
    Drill("MemoryCompareStatistic", "MemoryCompare", (("name", ("base_name", "comp_name")),)),
    Drill("ModuleCompareStatistic", "ModuleCompare",
          (("module_name", ("module_name",)), ("op", ("base_op", "comp_op")))),
    Drill("ModuleTree", "ModuleCompare", (("_path", ("module_name",)),)),
)}

#: Source cell values that match every target row.
MATCH_ALL = frozenset({"[ TOTAL ]"})
