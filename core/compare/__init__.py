"""Every comparison, in workbook order, behind one small interface — and the one registry of what
each comparison's tables are.

Each :class:`Step` takes the shared :class:`Context` (both profiles, options, intermediate results
reused across steps such as the operator pair list) and returns its tables, or a one-line reason
when it cannot run. The pipeline, the headless export and the TUI all iterate :data:`STEPS`, so a
table can never be computed two different ways.

A step also *declares* its tables (:class:`~.result.Sheet`: help line, exported or not, tree,
drill target, call-stack columns, the screen that shows it); :func:`declare` hands that to each
table it makes, and :data:`SCREENS` is derived from it. Adding a comparison is therefore: write
its module here, and add one :class:`Step` to :data:`STEPS` (with a new :class:`~.result.Screen`
if it needs one). Nothing in the writers or the app names a table.

Besides the steps' tables, these are declared here: the advisor's (made beside the steps), the
workbook's ``Matching`` sheet (:func:`matching`: the rows of the written sheets that were paired
by the equivalence table or by position — the ``Matched As`` column those sheets cannot hold), and
a cluster comparison's two tables (:data:`CLUSTER_SHEETS`, made by :mod:`perfcmp_core.cluster`
on the :data:`RANKS` screen of :data:`CLUSTER_SCREENS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..insight import gap_sentence
from ..model import Profile
from ..options import CompareOptions
from .equivalence import Equivalence, builtin_equivalence
from .masks import DEFAULT_MASKS, Masks, TextIndexes
from .matching_sheet import SHEET as MATCHING_SHEET
from .matching_sheet import matching_table
from .result import Drill, Screen, Sheet, Table


@dataclass
class Context:
    base: Profile
    comp: Profile
    opts: CompareOptions
    kernel_masks: Masks = DEFAULT_MASKS  # parsed once, with the run request
    #: equivalent operators and kernel classes (``--equivalence`` on top of the built-in table),
    #: parsed once with the run request
    equivalence: Equivalence = field(default_factory=builtin_equivalence)
    #: What the step now running has to say beside its tables; the pipeline makes each a
    #: :class:`~perfcmp_core.notes.Note` of that step, shown on that step's screens.
    notes: list[str] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def base_label(self) -> str:
        return self.base.meta.source

    @property
    def comp_label(self) -> str:
        return self.comp.meta.source

    def masks(self) -> Masks:
        """The keyword masks that sort kernels into OverallMetrics classes."""
        return self.kernel_masks

    def texts(self, profile: Profile) -> TextIndexes:
        """The text-column indexes of ``profile`` (base or comparison), shared by every step:
        OverallMetrics and ApiCompare both factorise the host-op names, the costliest part of
        each on a large trace."""
        if profile is self.base:
            key = "texts:base"
        elif profile is self.comp:
            key = "texts:comp"
        else:
            raise ValueError("texts() takes the context's base or comparison profile")
        if key not in self.cache:
            self.cache[key] = TextIndexes(profile)
        return self.cache[key]

    def side_metrics(self) -> tuple[Any, Any]:
        """OverallMetrics per side (computed once; the summary and advisor reuse them)."""
        if "metrics" not in self.cache:
            from .overall_metrics import overall_metrics

            masks = self.masks()
            # GPU classes map the kernel families (computed once, shared with KernelClassCompare
            # and the step explanation); NPU classes do not read them.
            gpu = self.base.meta.kind == "gpu" or self.comp.meta.kind == "gpu"
            classes = self.kernel_classes() if gpu else (None, None)
            self.cache["metrics"] = tuple(overall_metrics(p, masks, self.texts(p), cls)
                                          for p, cls in ((self.base, classes[0]), (self.comp, classes[1])))
        return self.cache["metrics"]

    def step_counts(self) -> tuple[int, int]:
        """How many steps each side holds (0: no step markers). When they differ, totals are
        not comparable: the headline figures become per-step means."""
        return len(self.base.steps), len(self.comp.steps)

    def kernel_classes(self) -> tuple[Any, Any]:
        """Each side's kernel classes (computed once: KernelClassCompare, KernelOpCompare and
        the step explanation's computing by class read the same table)."""
        if "kernel classes" not in self.cache:
            from .kernel_families import kernel_classes

            self.cache["kernel classes"] = (kernel_classes(self.base, self.equivalence),
                                            kernel_classes(self.comp, self.equivalence))
        return self.cache["kernel classes"]

    def explanations(self) -> tuple[Any, Any]:
        """The step explanation of each side (computed once; the StepTime tables share it)."""
        if "explain" not in self.cache:
            from ..explain import explain_profile

            b, c = self.kernel_classes()
            self.cache["explain"] = (explain_profile(self.base, self.equivalence, b),
                                     explain_profile(self.comp, self.equivalence, c))
        return self.cache["explain"]

    def adopt(self, analyses: tuple[Any, Any]) -> None:
        """Take both sides' analyses (:class:`perfcmp_core.side.SideAnalysis`) as they were
        made where the sides loaded: their kernel classes and step explanations, and — made
        ahead of a step change — their Overall figures and Timeline steps, instead of making
        them here (Overall figures already made in this run are kept)."""
        base, comp = analyses
        self.cache["kernel classes"] = (base.classes, comp.classes)
        self.cache["explain"] = (base.explanation, comp.explanation)
        if base.products is not None and comp.products is not None:
            self.cache.setdefault("metrics", (base.products.metrics, comp.products.metrics))
            if base.products.lanes is not None and comp.products.lanes is not None:
                self.cache["timeline steps"] = (base.products.lanes, comp.products.lanes)

    def operator_match(self) -> Any:
        if "match" not in self.cache:
            from .operators import match_operators

            self.cache["match"] = match_operators(self.base, self.comp, self.opts, self.equivalence)
        return self.cache["match"]


