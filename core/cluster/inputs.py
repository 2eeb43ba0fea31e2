"""Two cluster folders → the rank pairs to compare.

A cluster folder holds one member per rank: a run folder (``*_ascend_pt`` / ``*_ascend_ms``, Text
or Db, any mix) or a GPU trace. Ranks pair by rank id, whatever the members are called or which
kind they are; a rank present on one side only is kept and reported, never fatal. When the two
inputs are not both folders of ranks, :func:`cluster_inputs` says so with ``None`` and the caller
compares one profile pair as before (``--rank N`` always means exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, UsageError
from ..load.detect import cluster_members, detect, member_rank
from ..notes import CLUSTER, Note
from .ranks import RankSet, format_ranks, ranks_phrase


@dataclass(frozen=True)
class ClusterSide:
    """One side's ranks: rank → absolute path of its folder or trace (what the workers open)."""

    given: str  # the folder as the user typed it
    members: tuple[tuple[int, str], ...]  # (rank, path), by rank

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(r for r, _ in self.members)

    def path(self, rank: int) -> str | None:
        return dict(self.members).get(rank)


@dataclass(frozen=True)
class ClusterInputs:
    """The two sides after ``--ranks``; ranks of either side, and notes about what is missing."""

    base: ClusterSide
    comp: ClusterSide
    notes: tuple[Note, ...] = ()

    @property
    def ranks(self) -> tuple[int, ...]:
        """Every rank of either side, in order."""
        return tuple(sorted({*self.base.ranks, *self.comp.ranks}))

    @property
    def paired(self) -> tuple[int, ...]:
        return tuple(r for r in self.ranks if r in self.base.ranks and r in self.comp.ranks)


def cluster_inputs(base: str, comp: str, selection: RankSet | None = None) -> ClusterInputs | None:
    """The cluster comparison of ``base`` and ``comp``, or None when they are not two folders of
    ranks, at least one holding several (or any two with ``--ranks``). A single profile against a
    folder of ranks is None too: the single comparison then asks which rank (``--rank N``)."""
    found = {side: _members(path) for side, path in (("base", base), ("comp", comp))}
    for side, path in (("base", base), ("comp", comp)):
        if found[side] is None:
            if selection is not None:
                raise UsageError(f"--ranks needs two folders of ranks (rank folders or per-rank "
                                 f"traces); {path} is a single profile")
            return None
    counts = [len(m or ()) for m in found.values()]
    if max(counts) < 2 and selection is None:
        return None
    for side, path in (("base", base), ("comp", comp)):
        if not found[side]:
            raise InputError(path, "holds no rank folders (*_ascend_pt, *_ascend_ms) or per-rank "
                                   "traces (*.pt.trace.json)")
    sides = [_ranked(path, found[side] or []) for side, path in (("base", base), ("comp", comp))]
    b, c = sides
    notes: list[Note] = []
    if selection is not None:
        absent = selection.missing_from({*b.ranks, *c.ranks})
        b, c = _select(b, selection), _select(c, selection)
        if not b.members and not c.members:
            raise InputError(None, f"--ranks {selection.text}: no such rank in {base} "
                                   f"(ranks {format_ranks(sides[0].ranks)}) or {comp} "
                                   f"(ranks {format_ranks(sides[1].ranks)})")
        if absent:
            notes.append(Note(f"--ranks {selection.text}: in neither cluster: {ranks_phrase(absent)}",
                              origin=CLUSTER))
    only_base = [r for r in b.ranks if r not in c.ranks]
    only_comp = [r for r in c.ranks if r not in b.ranks]
    if len(only_base) == len(b.ranks) and len(only_comp) == len(c.ranks):
        raise InputError(None, f"no rank is in both clusters: {base} holds ranks "
                               f"{format_ranks(b.ranks) or 'none'}, {comp} ranks "
                               f"{format_ranks(c.ranks) or 'none'}")
    if only_base:
        notes.append(Note(f"only in base ({base}), not compared: {ranks_phrase(format_ranks(only_base))}",
                          origin=CLUSTER))
    if only_comp:
        notes.append(Note(f"only in comparison ({comp}), not compared: "
                          f"{ranks_phrase(format_ranks(only_comp))}", origin=CLUSTER))
    return ClusterInputs(b, c, tuple(notes))


def _members(given: str) -> list[Path] | None:
    path = Path(given).expanduser()
    if not path.exists():
        detect(given)  # raises the precise error: no such file, a broken symbolic link …
    return cluster_members(path.resolve())


def _ranked(given: str, members: list[Path]) -> ClusterSide:
    """Rank every member; a member without a recorded rank, or two members of one rank, is an
    error naming them (pairing by guesswork would compare the wrong ranks)."""
    by_rank: dict[int, Path] = {}
    for member in members:
        rank, _ = member_rank(member)
        if rank is None:
            raise InputError(member, "cannot tell which rank this is: no profiler_info_<rank>.json, "
                                     "ascend_*_profiler_<rank>.db or distributedInfo.rank, and no "
                                     "rank<N> in its name")
        if rank in by_rank:
            raise InputError(given, f"holds two profiles of rank {rank}: {by_rank[rank].name} and "
                                    f"{member.name} (keep one, or pick with --rank N)")
        by_rank[rank] = member
    return ClusterSide(given, tuple((r, str(by_rank[r])) for r in sorted(by_rank)))


def _select(side: ClusterSide, selection: RankSet) -> ClusterSide:
    return ClusterSide(side.given, tuple((r, p) for r, p in side.members if r in selection))
