"""The two loaded profiles a long-lived comparison child keeps between runs.

The app's ``S`` (another step of either side) used to start a new child that read both inputs
again (from the cache: ≈ 0.15 s per side on the real H200 pair) and analysed both sides again,
although the base side had not changed. A serving child (:class:`perfcmp_core.runner.ChildRun`
with ``serve=True``) keeps a :class:`Held` instead: each side's whole profile, the step cuts it
made of it and their analyses (:mod:`perfcmp_core.side`). A step is then a cut of the held
profile (:func:`~perfcmp_core.load.steps.select_step`, a few milliseconds) and only the side
whose step changed is analysed again.

A run whose inputs, load options or configuration differ from what is held reads its inputs as
any run does (:func:`perfcmp_core.pair.iter_pair`) and holds what it read instead. Profiles are
never changed after load (:class:`~perfcmp_core.model.Profile`), so what a run read is what the
next one finds.
"""

from __future__ import annotations

import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Iterator, TypeVar

from .compare.masks import Masks
from .load import Source, load_profile, load_source
from .load.steps import select_step, step_ids
from .model import Profile
from .options import LoadOptions
from .pair import Analysis, analysed_beside, iter_pair
from .processes import BACKGROUND_NICE, Producer, Worker, start_method
from .request import RunRequest

A = TypeVar("A")
#: Step cuts (with their analyses) kept per side besides the whole profile: the steps the user
#: goes back and forth between stay instant, the memory stays bounded.
KEPT_CUTS = 4
#: The Timeline steps that analyses made ahead carry (:class:`~perfcmp_core.side.SideProducts`)
#: are kept up to this many bytes of lane tables per side, in the order they were made (the
#: steps nearest the start, as the picker lists them): on a run of a hundred steps they would
#: otherwise hold about a megabyte per step and side; a step beyond it makes its lanes in the
#: run (tens of milliseconds).
AHEAD_LANES_BYTES = 64 << 20
_SIDES = ("base", "comparison")


@dataclass
class _Side:
    """One side as held: its identity, its whole profile (None until a run needed it), and the
    cuts made of it (step → profile), with the analysis of each once made."""

    key: tuple[object, ...]
    whole: Profile | None = None
    cuts: OrderedDict[int | None, Profile] = field(default_factory=OrderedDict)
    #: step → its analysis, every one made so far (far smaller than the cuts: all are kept)
    analyses: dict[int | None, object] = field(default_factory=dict)
    #: bytes of the Timeline lanes its analyses made ahead hold (:data:`AHEAD_LANES_BYTES`)
    lanes_bytes: int = 0

    def take(self, step: int | None, analysis: object) -> None:
        """Keep ``analysis`` of ``step``, made ahead, unless one is held already (one made in a
        run, without :class:`~perfcmp_core.side.SideProducts`, gives way to it); its Timeline
        lanes only within :data:`AHEAD_LANES_BYTES`."""
        if step in self.analyses and not _lacks_products(self.analyses[step]):
            return
        products = getattr(analysis, "products", None)
        if products is not None and not isinstance(products.lanes, (str, type(None))):
            size = int(products.lanes[1].memory_usage(index=False).sum())
            if self.lanes_bytes + size > AHEAD_LANES_BYTES:
                analysis = replace(analysis, products=replace(products, lanes=None))  # type: ignore[type-var]
            else:
                self.lanes_bytes += size
        self.analyses[step] = analysis

    def keep(self, step: int | None, profile: Profile) -> None:
        self.cuts[step] = profile
        self.cuts.move_to_end(step)
        while len(self.cuts) > KEPT_CUTS:
            self.cuts.popitem(last=False)