@dataclass(frozen=True)
class Absent:
    """Tables a step could not make, and why (the screens say it instead of an empty table)."""

    names: tuple[str, ...]
    reason: str


#: What a step returns: its tables (empty ones say why in ``absent_reason``) and the tables it
#: could not make, or one reason for all of them.
Outcome = list[Table | Absent] | str


@dataclass(frozen=True)
class Step:
    name: str  # phase label shown in progress
    switch: str  # CompareOptions switch that enables it
    run: Callable[[Context], Outcome]
    sheets: tuple[Sheet, ...]  # every table it can make, in screen order
    #: Runs on the second core beside the others (:mod:`perfcmp_core.pipeline`). Such steps
    #: see what the context held when they forked (the profiles, and the analyses for those
    #: that read them), share what they add to its cache among themselves only (the operator
    #: match), and what they add to ``Context.notes`` comes back with their outcome.
    beside: bool = False
    #: Reads the sides' analyses (``Context.kernel_classes`` / ``explanations``, made where each
    #: side loaded: :mod:`perfcmp_core.side`): it runs once both are here. A step without it must
    #: not read them (it would make them again), so it can run while an analysis is still being
    #: made (the comparison side's after its parse, or a cached or held side's).
    reads_analyses: bool = False

    @property
    def tables(self) -> tuple[str, ...]:
        """Names of the tables it can produce."""
        return tuple(s.name for s in self.sheets)


def _overall(ctx: Context) -> Outcome:
    from .overall import overall_table, skip_reason

    b, c = ctx.side_metrics()
    table = overall_table(b, c, ctx.base_label, ctx.comp_label)
    if table is None:
        return skip_reason(b, c, ctx.base_label, ctx.comp_label)
    n_b, n_c = ctx.step_counts()
    if n_b == n_c:
        return [replace(table, lead=gap_sentence(table))]
    # Totals over different numbers of steps: the sheet keeps the reference's totals, and says
    # where the like-with-like figures are.
    counted = f"base {n_b or 'no'} step{'s' * (n_b != 1)}, comparison {n_c or 'no'} step{'s' * (n_c != 1)}"
    note = (f"totals over different numbers of steps ({counted}): compare the per-step means of "
            "StepTime and the headline figures, not these totals")
    return [replace(table, lead=f"Totals over {counted}: StepTime (v) compares the per-step means",
                    notes=[note, *table.notes])]


