"""Performance regression gate for CI: ``perfcmp-tui check BASE COMP --max E2E=+5%``.

The policy — metrics, limits, the noise test's α and minimum steps, warm-up steps — is parsed and
checked before anything is loaded (:mod:`.spec`). Each side's per-step values come from the step
explanation with warm-up steps left out as the advisor leaves them out (:mod:`.series`); a check
fails when the per-step mean grew past its limit and, with enough steps, a one-sided Mann-Whitney
U test (:mod:`.stats`) says the growth is beyond step-to-step noise (:mod:`.verdict`). Clusters
are gated rank pair by rank pair on a process pool, worst rank reported (:mod:`.run`); the terminal, JUnit, JSON and
Markdown reports are :mod:`.report`. docs/ci.md is the user's guide.
"""

from .run import GateResult, Outputs, gate_cluster, gate_pair, run_check
from .spec import Check, GateSpec, Limit, Metric, combine, parse_limit, parse_max, parse_metric, read_gate_file
from .stats import mann_whitney_greater

__all__ = ["Check", "GateResult", "GateSpec", "Limit", "Metric", "Outputs", "combine", "gate_cluster",
           "gate_pair", "mann_whitney_greater", "parse_limit", "parse_max", "parse_metric", "read_gate_file",
           "run_check"]
