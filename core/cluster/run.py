"""One cluster comparison: rank tasks → the chosen engine's map → the reduce.

The map runs :func:`~.summary.summarize_rank` once per rank and side, on a local process pool
(:mod:`.pool_map`) or on a Dask cluster (:mod:`.dask_map`); both yield the same outcomes, so the
tables do not depend on where the ranks were loaded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..options import LoadOptions
from .inputs import ClusterInputs
from .ranks import RankSet
from .summary import BASE, COMPARISON, RankOutcome, RankTask
from .tables import ClusterTables, cluster_tables

#: Dask's own variable for the scheduler address (read when ``--scheduler`` is not given).
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: ``--scheduler local`` keeps the map on this machine even when the variable is set.
LOCAL = "local"


@dataclass(frozen=True)
class ClusterOptions:
    """How the ranks of a cluster are selected and where they are loaded."""

    ranks: RankSet | None = None  # --ranks
    scheduler: str | None = None  # --scheduler: a Dask address, "local", or None (environment)
    jobs: int | None = None  # --jobs: processes of the local pool (default: the cores)

    @property
    def address(self) -> str | None:
        """The Dask scheduler to use, or None for the local pool."""
        chosen = self.scheduler if self.scheduler is not None else os.environ.get(SCHEDULER_ENV, "")
        chosen = chosen.strip()
        return None if not chosen or chosen == LOCAL else chosen

    @property
    def engine(self) -> str:
        """For progress and messages: where the ranks load."""
        return f"Dask {self.address}" if self.address else "local processes"


def rank_tasks(inputs: ClusterInputs, base_opts: LoadOptions, comp_opts: LoadOptions) -> list[RankTask]:
    """One task per rank and side, comparison ranks interleaved with base ones so that a rank
    pair completes early (and progress means something)."""
    tasks = []
    for rank in inputs.ranks:
        for side, members, opts in ((BASE, inputs.base, base_opts), (COMPARISON, inputs.comp, comp_opts)):
            path = members.path(rank)
            if path is not None:
                tasks.append(RankTask(side, rank, path, replace(opts, rank=None)))
    return tasks


def map_ranks(tasks: list[RankTask], options: ClusterOptions) -> Iterator[RankOutcome]:
    """Each task's outcome as it completes, on the engine ``options`` choose."""
    address = options.address
    if address is not None:
        from .dask_map import map_on_dask

        return map_on_dask(tasks, address)
    from .pool_map import map_in_pool

    return map_in_pool(tasks, options.jobs)


def compare_cluster(
    inputs: ClusterInputs,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    options: ClusterOptions,
    progress: Callable[[RankOutcome, int, int], None] | None = None,
) -> tuple[ClusterTables, float]:
    """Map and reduce; ``progress(outcome, done, total)`` after each rank. Returns the tables and
    the seconds the map took."""
    tasks = rank_tasks(inputs, base_opts, comp_opts)
    t0 = time.perf_counter()
    outcomes: list[RankOutcome] = []
    for outcome in map_ranks(tasks, options):
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome, len(outcomes), len(tasks))
    return cluster_tables(inputs, outcomes), time.perf_counter() - t0
