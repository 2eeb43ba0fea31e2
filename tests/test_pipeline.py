"""The run's orchestration: steps declared ``beside`` run on the second core, and the stream of
events is the one a run on one core gives, in workbook order with the notes in step order."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from perfcmp_core import pipeline
from perfcmp_core.compare import STEPS
from perfcmp_core.events import Event, Finished, Phase, Skipped, TableReady
from perfcmp_core.notes import Note
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.processes import Claims, Later, start_method
from perfcmp_core.request import RunRequest

FIX = Path(__file__).resolve().parents[1] / "fixtures"
#: Pairs on which both kinds of step make tables and notes.
PAIRS = {
    "npu": ("npu_text/base_ascend_pt", "npu_text/comp_ascend_pt"),
    "gpu_npu": ("gpu/base.pt.trace.json", "npu_text/comp_ascend_pt"),
}


def _request(pair: str) -> RunRequest:
    base, comp = (str(FIX / p) for p in PAIRS[pair])
    opts = LoadOptions(use_cache=False)
    return RunRequest.read(base, comp, opts, opts, CompareOptions())


def _stream(request: RunRequest) -> list[tuple[str, Any]]:
    """The events that carry results, in order (times left out): tables with their data,
    absences, phases, the final notes (records: with the step and screens of each)."""
    out: list[tuple[str, Any]] = []
    for event in pipeline.comparison_events(request):
        if isinstance(event, TableReady):
            t = event.table  # its kernel lists (child tables) compared as the workbook writes them
            out.append(("table", (t.name, t.data.assign(**{k: t.values(k) for k in t.children}))))
        elif isinstance(event, Skipped):
            out.append(("skipped", (event.names, event.reason)))
        elif isinstance(event, Phase):
            out.append(("phase", (event.name, event.done)))
        elif isinstance(event, Finished):
            out.append(("finished", list(event.notes)))
    return out


def _inline(fn: Callable[..., Any], *args: Any, nice: int = 0) -> Later[Any]:
    return Later(fn, args, None)  # what in_background gives where the process cannot fork


def _same(a: list[tuple[str, Any]], b: list[tuple[str, Any]]) -> None:
    assert [(kind, v[0] if kind == "table" else v) for kind, v in a] == \
           [(kind, v[0] if kind == "table" else v) for kind, v in b]
    for (kind, va), (_, vb) in zip(a, b):
        if kind == "table":
            pd.testing.assert_frame_equal(va[1], vb[1])


def test_the_operator_memory_and_timeline_steps_are_the_ones_beside() -> None:
    # The first two share the operator match (Context.operator_match), so they must run in one
    # place; the Timeline reads only the sides' analyses, made before the fork.
    assert [s.name for s in STEPS if s.beside] == ["operators / modules", "MemoryCompare", "Timeline"]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_stream_equals_a_one_core_run(pair: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if start_method() != "fork":
        pytest.skip("this process cannot fork: every step runs here anyway")
    parallel = _stream(_request(pair))
    monkeypatch.setattr(pipeline, "in_background", _inline)
    serial = _stream(_request(pair))
    _same(parallel, serial)
    # Every enabled step reported, in declaration order, each started before it is done.
    phases = [v for kind, v in parallel if kind == "phase"]
    names = [s.name for s in STEPS]
    assert [n for n, done in phases if done and n in names] == names
    assert [n for n, done in phases if not done and n in names] == names


def test_notes_of_a_step_beside_come_back_with_its_screens() -> None:
    if start_method() != "fork":
        pytest.skip("this process cannot fork")
    stream = _stream(_request("gpu_npu"))
    notes = next(v for kind, v in stream if kind == "finished")
    # The operator match's note on kernels no operator row holds, made in the other process.
    unlinked = [n for n in notes if "appear in no operator row" in n.text]
    assert unlinked, notes
    assert unlinked[0].origin == "operators / modules" and unlinked[0].screens == ("modules", "operators")


def test_steps_beside_run_in_another_process(monkeypatch: pytest.MonkeyPatch) -> None:
    if start_method() != "fork":
        pytest.skip("this process cannot fork")
    where: dict[str, int] = {}
    run_steps = pipeline._run_steps

    def recording(steps: list[Any], ctx: Any) -> list[Any]:
        for step in steps:
            where[step.name] = os.getpid()
        out = run_steps(steps, ctx)
        # Bring the pids back in the notes of the result (the child's dict is its own).
        return [pipeline.Ran(r.outcome, [*r.notes, Note(f"pid {where[s.name]}", origin=s.name)], r.seconds)
                for s, r in zip(steps, out)]

    monkeypatch.setattr(pipeline, "_run_steps", recording)
    stream = _stream(_request("npu"))
    notes = next(v for kind, v in stream if kind == "finished")
    pid = {n.origin: int(n.text.split()[1]) for n in notes if n.text.startswith("pid ")}
    here = os.getpid()
    assert all(pid[s.name] == here for s in STEPS if not s.beside)
    # The beside steps that read only the profiles share one worker (and the operator match);
    # the one that reads the analyses runs in a second worker, started once they are made.
    # MemoryCompare runs there too, or here when this process took it back (its own steps done
    # first: a matter of timing, tested apart below).
    assert pid["operators / modules"] != here and pid["MemoryCompare"] in (here, pid["operators / modules"])
    assert pid["Timeline"] not in (here, pid["operators / modules"])


def test_profile_only_steps_start_while_the_comparison_side_is_analysed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The comparison side's profile comes before its analysis: the beside steps that need only
    the profiles (operators / modules, memory) start then, not after the analysis. The
    comparison side's analysis here waits for a mark those steps leave when they start (it
    would wait in vain, up to its limit, if they started only after it)."""
    import time

    from perfcmp_core import side

    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing runs beside")
    mark = tmp_path / "beside started"
    seen = tmp_path / "analysis saw it"
    real_analyse, real_run = side.analyse_side, pipeline._run_steps
    request = _request("npu")

    def analysed(profile: Any, **kwargs: Any) -> Any:
        if profile.meta.source == request.comp:
            deadline = time.monotonic() + 20
            while not mark.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.write_text(str(mark.exists()))
        return real_analyse(profile, **kwargs)

    def ran(steps: list[Any], ctx: Any) -> list[Any]:
        if any(s.name == "operators / modules" for s in steps):
            mark.touch()
        return real_run(steps, ctx)

    monkeypatch.setattr(pipeline, "analyse_side", analysed)
    monkeypatch.setattr(pipeline, "_run_steps", ran)
    events = list(pipeline.comparison_events(request))
    assert isinstance(events[-1], Finished)
    assert seen.read_text() == "True"