class Held:
    """What a serving comparison child holds between runs (see the module docstring)."""

    def __init__(self) -> None:
        self._sides: dict[str, _Side] = {}
        #: Whether the last :meth:`pair` cut both sides from what is held (a step change) or
        #: read the inputs.
        self.cut = False
        self._ahead: Producer[tuple[str, int, object]] | None = None

    def prefetch(self, analyse: Callable[[Profile], A]) -> None:
        """Start making the analyses of the steps not analysed yet, while the child waits for
        its next run: in a forked worker at the background's priority (the app's screens come
        first), steps in order, the two sides in turn (the step picker pairs steps by
        position). The next run takes those made by then and stops the rest
        (:meth:`pair`): a step change then analyses neither side."""
        wholes = {side: s.whole for side, s in self._sides.items() if s.whole is not None}
        todo: list[tuple[str, int | None]] = [
            (side, step) for side, whole in wholes.items() for step in step_ids(whole)
            if step not in self._sides[side].analyses]
        todo.sort(key=lambda t: (step_ids(wholes[t[0]]).index(t[1]), t[0]))
        # First the whole profiles' products, which the run that read them did not make: every
        # step change that keeps a side on all its steps reads them.
        todo[:0] = [(side, None) for side in wholes
                    if _lacks_products(self._sides[side].analyses.get(None))]
        if todo and start_method() == "fork":
            self._ahead = Producer(_analysed_steps, wholes, todo, analyse, name="perfcmp-ahead",
                                   method="fork", nice=BACKGROUND_NICE)

    def take_ahead(self, *, stop: bool = False) -> None:
        """Keep the analyses made ahead so far (received as they are made, they are held as
        their pickled buffers until taken: call this while waiting for the next run), and with
        ``stop`` stop making more."""
        if self._ahead is None:
            return
        for side, step, analysis in self._ahead.made():
            if side in self._sides:
                self._sides[side].take(step, analysis)
        if stop:
            self._ahead.stop()
            self._ahead = None

    def pair(self, request: RunRequest,
             analyse: Callable[[Profile], A]) -> Iterator[tuple[str, Profile, Analysis[A], float]]:
        """``(side, profile, analysis, seconds)`` for "base" then "comparison", as
        :func:`~perfcmp_core.pair.iter_pair` yields them, from what is held where the request
        names the same inputs, load options and configuration; else read as any run does (and
        held for the next run). Close it to stop a worker still making an analysis."""
        self.take_ahead(stop=True)
        config = _config_key(request)
        opts = {"base": request.base_opts, "comparison": request.comp_opts}
        keys = {side: (_input_key(given), replace(opts[side], step=None), config)
                for side, given in zip(_SIDES, request.inputs)}
        self.cut = all(side in self._sides and self._sides[side].key == keys[side] for side in _SIDES)
        if not self.cut:
            yield from self._read(request, analyse, keys)
            return
        yield from self._from_held(request, analyse, opts)

    def _read(self, request: RunRequest, analyse: Callable[[Profile], A],
              keys: dict[str, tuple[object, ...]]) -> Iterator[tuple[str, Profile, Analysis[A], float]]:
        """The run reads both inputs (:func:`iter_pair`); what it read is held from now on."""
        self._sides = {side: _Side(keys[side]) for side in _SIDES}
        steps = {"base": request.base_opts.step, "comparison": request.comp_opts.step}
        pair = iter_pair(*request.inputs, request.base_opts, request.comp_opts, analyse=analyse)
        try:
            for side, profile, analysis, seconds in pair:
                held = self._sides[side]
                if steps[side] is None:
                    held.whole = profile  # the run's own profile: no second copy
                held.keep(steps[side], profile)
                yield side, profile, self._remembered(held, steps[side], analysis), seconds
        finally:
            pair.close()

    def _from_held(self, request: RunRequest, analyse: Callable[[Profile], A],
                   opts: dict[str, LoadOptions]) -> Iterator[tuple[str, Profile, Analysis[A], float]]:
        """Both sides cut from the held profiles; an analysis not held yet is made when asked
        for: the base side's here, the comparison side's meanwhile in a forked worker (as
        :func:`iter_pair` does for two profiles from the cache)."""
        given = dict(zip(_SIDES, request.inputs))
        t0 = time.perf_counter()
        profiles = {side: self._cut(side, given[side], opts[side]) for side in _SIDES}
        seconds = time.perf_counter() - t0
        worker: Worker[A] | None = None
        try:
            for side in _SIDES:
                held, step = self._sides[side], opts[side].step
                if step in held.analyses:
                    analysis: Analysis[A] = Analysis.made(held.analyses[step])  # type: ignore[arg-type]
                elif side == "comparison" and start_method() == "fork":
                    pending, worker = analysed_beside(profiles[side], analyse)
                    analysis = self._remembered(held, step, pending)
                else:
                    analysis = self._remembered(held, step, Analysis(partial(analyse, profiles[side]),
                                                                     ready=False))
                yield side, profiles[side], analysis, seconds
        finally:
            if worker is not None:
                worker.stop()

    def _cut(self, side: str, given: str | Source, opts: LoadOptions) -> Profile:
        """``side`` on ``opts.step``: the cut held, else one made of the whole profile (read
        first when no run held it yet: the first run was on a step)."""
        held = self._sides[side]
        if opts.step in held.cuts:
            held.cuts.move_to_end(opts.step)
            return held.cuts[opts.step]
        if held.whole is None:
            whole_opts = replace(opts, step=None)
            held.whole = (load_source(given, whole_opts) if isinstance(given, Source)
                          else load_profile(given, whole_opts))
        profile = held.whole if opts.step is None else select_step(held.whole, opts.step)
        held.keep(opts.step, profile)
        return profile

    @staticmethod
    def _remembered(held: _Side, step: int | None, analysis: Analysis[A]) -> Analysis[A]:
        """``analysis``, whose value is held for ``step`` once made."""
        if analysis.ready:
            held.analyses[step] = analysis()
            return analysis

        def value() -> A | None:
            if step not in held.analyses:
                held.analyses[step] = analysis()
            return held.analyses[step]  # type: ignore[return-value]

        return Analysis(value, ready=False, after_parse=analysis.after_parse)


def _analysed_steps(wholes: dict[str, Profile], todo: list[tuple[str, int | None]],
                    analyse: Callable[[Profile], A]) -> Iterator[tuple[str, int | None, A]]:
    """``(side, step, analysis)`` of each step in ``todo``, cut from that side's whole profile
    (``None``: the whole profile)."""
    for side, step in todo:
        yield side, step, analyse(wholes[side] if step is None else select_step(wholes[side], step))


def _lacks_products(analysis: object) -> bool:
    """An analysis held without the products made ahead (one made in a run)."""
    return analysis is not None and getattr(analysis, "products", None) is None


def _input_key(given: str | Source) -> object:
    """What names an input: its path, or its detected source (kind and files)."""
    return repr(given) if isinstance(given, Source) else given


def _config_key(request: RunRequest) -> tuple[bytes, Masks]:
    """The configuration the analyses depend on (the equivalence table, the advisor rules, the
    kernel masks of the Overall figures made ahead), compared by content: each request comes
    over the pipe as a new object. The masks are compared as values: their pickle differs with
    which of their texts happen to be one object."""
    return pickle.dumps((request.equivalence, request.advisor)), request.masks
