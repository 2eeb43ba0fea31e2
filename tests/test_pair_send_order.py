"""When the comparison side's load worker sends its profile (``pair.SEND_FIRST_MAX_BYTES``):
before its analysis for a small profile, so that the steps needing only the profiles start
meanwhile; with its analysis for a large one, which would otherwise be held twice while it is
analysed."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import pytest

from perfcmp_core import pair
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions
from perfcmp_core.processes import start_method

GPU = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def _waits_for(flag: Path, profile: Profile) -> bool | None:
    """The comparison side's analysis: whether this process received its profile (``flag``
    written) while it was being made, waiting up to 3 s for it."""
    if "comp" not in profile.meta.source:
        return None
    deadline = time.monotonic() + 3.0
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return flag.exists()


@pytest.mark.skipif(start_method() != "fork", reason="the limit is set in this process, read in the worker")
@pytest.mark.parametrize("limit, sent_first", [(1 << 62, True), (0, False)])
def test_a_large_comparison_profile_comes_with_its_analysis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             limit: int, sent_first: bool) -> None:
    monkeypatch.setattr(pair, "SEND_FIRST_MAX_BYTES", limit)
    flag = tmp_path / "received"
    opts = LoadOptions()
    seen = None
    for side, profile, analysis, _ in pair.iter_pair(str(GPU / "base.pt.trace.json"), str(GPU / "comp.pt.trace.json"),
                                                     opts, opts, parallel=True, analyse=partial(_waits_for, flag)):
        if side == "comparison":
            flag.touch()
            seen = analysis()
    assert seen is sent_first


def test_nbytes_counts_every_table_column() -> None:
    """:meth:`Profile.nbytes` is the sum of every table's column buffers (an object column: one
    pointer per row)."""
    from perfcmp_core.load import load_profile

    p = load_profile(str(GPU / "base.pt.trace.json"), LoadOptions())
    want = 0
    for table in p.tables().values():
        for col in table.columns:
            values = table[col].to_numpy()
            want += values.nbytes if values.dtype != object else 8 * len(values)
    assert p.nbytes() == want > 0
