"""End to end: the installed ``perfcmp-tui`` on two cluster folders in a real terminal (tmux).

The Ranks screen comes first; Enter opens a rank pair (a comparison child of its own); quitting
leaves no process behind — neither the cluster's child and its pool workers nor the rank pair's
child. Every process the command starts inherits a tag in its environment, which is how the test
finds them afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from test_tui_e2e import EXE, Terminal, pytestmark  # noqa: F401  (skips without tmux)

BASE, COMP = "fixtures/cluster/npu_base", "fixtures/cluster/npu_comp"


def tagged(tag: str) -> list[int]:
    """Processes whose environment carries ``PERFCMP_E2E_TAG=tag``."""
    needle = f"PERFCMP_E2E_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_ranks_first_then_a_rank_pair_and_nothing_left_behind() -> None:
    tag = uuid.uuid4().hex
    term = Terminal(f"env PERFCMP_E2E_TAG={tag} {EXE} {BASE} {COMP} --no-cache", size=(160, 40))
    try:
        screen = term.wait("slowest; largest regression", "4 ranks")
        assert " 0 Ranks " in screen and "Enter on a rank compares that rank pair" in screen
        assert len(tagged(tag)) >= 1  # the app is running
        term.keys("j", "Enter")
        screen = term.wait("rank 1 node-a_40310", "Where the time went", absent="q cancels")
        # fixtures/README.md: rank 1 computes +0.570 ms over its 3 steps, its GEMMs longer
        assert "+0.19 ms/step" in screen and "GEMM kernels +0.20" in screen
        term.keys("Q")  # the rank pair finished loading: Q quits at once
        term.wait("EXIT:0")
        end = time.monotonic() + 10
        while tagged(tag) and time.monotonic() < end:
            time.sleep(0.2)
        left = [p for p in tagged(tag) if os.path.exists(f"/proc/{p}")]
        assert left == [], f"processes left after quitting: {left}"
    finally:
        term.close()