def _communication(ctx: Context) -> Outcome:
    from .communication import compare_communication

    table, reason = compare_communication(ctx.base, ctx.comp, ctx.opts)
    return [table] if table is not None else reason


def _operators(ctx: Context) -> Outcome:
    """Module sheets when both sides have nn.Module frames, else the operator sheets."""
    from .modules import compare_modules
    from .operators import compare_operators, unlinked_notes

    modules, reason = compare_modules(ctx.base, ctx.comp, ctx.opts, ctx.equivalence)
    match = ctx.operator_match()
    ctx.notes.extend(unlinked_notes(match))
    _, tables = compare_operators(ctx.base, ctx.comp, ctx.opts, match)
    if modules is not None:
        # The workbook carries the module sheets instead of the operator sheets (as the
        # reference does); the app still shows both screens.
        return [*modules.tables(), *(replace(t, export=False) for t in tables)]
    if not reason:
        return tables
    # Said where it is read: on the empty Modules screen "showing operators instead" read as a
    # promise of rows below; the operators are on their own screen (and sheets).
    note = f"module comparison: {reason} — the operators are compared instead (Operators screen, 2)"
    ctx.notes.append(note)
    return [*tables, Absent(tuple(s.name for s in _OPERATOR_SHEETS if s.screen is MODULES), note)]


def _memory(ctx: Context) -> Outcome:
    from .memory import compare_memory

    return compare_memory(ctx.base, ctx.comp, ctx.opts, ctx.operator_match())


def _api(ctx: Context) -> Outcome:
    from .api import compare_api

    return [compare_api(ctx.base, ctx.comp, ctx.opts, ctx.texts(ctx.base), ctx.texts(ctx.comp),
                        ctx.equivalence)]


def _kernels(ctx: Context) -> Outcome:
    from .kernels import compare_kernels

    table, reason = compare_kernels(ctx.base, ctx.comp, ctx.opts)
    return [table] if table is not None else reason


def _kernel_classes(ctx: Context) -> Outcome:
    from .kernel_families import kernel_class_compare, kernel_op_compare

    table = ctx.equivalence
    classes = ctx.kernel_classes()
    return [kernel_class_compare(ctx.base, ctx.comp, table, classes),
            kernel_op_compare(ctx.base, ctx.comp, ctx.opts, table, classes)]


def _step_time(ctx: Context) -> Outcome:
    from ..explain.table import STEPS_TABLE, step_time_table, steps_table, where_table

    base, comp = ctx.explanations()
    if not base.step_count or not comp.step_count:
        empty = [label for label, ex in ((ctx.base_label, base), (ctx.comp_label, comp)) if not ex.step_count]
        return "step time: no device activity and no steps in " + " and ".join(empty)
    per_step = steps_table(base, comp)
    reason = ("per-step table: both sides need ProfilerStep markers and more than one step between them"
              if per_step is None else "")
    return [step_time_table(base, comp), per_step if per_step is not None else Absent((STEPS_TABLE,), reason),
            where_table(base, comp)]


def _timeline(ctx: Context) -> Outcome:
    from ..lanes.table import timeline_of, timeline_table

    made = ctx.cache.get("timeline steps")  # made ahead with the analyses (Context.adopt)
    if made is not None:
        table = timeline_of(made)
    else:
        base, comp = ctx.explanations()
        table = timeline_table((ctx.base, base), (ctx.comp, comp))
    return table if isinstance(table, str) else [table]


