"""Issue 30 #14: from a number on the Overall screen to its cause, and from a kernel to the ops
that launched it (`o`, and Enter on OverallMetrics and the Kernels screen's class tables).

Each expected row set is derived here from core's tables by another route than
:func:`perfcmp_core.compare.behind.behind`: by the kernel class column, by the figures the
sheets print (a class's launching ops add up to its KernelClassCompare row and to its
OverallMetrics / StepTime figure), by the op names of the hand-built host-bound pair
(tests/test_explain.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from perfcmp_core.compare.behind import Behind, behind
from perfcmp_tui.app import PerfCmpApp
from tui_support import aio, make_app, open_view, settle, tables

SIZE = (160, 44)


def _row(pair: str, name: str, label: str, key: str = "index") -> int:
    """Position of the row of table ``name`` whose ``key`` cell, stripped, reads ``label``."""
    data = tables(pair)[name].data
    hits = np.flatnonzero(data[key].astype(object).map(lambda v: str(v).strip()) == label)
    assert len(hits), f"{label} is no row of {name}"
    return int(hits[0])


def _class_rows(pair: str, classes: set[str]) -> list[int]:
    data = tables(pair)["KernelOpCompare"].data
    return [i for i, c in enumerate(data["cls"].tolist()) if c in classes]


def _shown_rows(app: PerfCmpApp) -> list[int]:
    view = app.pane.view
    assert view is not None
    return sorted(int(r) for r in view.order())


def _sums(pair: str, rows: list[int]) -> tuple[float, float]:
    data = tables(pair)["KernelOpCompare"].data.iloc[rows]
    return float(data["base_ms"].sum()), float(data["comp_ms"].sum())


# -- core, headless ---------------------------------------------------------------------------
def test_a_kernel_class_opens_its_launching_ops_which_add_up_to_its_figures() -> None:
    """GPU pair: every KernelClassCompare class opens the KernelOpCompare rows of that class,
    and they add up to the class's row; StepTime's GEMM (a per-step mean of the 3 steps) is a
    third of it."""
    t = tables("gpu")
    classes = t["KernelClassCompare"].data
    for i, cls in enumerate(classes["cls"].tolist()):
        if cls == "[ TOTAL ]":
            continue
        found = behind(t, "KernelClassCompare", i)
        assert isinstance(found, Behind) and found.table == "KernelOpCompare"
        assert sorted(found.rows.tolist()) == _class_rows("gpu", {cls})
        base, comp = _sums("gpu", found.rows.tolist())
        assert base == pytest.approx(classes["base_ms"].iat[i], abs=1e-9)
        assert comp == pytest.approx(classes["comp_ms"].iat[i], abs=1e-9)
    step = t["StepTime"].data
    gemm = _row("gpu", "StepTime", "GEMM")
    found = behind(t, "StepTime", gemm)
    assert isinstance(found, Behind)
    base, comp = _sums("gpu", found.rows.tolist())
    assert base / 3 == pytest.approx(step["base_ms"].iat[gemm], abs=1e-6)
    assert comp / 3 == pytest.approx(step["comp_ms"].iat[gemm], abs=1e-6)


def test_overall_metrics_classes_open_the_kernels_they_hold() -> None:
    """GPU pair, the OverallMetrics Computing rows: Matmul is the GEMM class, Flash Attention
    and Conv split forward / backward by the launching op, Page Attention is vLLM's op, Vector
    the classes OverallMetrics names nowhere else; each adds up to the row's figure (base side
    for Vector: on the comparison, an ``aten::copy_`` kernel the device runs as compute counts as
    Vector there and as ``copy / cast / memset`` here — docs/tui.md)."""
    t = tables("gpu")
    om = t["OverallMetrics"].data
    ops = t["KernelOpCompare"].data
    expect = {
        "Matmul": _class_rows("gpu", {"GEMM"}),
        "Flash Attention (Forward)": [i for i in _class_rows("gpu", {"attention"})
                                      if ops["op"].iat[i] == "aten::_scaled_dot_product_flash_attention"],
        "Flash Attention (Backward)": [i for i in _class_rows("gpu", {"attention"})
                                       if ops["op"].iat[i].endswith("_backward")],
        "Conv (Forward)": [i for i in _class_rows("gpu", {"convolution"})
                           if ops["op"].iat[i] == "aten::_convolution"],
        "Conv (Backward)": [i for i in _class_rows("gpu", {"convolution"})
                            if ops["op"].iat[i] == "aten::convolution_backward"],
        "Page Attention": [i for i in _class_rows("gpu", {"attention"})
                           if ops["op"].iat[i] == "_C::paged_attention_v1"],
        "Vector": _class_rows("gpu", {"element-wise", "normalisation", "reduction / softmax / sort",
                                      "indexing / embedding / resize"}),
    }
    for label, rows in expect.items():
        at = _row("gpu", "OverallMetrics", label)
        found = behind(t, "OverallMetrics", at)
        assert isinstance(found, Behind) and found.table == "KernelOpCompare", label
        assert sorted(found.rows.tolist()) == sorted(rows), label
        base, comp = _sums("gpu", rows)
        assert base == pytest.approx(om["base_ms"].iat[at], abs=1e-9), label
        if label != "Vector":
            assert comp == pytest.approx(om["comp_ms"].iat[at], abs=1e-9), label
    # Free and E2E are no kernels: a reason, not rows
    assert isinstance(behind(t, "OverallMetrics", _row("gpu", "OverallMetrics", "E2E Time")), str)


def test_idle_causes_open_the_ops_they_name() -> None:
    """Host-bound pair (tests/test_explain.py works it out by hand): the sync cause is
    ``aten::item``'s, the copies happen in ``aten::to`` and ``aten::item``, launch-bound time
    in ``aten::linear``; host work in Python frames names no op."""
    t = tables("hostbound")
    ops = t["OperatorCompareStatistic"].data["name"].tolist()
    for label, names in (("synchronisation (host waited for the device)", {"aten::item"}),
                         ("copies", {"aten::to", "aten::item"}),
                         ("launch-bound (host dispatching ops)", {"aten::linear"}),
                         ("H2D copy (pageable) in aten::to", {"aten::to"})):
        found = behind(t, "StepTime", _row("hostbound", "StepTime", label))
        assert isinstance(found, Behind) and found.table == "OperatorCompareStatistic", label
        assert {ops[i] for i in found.rows} == names, label
    assert isinstance(behind(t, "StepTime", _row("hostbound", "StepTime", "train.py(12): load_batch")), str)


# -- the keys ---------------------------------------------------------------------------------
@aio
async def test_enter_on_an_overall_class_opens_its_kernels_and_backspace_returns_to_the_row() -> None:
    """Overall → OverallMetrics, Enter on Matmul: the Kernels screen shows the GEMM launching
    ops (their Device Time adds up to Matmul's); Backspace: Overall again, on Matmul, and the
    Kernels table whole again."""
    app = make_app("gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await open_view(pilot, app, "OverallMetrics")
        matmul = _row("gpu", "OverallMetrics", "Matmul")
        app.pane.frame.goto_row(matmul)
        await pilot.press("enter")
        assert (app.pane.spec.id, app.pane.current) == ("kernels", "KernelOpCompare")
        assert _shown_rows(app) == _class_rows("gpu", {"GEMM"})
        assert "rows of Matmul kernels" in str(app.pane.query_one("#pane-status").visual)
        base, _ = _sums("gpu", _shown_rows(app))
        assert base == pytest.approx(tables("gpu")["OverallMetrics"].data["base_ms"].iat[matmul])
        await pilot.press("backspace")
        assert (app.pane.spec.id, app.pane.current) == ("overall", "OverallMetrics")
        assert app.pane.frame.current_row == matmul
        kernels = app._pane("kernels").views["KernelOpCompare"]
        assert kernels.focus_rows is None and len(kernels) == len(tables("gpu")["KernelOpCompare"].data)
        await pilot.press("Q")


@aio
async def test_o_on_step_time_opens_kernels_collectives_and_ops_and_q_comes_back() -> None:
    """StepTime (the screen Overall opens on): `o` on GEMM → the GEMM launching ops; on
    AllReduce → the allreduce row of the Comm screen; q returns to the row each time."""
    app = make_app("gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.pane.current == "StepTime"
        gemm = _row("gpu", "StepTime", "GEMM")
        app.pane.frame.goto_row(gemm)
        await pilot.press("o")
        assert (app.pane.spec.id, app.pane.current) == ("kernels", "KernelOpCompare")
        assert _shown_rows(app) == _class_rows("gpu", {"GEMM"})
        await pilot.press("q")
        assert (app.pane.spec.id, app.pane.current, app.pane.frame.current_row) == ("overall", "StepTime", gemm)
        allreduce = _row("gpu", "StepTime", "AllReduce")
        app.pane.view.expand_all(True)
        app.pane.frame.refresh_data()
        app.pane.frame.goto_row(allreduce)
        await pilot.press("o")
        assert (app.pane.spec.id, app.pane.current) == ("communication", "CommunicationCompare")
        comm = tables("gpu")["CommunicationCompare"].data
        assert [comm["base_name"].iat[r] for r in _shown_rows(app)] == ["allreduce"]
        await pilot.press("escape")
        assert (app.pane.spec.id, app.pane.frame.current_row) == ("overall", allreduce)
        await pilot.press("Q")


@aio
async def test_o_on_an_idle_cause_opens_its_operators() -> None:
    """Host-bound pair: `o` on the sync cause opens the Operators screen on aten::item alone."""
    app = make_app("hostbound")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.pane.frame.goto_row(_row("hostbound", "StepTime", "synchronisation (host waited for the device)"))
        await pilot.press("o")
        assert (app.pane.spec.id, app.pane.current) == ("operators", "OperatorCompareStatistic")
        names = tables("hostbound")["OperatorCompareStatistic"].data["name"]
        assert [names.iat[r] for r in _shown_rows(app)] == ["aten::item"]
        await pilot.press("Q")


@aio
async def test_from_a_kernel_class_to_its_launching_ops_to_their_operator_rows() -> None:
    """Kernels screen: Enter on KernelClassCompare's GEMM → its KernelOpCompare rows (same
    screen; q back); Enter on one of them → the Operators screen's rows of that op, or the API
    screen's when it never runs outermost (``aten::addmm`` runs inside ``aten::linear``)."""
    app = make_app("gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("6")
        await open_view(pilot, app, "KernelClassCompare")
        gemm = _row("gpu", "KernelClassCompare", "GEMM", key="cls")
        app.pane.frame.goto_row(gemm)
        await pilot.press("enter")
        assert app.pane.current == "KernelOpCompare"
        assert _shown_rows(app) == _class_rows("gpu", {"GEMM"})
        first = _shown_rows(app)[0]
        op = tables("gpu")["KernelOpCompare"].data["op"].iat[first]
        app.pane.frame.goto_row(first)
        await pilot.press("enter")
        top = set(tables("gpu")["OperatorCompareStatistic"].data["name"])
        screen, table = (("operators", "OperatorCompareStatistic") if op in top else ("api", "ApiCompare"))
        assert (op, app.pane.spec.id, app.pane.current) == (op, screen, table)
        names = tables("gpu")[table].data["name"]
        assert [names.iat[r] for r in _shown_rows(app)] == [op]
        await pilot.press("backspace")
        assert (app.pane.spec.id, app.pane.current) == ("kernels", "KernelOpCompare")
        await pilot.press("q")
        assert (app.pane.current, app.pane.frame.current_row) == ("KernelClassCompare", gemm)
        await pilot.press("Q")
