"""Pause Python's cyclic garbage collector around allocation bursts that create no cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, then restore it as it was.

    Parsing a trace allocates millions of dicts and strings, and importing pandas and Textual
    hundreds of thousands of objects, none in reference cycles; every allocation burst triggers a
    generation scan that finds nothing. Pausing it halved ``orjson.loads`` of a 34 MB trace
    (0.41 → 0.18 s) and saves ≈ 10 % of the app's import time (docs/performance.md).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