def _steps(ctx: Context) -> Outcome:
    from .steps import compare_steps, step_statistics

    table, reason = compare_steps(ctx.base, ctx.comp, ctx.masks())
    return [table, step_statistics(table)] if table is not None else reason


# ---------------------------------------------------------------------------- the registry

OVERALL = Screen("overall", "1", "Overall",
                 "needs device kernels on both sides (the profiling comparison)", headlines=True)
OPERATORS = Screen("operators", "2", "Operators", "needs host ops (cpu_op events) on both sides")
MODULES = Screen("modules", "3", "Modules",
                 "no python_function events on both sides: collect with with_stack=True")
COMMUNICATION = Screen("communication", "4", "Comm", "needs communication ops (NCCL / HCCL)")
MEMORY = Screen("memory", "5", "Memory",
                "needs per-op memory records: collect with profile_memory=True")
KERNELS = Screen("kernels", "6", "Kernels", "needs device kernels on both sides")
API = Screen("api", "7", "API", "needs host ops on both sides")
ADVISOR_SCREEN = Screen("advisor", "8", "Advisor", "the advisor runs after the comparisons")
#: Drawn by the app's Timeline screen (``T``), not a table pane.
TIMELINE_SCREEN = Screen("timeline", "T", "Timeline", "needs steps or device activity on both sides",
                         tabbed=False)

_BY_NAME = (("name", ("base_name", "comp_name")),)  # an op name on either side
_STACKS = ("base_stack", "comp_stack")
_PAIR_NAMES = ("base_name", "comp_name")  # a pair's op on each side
_OPERATOR_SHEETS = (
    # A fixed order: which keys tell apart rows of one name depends on the run (Step does on
    # several steps, not on one), and the tree must read the same on every pair (issue 30 #11).
    Sheet("ModuleTree", MODULES, export=False, tree="nodes",
          drill=Drill("ModuleCompare", (("_path", ("module_name",)),)),
          stacks=("_base_stack", "_comp_stack"),
          screen_order=("module", "step", "diff_total", "ratio", "module_class", "matched_as")),
    Sheet("ModuleCompareStatistic", MODULES,
          "nn.Module paths aggregated: a [ TOTAL ] row per module, then its ops; device "
          "self/total time per side.",
          drill=Drill("ModuleCompare", (("module_name", ("module_name",)),
                                        ("op", ("base_op", "comp_op")))),
          stacks=_STACKS, regressions="module_name", row_names=("module_name", "op")),
    Sheet("ModuleCompare", MODULES,
          "Every module instance (TOTAL row) with its aligned top-level ops, kernels and call "
          "stacks.", stacks=_STACKS, row_names=("module_name", "base_op", "comp_op")),
    Sheet("OperatorCompareStatistic", OPERATORS,
          "Top-level operators grouped by name, sorted by device-time difference.",
          drill=Drill("OperatorCompare", _BY_NAME), regressions="name", row_names=("name",)),
    Sheet("OperatorCompare", OPERATORS,
          "Aligned operator pairs in execution order with their kernels.", row_names=_PAIR_NAMES,
          stacks=("_base_stack", "_comp_stack")),
)