def test_each_side_is_analysed_where_it_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Kernel classes, step explanation and the advisor's analysis of a side need only that
    side: the base side's are made in this process, the comparison side's in the worker that
    parses it, at the same time; the advisor's table then uses them (no third process, no
    second analysis)."""
    from perfcmp_core import side

    if start_method() != "fork":
        pytest.skip("this process cannot fork")
    calls = tmp_path / "calls"
    real = side.analyse_side

    def recorded(profile: Any, **kwargs: Any) -> Any:
        with calls.open("a") as fh:
            fh.write(f"{os.getpid()} {profile.meta.source}\n")
        return real(profile, **kwargs)

    monkeypatch.setattr(pipeline, "analyse_side", recorded)
    request = _request("npu")
    events = list(pipeline.comparison_events(request))
    table = next(e.table for e in events if isinstance(e, TableReady) and e.table.name == "Advisor")
    # (the two sides run at the same time: either may finish first)
    where = {source: pid for pid, source in (line.split(" ", 1) for line in calls.read_text().splitlines())}
    assert len(where) == 2 and where[request.base] == str(os.getpid()) != where[request.comp]
    # The table holds both sides' analyses: each side's rows and their difference.
    assert {"base", "comparison", "diff"} <= set(table.data["scope"])


def test_a_pair_from_the_cache_shows_the_overall_figures_before_its_analyses(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Both sides read from the cache: their profiles are there long before their analyses, so
    OverallMetrics (which needs only the profiles) is made first and the base side's analysis
    after it; parsed, the base side is analysed while the comparison side still loads, as
    before. Either way the same events and tables as a run without the cache."""
    import shutil
    import time

    from perfcmp_core import side

    if start_method() != "fork":
        pytest.skip("this process cannot fork: no analysis is made beside")
    inputs = tmp_path / "in"
    for rel in PAIRS["npu"]:  # two export folders
        shutil.copytree(FIX / rel, inputs / Path(rel).name)
    old = time.time() - 3600
    for path in inputs.rglob("*"):
        os.utime(path, (old, old))  # not "racy": the cache stores them
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    order: list[str] = []
    real_analyse, real_run = side.analyse_side, pipeline._run_steps

    def analysed(profile: Any, **kwargs: Any) -> Any:
        order.append("analysis")
        return real_analyse(profile, **kwargs)

    def ran(steps: list[Any], ctx: Any) -> list[Any]:
        order.extend(s.name for s in steps if s.name == pipeline.OPENING_STEP)
        return real_run(steps, ctx)

    monkeypatch.setattr(pipeline, "analyse_side", analysed)
    monkeypatch.setattr(pipeline, "_run_steps", ran)
    base, comp = (str(inputs / Path(rel).name) for rel in PAIRS["npu"])
    opts = LoadOptions()
    request = RunRequest.read(base, comp, opts, opts, CompareOptions())
    parsed = _stream(request)
    assert order == ["analysis", pipeline.OPENING_STEP]  # (the comparison side's: in its worker)
    order.clear()
    cached = _stream(request)
    assert order == [pipeline.OPENING_STEP, "analysis"]
    _same(parsed, cached)
    monkeypatch.undo()
    _same(cached, _stream(_request("npu")))


