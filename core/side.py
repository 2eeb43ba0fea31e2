"""What a comparison reads of one side that depends on that side alone, made where the side is
loaded.

A side's kernel classes, its step explanation and the advisor's analysis of it need nothing of
the other side, so :func:`perfcmp_core.pair.iter_pair` makes the comparison side's in the
worker that parses it, at the same time as this process makes the base side's. The advisor then
only puts the two together at the end of the run, where it used to need a third process
(competing with the steps for two cores, and last to finish on the real A100 pair).

A serving comparison child makes the analyses of every step ahead, while the user reads the
screen (:meth:`perfcmp_core.held.Held.prefetch`): those also carry the side's Overall figures
and Timeline lanes (:class:`SideProducts`), two more things that depend on the side alone, so
that a step change (the app's ``S``) does not make them while the user waits.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .advisor.analysis import Analysis, analyse
from .advisor.rules import AdvisorConfig
from .compare import kernel_families
from .compare.equivalence import Equivalence
from .compare.masks import Masks, TextIndexes
from .compare.overall_metrics import SideMetrics, overall_metrics
from .explain import StepExplanation, explain_profile
from .heap import return_free_memory
from .explain.table import prepare
from .lanes.table import SideStep, side_step
from .model import Profile


@dataclass(frozen=True)
class SideProducts:
    """A side's parts of two comparisons, made ahead with its analysis (see the module
    docstring): the same values the steps make in a run."""

    metrics: SideMetrics  # its OverallMetrics figures (with the run's kernel masks)
    #: Its Timeline step (the median one), or why there is none; None where the holder let it
    #: go to bound its memory (:data:`perfcmp_core.held.AHEAD_LANES_BYTES`): made in the run.
    lanes: SideStep | str | None


@dataclass(frozen=True)
class SideAnalysis:
    classes: pd.DataFrame  # kernel_families.kernel_classes: the one classification of its kernels
    explanation: StepExplanation
    advice: Analysis  # the advisor's stages, categories, rules and checks of this side
    products: SideProducts | None = None  # made ahead only (analyse_ahead)


def analyse_side(profile: Profile, equivalence: Equivalence, advisor: AdvisorConfig) -> SideAnalysis:
    """The :class:`SideAnalysis` of ``profile`` (each part computed once, from the one before).
    What it freed on the way goes back to the system: its process then waits with the profile
    (for the other side, or to send this one), the run's heaviest moment."""
    classes = kernel_families.kernel_classes(profile, equivalence)
    explanation = explain_profile(profile, equivalence, classes)
    prepare(explanation)
    made = SideAnalysis(classes, explanation, analyse(profile, advisor, equivalence, classes, explanation))
    return_free_memory()
    return made


def analyse_ahead(profile: Profile, equivalence: Equivalence, advisor: AdvisorConfig,
                  masks: Masks) -> SideAnalysis:
    """:func:`analyse_side` with the side's :class:`SideProducts`: for analyses made ahead of a
    run that may never come, where their cost is not waited for."""
    made = analyse_side(profile, equivalence, advisor)
    products = SideProducts(overall_metrics(profile, masks, TextIndexes(profile), made.classes),
                            side_step(profile, made.explanation))
    return SideAnalysis(made.classes, made.explanation, made.advice, products)
