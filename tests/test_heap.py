"""The memory a phase freed goes back to the system (:mod:`perfcmp_core.heap`)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

#: 200 MB of C-heap blocks freed under a live one (so ``free`` alone cannot shrink the heap);
#: prints how many MB the process's resident set lost at the call.
_SCRIPT = """
import os
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
from perfcmp_core.heap import return_free_memory
blocks = [bytearray(100_000) for _ in range(2000)]
keep = bytearray(100_000)
del blocks
before = rss()
return_free_memory()
print((before - rss()) // 2**20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_freed_heap_pages_are_returned() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True)
    assert int(out.stdout) >= 100

