"""``perfcmp-tui export`` / ``summary`` of two cluster folders.

Every rank is loaded and summarised (the cluster tables), then the rank pair the tables single out
— the largest regression, else the slowest rank — is compared in full, exactly as ``--rank N``
would. The terminal shows the ranks, who waits for whom, then that pair's usual summary; the
workbook holds that pair's sheets (the reference's layout) followed by ``ClusterCompare`` and
``ClusterCommGroups``; ``--json`` holds every table.
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..collect import ResultBuilder, collect
from ..compare.result import ComparisonResult
from ..events import Phase
from ..headless import check_destinations, write_outputs
from ..pipeline import comparison_events
from ..report import terminal_report
from .events import LOAD_PHASE, RankLoaded, cluster_events
from .report import format_ranks, format_waits
from .request import ClusterRequest
from .tables import CLUSTER_COMPARE, CLUSTER_GROUPS, cluster_result, focus_rank


def run_cluster_export(
    request: ClusterRequest,
    *,
    out_dir: str | None,
    json_path: str | None,
    write_workbook: bool,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    check_destinations(out_dir, json_path, write_workbook)
    cluster, load_s = _run_cluster(request)
    ranks = cluster.tables[CLUSTER_COMPARE]
    print(format_ranks(ranks, _headline(request, load_s)), file=out)
    waits = format_waits(cluster.tables.get(CLUSTER_GROUPS))
    if waits:
        print(waits, file=out)
    rank, why = focus_rank(ranks)
    assert rank is not None  # cluster_events fails when no rank pair could be compared
    detail_request = request.rank_request(rank)
    print(file=out)
    print(f"Rank {rank} in detail ({why}; --rank N shows another): {detail_request.base} vs "
          f"{detail_request.comp}", file=out)
    detail = collect(comparison_events(detail_request), detail_request.base, detail_request.comp)
    merged = cluster_result(cluster, detail, rank, why)
    merged.options.update({"detail_base": detail_request.base, "detail_comp": detail_request.comp})
    print(terminal_report(merged), file=out)
    return write_outputs(merged, out_dir=out_dir, json_path=json_path,
                         write_workbook=write_workbook, out=out)


def _run_cluster(request: ClusterRequest) -> tuple[ComparisonResult, float]:
    """The cluster tables and notes, and the seconds the ranks took; progress on stderr when it
    is a terminal."""
    builder = ResultBuilder(request.base, request.comp)
    load_s = 0.0
    progress = sys.stderr.isatty()
    for event in cluster_events(request):
        if isinstance(event, RankLoaded):
            if progress:
                print(f"\rloading ranks on {request.options.engine}: {event.done}/{event.total}",
                      end="", file=sys.stderr, flush=True)
            continue
        builder.add(event)
        if isinstance(event, Phase) and event.done and event.name == LOAD_PHASE:
            load_s = event.seconds
            if progress:
                print("\r\x1b[K", end="", file=sys.stderr, flush=True)
    return builder.snapshot(), load_s


def _headline(request: ClusterRequest, load_s: float) -> str:
    inputs = request.inputs
    paired = len(inputs.paired)
    return (f"Cluster: {paired} rank pair{'s' if paired != 1 else ''} compared — base "
            f"{request.base} ({len(inputs.base.ranks)} ranks), comparison {request.comp} "
            f"({len(inputs.comp.ranks)} ranks); ranks loaded in {load_s:.2f} s on "
            f"{request.options.engine}")
