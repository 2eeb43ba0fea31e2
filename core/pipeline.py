"""One comparison run as a stream of events.

``comparison_events`` is the single place where a run is orchestrated: load and analyse both
sides (in parallel processes, :mod:`perfcmp_core.side`), then every enabled comparison, reported
in workbook order (the steps declared ``beside`` computed on the second core meanwhile), then the
summary and the advisor. The headless commands (:mod:`perfcmp_core.headless`) consume the stream in-process; the
TUI consumes it from a child process (:mod:`perfcmp_core.runner`); both fold it with
:class:`perfcmp_core.collect.ResultBuilder`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Generator, Iterator

from .compare import STEPS, Absent, Context, Outcome, Step, declare, summary_step
from .compare.result import Table
from .events import Event, Finished, Loaded, Phase, Planned, Skipped, SummaryReady, TableReady
from .info import profile_info
from .model import Profile
from .notes import Note
from .pair import iter_pair
from .processes import Later, in_background
from .request import RunRequest
from .side import SideAnalysis, analyse_side

#: The step behind the screen the app opens on (the Overall screen's figures).
OPENING_STEP = "OverallMetrics"


def comparison_events(request: RunRequest) -> Iterator[Event]:
    """Run a whole comparison, yielding progress and results as they become available."""
    t_start = time.perf_counter()
    steps = [s for s in STEPS if request.compare.enables(s.switch)]
    yield Planned(("load base", "load comparison", *(s.name for s in steps), "summary", "advisor"))

    yield Phase("load base")
    yield Phase("load comparison")
    loaded: dict[str, Profile] = {}
    analyses: dict[str, SideAnalysis] = {}
    first: list[Note] = []
    # What each side's comparisons read of it alone (kernel classes, step explanation, the
    # advisor's analysis) is made where it loads: the comparison side's in its load worker, at
    # the same time as the base side's here.
    pair = iter_pair(*request.inputs, request.base_opts, request.comp_opts,
                     analyse=partial(analyse_side, equivalence=request.equivalence, advisor=request.advisor))
    groups: list[tuple[list[Step], Later[list[Ran]]]] = []
    try:
        pending = {}
        for side, profile, analysis, seconds in islice(pair, 2):
            loaded[side], pending[side] = profile, analysis
            yield Loaded(side, profile_info(profile), tuple(profile.meta.notes))
            yield Phase(f"load {side}", done=True, seconds=seconds)
        ctx = Context(base=loaded["base"], comp=loaded["comparison"], opts=request.compare,
                      kernel_masks=request.masks, equivalence=request.equivalence)
        if steps and steps[0].name == OPENING_STEP and not any(a.ready for a in pending.values()):
            # Both sides came from the cache and their analyses are still being made: the Overall
            # screen, which needs only the profiles, is shown first (reopening a pair is then an
            # Overall screen in the time of reading the cache and this one step).
            first = yield from _step_events(steps[:1], ctx, [])
            steps_left = steps[1:]
        else:
            steps_left = steps
        # The steps declared ``beside`` run in workers that share the loaded profiles with this
        # process: those reading only the profiles start now, while an analysis may still be
        # being made (a larger comparison side's, in its load worker), the others once both
        # analyses are here.
        _start_beside(groups, [s for s in steps_left if s.beside and not s.reads_analyses], ctx)
        for side, analysis in pending.items():
            analyses[side] = analysis()
        pair.close()  # no worker left making an analysis

        from .advisor import advisor_tables

        base, comp = analyses["base"], analyses["comparison"]
        ctx.adopt((base.classes, comp.classes), (base.explanation, comp.explanation))
        _start_beside(groups, [s for s in steps_left if s.beside and s.reads_analyses], ctx)
        notes = first + (yield from _step_events(steps_left, ctx, groups))
        yield Phase("summary")
        t0 = time.perf_counter()
        figures, text = summary_step(ctx)
        yield SummaryReady(figures, text)
        yield Phase("summary", done=True, seconds=time.perf_counter() - t0)

        yield Phase("advisor")
        t0 = time.perf_counter()
        for table in advisor_tables(ctx, request.advisor, request.advisor_file, (base.advice, comp.advice)):
            yield TableReady(declare(table))
        yield Phase("advisor", done=True, seconds=time.perf_counter() - t0)
        yield Finished(time.perf_counter() - t_start, notes=notes)
    finally:  # a failed or abandoned run leaves no worker behind (its results are unwanted)
        pair.close()
        for _, later in groups:
            later.stop()


def _start_beside(groups: list[tuple[list[Step], Later[list[Ran]]]], steps: list[Step], ctx: Context) -> None:
    """Start ``steps`` (if any) on the second core, as one more group of ``groups``."""
    if steps:
        groups.append((steps, in_background(_run_steps, steps, ctx)))


def _step_events(steps: list[Step], ctx: Context,
                 groups: list[tuple[list[Step], Later[list[Ran]]]]) -> Generator[Event, None, list[Note]]:
    """Every step's events in workbook order; the steps declared ``beside`` come from the worker
    of their group in ``groups``, this process runs the others (at a beside step whose group has
    not answered yet, the rest of its own first, then it waits). Returns the run's notes in step
    order, wherever each step ran."""
    done: dict[str, Ran] = {}
    for i, step in enumerate(steps):
        yield Phase(step.name)
        if step.name not in done:
            if step.beside:
                here = [s for s in steps[i:] if not s.beside and s.name not in done]
                done.update(zip((s.name for s in here), _run_steps(here, ctx)))
                group, later = next((g, w) for g, w in groups if step in g)
                done.update(zip((s.name for s in group), later()))
            else:
                done[step.name] = _run_steps([step], ctx)[0]
        ran = done[step.name]
        yield from _outcome_events(step, ran.outcome)
        yield Phase(step.name, done=True, seconds=ran.seconds)
    return [n for step in steps for n in done[step.name].notes]


@dataclass(frozen=True)
class Ran:
    """What one step made, its notes (what it added to ``Context.notes``, as notes of this
    step about its screens), and its own time."""

    outcome: Outcome
    notes: list[Note]
    seconds: float


def _run_steps(steps: list[Step], ctx: Context) -> list[Ran]:
    """Run ``steps`` in order on ``ctx`` (in this process or a forked worker: the result is
    self-contained, so it can come back from one)."""
    out = []
    for step in steps:
        t0 = time.perf_counter()
        before = len(ctx.notes)
        outcome = step.run(ctx)
        # The step says what it found; which step it was and the screens it shows decide
        # where the note is shown (not its text).
        screens = tuple(dict.fromkeys(s.screen.id for s in step.sheets))
        notes = [Note(text, origin=step.name, screens=screens) for text in ctx.notes[before:]]
        out.append(Ran(outcome, notes, time.perf_counter() - t0))
    return out


def _outcome_events(step: Step, outcome: Outcome) -> Iterator[Event]:
    """A step's tables as they are ready, then what it could not make and why."""
    if isinstance(outcome, str):
        yield Skipped(step.tables, outcome)
        return
    tables = [t for t in outcome if isinstance(t, Table)]
    for table in tables:
        if not table.empty:
            yield TableReady(declare(table))
    for table in tables:
        if table.empty:
            yield Skipped((table.name,), table.absent_reason or f"{table.name}: no rows")
    for absent in outcome:
        if isinstance(absent, Absent):
            yield Skipped(absent.names, absent.reason)
