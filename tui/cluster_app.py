"""The app on two cluster folders: `perfcmp-tui RUNS_V1/ RUNS_V2/`.

It opens on the **Ranks** screen (`0`): the ``ClusterCompare`` table, one row per rank, and with
`v` the ``ClusterCommGroups`` view of who waits for whom. Enter on a rank starts the comparison of
that rank pair — in a child process, like any comparison — and fills the usual screens `1` … `8`
with it; Enter on another rank replaces it. The ranks' tables stay; `e` writes the open rank
pair's sheets followed by the cluster's, as ``perfcmp-tui export`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from rich.text import Text
from textual.binding import Binding

from perfcmp_core.cluster.events import RankLoaded
from perfcmp_core.cluster.request import ClusterRequest
from perfcmp_core.cluster.tables import CLUSTER_COMPARE, cluster_result
from perfcmp_core.collect import ResultBuilder
from perfcmp_core.compare import CLUSTER_SCREENS, RANKS
from perfcmp_core.compare.result import ComparisonResult
from perfcmp_core.errors import InputError
from perfcmp_core.events import Event, Finished
from perfcmp_core.runner import ChildRun
from perfcmp_core.view import TableView

from .app import EventSource, PerfCmpApp, run_in_terminal
from .widgets.frame_view import FrameView
from .widgets.inputs import InputsBar
from .widgets.pane import TablePane
from .widgets.progress import RunProgress
from .widgets.tab_bar import TabBar

#: ``open_rank(rank)``: the event source of that rank pair's comparison (raises InputError when
#: the rank is not on both sides).
RankSource = Callable[[int], EventSource]
NOT_OPEN = "no rank pair open yet: Enter on a rank of the Ranks screen (0) compares it"


class ClusterApp(PerfCmpApp):
    BINDINGS = [Binding(RANKS.key, f"pane('{RANKS.id}')", RANKS.title, show=False)]

    def __init__(self, base: str, comp: str, source: EventSource, open_rank: RankSource, *,
                 ranks: tuple[int, int], out_dir: str = ".", timings: bool = True) -> None:
        """``source``: the cluster's events; ``ranks``: how many ranks each side holds."""
        super().__init__(base, comp, source, out_dir=out_dir, timings=timings,
                         screens=CLUSTER_SCREENS)
        self.open_rank_source = open_rank
        self.rank_counts = ranks
        self.rank: int | None = None  # the rank pair shown on screens 1 … 8
        #: The cluster's run; ``self.outcome`` becomes the open rank pair's.
        self.cluster = self.outcome

    def inputs_bar(self) -> InputsBar:
        return ClusterInputsBar(self.base_path, self.comp_path, self.rank_counts, id="inputs")

    def _show_inputs(self) -> None:
        bar = self.query_one(ClusterInputsBar)
        bar.rank, bar.ready = self.rank, CLUSTER_COMPARE in self.cluster.tables
        bar.show(self.outcome.loaded if self.rank is not None else {})

    # -- events -------------------------------------------------------------------------------
    def handle_event(self, event: Event | RankLoaded,  # type: ignore[override]
                     view: TableView | None = None) -> None:
        if isinstance(event, RankLoaded):
            self.query_one(RunProgress).count(event.done, event.total, "loading ranks")
            return
        super().handle_event(event, view)
        if self.rank is None and isinstance(event, Finished):
            self._show_inputs()
            for pane in self.query(TablePane):
                if pane.spec.id != RANKS.id:
                    pane.add_reason(NOT_OPEN)

    # -- opening a rank pair ------------------------------------------------------------------
    def on_frame_view_activated(self, event: FrameView.Activated) -> None:
        pane = self.pane
        if pane.spec.id != RANKS.id or event.frame_view is not pane.frame or pane.view is None:
            super().on_frame_view_activated(event)
            return
        rank = int(pane.view.table.data["rank"].iat[event.row])
        flag = str(self.cluster.tables[CLUSTER_COMPARE].data.set_index("rank")["flag"].get(rank, ""))
        if "failed to load" in flag or flag.startswith("only in"):
            self.notify(f"rank {rank}: {flag}, nothing to compare (the notes say why)",
                        severity="warning", timeout=5, markup=False)
            return
        self.open_rank(rank)

    def open_rank(self, rank: int) -> None:
        """Compare rank pair ``rank`` on screens 1 … 8 (replacing the one open)."""
        try:
            source = self.open_rank_source(rank)
        except InputError as exc:
            self.notify(exc.message, severity="warning", timeout=5, markup=False)
            return
        self.workers.cancel_group(self, "compare")
        self.rank, self.source = rank, source
        self.outcome = ResultBuilder(self.base_path, self.comp_path)
        tabs = self.query_one(TabBar)
        for pane in self.query(TablePane):
            if pane.spec.id != RANKS.id:
                pane.reset()
                tabs.set_empty(pane.spec.id, False)
        self._show_inputs()
        self.query_one("#progress").remove_class("hidden")
        self.running = True
        self.run_comparison()
        self.action_pane(self.screens[1].id)

    def _after_error(self, choice: str | None) -> None:
        if choice == "retry" and self.rank is not None:
            self.open_rank(self.rank)  # the ranks stay; only the rank pair is compared again
        else:
            super()._after_error(choice)
            self.cluster = self.outcome  # a retry of the cluster's own run starts it afresh

    # -- export -------------------------------------------------------------------------------
    def export_result(self) -> ComparisonResult:
        """The open rank pair's sheets first (the reference's layout), then the cluster's."""
        detail = self.outcome.snapshot() if self.rank is not None else \
            ComparisonResult(self.base_path, self.comp_path)
        return cluster_result(self.cluster.snapshot(), detail, self.rank)


