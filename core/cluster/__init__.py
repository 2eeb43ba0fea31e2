"""Whole clusters: compare every rank of two runs, on this machine or on a Dask cluster.

* :mod:`.inputs` — two folders of ranks (run folders or per-rank GPU traces, any mix of kinds) →
  the rank pairs, ranks found on one side only, ``--ranks`` selections;
* :mod:`.summary` — the worker function: load one rank, reduce it to a small summary;
* :mod:`.pool_map` / :mod:`.dask_map` — the map over the ranks (a local process pool, or Dask);
* :mod:`.tables` — the reduce: the ``ClusterCompare`` and ``ClusterCommGroups`` tables and flags;
* :mod:`.run` — one comparison: tasks, engine, reduce.
"""

from .inputs import ClusterInputs, ClusterSide, cluster_inputs
from .ranks import RankSet, format_ranks, parse_ranks
from .run import ClusterOptions, compare_cluster, map_ranks, rank_tasks
from .summary import RankFailure, RankSummary, RankTask, summarize_rank
from .tables import CLUSTER_COMPARE, CLUSTER_GROUPS, ClusterTables, cluster_tables

__all__ = [
    "CLUSTER_COMPARE", "CLUSTER_GROUPS", "ClusterInputs", "ClusterOptions", "ClusterSide",
    "ClusterTables", "RankFailure", "RankSet", "RankSummary", "RankTask", "cluster_inputs",
    "cluster_tables", "compare_cluster", "format_ranks", "map_ranks", "parse_ranks", "rank_tasks",
    "summarize_rank",
]
