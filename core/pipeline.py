"""One comparison run as a stream of events, and the headless commands built on it.

``comparison_events`` is the single place where a run is orchestrated: load both sides (in
parallel processes), then every enabled comparison in workbook order, then the summary and the
advisor. ``export``/``summary`` consume the stream in-process; the TUI consumes it from a child
process (:mod:`perfcmp_core.runner`).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

from . import background
from .compare import STEPS, Context, summary_step
from .compare.result import ComparisonResult
from .errors import InputError
from .events import (Event, Failed, Finished, Loaded, Phase, Planned, Skipped, SummaryReady,
                     TableReady)
from .info import profile_info
from .options import CompareOptions, LoadOptions
from .model import Profile
from .pair import iter_pair


def comparison_events(
    base: str,
    comp: str,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    compare_opts: CompareOptions,
    advisor_config: str | None = None,
) -> Iterator[Event]:
    """Run a whole comparison, yielding progress and results as they become available."""
    from .advisor import load_config
    from .compare.equivalence import check_equivalence
    from .compare.masks import load_masks

    t_start = time.perf_counter()
    # Config files are the user's input too: reject a bad one before minutes of loading.
    load_config(advisor_config)
    load_masks(compare_opts.config_path)
    check_equivalence(compare_opts.equivalence_path)
    steps = [s for s in STEPS if compare_opts.enables(s.switch)]
    yield Planned(("load base", "load comparison", *(s.name for s in steps), "summary", "advisor"))

    yield Phase("load base")
    yield Phase("load comparison")
    loaded: dict[str, Profile] = {}
    for side, profile, seconds in iter_pair(base, comp, base_opts, comp_opts):
        loaded[side] = profile
        yield Loaded(side, profile_info(profile))
        yield Phase(f"load {side}", done=True, seconds=seconds)
    b, c = loaded["base"], loaded["comparison"]

    from .advisor import advisor_tables

    ctx = Context(base=b, comp=c, opts=compare_opts)
    # The advisor needs nothing the other steps compute: it runs on the second core meanwhile.
    advice = background.start(advisor_tables, ctx, advisor_config)
    for step in steps:
        yield Phase(step.name)
        t0 = time.perf_counter()
        outcome = step.run(ctx)
        if isinstance(outcome, str):
            yield Skipped(step.tables, outcome)
        else:
            produced = [t for t in outcome if not t.empty]
            for table in produced:
                yield TableReady(table)
            for table in outcome:
                if table.empty:
                    yield Skipped((table.name,), table.absent_reason or f"{table.name}: no rows")
        yield Phase(step.name, done=True, seconds=time.perf_counter() - t0)

    yield Phase("summary")
    t0 = time.perf_counter()
    figures, text = summary_step(ctx)
    yield SummaryReady(figures, text)
    yield Phase("summary", done=True, seconds=time.perf_counter() - t0)

    yield Phase("advisor")
    t0 = time.perf_counter()
    for table in advice():
        yield TableReady(table)
    yield Phase("advisor", done=True, seconds=time.perf_counter() - t0)
    yield Finished(time.perf_counter() - t_start, notes=list(ctx.notes))


def collect(events: Iterator[Event], base: str, comp: str,
            log: TextIO | None = None) -> ComparisonResult:
    """Consume an event stream into a :class:`ComparisonResult` (headless use)."""
    result = ComparisonResult(base, comp)
    for event in events:
        if isinstance(event, Loaded):
            # What the loader had to guess (N/A durations, absent Db tables, links leading
            # outside the folder …): headless users see it only here and in the README.
            result.notes.extend(f"{event.side}: {n}" for n in event.info.get("notes", ()))
        elif isinstance(event, TableReady):
            result.add(event.table)
        elif isinstance(event, Skipped):
            if event.reason not in result.notes:
                result.notes.append(event.reason)
        elif isinstance(event, SummaryReady):
            result.summary = {"figures": event.figures, "text": event.text}
        elif isinstance(event, Phase) and event.done and log is not None:
            print(f"  {event.name:<28} {event.seconds:7.2f} s", file=log)
        elif isinstance(event, Failed):
            raise InputError(None, event.message)
        elif isinstance(event, Finished):
            result.notes.extend(n for n in event.notes if n not in result.notes)
    return result


def top_regressions(result: ComparisonResult, n: int = 10) -> str:
    """The top ``n`` operators / modules by Diff, as text for the terminal."""
    from .view import format_value

    for name in ("ModuleCompareStatistic", "OperatorCompareStatistic"):
        table = result.tables.get(name)
        if table is None or table.empty or not table.default_sort:
            continue
        df = table.data
        if "_is_total" in df:
            df = df[df["_is_total"].astype(bool)]
        df = df.sort_values(table.default_sort, ascending=False, kind="stable").head(n)
        name_col = next(c for c in table.columns if c.fmt in ("bold", "text") and
                        c.header in ("Operator Name", "Module Name"))
        diff_col = table.column(table.default_sort)
        ratio_col = next((c for c in table.columns if c.role == "ratio"), None)
        lines = [f"Top {len(df)} regressions ({name}, by {diff_col.header}):"]
        for i, row in enumerate(df.itertuples(index=False), 1):
            rec = row._asdict()
            ratio = f"  ({format_value(rec[ratio_col.key], ratio_col)})" if ratio_col else ""
            lines.append(f"  {i:>2}. {str(rec[name_col.key])[:70]:<70} "
                         f"{format_value(rec[diff_col.key], diff_col):>12}{ratio}")
        return "\n".join(lines)
    return "No operator or module table: no top regressions to show."


def run_export(
    base: str,
    comp: str,
    base_opts: LoadOptions,
    comp_opts: LoadOptions,
    compare_opts: CompareOptions,
    *,
    out_dir: str | None,
    json_path: str | None,
    advisor_config: str | None,
    write_workbook: bool,
    out: TextIO | None = None,
) -> int:
    """``perfcmp-tui export`` / ``summary``: compare, print the summary, write outputs."""
    out = out or sys.stdout
    from .export.json_out import write_json
    from .export.safe_write import check_dir
    from .export.xlsx import NothingToWrite
    from .export.xlsx import write_workbook as write_xlsx

    # Fail on an unusable destination before a long comparison, but create nothing yet: a run
    # that then fails on its input must leave no (empty) output folder behind.
    if write_workbook:
        check_dir(out_dir or ".")
    if json_path:
        check_dir(Path(json_path).parent)
    result = collect(comparison_events(base, comp, base_opts, comp_opts, compare_opts,
                                       advisor_config), base, comp)
    summary = result.summary or {}
    print(summary.get("text") or "Model Profiling Time Distribution: not available "
          "(profiling comparison disabled or no kernels)", file=out)
    print(file=out)
    print(top_regressions(result), file=out)
    advice = result.tables.get("Advisor")
    if advice is not None and not advice.empty:
        from .advisor import format_findings

        print(file=out)
        print(format_findings(advice), file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)
    if json_path:
        with _output_errors(json_path):
            path = write_json(result, json_path)
        print(f"JSON written: {path}", file=out)
    if not write_workbook:
        return 0
    try:
        with _output_errors(out_dir or "."):
            path = write_xlsx(result, out_dir or ".")
    except NothingToWrite as exc:
        print(exc, file=out)
        return 0
    print(f"The comparison result file has been generated: {path}", file=out)
    return 0


@contextmanager
def _output_errors(where: str) -> Iterator[None]:
    """A full disk, a quota or a file system gone read-only while writing is a problem of the
    chosen destination: one line naming it (exit 2), not an internal error. The writers have
    already removed their temporary file by then."""
    try:
        yield
    except OSError as exc:
        raise InputError(where, f"cannot write the result here ({exc.strerror or exc})") from exc

