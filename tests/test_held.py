"""A serving comparison child: the app's step change (``S``) is the next run of the child that
made the first one, cut from the profiles it holds (:mod:`perfcmp_core.held`), with the same
results as a fresh run of that step, and no process left behind however the run ends."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from perfcmp_core import held as held_module
from perfcmp_core import pipeline, processes, runner
from perfcmp_core.compare import overall_metrics as overall_metrics_module
from perfcmp_core.lanes import table as lanes_table
from perfcmp_core.events import Event, Failed, Finished, Loaded, Skipped, SummaryReady, TableReady
from perfcmp_core.load import load_profile
from perfcmp_core.load.steps import select_step, step_ids
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.processes import Later
from perfcmp_core.request import RunRequest
from test_pipeline import _same

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BASE, COMP = str(FIX / "npu_text/base_ascend_pt"), str(FIX / "npu_text/comp_ascend_pt")


def _request(base_step: int | None = None, comp_step: int | None = None) -> RunRequest:
    opts = LoadOptions(use_cache=False)
    return RunRequest.read(BASE, COMP, replace(opts, step=base_step), replace(opts, step=comp_step),
                           CompareOptions())


def _results(stream: Any) -> list[tuple[str, Any]]:
    """What a run shows (times left out): tables with their data, absences, the loaded sides,
    the summary, the final notes."""
    out: list[tuple[str, Any]] = []
    for event in stream:
        if isinstance(event, TableReady):
            t = event.table
            out.append(("table", (t.name, t.data.assign(**{k: t.values(k) for k in t.children}))))
        elif isinstance(event, Skipped):
            out.append(("skipped", (event.names, event.reason)))
        elif isinstance(event, Loaded):
            out.append(("loaded", (event.side, event.info, event.notes)))
        elif isinstance(event, SummaryReady):
            out.append(("summary", event.text))
        elif isinstance(event, Finished):
            out.append(("finished", list(event.notes)))
            break
        elif isinstance(event, Failed):
            raise AssertionError(event.message)
    return out


def _gone(pid: int, seconds: float = 3.0) -> bool:
    """Whether process group ``pid`` (a comparison child and what it started) is gone."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple[Any, ...]]:
    """``module.name`` replaced by itself recording the arguments of each call (in this
    process), which the returned list holds."""
    calls: list[tuple[Any, ...]] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_step_cut_leaves_the_whole_profile_as_it_was() -> None:
    """The held whole profile is cut again and again: a cut has its own metadata."""
    whole = load_profile(COMP, LoadOptions(use_cache=False))
    cut = select_step(whole, 2)
    assert cut.meta.selected_step == 2 and whole.meta.selected_step is None
    assert cut.meta is not whole.meta and cut.meta.notes is not whole.meta.notes
    assert select_step(whole, 3).meta.selected_step == 3 and whole.meta.selected_step is None


