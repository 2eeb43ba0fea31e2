"""Every comparison, in workbook order, behind one small interface.

Each :class:`Step` takes the shared :class:`Context` (both profiles, options, intermediate results
reused across steps such as the operator pair list) and returns its tables, or a one-line reason
when it cannot run. The pipeline, the headless export and the TUI all iterate :data:`STEPS`, so a
table can never be computed two different ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..model import Profile
from ..options import CompareOptions
from .masks import TextIndexes
from .result import Table


@dataclass
class Context:
    base: Profile
    comp: Profile
    opts: CompareOptions
    notes: list[str] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def base_label(self) -> str:
        return self.base.meta.source

    @property
    def comp_label(self) -> str:
        return self.comp.meta.source

    def masks(self) -> Any:
        if "masks" not in self.cache:
            from .masks import load_masks

            self.cache["masks"] = load_masks(self.opts.config_path)
        return self.cache["masks"]

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
            self.cache["metrics"] = (overall_metrics(self.base, masks, self.texts(self.base)),
                                     overall_metrics(self.comp, masks, self.texts(self.comp)))
        return self.cache["metrics"]

    def operator_match(self) -> Any:
        if "match" not in self.cache:
            from .operators import match_operators

            self.cache["match"] = match_operators(self.base, self.comp, self.opts)
        return self.cache["match"]


Outcome = list[Table] | str


@dataclass(frozen=True)
class Step:
    name: str  # phase label shown in progress
    switch: str  # CompareOptions switch that enables it
    tables: tuple[str, ...]  # names of the tables it can produce
    run: Callable[[Context], Outcome]


def _overall(ctx: Context) -> Outcome:
    from .overall import overall_table, skip_reason

    b, c = ctx.side_metrics()
    table = overall_table(b, c, ctx.base_label, ctx.comp_label)
    return [table] if table is not None else skip_reason(b, c, ctx.base_label, ctx.comp_label)


def _communication(ctx: Context) -> Outcome:
    from .communication import compare_communication

    table, reason = compare_communication(ctx.base, ctx.comp, ctx.opts)
    return [table] if table is not None else reason


def _operators(ctx: Context) -> Outcome:
    """Module sheets when both sides have nn.Module frames, else the operator sheets."""
    from .modules import compare_modules
    from .operators import compare_operators, unlinked_notes

    modules, reason = compare_modules(ctx.base, ctx.comp, ctx.opts)
    match = ctx.operator_match()
    ctx.notes.extend(unlinked_notes(match))
    _, tables = compare_operators(ctx.base, ctx.comp, ctx.opts, match)
    if modules is not None:
        # The workbook carries the module sheets instead of the operator sheets (as the
        # reference does); the app still shows both screens.
        return modules.tables() + [replace(t, export=False) for t in tables]
    if reason:
        ctx.notes.append(f"module comparison: {reason} — showing operators instead")
    return tables


def _memory(ctx: Context) -> Outcome:
    from .memory import compare_memory

    return compare_memory(ctx.base, ctx.comp, ctx.opts, ctx.operator_match())


def _api(ctx: Context) -> Outcome:
    from .api import compare_api

    return [compare_api(ctx.base, ctx.comp, ctx.opts, ctx.texts(ctx.base), ctx.texts(ctx.comp))]


def _kernels(ctx: Context) -> Outcome:
    from .kernels import compare_kernels

    table, reason = compare_kernels(ctx.base, ctx.comp, ctx.opts)
    return [table] if table is not None else reason


STEPS: tuple[Step, ...] = (
    Step("OverallMetrics", "profiling", ("OverallMetrics",), _overall),
    Step("CommunicationCompare", "communication", ("CommunicationCompare",), _communication),
    Step("operators / modules", "operator",
         ("ModuleCompareStatistic", "ModuleCompare", "ModuleTree",
          "OperatorCompareStatistic", "OperatorCompare"), _operators),
    Step("MemoryCompare", "memory", ("MemoryCompareStatistic", "MemoryCompare"), _memory),
    Step("ApiCompare", "api", ("ApiCompare",), _api),
    Step("KernelCompare", "kernel", ("KernelCompare", "KernelTypeCompare"), _kernels),
)


def summary_step(ctx: Context) -> tuple[dict[str, Any], str]:
    """The terminal "Model Profiling Time Distribution" figures and their text rendering."""
    if not ctx.opts.enables("profiling"):
        return {}, ""
    from .overall import format_summary_table, summary_figures

    b, c = ctx.side_metrics()
    figures = summary_figures(b, c)
    return figures, format_summary_table(figures)


def run_all(base: Profile, comp: Profile, opts: CompareOptions) -> list[Table]:
    """Every enabled comparison's non-empty tables, in workbook order (for scripts and tests)."""
    ctx = Context(base, comp, opts)
    out: list[Table] = []
    for step in STEPS:
        if opts.enables(step.switch):
            outcome = step.run(ctx)
            if not isinstance(outcome, str):
                out.extend(t for t in outcome if not t.empty)
    return out
