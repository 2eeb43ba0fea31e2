"""One cluster comparison, fully specified before any rank is opened.

A :class:`ClusterRequest` wraps the command line's :class:`~perfcmp_core.request.RunRequest` of
the two cluster folders (their options and already-read configuration files) with the ranks found
in them and where to load them. It is frozen and picklable like the run request, so the app's
comparison child receives exactly what the command line checked; the detailed comparison of one
rank pair is that run request with the two rank paths in it (:meth:`ClusterRequest.rank_request`),
so it is compared exactly like a single pair.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError
from ..request import RunRequest
from .inputs import ClusterInputs, ClusterSide, cluster_inputs
from .ranks import RankSet
from .run import ClusterOptions


@dataclass(frozen=True)
class ClusterRequest:
    pair: RunRequest  # the two cluster folders as given, with every option and config
    inputs: ClusterInputs
    options: ClusterOptions

    @property
    def base(self) -> str:
        return self.pair.base

    @property
    def comp(self) -> str:
        return self.pair.comp

    def rank_request(self, rank: int) -> RunRequest:
        """The run request of one rank pair (paths under the folders as the user gave them)."""
        b, c = _member(self.inputs.base, rank), _member(self.inputs.comp, rank)
        if b is None or c is None:
            side = "base" if b is None else "comparison"
            raise InputError(None, f"rank {rank} is not in the {side} cluster: nothing to compare")
        return replace(self.pair, base=b, comp=c)


def cluster_request(pair: RunRequest, ranks: RankSet | None, options: ClusterOptions) -> ClusterRequest | None:
    """The cluster comparison of ``pair``'s two paths, or None when they are not two folders of
    ranks (``pair`` is then compared as one profile pair)."""
    inputs = cluster_inputs(pair.base, pair.comp, ranks)
    return None if inputs is None else ClusterRequest(pair, inputs, options)


def _member(side: ClusterSide, rank: int) -> str | None:
    """A member's path spelled under the folder the user typed (``runs/v1/x_ascend_pt``), so the
    detailed comparison's labels read like the command line."""
    path = side.path(rank)
    return None if path is None else os.path.join(side.given, Path(path).name)