class ClusterInputsBar(InputsBar):
    """The header of a cluster comparison: each folder and its ranks, then the rank pair open on
    screens 1 … 8 (its folders, kind and steps) or, before one is, how to open one."""

    def __init__(self, base: str, comp: str, counts: tuple[int, int], **kwargs: Any) -> None:
        self.counts = counts
        self.rank: int | None = None
        self.ready = False  # the ranks' table arrived
        super().__init__(base, comp, **kwargs)

    def show(self, loaded: dict[str, dict[str, Any]], stopped: bool = False) -> None:
        self._loaded, self._stopped = loaded, stopped
        self.update(self.text(loaded))

    def text(self, loaded: dict[str, dict[str, Any]]) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (tag, side) in enumerate((("BASE", "base"), ("COMP", "comparison"))):
            text.append(tag, style="bold")
            text.append(f" {self.paths[side]}  · {self.counts[i]} ranks")
            if self.rank is not None:
                info = loaded.get(side, {})
                text.append("  · ")
                text.append(f"rank {self.rank}", style="bold")
                text.append(f" {Path(info.get('path', '')).name or '…'}")
                if info:
                    steps = info.get("steps") or []
                    text.append(f" · {info.get('label', '?')} · {len(steps)} step"
                                f"{'s' if len(steps) != 1 else ''}")
            elif i == 0 and self.ready:
                text.append("  · Enter on a rank compares that rank pair")
            if side == "base":
                text.append("\n")
        return text


def build_cluster_app(request: ClusterRequest, *, out_dir: str = ".",
                      first_run: ChildRun | None = None) -> ClusterApp:
    """The app wired to the cluster's child process (call ``runner.prepare()`` first); each
    rank pair opened starts a comparison child of its own."""
    from perfcmp_core.cluster.events import start_cluster
    from perfcmp_core.runner import start_comparison

    pending = [first_run] if first_run is not None else []

    def source(should_stop: Callable[[], bool]) -> Iterator[Event]:
        run = pending.pop() if pending else start_cluster(request)
        return run.events(should_stop)

    def open_rank(rank: int) -> EventSource:
        pair = request.rank_request(rank)

        def rank_source(should_stop: Callable[[], bool]) -> Iterator[Event]:
            return start_comparison(pair).events(should_stop)
        return rank_source

    counts = (len(request.inputs.base.ranks), len(request.inputs.comp.ranks))
    return ClusterApp(request.base, request.comp, source, open_rank, ranks=counts,
                      out_dir=str(Path(out_dir)))


def run_cluster_app(request: ClusterRequest, *, out_dir: str = ".", mouse: bool = True,
                    first_run: ChildRun | None = None) -> int:
    """Run the cluster app in this terminal; its exit code."""
    return run_in_terminal(lambda: build_cluster_app(request, out_dir=out_dir, first_run=first_run),
                           mouse)
