"""One rank reduced to the few numbers a cluster comparison needs — computed where it is loaded.

:func:`summarize_rank` runs in a worker (a local process or a Dask worker): it loads one rank's
profile (through the profile cache, so reopening a cluster is fast), computes its OverallMetrics
figures, per-step E2E and per-group wait / transmit times, and returns a :class:`RankSummary` of a
few hundred bytes. The profile itself never leaves the worker, so the client holds a small
summary per rank however large the cluster is.

Every figure is the one the single-rank comparison shows (the same :func:`overall_metrics`, and a
step's E2E is what ``--base-step N`` reports), so a rank of the cluster table and the detailed
comparison of that rank pair never disagree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import InputError
from ..model import Profile
from ..options import LoadOptions

BASE, COMPARISON = "base", "comparison"


@dataclass(frozen=True)
class RankTask:
    """Load and summarise one rank of one side."""

    side: str  # BASE | COMPARISON
    rank: int
    path: str  # absolute: a worker's working directory is not the client's
    opts: LoadOptions


@dataclass(frozen=True)
class GroupTimes:
    """A communication group's uncovered time on one rank, split like OverallMetrics does."""

    group: str  # HCCL group id, spelled the same for Text and Db exports
    name: str  # process-group name (dp, tp …) when the profile records it, else ""
    wait_ns: int
    transmit_ns: int


@dataclass(frozen=True)
class RankSummary:
    """What travels back from a worker for one rank of one side (all times int ns)."""

    side: str
    rank: int
    path: str
    label: str  # "NPU Text", "GPU" … (ProfileMeta.label)
    e2e_ns: int
    compute_ns: int
    uncovered_ns: int
    wait_ns: int
    free_ns: int
    steps: tuple[int, ...]
    step_e2e_ns: tuple[int, ...]  # E2E of each step, in ``steps`` order
    groups: tuple[GroupTimes, ...]
    notes: tuple[str, ...]  # its loader's and its figures' (the cluster says each once, by rank)
    seconds: float  # loading and summarising, in the worker

    @property
    def busy_ns(self) -> int:
        """E2E minus the wait for other ranks: the time this rank set the pace. In a job whose
        collectives synchronise the ranks, E2E is about equal everywhere; this is not."""
        return self.e2e_ns - self.wait_ns


@dataclass(frozen=True)
class RankFailure:
    """A rank that could not be loaded: reported by name, the other ranks still compare."""

    side: str
    rank: int
    path: str
    message: str  # the one-line InputError message


RankOutcome = RankSummary | RankFailure


def import_workers_modules() -> None:
    """Import what :func:`summarize_rank` needs, so that forked workers inherit it instead of each
    importing the loaders and the metrics again."""
    from ..compare import overall_metrics  # noqa: F401
    from ..load import gpu, npu_db, npu_text, steps  # noqa: F401


def summarize_rank(task: RankTask) -> RankOutcome:
    """Load ``task``'s rank and reduce it (the function every engine maps over the ranks).

    Bad input becomes a :class:`RankFailure`; anything else is a bug and propagates.
    """
    from ..load import load_profile

    t0 = time.perf_counter()
    try:
        profile = load_profile(task.path, task.opts)
    except InputError as exc:
        return RankFailure(task.side, task.rank, task.path, exc.message)
    return summarize_profile(task, profile, t0)


def summarize_profile(task: RankTask, profile: Profile, t0: float) -> RankSummary:
    """The summary of an already loaded rank (``t0``: when its loading started)."""
    from ..compare.masks import load_masks
    from ..compare.overall_metrics import overall_metrics
    from ..load.steps import select_step, step_ids

    masks = load_masks(None)  # the figures used here do not depend on the kernel-class keywords
    side = overall_metrics(profile, masks)
    steps = tuple(step_ids(profile))
    per_step = tuple(overall_metrics(select_step(profile, s), masks).e2e_ns for s in steps)
    groups = tuple(GroupTimes(group_id(g), side.pg_names.get(g, ""), t.wait_ns, t.transmit_ns)
                   for g, t in side.groups.items())
    return RankSummary(
        side=task.side, rank=task.rank, path=task.path, label=profile.meta.label,
        e2e_ns=side.e2e_ns, compute_ns=side.compute_ns, uncovered_ns=side.uncovered_ns,
        wait_ns=side.wait_ns, free_ns=side.free_time_ns, steps=steps, step_e2e_ns=per_step,
        groups=groups, notes=tuple(n.text for n in profile.meta.notes) + tuple(side.notes),
        seconds=time.perf_counter() - t0,
    )


def group_id(key: str) -> str:
    """The HCCL group id of an OverallMetrics group key: Text exports name a group by its thread
    (``Group <id> Communication``), Db exports by the id itself."""
    if key.startswith("Group ") and key.endswith(" Communication"):
        return key[len("Group "):-len(" Communication")]
    return key
