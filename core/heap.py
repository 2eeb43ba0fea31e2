"""Give the memory a finished phase freed back to the system.

Loading a 0.9 GB NPU Text side peaks near 0.9 GB in its process, and most of that — the trace's
event columns, the side files' frames — is freed when the profile is built. glibc's allocator
keeps freed heap pages mapped for reuse, so the process still holds ≈ 0.75 GB for a profile of
≈ 0.4 GB, and every process of the run counts it against the run's memory (summed PSS) until it
ends. ``malloc_trim`` returns those pages (MADV_DONTNEED) in about ten milliseconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Callable

_trim: Callable[[int], int] | None = None
_looked_up = False


def return_free_memory() -> None:
    """Hand the allocator's free pages back to the system where the C library can (glibc on
    Linux); elsewhere nothing."""
    global _trim, _looked_up
    if not _looked_up:
        _looked_up = True
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                _trim = None
    if _trim is not None:
        _trim(0)
