"""What a comparison reads of one side that depends on that side alone, made where the side is
loaded.

A side's kernel classes, its step explanation and the advisor's analysis of it need nothing of
the other side, so :func:`perfcmp_core.pair.iter_pair` makes the comparison side's in the
worker that parses it, at the same time as this process makes the base side's. The advisor then
only puts the two together at the end of the run, where it used to need a third process
(competing with the steps for two cores, and last to finish on the real A100 pair).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .advisor.analysis import Analysis, analyse
from .advisor.rules import AdvisorConfig
from .compare.equivalence import Equivalence
from .compare import kernel_families
from .explain import StepExplanation, explain_profile
from .explain.table import prepare
from .model import Profile


@dataclass(frozen=True)
class SideAnalysis:
    classes: pd.DataFrame  # kernel_families.kernel_classes: the one classification of its kernels
    explanation: StepExplanation
    advice: Analysis  # the advisor's stages, categories, rules and checks of this side


def analyse_side(profile: Profile, equivalence: Equivalence, advisor: AdvisorConfig) -> SideAnalysis:
    """The :class:`SideAnalysis` of ``profile`` (each part computed once, from the one before)."""
    classes = kernel_families.kernel_classes(profile, equivalence)
    explanation = explain_profile(profile, equivalence, classes)
    prepare(explanation)
    return SideAnalysis(classes, explanation, analyse(profile, advisor, equivalence, classes, explanation))
