"""Bottleneck advisor: where an inference run spends its device time, and what to do about it.

Following the user's inference analysis method (docs/advisor.md): split device work into stages
(DiT transformer vs VAE, :mod:`.stages`), split each stage into FA / MatMul / Vector / Comm /
Other (:mod:`.categories`), and map shares over thresholds to an optimisation direction
(:mod:`.rules`, ``advisor.ini``). :func:`analyse` (:mod:`.analysis`) does this for one profile;
the comparison pipeline runs it on both sides and on their difference (:func:`advisor_tables`,
:mod:`.table`), and ``perfcmp-tui advise PATH`` reports a single profile (:func:`run_advise`,
:mod:`.advise`).

This module only re-exports the package's public face.
"""

from .advise import document, report, run_advise
from .analysis import Analysis, analyse
from .rules import load_config
from .table import advisor_tables, format_findings

__all__ = ["Analysis", "advisor_tables", "analyse", "document", "format_findings", "load_config", "report",
           "run_advise"]
