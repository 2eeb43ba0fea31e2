"""Issue 27: an input is detected once per run. The app's pre-screen check detects both inputs
and the request carries them (a step chosen later keeps them); the run's cache lookup and load
use them; a headless run detects each path once for both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfcmp_core import load
from perfcmp_core.events import Finished
from perfcmp_core.load.detect import Source
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest

ROOT = Path(__file__).resolve().parents[1]
BASE = str(ROOT / "fixtures" / "gpu" / "base.pt.trace.json")
COMP = str(ROOT / "fixtures" / "gpu" / "comp.pt.trace.json")


@pytest.fixture
def detections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path ``perfcmp_core.load.detect`` and the pair loader detect, in order."""
    from perfcmp_core import pair

    seen: list[str] = []
    real = load.detect

    def counted(path: str, rank: int | None = None) -> Source:
        seen.append(path)
        return real(path, rank)

    monkeypatch.setattr(load, "detect", counted)
    monkeypatch.setattr(pair, "detect", counted)
    return seen


def _run(request: RunRequest) -> None:
    assert any(isinstance(e, Finished) for e in comparison_events(request))


def test_the_app_check_detects_and_the_run_reuses(detections: list[str], tmp_path: Path) -> None:
    from perfcmp_tui import cli

    opts = LoadOptions(use_cache=False)
    request = RunRequest.read(BASE, COMP, opts, opts, CompareOptions())
    checked = cli._check_before_screen(request, str(tmp_path))
    assert detections == [BASE, COMP]
    assert isinstance(checked.base_source, Source) and checked.base_source.given == BASE
    assert checked.inputs == (checked.base_source, checked.comp_source)
    _run(checked)
    assert detections == [BASE, COMP]  # the run detected nothing again


def test_a_headless_run_detects_each_path_once(detections: list[str]) -> None:
    opts = LoadOptions(use_cache=True)
    _run(RunRequest.read(BASE, COMP, opts, opts, CompareOptions()))
    assert sorted(detections) == sorted([BASE, COMP])


def test_a_path_that_cannot_be_detected_is_reported_by_its_load(tmp_path: Path) -> None:
    """Detection errors keep their place: both bad inputs are named in one message."""
    from perfcmp_core.errors import InputError

    opts = LoadOptions(use_cache=False)
    missing = str(tmp_path / "missing.json")
    with pytest.raises(InputError) as caught:
        _run(RunRequest.read(missing, str(tmp_path / "also.json"), opts, opts, CompareOptions()))
    assert "missing.json" in caught.value.message and "also.json" in caught.value.message


def test_a_step_chosen_later_detects_nothing_again(detections: list[str], tmp_path: Path) -> None:
    """The app's S cuts a step from the same request: its run loads the sources it carries."""
    from dataclasses import replace

    from perfcmp_tui import cli

    opts = LoadOptions(use_cache=False)
    checked = cli._check_before_screen(RunRequest.read(BASE, COMP, opts, opts, CompareOptions()), str(tmp_path))
    cut: Any = replace(checked, base_opts=replace(checked.base_opts, step=1),
                       comp_opts=replace(checked.comp_opts, step=1))
    _run(cut)
    assert detections == [BASE, COMP]