STEPS: tuple[Step, ...] = (
    Step("OverallMetrics", "profiling", _overall, (
        Sheet("OverallMetrics", OVERALL,
              "Time breakdown per side (computing, uncovered communication, free, E2E): which "
              "direction the difference comes from.", tree="outline"),), reads_analyses=True),
    Step("CommunicationCompare", "communication", _communication, (
        Sheet("CommunicationCompare", COMMUNICATION,
              "Communication ops by type: calls and durations per side; NPU task rows under "
              "each op.", tree="nodes"),)),
    # The two largest steps on a big NPU pair, and both use the operator match: beside the rest.
    Step("operators / modules", "operator", _operators, _OPERATOR_SHEETS, beside=True),
    Step("MemoryCompare", "memory", _memory, (
        Sheet("MemoryCompareStatistic", MEMORY,
              "Operators grouped by name: allocated memory and lifetime per side, sorted by "
              "memory difference.", drill=Drill("MemoryCompare", _BY_NAME), row_names=("name",)),
        Sheet("MemoryCompare", MEMORY,
              "Aligned operator pairs with every allocation in their subtree.",
              row_names=_PAIR_NAMES)), beside=True),
    Step("ApiCompare", "api", _api, (
        Sheet("ApiCompare", API,
              "Every host API / op name: total, self and average time and calls per side.",
              row_names=("name",)),)),
    Step("KernelCompare", "kernel", _kernels, (
        Sheet("KernelCompare", KERNELS, "NPU kernels grouped by type and input shapes."),
        Sheet("KernelTypeCompare", KERNELS, "NPU kernels grouped by type and core type."))),
    # Not the reference's: our sheets come after its sheets.
    Step("kernel classes", "kernel", _kernel_classes, (
        Sheet("KernelClassCompare", KERNELS,
              "Device time per kernel class (GEMM, attention, convolution, …) for any pair, GPU "
              "vs NPU and vendor vs vendor included; each class's largest kernels."),
        Sheet("KernelOpCompare", KERNELS,
              "Device time per launching op and kernel class, for kernels whose names differ by "
              "vendor.", row_names=("op", "cls"))), reads_analyses=True),
    # Ours, after the reference's sheets in the workbook; the Overall screen opens on it.
    Step("StepTime", "profiling", _step_time, (
        Sheet("StepTime", OVERALL,
              "Where the time went, per step: step time split into computing by kernel class, "
              "uncovered communication (wait / transmit) and idle time by cause "
              "(synchronisation, host work, launch-bound, copies, device-side), base vs comparison.",
              tree="outline", opens=True, open_levels=2,
              drill=Drill("StepTimeWhere", (("_cause", ("_cause",)), ("_label", ("label",))))),
        Sheet("StepTimeSteps", OVERALL,
              "Per step: both step times and which part (computing, communication, each idle "
              "cause) moved by how much."),
        Sheet("StepTimeWhere", OVERALL, export=False)), reads_analyses=True),
    # One step of each side as lanes: screens and --json only.
    # Beside: the app opens it on request only, and it reads the analyses made before the fork.
    Step("Timeline", "profiling", _timeline, (Sheet("Timeline", TIMELINE_SCREEN, export=False),),
         beside=True, reads_analyses=True),
    # Last: it measures every step again, and the Overall screen shows its totals first.
    Step("StepCompare", "profiling", _steps, (
        Sheet("StepCompare", OVERALL, export=False),
        Sheet("StepStatistics", OVERALL, export=False),)),
)

#: The advisor's table: made by :mod:`perfcmp_core.advisor`, which the pipeline runs beside the
#: steps (it needs nothing they compute).
ADVISOR = Sheet("Advisor", ADVISOR_SCREEN,
                "Per side: stage/category shares and rule findings; diff rows: what grew and "
                "which operators drive it.")

#: A cluster comparison's screen, shown first: its tables are made by :mod:`perfcmp_core.cluster`
#: from every rank's summary (no step makes them); Enter on a rank opens that rank pair on the
#: screens of :data:`SCREENS`.
RANKS = Screen("ranks", "0", "Ranks", "needs two folders of rank folders or per-rank traces")
CLUSTER_SHEETS = (
    Sheet("ClusterCompare", RANKS,
          "Cluster comparisons: one row per rank — E2E, computing, uncovered communication (wait), "
          "free time per side and their diffs, per-step E2E spread, flags (slowest, largest "
          "regression, missing). The sheets before it compare one rank pair (Options: "
          "detail_rank)."),
    Sheet("ClusterCommGroups", RANKS,
          "Cluster comparisons: wait and transmit time per communication group and rank; the "
          "rank with the least wait is the one the others wait for."),
)

