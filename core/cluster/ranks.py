"""Rank sets as users write them (``--ranks 0-7,12``) and as messages print them (``0-3,5``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import UsageError

_PART = re.compile(r"(\d+)(?:-(\d+))?")
#: Longest accepted option text: a selection, not a data file.
_MAX_TEXT = 4096


@dataclass(frozen=True)
class RankSet:
    """Inclusive, sorted, non-overlapping ``(first, last)`` ranges (so ``0-100000`` costs nothing)."""

    ranges: tuple[tuple[int, int], ...]
    text: str  # as the user wrote it, for messages

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and any(lo <= rank <= hi for lo, hi in self.ranges)

    def missing_from(self, present: Iterable[int]) -> str:
        """The selected ranks not in ``present``, formatted (``"4-7,12"``); "" when all are there.
        Gaps are computed as ranges, so a selection of a million ranks is never expanded."""
        have = sorted(set(present))
        gaps: list[str] = []
        for lo, hi in self.ranges:
            cur = lo
            for r in have:
                if r < cur or r > hi:
                    continue
                if r > cur:
                    gaps.append(_span(cur, r - 1))
                cur = r + 1
            if cur <= hi:
                gaps.append(_span(cur, hi))
        return ",".join(gaps)


def parse_ranks(text: str) -> RankSet:
    """``"0-7,12"`` → ranks 0..7 and 12. Raises UsageError (exit 2) on anything else."""
    if len(text) > _MAX_TEXT:
        raise UsageError(f"--ranks is longer than {_MAX_TEXT} characters")
    spans: list[tuple[int, int]] = []
    for part in text.replace(" ", "").split(","):
        m = _PART.fullmatch(part)
        if m is None:
            raise UsageError(f"--ranks {text!r}: {part!r} is not a rank or a range like 0-7 "
                             "(write e.g. --ranks 0-7,12)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise UsageError(f"--ranks {text!r}: the range {part} runs backwards")
        spans.append((lo, hi))
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return RankSet(tuple((lo, hi) for lo, hi in merged), text)


def format_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5]`` → ``"0-3,5"`` (sorted, duplicates dropped)."""
    out: list[str] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(_span(run[0], run[-1]))
        run = [r]
    if run:
        out.append(_span(run[0], run[-1]))
    return ",".join(out)


def ranks_phrase(formatted: str) -> str:
    """``"3"`` → ``"rank 3"``, ``"0-3,5"`` → ``"ranks 0-3,5"``."""
    return f"rank {formatted}" if formatted.isdigit() else f"ranks {formatted}"


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"
