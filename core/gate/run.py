"""``perfcmp-tui check``: load a pair (or every rank pair of two clusters), gate it, report.

One profile pair is loaded here, both sides explained with the kernel classes of the request's
equivalence table, and every check evaluated (:mod:`.verdict`). Two cluster folders are gated
rank pair by rank pair, on a process pool (one rank pair per process at a time), each exactly as
``--rank N`` would gate it; a check's verdict is its worst rank's (a failing rank first, then the one furthest past the
limit), and the report names that rank.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..request import RunRequest
from .series import SideSeries, side_series
from .spec import GateSpec
from .verdict import FAIL, SKIP, Verdict, evaluate

if TYPE_CHECKING:
    from ..cluster.request import ClusterRequest


@dataclass(frozen=True)
class Outputs:
    """Where the machine-readable reports go (None: not written)."""

    junit: str | None = None
    json: str | None = None
    markdown: str | None = None

    def paths(self) -> list[str]:
        return [p for p in (self.junit, self.json, self.markdown) if p]


@dataclass(frozen=True)
class PairGate:
    """Every check on one profile pair."""

    base: SideSeries
    comp: SideSeries
    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True)
class GateResult:
    """The gate's outcome: one verdict per check (a cluster's worst rank per check)."""

    base: str
    comp: str
    spec: GateSpec
    verdicts: tuple[Verdict, ...]
    pair: PairGate | None = None  # one profile pair
    ranks: dict[int, tuple[Verdict, ...]] = field(default_factory=dict)  # a cluster: every rank's

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == FAIL]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    @property
    def is_cluster(self) -> bool:
        return self.pair is None

    def failing_ranks(self, index: int) -> list[int]:
        """The ranks whose pair fails check ``index`` (a cluster; [] for one pair)."""
        return sorted(r for r, verdicts in self.ranks.items() if verdicts[index].status == FAIL)


@dataclass(frozen=True)
class RankGate:
    """One rank pair of a cluster to gate in a worker (picklable: the request is)."""

    rank: int
    request: RunRequest
    spec: GateSpec


def gate_rank(task: RankGate) -> tuple[int, tuple[Verdict, ...]]:
    """The worker function: a rank pair's verdicts (the explanations stay in the worker)."""
    return task.rank, gate_pair(task.request, task.spec, task.rank).verdicts


def gate_pair(request: RunRequest, spec: GateSpec, rank: int | None = None) -> PairGate:
    """Load both profiles of ``request`` and evaluate every check of ``spec``."""
    from ..explain import explain_profile
    from ..load import load_profile

    warmup = spec.warmup_steps if spec.warmup_steps is not None else request.advisor.warmup_steps
    metrics = [c.metric for c in spec.checks]
    sides = []
    for path, opts in ((request.base, request.base_opts), (request.comp, request.comp_opts)):
        profile = load_profile(path, opts)
        ex = explain_profile(profile, request.equivalence)  # kernel classes from the request's table
        sides.append(side_series(profile, ex, metrics, warmup))
        del profile  # one profile in memory at a time; the explanation is all that is kept
    base, comp = sides
    verdicts = tuple(_with_rank(evaluate(c, base, comp, spec), rank) for c in spec.checks)
    return PairGate(base, comp, verdicts)


def gate_cluster(cluster: ClusterRequest, spec: GateSpec) -> GateResult:
    """Every rank pair of two cluster folders, on a process pool (``--jobs``); each check's
    verdict is its worst rank's: a failing rank first, then the one furthest past the limit (a
    rank that could not be checked only when no rank could)."""
    from ..cluster.pool_map import map_in_pool

    tasks = [RankGate(rank, cluster.rank_request(rank), spec) for rank in cluster.inputs.paired]
    ranks = dict(sorted(map_in_pool(tasks, cluster.options.jobs, gate_rank)))
    worst = tuple(max((verdicts[i] for verdicts in ranks.values()),
                      key=lambda v: (v.status == FAIL, v.status != SKIP, v.excess))
                  for i in range(len(spec.checks)))
    return GateResult(cluster.base, cluster.comp, spec, worst, ranks=ranks)


def run_check(request: RunRequest, spec: GateSpec, outputs: Outputs, *, cluster: ClusterRequest | None = None,
              out: TextIO | None = None) -> int:
    """Gate, print the terminal report, write the reports asked for; 0 pass, 1 regression."""
    from ..export.safe_write import check_dir
    from .report import terminal_report, write_reports

    for path in outputs.paths():  # an unusable destination fails before the loading
        check_dir(Path(path).parent)
    out = out or sys.stdout
    if spec.warmup_steps is None:  # the advisor's, stated in the reports
        spec = replace(spec, warmup_steps=request.advisor.warmup_steps)
    if cluster is not None:
        result = gate_cluster(cluster, spec)
    else:
        pair = gate_pair(request, spec)
        result = GateResult(request.base, request.comp, spec, pair.verdicts, pair)
    print(terminal_report(result), file=out)
    for kind, path in write_reports(result, outputs):
        print(f"{kind} written: {path}", file=out)
    return result.exit_code


def _with_rank(v: Verdict, rank: int | None) -> Verdict:
    return v if rank is None else replace(v, rank=rank)