#: The workbook's sheet of the rows paired by the equivalence table or by position (made from
#: the sheets being written by :func:`matching`; no screen: the screens show ``Matched As``).
MATCHING = Sheet(MATCHING_SHEET, None,
                 "Rows of the sheets above whose two sides have different names: matched through "
                 "the equivalence table or by position (docs/matching.md).")

_PAIR_SHEETS = (*(s for st in STEPS for s in st.sheets), ADVISOR, MATCHING)
#: Every table by name.
SHEETS: dict[str, Sheet] = {s.name: s for s in (*_PAIR_SHEETS, *CLUSTER_SHEETS)}


def _screens(sheets: tuple[Sheet, ...]) -> tuple[Screen, ...]:
    """The screens the sheets name, in key order, each with its tables in declaration order —
    a sheet declared ``opens`` first (workbook-only tables have none)."""
    return tuple(
        replace(screen, sheets=tuple(s.name for s in sorted((s for s in sheets if s.screen is screen),
                                                            key=lambda s: not s.opens)))
        for screen in sorted({s.screen for s in sheets if s.screen is not None and s.screen.tabbed},
                             key=lambda sc: sc.key)
    )


#: The app's screens of one profile pair.
SCREENS: tuple[Screen, ...] = _screens(_PAIR_SHEETS)
#: The app's screens of two clusters: the Ranks first, then those of the rank pair opened.
CLUSTER_SCREENS: tuple[Screen, ...] = _screens(CLUSTER_SHEETS) + SCREENS


def screen_of(name: str) -> str:
    """Id of the screen that shows table ``name`` (a KeyError for a workbook-only table)."""
    screen = SHEETS[name].screen
    if screen is None:
        raise KeyError(f"{name}: a workbook-only table has no screen")
    return screen.id


def declare(table: Table) -> Table:
    """``table`` carrying what its :class:`~.result.Sheet` declares (a KeyError names a table
    that no step declares: it would have no screen)."""
    sheet = SHEETS.get(table.name)
    if sheet is None:
        raise KeyError(f"{table.name}: no step declares this table (perfcmp_core.compare.STEPS)")
    return replace(table, help=sheet.help, export=table.export and sheet.export, tree=sheet.tree,
                   open_levels=sheet.open_levels,
                   drill=sheet.drill, stacks=sheet.stacks, screen_order=sheet.screen_order)


def matching(tables: list[Table]) -> Table | None:
    """The workbook's ``Matching`` table over ``tables`` (the sheets being written, in order),
    each row named by its sheet's declared ``row_names``; None when no row of them was paired by
    anything but its name."""
    named = [(t, SHEETS[t.name].row_names) for t in tables if t.name in SHEETS]
    table = matching_table([(t, names) for t, names in named if names])
    return None if table is None else declare(table)


def summary_step(ctx: Context) -> tuple[dict[str, Any], str]:
    """The terminal "Model Profiling Time Distribution" figures and their text rendering."""
    if not ctx.opts.enables("profiling"):
        return {}, ""
    from .overall import format_summary_table, per_step_figures, summary_figures

    b, c = ctx.side_metrics()
    figures = summary_figures(b, c)
    steps = ctx.step_counts()
    if steps[0] != steps[1]:
        figures = per_step_figures(figures, *steps)
    return figures, format_summary_table(figures)


def run_all(base: Profile, comp: Profile, opts: CompareOptions, masks: Masks = DEFAULT_MASKS,
            equivalence: Equivalence | None = None) -> list[Table]:
    """Every enabled comparison's non-empty tables, in workbook order (for scripts and tests)."""
    ctx = Context(base, comp, opts, masks, equivalence or builtin_equivalence())
    out: list[Table] = []
    for step in STEPS:
        if opts.enables(step.switch):
            outcome = step.run(ctx)
            if not isinstance(outcome, str):
                out.extend(declare(t) for t in outcome if isinstance(t, Table) and not t.empty)
    return out
