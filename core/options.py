"""Options shared by every front end (``info``, ``export``, ``summary``, the TUI).

They are plain frozen dataclasses so that they can be pickled into the worker process that loads
profiles, and so that the CLI, the TUI and tests build them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Flow categories that link GPU host ops to kernels when correlation ids are missing.
DEFAULT_GPU_FLOW_CATS: tuple[str, ...] = ("async_gpu", "async_cpu_to_gpu", "ac2g", "async")

#: Size caps (bytes), skipped by ``--force``. The reference documents these values.
CSV_CAP = 5 * 1024**3
JSON_CAP = 10 * 1024**3
DB_CAP = 8 * 1024**3


@dataclass(frozen=True)
class LoadOptions:
    """How to find and read one profile."""

    rank: int | None = None  # pick one rank folder / trace out of several
    step: int | None = None  # keep only this step (ProfilerStep#N / STEP_TIME id)
    force: bool = False  # skip size caps and the owner check
    gpu_flow_cat: str = ""  # replaces DEFAULT_GPU_FLOW_CATS (flows are only a fallback)
    load_memory: bool = True  # skip [memory] / memory csv parsing when no memory compare runs
    use_cache: bool = True  # reuse/store the loaded profile in the user cache (core/cache.py)
    #: Part of a large trace's events parsed by a forked child beside this process (0: none;
    #: set by ``pair.iter_pair`` for the larger side of an unbalanced pair; load/halves.py).
    split: float = 0.0

    @property
    def flow_cats(self) -> tuple[str, ...]:
        return (self.gpu_flow_cat.lower(),) if self.gpu_flow_cat else DEFAULT_GPU_FLOW_CATS


COMPARISONS: tuple[str, ...] = (
    "profiling",
    "operator",
    "communication",
    "memory",
    "kernel",
    "api",
)


@dataclass(frozen=True)
class CompareOptions:
    """Which comparisons run and how (mirrors ``msprof-analyze compare`` options)."""

    enabled: frozenset[str] = field(default_factory=lambda: frozenset(COMPARISONS))
    disable_details: bool = False
    disable_module: bool = False
    max_kernel_num: int | None = None
    op_name_map: tuple[tuple[str, str], ...] = ()
    use_input_shape: bool = False
    use_kernel_type: bool = False
    #: pair ops by their recorded names only (no equivalence table, no structural pairing), as the
    #: reference does
    exact_names: bool = False

    def enables(self, comparison: str) -> bool:
        return comparison in self.enabled

    @property
    def name_map(self) -> dict[str, str]:
        return dict(self.op_name_map)
