"""Issue 27: loaders are found through one registry (``perfcmp_core.load.LOADERS``), not an
if/elif: every input kind the model knows has exactly one, and each reads its kind's fixture."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import get_args

import pytest

from perfcmp_core.load import LOADERS, _loader, detect
from perfcmp_core.model import Kind
from perfcmp_core.options import LoadOptions

FIX = Path(__file__).resolve().parents[1] / "fixtures"
#: One fixture of each kind, detected (not named here by kind).
EXAMPLES = (FIX / "gpu" / "base.pt.trace.json", FIX / "npu_text" / "base_ascend_pt", FIX / "npu_db" / "base_ascend_pt")


def test_every_kind_has_one_loader() -> None:
    assert set(LOADERS) == set(get_args(Kind))
    for kind in LOADERS:
        assert list(inspect.signature(_loader(kind)).parameters) == ["src", "opts"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_the_registered_loader_reads_its_kind(path: Path) -> None:
    src = detect(str(path))
    profile = _loader(src.kind)(src, LoadOptions(use_cache=False))
    assert profile.meta.kind == src.kind and len(profile.kernels) > 0
