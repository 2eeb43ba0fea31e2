"""One comparison run as a stream of events.

``comparison_events`` is the single place where a run is orchestrated: load and analyse both
sides (in parallel processes, :mod:`perfcmp_core.side`), then every enabled comparison, reported
in workbook order (the steps declared ``beside`` computed on the second core meanwhile), then the
summary and the advisor. The headless commands (:mod:`perfcmp_core.headless`) consume the stream in-process; the
TUI consumes it from a child process (:mod:`perfcmp_core.runner`), which stays to run the same
comparison on other steps from the profiles it holds (:class:`HeldComparisons`); both fold it with
:class:`perfcmp_core.collect.ResultBuilder`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache, partial
from itertools import islice
from typing import Callable, Generator, Iterator

from .compare import STEPS, Absent, Context, Outcome, Step, declare, summary_step
from .compare.optree import derived_forgotten
from .compare.result import Table
from .events import Event, Finished, Loaded, Phase, Planned, Skipped, SummaryReady, TableReady
from .heap import return_free_memory
from .held import Held
from .info import profile_info
from .model import Profile
from .notes import Note
from .pair import iter_pair
from .processes import BACKGROUND_NICE, Claims, Later, in_background
from .request import RunRequest
from .side import SideAnalysis, analyse_ahead, analyse_side

#: The step behind the screen the app opens on (the Overall screen's figures).
OPENING_STEP = "OverallMetrics"


def comparison_events(request: RunRequest, held: Held | None = None) -> Iterator[Event]:
    """Run a whole comparison, yielding progress and results as they become available.

    ``held``: what a serving child keeps between runs (:mod:`perfcmp_core.held`); the sides
    are then cut from the profiles it holds where the request names the same inputs."""
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
    analyse = partial(analyse_side, equivalence=request.equivalence, advisor=request.advisor)
    pair = (iter_pair(*request.inputs, request.base_opts, request.comp_opts, analyse=analyse)
            if held is None else held.pair(request, analyse))
    #: The workers running the steps declared ``beside``.
    beside: list[Beside] = []
    try:
        try:
            pending = {}
            for side, profile, analysis, seconds in islice(pair, 2):
                loaded[side], pending[side] = profile, analysis
                yield Loaded(side, profile_info(profile), tuple(profile.meta.notes))
                yield Phase(f"load {side}", done=True, seconds=seconds)
            ctx = Context(base=loaded["base"], comp=loaded["comparison"], opts=request.compare,
                          kernel_masks=request.masks, equivalence=request.equivalence)
            # A step change cut from held profiles: the Overall figures come first anyway (a
            # few tens of ms), and the rest of the run is what the user waits for, so the steps
            # beside run at this process's priority, not below it (on a loaded host 0.58 s
            # against 0.69 s, bench/step_change.py).
            nice = 0 if held is not None and held.cut else BACKGROUND_NICE
            if steps and steps[0].name == OPENING_STEP and not all(a.ready or a.after_parse
                                                                    for a in pending.values()):
                # The profiles came from the cache (or a serving child holds them) long before
                # their analyses: the Overall screen, which needs only the profiles, is shown
                # first (reopening a pair is then an Overall screen in the time of reading the
                # cache and this one step).
                first = yield from _step_events(steps[:1], ctx, [])
                steps_left = steps[1:]
            else:
                steps_left = steps
            # The beside steps that read only the profiles start now, while an analysis may
            # still be being made (a larger comparison side's in its load worker, or one asked
            # for below); the others once both analyses are here.
            beside += _started([s for s in steps_left if s.beside and not s.reads_analyses], ctx, nice)
            for side, analysis in pending.items():
                analyses[side] = analysis()
        finally:  # the worker making an analysis is not left behind
            pair.close()

        from .advisor import advisor_tables

        base, comp = analyses["base"], analyses["comparison"]
        ctx.adopt((base, comp))
        # The beside steps that read the analyses: in a worker that shares them with this process.
        started = {step.name for group in beside for step in group.steps}
        beside += _started([s for s in steps_left if s.beside and s.name not in started], ctx, nice)

        @cache
        def advised() -> tuple[list[Table], float]:
            """The Advisor table (and its seconds), which reads the two analyses only: made while
            the steps beside are still running where there are some (then it is no longer the
            run's last wait), shown last in any case."""
            t0 = time.perf_counter()
            tables = advisor_tables(ctx, request.advisor, request.advisor_file, (base.advice, comp.advice))
            return tables, time.perf_counter() - t0

        notes = first + (yield from _step_events(steps_left, ctx, beside, advised))
        yield Phase("summary")
        t0 = time.perf_counter()
        figures, text = summary_step(ctx)
        yield SummaryReady(figures, text)
        yield Phase("summary", done=True, seconds=time.perf_counter() - t0)

        yield Phase("advisor")
        tables, seconds = advised()
        for table in tables:
            yield TableReady(declare(table))
        yield Phase("advisor", done=True, seconds=seconds)
        yield Finished(time.perf_counter() - t_start, notes=notes)
    finally:  # a failed or abandoned run leaves no worker behind (its results are unwanted)
        for group in beside:
            group.later.stop()
            group.claims.close()


@dataclass
class Beside:
    """Steps run on the second core by a worker (:func:`in_background`), which takes each from
    the front of the list before it runs it; after the first, this process may take them from
    the back (:func:`_take_back`). ``later`` gives the results of those the worker ran."""

    steps: list[Step]
    later: Later[list[Ran]]
    claims: Claims


def _started(steps: list[Step], ctx: Context, nice: int) -> list[Beside]:
    """``steps`` started on the second core (:func:`in_background`, at ``nice``), none when
    empty."""
    if not steps:
        return []
    claims = Claims(len(steps))
    try:
        return [Beside(steps, in_background(_run_beside, steps, ctx, claims, nice=nice), claims)]
    except BaseException:
        claims.close()
        raise


def _run_beside(steps: list[Step], ctx: Context, claims: Claims | None = None) -> list[Ran]:
    """:func:`_run_steps` in the worker beside, each step once taken from ``claims`` (those
    after the first one not taken end the list: this process took them); what its steps cached
    on the context and derived from the profiles (the operator match and the op forests,
    ≈ 110 + 68 MB on the 32×92 NPU Db pair) is dropped and the heap trimmed before the results
    are sent, while this worker and this process both hold them. The same for the steps this
    process took back (``claims`` None), which would hold them through the workbook."""
    before = set(ctx.cache)
    with derived_forgotten():
        out = []
        for i, step in enumerate(steps):
            if claims is not None and not claims.take(i):
                break
            out += _run_steps([step], ctx)
    for key in set(ctx.cache) - before:
        del ctx.cache[key]
    return_free_memory()
    return out


class HeldComparisons:
    """The run function of a serving comparison child (:class:`perfcmp_core.runner.ChildRun`):
    :func:`comparison_events` on what the child holds between its runs (:class:`Held`)."""

    def __init__(self) -> None:
        self.held = Held()

    def __call__(self, request: RunRequest) -> Iterator[Event]:
        yield from comparison_events(request, self.held)
        # This child stays for the session: what the run freed goes back to the system.
        return_free_memory()
        # Finished: the analyses of the other steps are made while the user looks at this run,
        # with what else of each side a step change would make (its Overall figures, its
        # Timeline step).
        self.held.prefetch(partial(analyse_ahead, equivalence=request.equivalence, advisor=request.advisor,
                                   masks=request.masks))

    def idle(self) -> None:
        """Called while the child waits for its next run: take the analyses made ahead."""
        self.held.take_ahead()


def _step_events(steps: list[Step], ctx: Context, beside: list[Beside],
                 meanwhile: Callable[[], object] = lambda: None) -> Generator[Event, None, list[Note]]:
    """Every step's events in workbook order; the steps declared ``beside`` come from the
    ``beside`` workers, this process runs the others (those after a beside step first, then
    ``meanwhile``, then what it can take back of the worker's steps, then it waits). Returns the
    run's notes in step order, wherever each step ran."""
    done: dict[str, Ran] = {}
    for i, step in enumerate(steps):
        yield Phase(step.name)
        if step.name not in done:
            if step.beside:
                here = [s for s in steps[i:] if not s.beside and s.name not in done]
                done.update(zip((s.name for s in here), _run_steps(here, ctx)))
                meanwhile()
                # This process's steps are done: what they freed goes back before the wait, in
                # which the worker beside reaches its largest (the run's peak of memory).
                return_free_memory()
                group = next(g for g in beside if any(s.name == step.name for s in g.steps))
                done.update(_take_back(group, ctx))
                done.update(zip((s.name for s in group.steps), group.later()))
            else:
                done[step.name] = _run_steps([step], ctx)[0]
        ran = done[step.name]
        yield from _outcome_events(step, ran.outcome)
        yield Phase(step.name, done=True, seconds=ran.seconds)
    return [n for step in steps for n in done[step.name].notes]


def _take_back(group: Beside, ctx: Context) -> dict[str, Ran]:
    """The steps of ``group``'s worker that it has not started, taken from the back and run
    here: this process's own steps are done and the worker's are not (on the 32×92 NPU Db pair
    its operators / modules alone take longer than all of this process's steps, and
    MemoryCompare came after them). Where the worker is not a child (no fork), it runs them
    all when asked: the operator match they share is then made once."""
    taken: list[Step] = []
    if group.later.forked:
        for i in range(len(group.steps) - 1, 0, -1):
            if not group.claims.take(i):
                break
            taken.insert(0, group.steps[i])
    if not taken:
        return {}
    return dict(zip((s.name for s in taken), _run_beside(taken, ctx)))


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
