"""Give the memory a finished phase freed back to the system, and keep large blocks out of the
heap where a process makes one after another (:func:`map_large_blocks`).

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
import ctypes.util
import sys
from functools import cache
from typing import Callable


#: ``mallopt``'s parameter for the size from which a block is mapped on its own (glibc).
_M_MMAP_THRESHOLD = -3
#: Blocks of this size or more are mapped on their own once :func:`map_large_blocks` is called.
LARGE_BLOCK = 256 * 1024


@cache
def _libc() -> ctypes.CDLL | None:
    """glibc, looked up once; None where there is none (not Linux, or musl: no ``mallopt``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both or neither
    except (OSError, AttributeError):
        return None
    return libc


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None where there is none."""
    libc = _libc()
    return None if libc is None else libc.malloc_trim  # type: ignore[no-any-return]


def return_free_memory() -> None:
    """Hand the allocator's free pages back to the system where the C library can (glibc on
    Linux); elsewhere nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def map_large_blocks() -> None:
    """From now on, have glibc map each block of :data:`LARGE_BLOCK` bytes or more on its own
    and unmap it when it is freed (elsewhere nothing).

    By default glibc raises that threshold to the size of each mapped block freed (up to 32 MB),
    after which blocks that size come from the heap, which keeps what they free mapped and,
    fragmented by the small objects allocated among them, grows. A process that makes one large
    block after another (the workbook writer: a few MB of XML per chunk of rows) then holds
    several times its working set, and in a forked pair each such page is a copy: on the 32x92
    NPU Db pair's workbook the pair peaked ≈ 120 MB higher with the default (docs/performance.md).
    The setting lasts for the process (and the children it forks): it is for processes that
    end after that work.
    """
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)
