"""Communication wait on the real torch_npu exports (issue 24 item 4): the Text export of a job
now reports the wait its Db export reports, both exactly the profiler's own communication
analysis of that recording.

The fixture clusters check the same in the default run (``../shared`` absent); on the real data:
``../shared/data/npu-real-runs`` holds a Text and a Db recording of one 2-rank AlexNet job
(two runs of it: their waits differ as the recordings do). For each export and rank, the wait
spans (:func:`wait_spans`) are checked against the ``Notify_Wait`` tasks read from the raw files
(``tests/npu_waits.py``), per op against the profiler's own Wait Time (``communication.json`` /
``analysis.db``), and the OverallMetrics Wait row against those spans clipped to the uncovered
communication. Skipped when the data is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from npu_waits import REAL, RankWaits, db_waits, text_waits, union_length
from perfcmp_core.compare.comm_groups import wait_spans
from perfcmp_core.compare.device_sets import device_sets
from perfcmp_core.compare.masks import DEFAULT_MASKS
from perfcmp_core.compare.overall_metrics import overall_metrics
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions

REAL_ONLY = pytest.mark.skipif(not (REAL / "db" / "level1").is_dir(), reason="../shared/data absent")
CLUSTER = Path(__file__).resolve().parents[1] / "fixtures" / "cluster"

RUNS = [(kind, rank) for kind in ("text", "db") for rank in (0, 1)]


def _raw(kind: str, rank: int) -> RankWaits:
    run = REAL / kind / "level1" / f"rank{rank}_ascend_pt"
    return text_waits(run) if kind == "text" else db_waits(run)


@pytest.fixture(scope="module")
def loaded() -> dict[tuple[str, int], object]:
    opts = LoadOptions(force=True, use_cache=False)
    return {(kind, rank): load_profile(str(REAL / kind / "level1" / f"rank{rank}_ascend_pt"), opts)
            for kind, rank in RUNS}


@REAL_ONLY
@pytest.mark.parametrize(("kind", "rank"), RUNS)
def test_wait_spans_are_the_profilers_own_wait(loaded: dict, kind: str, rank: int) -> None:
    raw = _raw(kind, rank)
    # the derivation is the profiler's: every op's wait equals its Wait Time (which keeps sub-ns
    # digits: within 1 ns per task)
    assert raw.profiler_ms.keys() == raw.per_op_ns.keys()
    for op, ms in raw.profiler_ms.items():
        assert raw.per_op_ns[op] == pytest.approx(ms * 1e6, abs=len(raw.spans)), op
    spans = wait_spans(loaded[(kind, rank)])
    assert spans.length == union_length(raw.spans)
    assert spans.length == pytest.approx(sum(raw.profiler_ms.values()) * 1e6, abs=len(raw.spans))


@REAL_ONLY
@pytest.mark.parametrize(("kind", "rank"), RUNS)
def test_overall_wait_row_is_the_wait_spans_in_uncovered_communication(loaded: dict, kind: str, rank: int) -> None:
    p = loaded[(kind, rank)]
    uncovered = device_sets(p).uncovered
    m = overall_metrics(p, DEFAULT_MASKS)
    clip = list(zip(uncovered.start.tolist(), uncovered.end.tolist()))
    assert m.wait_ns == union_length(_raw(kind, rank).spans, clip) > 0
    assert m.wait_ns + sum(g.transmit_ns for g in m.groups.values()) == m.uncovered_ns


@REAL_ONLY
def test_text_and_db_of_one_job_agree_as_their_recordings_do(loaded: dict) -> None:
    """Each export's wait is its recording's (the profiler's own figure), so Text and Db differ
    by exactly what the profiler measured differently in the two recordings — and no longer by
    the export format (before: Text 0 on both ranks)."""
    for rank in (0, 1):
        text, db = (wait_spans(loaded[(k, rank)]).length for k in ("text", "db"))
        own_text, own_db = (sum(_raw(k, rank).profiler_ms.values()) * 1e6 for k in ("text", "db"))
        assert text - db == pytest.approx(own_text - own_db, abs=64)
        assert text > 0 and db > 0
    # rank 0 of the Text recording waited for rank 1 in its first all-reduce: 5.94 vs 0.19 ms
    assert np.round([wait_spans(loaded[("text", r)]).length / 1e6 for r in (0, 1)], 2).tolist() == [5.94, 0.19]


def test_fixture_cluster_waits_are_each_exports_own() -> None:
    """The default run's check (no ../shared needed): every rank of the 4-rank fixture jobs waits
    what its communication.json says (the generator's own figure: the counted Notify_Waits of the
    op's first plane), and the Db exports of two comparison ranks wait what their Text twins do."""
    opts = LoadOptions(use_cache=False)
    text = {}
    for side in ("npu_base", "npu_comp"):
        for run in sorted((CLUSTER / side).iterdir()):
            comm = json.loads((run / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text(encoding="utf-8"))
            own = sum(step["collective"]["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
                      for step in comm.values())
            text[(side, run.name)] = wait_spans(load_profile(str(run), opts)).length
            assert text[(side, run.name)] == pytest.approx(own * 1e6, abs=1), run.name
    assert sorted({round(v / 1e6, 6) for v in text.values()}) == [0.006387, 0.306387, 0.606387]
    for run in sorted((CLUSTER / "npu_comp_db").iterdir()):
        assert wait_spans(load_profile(str(run), opts)).length == text[("npu_comp", run.name)]
