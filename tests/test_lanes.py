"""The Timeline's lanes (issue 26): what a step's lanes hold and what each cell shows.

The hand-worked fixture is ``fixtures/gpu_patterns/step_base`` (fixtures/README.md): one 800 µs
step, host ops ``aten::linear`` 20–120 µs, ``aten::relu`` 130–180, ``aten::add`` 190–230,
``aten::mul`` 240–390 (from the step's start), kernels gemm 115–415, relu 415–515, add 520–620, mul
620–720 on stream 7, idle host 0–20, launch-bound 20–115, device-side 515–520, host 720–800
(tests/test_explain.py). Drawn in 8 cells of 100 µs, every cell below is worked out from those
numbers by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfcmp_core.explain import explain_profile
from perfcmp_core.explain.device import device_items
from perfcmp_core.lanes import LaneIndex, sides_of, timeline_table
from perfcmp_core.lanes.build import median_step
from perfcmp_core.lanes.picture import draw, picture_text, under
from perfcmp_core.load import load_profile
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = ROOT / "fixtures" / "gpu_patterns"
REAL = ROOT.parent / "shared" / "data" / "gpu-real" / "h200" / "llama16_train_bf16_12steps.pt.trace.json.gz"
US = 1000


def _sides(base: Path, comp: Path):  # type: ignore[no-untyped-def]
    b, c = (load_profile(str(p), LoadOptions(use_cache=False)) for p in (base, comp))
    return sides_of(timeline_table((b, explain_profile(b)), (c, explain_profile(c))))


@pytest.fixture(scope="module")
def pattern():  # type: ignore[no-untyped-def]
    return _sides(PATTERNS / "step_base.pt.trace.json", PATTERNS / "step_hostbound.pt.trace.json")


def _lane(side, title: str):  # type: ignore[no-untyped-def]
    return next(lane for lane in side.lanes if lane.title == title)


def test_pattern_lanes_hold_the_hand_timed_items(pattern) -> None:  # type: ignore[no-untyped-def]
    base, comp = pattern
    assert (base.step, base.window_ns, comp.step, comp.window_ns) == (1, 800 * US, 1, 1500 * US)
    assert [lane.title for lane in base.lanes] == ["compute s7", "host t19392", "idle"]
    dev = _lane(base, "compute s7")
    assert list(dev.name) == ["gemm_kernel", "relu_kernel", "add_kernel", "mul_kernel"]
    assert list(zip(dev.index.start // US, dev.index.end // US)) == [(115, 415), (415, 515), (520, 620), (620, 720)]
    assert set(dev.op) == {"aten::linear", "aten::relu", "aten::add", "aten::mul"} and dev.op[0] == "aten::linear"
    host = _lane(base, "host t19392")
    assert list(zip(host.name, host.index.start // US, host.index.end // US)) == [
        ("aten::linear", 20, 120), ("aten::relu", 130, 180), ("aten::add", 190, 230), ("aten::mul", 240, 390)]
    idle = _lane(base, "idle")
    assert list(zip(idle.cls, idle.index.start // US, idle.index.end // US)) == [
        ("host", 0, 20), ("launch", 20, 100), ("launch", 100, 115), ("device", 515, 520), ("host", 720, 800)]
    # (the explanation cuts aten::linear's launch-bound dispatch where its cudaLaunchKernel starts)


def test_pattern_cells_by_hand(pattern) -> None:  # type: ignore[no-untyped-def]
    base = pattern[0]
    dev = _lane(base, "compute s7")
    cells = dev.index.cells(0, 800 * US, 8)
    # [0,100) nothing; gemm 85; gemm; gemm; gemm 15 + relu 85; relu 15 + add 80; add 20 + mul 80; mul 20
    assert list(cells.covered / US) == [0, 85, 100, 100, 100, 95, 100, 20]
    assert list(cells.item) == [-1, 0, 0, 0, 1, 2, 3, 3]
    # compute glyphs by the busy share: ≤¼ ▂, ≤½ ▄, ≤¾ ▆, above █
    assert draw(dev, 0, 800 * US, 8).text == " ██████▂"
    host = _lane(base, "host t19392")
    cells = host.index.cells(0, 800 * US, 8)
    # linear 80; linear 20 + relu 50 + add 10; add 30 + mul 60; mul 90
    assert list(cells.covered / US) == [80, 80, 90, 90, 0, 0, 0, 0]
    assert list(cells.item) == [0, 1, 3, 3, -1, -1, -1, -1]
    assert draw(host, 0, 800 * US, 8).text == "▏▏▏a    "  # mul's run: ▏ then its name
    idle = _lane(base, "idle")
    cells = idle.index.cells(0, 800 * US, 8)
    assert list(cells.covered / US) == [100, 15, 0, 0, 0, 5, 0, 80]
    # launch-bound 80 of cell 0 (host 20); 15 of cell 1 (lower case: under half); device 5; host 80
    assert draw(idle, 0, 800 * US, 8).text == "Ll   d H"
    # zoomed in on 400–600 µs in 4 cells of 50: gemm 15 + relu 35; relu; relu 15 + add 30 (5 idle); add
    cells = dev.index.cells(400 * US, 600 * US, 4)
    assert list(cells.covered / US) == [50, 50, 45, 50] and list(cells.item) == [1, 1, 2, 2]


def test_pattern_cursor_names_what_is_under_it(pattern) -> None:  # type: ignore[no-untyped-def]
    base, comp = pattern
    found = {lane.title: str(lane.name[i]) for lane, i in under(base, 200 * US)}
    assert found == {"compute s7": "gemm_kernel", "host t19392": "aten::add"}
    found = {lane.title: str(lane.cls[i]) for lane, i in under(comp, 10 * US)}
    assert found == {"idle": "host"}  # the comparison's load_batch frame: host work, no op


def test_picture_text_draws_both_sides_and_the_legend(pattern) -> None:  # type: ignore[no-untyped-def]
    text = picture_text(pattern, 80)
    lines = text.splitlines()
    assert lines[2].startswith("BASE step 1 · 0.800 ms") and any(
        line.startswith("COMPARISON step 1 · 1.500 ms") for line in lines)
    assert all(len(line) <= 80 for line in lines[1:-2])
    assert "S synchronisation" in lines[-1] and "compute ▂▄▆█" in lines[-2]


def test_cells_match_a_brute_force_count() -> None:
    """Covered time and the dominant item of every cell, against summing each item's overlap
    with each cell (ties to the earlier item), on random disjoint items and views."""
    rng = np.random.default_rng(26)
    for _ in range(40):
        n = int(rng.integers(1, 60))
        bounds = np.sort(rng.choice(10_000, size=2 * n, replace=False))
        start, end = bounds[0::2], bounds[1::2]
        index = LaneIndex.of(start, end)
        t0 = float(rng.integers(0, 5000))
        t1 = t0 + float(rng.integers(1, 8000))
        width = int(rng.integers(1, 50))
        cells = index.cells(t0, t1, width)
        edges = t0 + (t1 - t0) * np.arange(width + 1) / width
        ov = np.clip(np.minimum(end[None, :], edges[1:, None]) - np.maximum(start[None, :], edges[:-1, None]), 0, None)
        np.testing.assert_allclose(cells.covered, ov.sum(axis=1), atol=1e-6)
        expect = np.where(ov.max(axis=1) > 0, ov.argmax(axis=1), -1)
        best = ov[np.arange(width), np.maximum(cells.item, 0)]
        # Equal overlaps computed two ways may differ in the last float bit: compare overlaps.
        np.testing.assert_allclose(np.where(cells.item >= 0, best, -1), np.where(expect >= 0, ov.max(axis=1), -1),
                                   atol=1e-6)


def test_ties_go_to_the_earlier_item() -> None:
    index = LaneIndex.of(np.array([0, 10]), np.array([10, 20]))
    assert list(index.cells(5, 15, 1).item) == [0]
    # first and last reach in by 1, the two in between are 3 long: the earlier of those
    index = LaneIndex.of(np.array([0, 2, 6, 9]), np.array([1, 5, 9, 10]))
    assert list(index.cells(0, 10, 1).item) == [1] and list(index.cells(0, 10, 1).covered) == [8]
    with pytest.raises(ValueError):
        LaneIndex.of(np.array([0, 5]), np.array([6, 9]))


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data absent")
def test_real_llama_lanes_account_for_the_step() -> None:
    """The 12-step llama trace: the median step, every device task of its window on the compute
    lane, the idle lane summing to the StepTime idle of that step, two module levels."""
    profile = load_profile(str(REAL))
    ex = explain_profile(profile)
    w = ex.windows
    length = (w["end_ns"] - w["start_ns"]).to_numpy()
    median = int(w["step"].to_numpy()[np.argsort(length, kind="stable")[(len(length) - 1) // 2]])
    assert median_step(ex) == median
    side = sides_of(timeline_table((profile, ex), (profile, ex)))[0]
    lo, hi = (int(x) for x in w.loc[w["step"] == median, ["start_ns", "end_ns"]].iloc[0])
    assert side.step == median and side.window_ns == hi - lo
    items = device_items(profile)
    inside = (items.start < hi) & (items.end > lo)
    dev = [lane for lane in side.lanes if lane.kind == "device"]
    assert [lane.title for lane in dev] == ["compute s7"]
    assert len(dev[0].index) == int(inside.sum()) > 2000
    busy = (np.minimum(items.end[inside], hi) - np.maximum(items.start[inside], lo)).sum()
    assert int(dev[0].index.prefix[-1]) == int(busy)  # one stream: no overlap to split
    parts = ex.parts()
    idle_ns = int(parts.loc[(parts["step"] == median) & (parts["part"] == "idle"), "ns"].sum())
    idle = next(lane for lane in side.lanes if lane.kind == "idle")
    assert int(idle.index.prefix[-1]) == idle_ns
    assert [lane.title for lane in side.lanes if lane.kind == "module"] == ["modules L1", "modules L2"]
    decoder = next(lane for lane in side.lanes if lane.title == "modules L2")
    assert sum(str(n).startswith("LlamaDecoderLayer") for n in decoder.name) == 16


def test_export_writes_the_picture_beside_the_workbook(pattern, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``export`` writes ``<workbook>_timeline.txt``: the same picture, 160 wide, and
    ``<workbook>_timeline.svg``: the same lines in the app's colours; the workbook holds no
    Timeline sheet (the table is for the screens and --json)."""
    import pandas as pd

    from perfcmp_tui.cli import main

    code = main(["export", str(PATTERNS / "step_base.pt.trace.json"),
                 str(PATTERNS / "step_hostbound.pt.trace.json"), "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    book = next(tmp_path.glob("performance_comparison_result_*.xlsx"))
    picture = book.with_name(book.stem + "_timeline.txt")
    svg = book.with_name(book.stem + "_timeline.svg")
    assert f"Timeline of one step per side: {picture} (SVG: {svg})" in out
    assert picture.read_text(encoding="utf-8") == picture_text(pattern, 160)
    assert "Timeline" not in pd.ExcelFile(book).sheet_names
    lines, fills = _svg_lines(svg)
    assert lines == [line.rstrip() for line in picture_text(pattern, 160).splitlines()]
    # coloured as the app colours them: compute cells green3, the idle lane's host work dark_orange
    # (the legend's glyphs stay in the default colour)
    assert fills["█"] == {"#00d700", "#c5c8c6"} and {"#ff8700", "#c5c8c6"} <= fills["H"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([book.name, picture.name, svg.name])


def _svg_lines(svg: Path) -> tuple[list[str], dict[str, set[str]]]:
    """The text lines of the SVG (each run of characters placed at its column: x over the cell
    width), and the fill colour each character is drawn in (its class's, else the default)."""
    import re
    import xml.etree.ElementTree as ET

    from perfcmp_core.export.timeline_text import CELL_W

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(svg).getroot()
    style = "".join(t.text or "" for t in root.iter(f"{ns}style"))
    default = re.search(r"text \{[^}]*fill: (#[0-9a-f]{6})", style).group(1)  # type: ignore[union-attr]
    fill = dict(re.findall(r"\.([\w-]+) \{ fill: (#[0-9a-f]{6})", style))
    rows: dict[float, dict[int, str]] = {}
    fills: dict[str, set[str]] = {}
    for line in root.iter(f"{ns}text"):
        row = rows.setdefault(float(line.attrib["y"]), {})
        for run in line.iter(f"{ns}tspan"):
            col = round(float(run.attrib["x"]) / CELL_W) - 1
            for i, ch in enumerate(run.text or ""):
                row[col + i] = ch
                fills.setdefault(ch, set()).add(fill.get(run.attrib.get("class", ""), default))
    height = float(root.attrib["height"])
    step = min(b - a for a, b in zip(sorted(rows), sorted(rows)[1:]))
    out = []
    for n in range(1, round(height / step)):  # every line, the empty ones included
        cells = rows.get(n * step, {})
        out.append("".join(cells.get(i, " ") for i in range(max(cells, default=-1) + 1)).rstrip())
    while out and not out[-1]:
        out.pop()
    return out, fills


def test_grown_kernels_are_those_both_steps_ran_that_grew_most() -> None:
    """base a 10 + b 5 ns, comparison a 12, b 9 and c 100 (c only there: no growth of c):
    b grew 4, a 2; the marks row holds ^ where b or a covers most of a device cell."""
    from perfcmp_core.lanes import Lane, SideLanes
    from perfcmp_core.lanes.picture import FOCUS, GREW, grown, marks

    def side(name: str, items: list[tuple[str, int, int]]) -> SideLanes:
        n = np.array([i[0] for i in items], dtype=object)
        lane = Lane("compute s7", "device", LaneIndex.of(np.array([i[1] for i in items]), np.array([i[2] for i in items])),
                    n, np.full(len(n), "compute", dtype=object), np.full(len(n), 7), np.full(len(n), "", dtype=object))
        return SideLanes(name, 1, 200, (lane,))

    base = side("base", [("a", 0, 10), ("b", 20, 25)])
    comp = side("comparison", [("a", 0, 12), ("b", 20, 29), ("c", 50, 150)])
    assert grown((base, comp)) == ["b", "a"]
    assert grown((base, comp), 1) == ["b"]
    rows = [draw(lane, 0, 200, 20) for lane in comp.lanes]  # cells of 10 ns
    assert marks(comp, rows, {"b", "a"}) == GREW * 3 + " " * 17  # a 10 of cell 0, a 2 / b 9 / c …
    # a kernel asked for by name (a Kernels row) is marked where it runs: c, 50–150 ns
    assert marks(comp, rows, set(), "c") == " " * 5 + FOCUS * 10 + " " * 5
    assert marks(comp, rows, {"b"}, "b") == "  " + FOCUS + " " * 17  # the op asked for wins


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data absent")
def test_real_llama_anchor_is_the_first_backward_op() -> None:
    """Aligning at the backward pass: the base's median step against step 3 of the same trace,
    each anchor the first ``autograd::engine::evaluate_function`` op of its window (read from the
    profile's ops here), the comparison's view shifted by their difference."""
    from perfcmp_core.lanes.picture import BACKWARD, anchor_ns, anchors, views

    profile = load_profile(str(REAL))
    ex = explain_profile(profile)
    sides = sides_of(timeline_table((profile, ex), (profile, ex), (None, 3)))
    ops = profile.ops
    expect = []
    for side in sides:
        lo, hi = (int(x) for x in ex.windows.loc[ex.windows["step"] == side.step, ["start_ns", "end_ns"]].iloc[0])
        start = ops["start_ns"].to_numpy()
        back = ops["name"].astype(str).str.startswith(BACKWARD).to_numpy() & (start >= lo) & (start < hi)
        expect.append(int(start[back].min()) - lo)
    assert [anchor_ns(s) for s in sides] == expect
    shift = expect[1] - expect[0]
    longest = max(s.window_ns for s in sides)
    first = anchors(sides)[0]
    assert first.label == "the first backward op" and (first.base_ns, first.comp_ns) == tuple(expect)
    assert views(sides, 0.0, 0.5, True, first) == ((0.0, 0.5 * longest), (shift, 0.5 * longest + shift))
    assert views(sides, 0.0, 1.0, False, first) == ((0.0, sides[0].window_ns), (0.0, sides[1].window_ns))


def test_npu_lanes_are_named_by_task_type_per_stream() -> None:
    """The NPU Text fixture (fixtures/README.md): one lane per stream that ran device work in
    the median step, named by its task type (AI_CORE for the compute stream), the HCCL op rows
    (no stream) on a communication lane; every device task of the window is on its stream's lane."""
    base = ROOT / "fixtures" / "npu_text" / "base_ascend_pt"
    profile = load_profile(str(base), LoadOptions(use_cache=False))
    ex = explain_profile(profile)
    side = sides_of(timeline_table((profile, ex), (profile, ex)))[0]
    w = ex.windows.set_index("step")
    lo, hi = int(w.at[side.step, "start_ns"]), int(w.at[side.step, "end_ns"])
    items = device_items(profile)
    inside = (items.start < hi) & (items.end > lo)
    streams = profile.kernels["stream"].to_numpy()[items.row[inside]]
    dev = [lane for lane in side.lanes if lane.kind == "device"]
    assert sorted({int(s) for lane in dev for s in lane.stream}) == sorted({int(s) for s in streams})
    assert sum(len(lane.index) for lane in dev) == int(inside.sum())
    by_title = {lane.title: lane for lane in dev}
    assert "AI_CORE s2" in by_title and "compute" in set(by_title["AI_CORE s2"].cls)  # copies run there too
    assert set(by_title["communication"].cls) == {"communication"} and set(by_title["communication"].stream) == {-1}


#: The GPU training fixture's model (fixtures/gen): TransformerLM_0 holds these modules, in order.
TOP_MODULES = ("Conv2d_0", "Embedding_0", "TransformerLayer_0", "TransformerLayer_1", "RMSNorm_0", "Linear_8")


def _module_starts(trace: Path, lo: int, hi: int) -> dict[str, int]:
    """Where each module frame of the window starts (ns from ``lo``), read from the trace's JSON
    (``ts`` in µs with three decimals, read exactly)."""
    import json
    from decimal import Decimal

    events = json.loads(trace.read_text(encoding="utf-8"), parse_float=Decimal)["traceEvents"]
    out = {}
    for e in events:
        if e.get("cat") == "python_function" and str(e.get("name", "")).startswith("nn.Module: "):
            ts = int(Decimal(e["ts"]) * 1000)
            if lo <= ts < hi:
                out.setdefault(e["name"][len("nn.Module: "):], ts - lo)
    return out


def test_anchors_at_the_backward_pass_and_the_top_level_modules() -> None:
    """The GPU training fixture (fixtures/README.md: the comparison's layer-0 MLP runs a 15 µs
    Cast more, forward): ``a`` steps through the first backward op, then the start of every
    module directly under TransformerLM_0 — each time read from the trace's JSON here. Up to
    layer 0 both sides agree to the ns; from layer 1 on the comparison's host is late by what the
    extra ``aten::to`` costs it (10.3 µs), so anchoring at TransformerLayer_1 shifts its view by that."""
    from perfcmp_core.lanes.picture import anchor_ns, anchors, views

    traces = (ROOT / "fixtures" / "gpu" / "base.pt.trace.json", ROOT / "fixtures" / "gpu" / "comp.pt.trace.json")
    profiles = [load_profile(str(p), LoadOptions(use_cache=False)) for p in traces]
    exs = [explain_profile(p) for p in profiles]
    sides = sides_of(timeline_table(*zip(profiles, exs)))
    starts = []
    for trace, ex, side in zip(traces, exs, sides):
        w = ex.windows.set_index("step")
        lo, hi = int(w.at[side.step, "start_ns"]), int(w.at[side.step, "end_ns"])
        starts.append(_module_starts(trace, lo, hi))
    for side, frames in zip(sides, starts):  # every module frame of the step, any depth (T on a tree row)
        assert dict(zip(side.spans.name, side.spans.start)) == frames and len(side.spans.name) == len(frames)
    # the comparison's layer 1 runs no dropout (fixtures/README.md, difference 5): no Dropout_1 frame
    assert [len(side.spans.name) for side in sides] == [27, 26]
    assert set(sides[0].spans.name) - set(sides[1].spans.name) == {"Dropout_1"}
    found = anchors(sides)
    assert [a.label for a in found] == ["the first backward op", *(f"module {m}" for m in TOP_MODULES)]
    assert (found[0].base_ns, found[0].comp_ns) == (anchor_ns(sides[0]), anchor_ns(sides[1]))
    for a, m in zip(found[1:], TOP_MODULES):
        assert (a.base_ns, a.comp_ns) == (starts[0][m], starts[1][m])
    shifts = {m: a.shift for a, m in zip(found[1:], TOP_MODULES)}
    assert [shifts[m] for m in TOP_MODULES[:3]] == [0, 0, 0]
    late = starts[1]["TransformerLayer_1"] - starts[0]["TransformerLayer_1"]
    assert late > 0 and shifts["TransformerLayer_1"] == late
    layer1 = found[1 + TOP_MODULES.index("TransformerLayer_1")]
    (b0, b1), (c0, c1) = views(sides, 0.0, 1.0, True, layer1)
    assert (c0 - b0, c1 - b1) == (late, late)  # its start lies in the same column on both sides