def test_held_runs_give_what_fresh_runs_of_those_steps_give(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step, then one step of the comparison side, then both sides on another, then every
    step again: the same results as a run of each request from nothing; the inputs are read once
    (by the first run), the later runs cut the held profiles."""
    reads = _counted(monkeypatch, held_module, "iter_pair")
    serve = pipeline.HeldComparisons()
    for request in (_request(), _request(None, 2), _request(3, 3), _request(None, 2), _request()):
        _same(_results(serve(request=request)), _results(pipeline.comparison_events(request)))
    assert len(reads) == 1


def test_a_run_on_a_step_first_reads_the_whole_profiles_at_the_first_change() -> None:
    """The first run was on a step (``--comparison-step``): the whole profile is read when
    another step is asked for, and the results are still those of a fresh run."""
    serve = pipeline.HeldComparisons()
    for request in (_request(None, 1), _request(None, 3), _request()):
        _same(_results(serve(request=request)), _results(pipeline.comparison_events(request)))


def test_other_inputs_or_options_are_read_again() -> None:
    """A request naming other load options is not served from what is held."""
    serve = pipeline.HeldComparisons()
    _results(serve(request=_request()))
    other = replace(_request(), comp_opts=LoadOptions(use_cache=False, load_memory=False))
    _same(_results(serve(request=other)), _results(pipeline.comparison_events(other)))


@pytest.fixture
def prepared() -> None:
    runner.prepare()


def _read(run: runner.ChildRun) -> list[Event]:
    return list(run.events())


def test_a_step_change_is_the_next_run_of_the_same_child(prepared: None) -> None:
    """The serving child takes the next run (same process), gives the tables of a fresh run of
    that step, and is gone once closed."""
    run = runner.start_comparison(_request(), serve=True)
    try:
        pid = run.pid
        assert isinstance(_read(run)[-1], Finished)
        assert pid is not None and not _gone(pid, 0.2)  # it waits for the next run
        for request in (_request(None, 2), _request(1, 3)):
            assert run.again(request=request)
            assert run.pid == pid
            _same(_results(_read(run)), _results(pipeline.comparison_events(request)))
    finally:
        run.close()
    assert _gone(pid)
    assert not run.again(request=_request())  # closed: the caller starts a new child


def test_a_step_change_stopped_half_way_leaves_no_process(prepared: None) -> None:
    """Stopped after its first events (Esc, another S), the run's child and its workers are
    gone, and it takes no other run: its state half way is not trusted again."""
    run = runner.start_comparison(_request(), serve=True)
    _read(run)
    pid = run.pid
    assert pid is not None and run.again(request=_request(None, 2))
    stream = run.events()
    assert not isinstance(next(stream), (Finished, Failed))  # the run is under way
    stream.close()
    assert _gone(pid)
    assert not run.again(request=_request(None, 3))
    assert run.child not in processes._live and run.child.stopped


def test_a_step_change_cancelled_by_should_stop_leaves_no_process(prepared: None) -> None:
    run = runner.start_comparison(_request(), serve=True)
    _read(run)
    pid = run.pid
    assert pid is not None and run.again(request=_request(None, 2))
    assert list(run.events(should_stop=lambda: True)) == []
    assert _gone(pid)


def test_a_failed_run_ends_the_serving_child(prepared: None) -> None:
    """A run that fails (here a step the input does not have) ends its child: a retry starts
    a new one."""
    run = runner.start_comparison(_request(), serve=True)
    _read(run)
    pid = run.pid
    assert pid is not None and run.again(request=_request(None, 99))
    last = _read(run)[-1]
    assert isinstance(last, Failed) and last.is_input and "has no step 99" in last.message
    assert _gone(pid)
    assert not run.again(request=_request())


def test_a_child_that_does_not_serve_ends_with_its_run(prepared: None) -> None:
    run = runner.start_comparison(_request())
    pid = run.pid
    assert isinstance(_read(run)[-1], Finished)
    assert pid is not None and _gone(pid)
    assert not run.again(request=_request(None, 2))


def test_analyses_of_the_other_steps_are_made_while_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a finished run, the serving child makes every step's analysis of both sides ahead
    (taken while it waits); a step change then analyses neither side, with the same results."""
    from perfcmp_core.processes import start_method

    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing is made ahead")
    serve = pipeline.HeldComparisons()
    _served_ahead(serve)
    assert set(serve.held._sides["comparison"].analyses) == {None, 1, 2, 3}

    def not_again(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("analysed again")

    # Both sides on a step, and the base on all its steps (the whole profile, whose analysis the
    # first run made: made again ahead, with its products).
    requests = [_request(2, 3), _request(None, 2)]
    fresh = [_results(pipeline.comparison_events(request)) for request in requests]
    monkeypatch.setattr(pipeline, "analyse_side", not_again)
    # Made ahead with the analyses: each side's Overall figures and Timeline step.
    monkeypatch.setattr(overall_metrics_module, "overall_metrics", not_again)
    monkeypatch.setattr(lanes_table, "side_step", not_again)
    for request, expected in zip(requests, fresh):
        _same(_results(serve(request=request)), expected)


def _served_ahead(serve: pipeline.HeldComparisons) -> None:
    """A first run, then wait until every step of both sides has its analysis made ahead."""
    for _ in serve(request=_request()):  # to its end: the analyses ahead start after Finished
        pass
    sides = serve.held._sides
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
            set(step_ids(s.whole)) <= set(s.analyses) and s.analyses[None].products is not None
            for s in sides.values() if s.whole is not None):
        serve.idle()
        time.sleep(0.05)


def test_timeline_lanes_made_ahead_are_kept_within_their_memory_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past :data:`AHEAD_LANES_BYTES` an analysis made ahead is kept without its Timeline lanes:
    the run then makes them, with the same results."""
    from perfcmp_core.processes import start_method

    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing is made ahead")
    monkeypatch.setattr(held_module, "AHEAD_LANES_BYTES", 0)
    serve = pipeline.HeldComparisons()
    _served_ahead(serve)
    kept = [a for s in serve.held._sides.values() for a in s.analyses.values()]  # the whole's too
    assert kept and all(a.products is not None and a.products.lanes is None for a in kept)
    assert all(s.lanes_bytes == 0 for s in serve.held._sides.values())
    made = _counted(monkeypatch, lanes_table, "side_step")
    # the steps beside run here, so that what they make is seen
    monkeypatch.setattr(pipeline, "in_background", lambda fn, *args, nice: Later(fn, args, None))
    request = _request(3, 2)
    served = _results(serve(request=request))
    assert len(made) == 2  # both sides' lanes made in the run
    _same(served, _results(pipeline.comparison_events(request)))


def test_lanes_within_the_bound_are_counted_per_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept lanes add up to each side's count, which stays within the bound."""
    from perfcmp_core.processes import start_method

    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing is made ahead")
    serve = pipeline.HeldComparisons()
    _served_ahead(serve)
    for side in serve.held._sides.values():
        lanes = [a.products.lanes for a in side.analyses.values()  # the whole profile's too
                 if a.products is not None and not isinstance(a.products.lanes, (str, type(None)))]
        assert lanes
        assert side.lanes_bytes == sum(int(x[1].memory_usage(index=False).sum()) for x in lanes)
        assert side.lanes_bytes <= held_module.AHEAD_LANES_BYTES


def test_the_configuration_key_survives_the_pipe() -> None:
    """A request comes to the serving child pickled: its configuration must compare equal to the
    held one's (the kernel masks' pickle differs with which of their texts are one object)."""
    import pickle

    request = _request()
    assert held_module._config_key(pickle.loads(pickle.dumps(request))) == held_module._config_key(request)
    other = replace(request, masks=replace(request.masks, fa=("flash",)))
    assert held_module._config_key(other) != held_module._config_key(request)


def test_other_kernel_masks_are_read_again() -> None:
    """The Overall figures made ahead depend on the kernel masks: other masks, another reading."""
    serve = pipeline.HeldComparisons()
    _results(serve(request=_request()))
    base = _request(2, 2)
    other = replace(base, masks=replace(base.masks, cube=("gemm",)))
    _same(_results(serve(request=other)), _results(pipeline.comparison_events(other)))
    assert not serve.held.cut


def test_a_step_change_runs_the_steps_beside_at_full_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first run's steps beside run below this process's priority (its Overall screen comes
    first); a step change cut from the held profiles is all waited for: at this priority."""
    from perfcmp_core.processes import BACKGROUND_NICE, Later

    asked: list[int] = []

    def inline(fn: Any, *args: Any, nice: int) -> Any:
        asked.append(nice)
        return Later(fn, args, None)

    monkeypatch.setattr(pipeline, "in_background", inline)
    serve = pipeline.HeldComparisons()
    _results(serve(request=_request()))
    assert asked and set(asked) == {BACKGROUND_NICE}
    asked.clear()
    _results(serve(request=_request(2, 2)))
    assert asked and set(asked) == {0}


def test_a_held_first_run_keeps_the_comparison_analysis_marked_as_made_after_its_parse() -> None:
    """A serving child's first run parses both inputs: the comparison side's analysis is made
    right after its parse, as in a one-off run, so the pipeline does not make the Overall figures
    (and, on GPU, the kernel classes) before it — held or not, the same order."""
    from perfcmp_core.processes import start_method
    from perfcmp_core.side import analyse_side

    if start_method() != "fork":
        pytest.skip("this process cannot fork: the comparison side loads here")
    request = _request()
    analyse = lambda p: analyse_side(p, equivalence=request.equivalence, advisor=request.advisor)  # noqa: E731
    pair = held_module.Held().pair(request, analyse)
    try:
        marks = {side: (a.ready, a.after_parse) for side, _, a, _ in pair}
    finally:
        pair.close()
    assert marks == {"base": (True, False), "comparison": (False, True)}
