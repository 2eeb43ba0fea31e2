"""A cluster comparison as a stream of events, like a single one (:mod:`perfcmp_core.events`).

The headless commands consume the stream in-process; the app's comparison child pipes it to the
Ranks screen. On top of the usual events, :class:`RankLoaded` reports each rank as its summary
arrives, so progress over hundreds of ranks means something.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import InputError
from ..events import Event, Finished, Phase, Planned, Skipped, TableReady
from ..gcpause import gc_paused
from ..processes import start_method
from ..runner import ChildRun
from .request import ClusterRequest
from .run import map_ranks, rank_tasks
from .summary import RankFailure, RankOutcome, import_workers_modules
from .tables import CLUSTER_GROUPS, cluster_tables

LOAD_PHASE = "load ranks"
TABLE_PHASE = "ClusterCompare"
#: What the app's comparison child runs (named: a spawned child imports it itself).
TARGET = "perfcmp_core.cluster.events:cluster_events"


@dataclass
class RankLoaded:
    """One rank of one side is summarised (or failed: ``failed`` holds the one-line reason)."""

    side: str
    rank: int
    done: int  # tasks finished so far, this one included
    total: int
    seconds: float
    failed: str = ""


def cluster_events(request: ClusterRequest) -> Iterator[Event | RankLoaded]:
    """Load every rank (on the engine the request names), then yield both cluster tables."""
    t_start = time.perf_counter()
    yield Planned((LOAD_PHASE, TABLE_PHASE))
    yield Phase(LOAD_PHASE)
    tasks = rank_tasks(request.inputs, request.pair.base_opts, request.pair.comp_opts)
    outcomes: list[RankOutcome] = []
    for outcome in map_ranks(tasks, request.options):
        outcomes.append(outcome)
        failed = outcome.message if isinstance(outcome, RankFailure) else ""
        yield RankLoaded(outcome.side, outcome.rank, len(outcomes), len(tasks),
                         0.0 if failed else outcome.seconds, failed)  # type: ignore[union-attr]
    yield Phase(LOAD_PHASE, done=True, seconds=time.perf_counter() - t_start)

    t0 = time.perf_counter()
    yield Phase(TABLE_PHASE)
    tables = cluster_tables(request.inputs, outcomes)
    data = tables.ranks.data
    if not (data["base_e2e"].notna() & data["comp_e2e"].notna()).any():
        first = next((o for o in outcomes if isinstance(o, RankFailure)), None)
        why = f": {first.side} rank {first.rank}: {first.message}" if first else ""
        raise InputError(None, f"no rank pair could be compared{why}")
    yield TableReady(tables.ranks)
    if tables.groups.empty:
        yield Skipped((CLUSTER_GROUPS,), tables.groups.absent_reason)
    else:
        yield TableReady(tables.groups)
    yield Phase(TABLE_PHASE, done=True, seconds=time.perf_counter() - t0)
    yield Finished(time.perf_counter() - t_start, notes=tables.notes)


def start_cluster(request: ClusterRequest) -> ChildRun:
    """Start :func:`cluster_events` in a child process (the app's first run, and its retry).

    Forked, the child inherits the loaders and metrics imported here first, and so do the pool
    processes it forks in turn.
    """
    if start_method() == "fork":
        with gc_paused():  # imports: hundreds of thousands of objects, no cycles
            import_workers_modules()
    return ChildRun(TARGET, request=request)
