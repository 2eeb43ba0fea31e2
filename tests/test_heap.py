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



def test_an_analysis_returns_what_it_freed_once_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """A side's process waits with its profile once the analysis is made (for the other side,
    or while the profile is sent): the heap is trimmed then, after the last part is made."""
    from pathlib import Path

    from perfcmp_core import side
    from perfcmp_core.load import load_profile
    from perfcmp_core.options import CompareOptions, LoadOptions
    from perfcmp_core.request import RunRequest

    fixture = str(Path(__file__).resolve().parents[1] / "fixtures" / "npu_text" / "base_ascend_pt")
    request = RunRequest.read(fixture, fixture, LoadOptions(), LoadOptions(), CompareOptions())
    calls: list[str] = []
    real_analyse = side.analyse
    monkeypatch.setattr(side, "analyse", lambda *a: calls.append("advisor") or real_analyse(*a))
    monkeypatch.setattr(side, "return_free_memory", lambda: calls.append("trim"))
    side.analyse_side(load_profile(fixture, LoadOptions(use_cache=False)), request.equivalence, request.advisor)
    assert calls == ["advisor", "trim"]
