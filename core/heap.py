"""Give the memory a finished phase freed back to the system.

A 0.9 GB NPU Text side frees much of what it builds — the trace's parts once joined, its event
columns, nesting's window tables, the side files' frames — phase by phase. glibc's allocator
keeps freed heap pages mapped for reuse, so without this a process held ≈ 0.75 GB for a profile
of ≈ 0.4 GB, and every phase started from the last one's high-water mark; every process of the
run counts that against the run's memory (summed PSS) until it ends. ``malloc_trim`` returns
those pages (MADV_DONTNEED) in about ten milliseconds, so the loaders call it after each phase
that frees a lot (docs/performance.md, one NPU Text side's load memory).
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache
from typing import Callable


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once; None where there is none (not Linux, or musl).

    Looked up among the symbols this process already has (the C library is loaded into every
    Python process): ``ctypes.util.find_library`` would run ``ldconfig -p`` in a new process,
    once in every process of ours that trims."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def return_free_memory() -> None:
    """Hand the allocator's free pages back to the system where the C library can (glibc on
    Linux); elsewhere nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
