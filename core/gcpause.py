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


def keep_out_of_collections() -> None:
    """Take every object alive now out of the collector's full scans (``gc.freeze``).

    A finished comparison holds its tables for the rest of the session — on the 0.9 GB NPU Text
    pair millions of objects (object-dtype columns of names and stacks) — and every full
    collection scans them all to find nothing: 110–200 ms of one key's CPU, whichever key
    happened to trigger it (docs/performance.md, the Timeline). Frozen objects are still freed
    when their last reference goes; only cycles among them wait for :func:`collect_again`.
    """
    gc.freeze()


def collect_again() -> None:
    """Hand the objects :func:`keep_out_of_collections` froze back to the collector: the run's
    results are being replaced (their cycles can go) or the app is closing."""
    gc.unfreeze()