def test_a_failed_run_leaves_no_worker_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of this process fails while the steps beside still run: the error reaches the
    caller and the worker is gone (this process goes on: a test session, the
    app's retry), and so they are when the consumer abandons the stream half way."""
    import multiprocessing as mp

    from perfcmp_core.compare import kernel_families

    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing runs beside")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("kernel classes broke")

    # (kernel_classes itself runs where the sides load: the KernelClassCompare table is the
    # step of this process that fails)
    monkeypatch.setattr(kernel_families, "kernel_class_compare", broken)
    with pytest.raises(RuntimeError, match="kernel classes broke"):
        for _ in pipeline.comparison_events(_request("npu")):
            pass
    assert mp.active_children() == []
    monkeypatch.undo()
    stream = pipeline.comparison_events(_request("npu"))
    for event in stream:
        if isinstance(event, Phase) and event.name == "OverallMetrics" and event.done:
            break
    stream.close()
    assert mp.active_children() == []


def test_kernels_are_classified_once_per_side_for_every_screen(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """Issue 25: OverallMetrics (GPU classes), KernelClassCompare, KernelOpCompare, the step
    explanation and the advisor read one classification per side: the classifier runs twice in
    a whole GPU comparison, once in each side's load process (each call is written to a file, so
    a call in a worker counts too)."""
    from perfcmp_core.compare import kernel_families

    calls = tmp_path / "calls"
    real = kernel_families.kernel_classes

    def counted(*args: Any, **kwargs: Any) -> Any:
        with calls.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel_families, "kernel_classes", counted)
    tables = [value[0] for kind, value in _stream(_request("gpu_npu")) if kind == "table"]
    assert {"OverallMetrics", "KernelClassCompare", "KernelOpCompare", "StepTime", "Advisor"} <= set(tables)
    pids = calls.read_text().split()  # (the two sides run at the same time: in either order)
    assert len(pids) == 2 and str(os.getpid()) in pids
    assert len(set(pids)) == 2 or start_method() != "fork"  # the comparison side's load worker


@pytest.mark.parametrize("pair", [("gpu/base.pt.trace.json", "gpu/comp.pt.trace.json"), PAIRS["npu"],
                                  PAIRS["gpu_npu"]])
def test_steps_not_declared_to_read_analyses_do_not(monkeypatch: pytest.MonkeyPatch,
                                                    pair: tuple[str, str]) -> None:
    """A step may run before the sides' analyses are made unless it declares ``reads_analyses``:
    every other step runs here on a context that refuses to make them."""
    from perfcmp_core.compare import Context
    from perfcmp_core.load import load_profile

    def refused(self: Context) -> Any:
        raise AssertionError("read an analysis")

    monkeypatch.setattr(Context, "kernel_classes", refused)
    monkeypatch.setattr(Context, "explanations", refused)
    base, comp = (load_profile(str(FIX / p), LoadOptions(use_cache=False)) for p in pair)
    ctx = Context(base=base, comp=comp, opts=CompareOptions())
    profile_only = [s for s in STEPS if not s.reads_analyses]
    assert {s.name for s in profile_only} >= {"operators / modules", "MemoryCompare"}
    for step in profile_only:
        step.run(ctx)


def test_the_advisor_is_made_before_the_steps_beside_are_waited_for() -> None:
    """What this process makes while the steps beside still run (``meanwhile``: the Advisor
    table, which reads the analyses only) comes before it waits for them; the events stay in
    workbook order."""
    from perfcmp_core.compare import Context
    from perfcmp_core.load import load_profile

    order: list[str] = []
    by_name = {s.name: s for s in STEPS}
    steps = [by_name["CommunicationCompare"], by_name["operators / modules"], by_name["ApiCompare"]]

    def waited() -> list[pipeline.Ran]:
        order.append("waited")
        return pipeline._run_steps([by_name["operators / modules"]], ctx)

    base = load_profile(str(FIX / "npu_text/base_ascend_pt"), LoadOptions(use_cache=False))
    comp = load_profile(str(FIX / "npu_text/comp_ascend_pt"), LoadOptions(use_cache=False))
    ctx = Context(base, comp, CompareOptions())
    beside = [pipeline.Beside([by_name["operators / modules"]], Later(waited, (), None), Claims(1))]
    events = list(pipeline._step_events(steps, ctx, beside, lambda: order.append("meanwhile")))
    assert order == ["meanwhile", "waited"]
    assert [e.name for e in events if isinstance(e, Phase) and e.done] == [s.name for s in steps]


def _marked_steps(tmp_path: Path, first_waits: bool) -> list[Any]:
    """Two steps beside: each says in a note which process ran it. The second leaves a mark;
    the first waits for it (``first_waits``), or ``meanwhile`` below waits for it."""
    from perfcmp_core.compare import Step

    mark = tmp_path / "second ran"

    def first(ctx: Any) -> list[Any]:
        deadline = time.monotonic() + 60
        while first_waits and not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        ctx.notes.append(f"pid {os.getpid()}")
        return []

    def second(ctx: Any) -> list[Any]:
        mark.touch()
        ctx.notes.append(f"pid {os.getpid()}")
        return []

    return [Step("first", "operator", first, (), beside=True), Step("second", "memory", second, (), beside=True)]


@pytest.mark.parametrize("worker_first", [False, True])
def test_this_process_takes_back_the_steps_beside_not_started(tmp_path: Path, worker_first: bool) -> None:
    """Once its own steps are done, this process runs the worker's steps that the worker has not
    started yet (from the back); a step the worker started stays the worker's. Each runs once,
    and the events stay in workbook order either way."""
    if start_method() != "fork":
        pytest.skip("this process cannot fork: nothing runs beside")
    from perfcmp_core.compare import Context
    from perfcmp_core.load import load_profile

    base = load_profile(str(FIX / "npu_text/base_ascend_pt"), LoadOptions(use_cache=False))
    ctx = Context(base, base, CompareOptions())
    steps = _marked_steps(tmp_path, first_waits=not worker_first)
    mark = tmp_path / "second ran"

    def meanwhile() -> None:  # the worker runs both steps before this process asks for any
        deadline = time.monotonic() + 60
        while worker_first and not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    beside = pipeline._started(steps, ctx, 0)
    try:
        events = pipeline._step_events(steps, ctx, beside, meanwhile)
        phases = []
        try:
            while True:
                event = next(events)
                if isinstance(event, Phase) and event.done:
                    phases.append(event.name)
        except StopIteration as end:
            notes = end.value
    finally:
        beside[0].later.stop()
        beside[0].claims.close()
    assert phases == ["first", "second"]
    pid = {n.origin: int(n.text.split()[1]) for n in notes}
    assert pid["first"] != os.getpid()
    assert pid["second"] == (pid["first"] if worker_first else os.getpid())


def test_the_worker_beside_drops_what_its_steps_cached_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps beside cache the operator match on the context (≈ 110 MB on the 32×92 NPU Db
    pair); their worker drops it, and trims its heap, before its results are pickled. What the
    context held before (the sides' analyses, shared with this process) stays, and the results
    are those of the same steps run here."""
    from perfcmp_core.compare import Context
    from perfcmp_core.load import load_profile

    trims: list[int] = []
    monkeypatch.setattr(pipeline, "return_free_memory", lambda: trims.append(1))
    base = load_profile(str(FIX / "npu_text/base_ascend_pt"), LoadOptions(use_cache=False))
    comp = load_profile(str(FIX / "npu_text/comp_ascend_pt"), LoadOptions(use_cache=False))
    steps = [s for s in STEPS if s.name in ("operators / modules", "MemoryCompare")]
    here = Context(base, comp, CompareOptions())
    want = pipeline._run_steps(steps, here)
    assert "match" in here.cache
    ctx = Context(base, comp, CompareOptions())
    ctx.cache["kept"] = object()
    got = pipeline._run_beside(steps, ctx)
    assert set(ctx.cache) == {"kept"} and trims
    for a, b in zip(want, got):
        assert [n.text for n in a.notes] == [n.text for n in b.notes]
        tables = [(x, y) for x, y in zip(a.outcome, b.outcome) if hasattr(x, "data")]
        assert tables and len(a.outcome) == len(b.outcome)
        for x, y in tables:
            pd.testing.assert_frame_equal(x.data, y.data)


def test_the_worker_beside_forgets_the_forests_it_derived() -> None:
    """The op forests its steps derived from the profiles (cached per profile for the app's
    drill-downs) are forgotten before its results are sent; a forest derived before stays."""
    from perfcmp_core.compare import Context, optree
    from perfcmp_core.load import load_profile

    base = load_profile(str(FIX / "npu_text/base_ascend_pt"), LoadOptions(use_cache=False))
    comp = load_profile(str(FIX / "npu_text/comp_ascend_pt"), LoadOptions(use_cache=False))
    kept = optree.forest_of(base)
    steps = [s for s in STEPS if s.name in ("operators / modules", "MemoryCompare")]
    pipeline._run_beside(steps, Context(base, comp, CompareOptions()))
    assert set(optree._CACHE[id(base)][1]) == {"forest"}
    assert id(comp) not in optree._CACHE or not optree._CACHE[id(comp)][1]
    assert optree.forest_of(base).parent is kept.parent  # the one derived before, not made again
    with optree.derived_forgotten():
        optree.forest_of(comp)
        assert "forest" in optree._CACHE[id(comp)][1]
    assert not optree._CACHE[id(comp)][1]
