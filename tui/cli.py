"""Command line: ``perfcmp-tui [BASE COMP | export | summary | check | info | advise] …``.

Headless commands import only :mod:`perfcmp_core`; Textual is imported only when the interactive
app starts, so ``export`` on a busy NPU host starts fast. Exit codes: 0 success, 2 bad input or
usage (one line on stderr, no traceback), 1 internal error (traceback with ``--debug``) — and for
``check``, 1 is also its verdict "regression".
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import traceback
from typing import TYPE_CHECKING, Callable, Sequence

from perfcmp_core import lifetime
from perfcmp_core.errors import InputError, UsageError, both_bad
from perfcmp_core.gcpause import gc_paused
from perfcmp_core.options import COMPARISONS, CompareOptions, LoadOptions
from perfcmp_core.processes import one_blas_thread

if TYPE_CHECKING:
    from perfcmp_core.cluster.request import ClusterRequest
    from perfcmp_core.request import RunRequest

PROG = "perfcmp-tui"
#: The subcommands, each with the one line ``perfcmp-tui --help`` shows for it.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "export": ("BASE COMP -o DIR", "headless: summary, then the msprof-analyze workbook"),
    "summary": ("BASE COMP", "headless: summary, top regressions, advisor findings"),
    "check": ("BASE COMP --max …", "CI gate: exit 1 when COMP regressed past the limits"),
    "info": ("PATH", "what a profile is: kind, steps, counts, files"),
    "advise": ("PATH", "the bottleneck advisor on one profile"),
}


def _commands_text() -> str:
    """The app's ``--help`` description: what it does, then every subcommand in one line."""
    rows = [("BASE COMP", "the interactive app (its options below)")]
    rows += [(f"{name} {args}", what) for name, (args, what) in SUBCOMMANDS.items()]
    width = max(len(r[0]) for r in rows) + 2
    lines = ["Compare BASE and COMP: why did the model get slower or hungrier?", "", "commands:"]
    lines += [f"  {cmd:<{width}}{what}" for cmd, what in rows]
    lines.append(f"\n`{PROG} COMMAND --help` lists a command's options.")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as UsageError (exit 2, one line) instead of exiting;
    every command answers ``--version``."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.add_argument("--version", action="version", version=f"{PROG} {_version()}")

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}{self._did_you_mean(message)} (see {self.prog} --help)")

    def _did_you_mean(self, message: str) -> str:
        """`--rnak`: the option meant (as an unknown command gets its "did you mean")."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        import difflib

        known = [o for o in self._option_string_actions if o.startswith("--")]
        for word in message.split(":", 1)[1].split():
            if word.startswith("--"):
                close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
                if close:
                    return f" (did you mean {close[0]}?)"
        return ""


def _version() -> str:
    from perfcmp_core import __version__

    return __version__


def _flag(group: argparse._ArgumentGroup, name: str, help_text: str, **kw: object) -> None:
    """Add ``--a-b`` with the reference's ``--a_b`` spelling as an alias."""
    dashed = "--" + name.replace("_", "-")
    under = "--" + name
    names = [dashed] if dashed == under else [dashed, under]
    group.add_argument(*names, dest=name, help=help_text, **kw)  # type: ignore[arg-type]


def _add_load_options(p: argparse.ArgumentParser, pair: bool) -> None:
    g = p.add_argument_group("loading")
    _flag(g, "rank", "pick this rank when a folder holds several ranks/traces", type=int)
    if pair:
        _flag(g, "base_step", "keep only step N (ProfilerStep#N / STEP_TIME id) of BASE", type=int)
        _flag(g, "comparison_step", "keep only step N of COMP", type=int)
    else:
        _flag(g, "step", "keep only step N (ProfilerStep#N / STEP_TIME id)", type=int)
    _flag(g, "gpu_flow_cat", "flow category linking GPU ops to kernels (fallback when a trace "
                             "has no correlation ids)", default="")
    _flag(g, "force", "skip the size caps (csv 5 GB, json 10 GB, db 8 GB) and the owner check",
          action="store_true")
    _flag(g, "no_cache", "neither read nor write the cache of loaded profiles "
                         "(~/.cache/perfcmp-tui)", action="store_true")
    _flag(g, "debug", "show tracebacks for internal errors", action="store_true")


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("comparisons (none enabled = all)")
    for name in COMPARISONS:
        _flag(g, f"enable_{name}_compare", f"run the {name} comparison", action="store_true")
    _flag(g, "disable_details", "only statistic tables (no per-op detail tables)",
          action="store_true")
    _flag(g, "disable_module", "never use the nn.Module comparison (operators instead)",
          action="store_true")
    _flag(g, "max_kernel_num", "drill into ops launching more than N kernels (N > 3)", type=int)
    _flag(g, "op_name_map", "rename ops before matching, e.g. \"{'SGD.step': 'FusedSGD.step'}\"",
          default="")
    _flag(g, "use_input_shape", "match ops by name and input shapes", action="store_true")
    _flag(g, "use_kernel_type", "kernel comparison by op type/core type (op_statistic.csv)",
          action="store_true")
    _flag(g, "config", "the one TOML configuration: masks, kernel classes, advisor rules and checks; "
                       "a legacy ini file with an [OP_MASK] section still works",
          default=None)
    _flag(g, "equivalence", "legacy ini file of equivalent operators / kernel classes read on top of the "
                            "built-in table: [op.NAME] / [kernel.NAME] sections as in the shipped "
                            "perfcmp_core/compare/equivalence.ini", default=None)
    _flag(g, "exact_names", "pair ops by their recorded names only, as msprof-analyze does (no "
                            "equivalence table, no pairing by position)", action="store_true")


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("clusters (BASE and COMP are folders of rank folders — "
                             "rank0_ascend_pt, … — or of per-rank traces: each rank is compared "
                             "with the same rank of the other, the Ranks screen first)")
    _flag(g, "ranks", "compare only these ranks, e.g. 0-7,12 (default: every rank)", default=None)
    _flag(g, "scheduler", "load the ranks on the Dask cluster at ADDRESS, e.g. tcp://head:8786 "
                          "(default: $DASK_SCHEDULER_ADDRESS; 'local': this machine); needs "
                          "perfcmp-tui[cluster]", default=None, metavar="ADDRESS")
    _flag(g, "jobs", "processes loading ranks on this machine (default: every core)", type=int)


def _add_pair(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", nargs="?", metavar="BASE", help="base profile (usually the GPU run)")
    p.add_argument("comp", nargs="?", metavar="COMP", help="comparison profile (usually the NPU run)")
    p.add_argument("-bp", "--benchmark_profiling_path", dest="bp", metavar="BASE",
                   help="base profile (msprof-analyze spelling)")
    p.add_argument("-d", "--profiling_path", dest="dp", metavar="COMP",
                   help="comparison profile (msprof-analyze spelling)")


def build_parser(command: str) -> argparse.ArgumentParser:
    if command == "info":
        p = _Parser(prog=f"{PROG} info", description="Describe one profile: kind, steps, counts, "
                                                      "files used and missing.")
        p.add_argument("path", metavar="PATH")
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
        _add_load_options(p, pair=False)
        return p
    if command == "advise":
        p = _Parser(prog=f"{PROG} advise", description="Bottleneck advisor for one profile.")
        p.add_argument("path", metavar="PATH")
        p.add_argument("--json", dest="json_out", metavar="FILE", help="also write JSON here")
        p.add_argument("--config", dest="config", metavar="FILE.toml", default=None,
                       help="the one TOML configuration: masks, kernel classes, advisor rules and "
                            "checks")
        p.add_argument("--advisor-config", dest="advisor_config", metavar="FILE",
                       help="legacy advisor INI file (rules/keywords override)")
        _add_load_options(p, pair=False)
        return p
    if command == "check":
        return _check_parser()
    desc = {
        "export": "Compare BASE and COMP headless and write the workbook "
                  "(drop-in for msprof-analyze compare).",
        "summary": "Print only the time distribution summary and the top regressions.",
        "tui": "Compare BASE and COMP interactively.",
    }[command]
    if command == "tui":
        p = _Parser(prog=PROG, description=_commands_text(),
                    usage=f"{PROG} BASE COMP [options] | {PROG} COMMAND …",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    else:
        p = _Parser(prog=f"{PROG} {command}", description=desc)
    _add_pair(p)
    if command == "export":
        p.add_argument("-o", "--output", "--output_path", dest="output", default=".",
                       metavar="DIR", help="output folder (default: current folder)")
        p.add_argument("--json", dest="json_out", metavar="FILE",
                       help="also write every table as JSON to FILE")
    if command == "tui":
        p.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
        p.add_argument("-o", "--output", dest="output", default=".", metavar="DIR",
                       help="default folder for exported workbooks")
    p.add_argument("--advisor-config", dest="advisor_config", metavar="FILE",
                   help="advisor rules/keywords override")
    _add_load_options(p, pair=True)
    _add_cluster_options(p)
    _add_compare_options(p)
    return p


def _check_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"{PROG} check",
                description="Performance regression gate: exit 0 when COMP is within the limits of BASE, 1 "
                            "when it regressed, 2 on bad input. Limits are growths per step; with enough "
                            "steps a rank test rules out step-to-step noise.")
    _add_pair(p)
    g = p.add_argument_group("policy")
    g.add_argument("--max", action="append", default=[], metavar="METRIC=LIMIT",
                   help="a limit, e.g. E2E=+5%%, idle.sync=+1ms, 'Mem Usage=+1GiB', kernel:GEMM=+3%%, "
                        "op:aten::mm=+10%%, 'module:*MLP*=+5%%' (repeatable; overrides the gate file)")
    g.add_argument("--gate", metavar="FILE", help="TOML gate file: [max] METRIC = \"LIMIT\", [gate] settings")
    g.add_argument("--alpha", type=float, help="significance level of the noise test (default 0.05)")
    _flag(g, "min_steps", "analysed steps per side the noise test needs (default 5)", type=int)
    _flag(g, "warmup_steps", "leading steps left out (default: the advisor's warmup_steps, 2)", type=int)
    g = p.add_argument_group("reports")
    g.add_argument("--junit", metavar="FILE", help="JUnit XML: one test case per check")
    g.add_argument("--json", dest="json_out", metavar="FILE", help="every check as JSON")
    g.add_argument("--markdown", metavar="FILE", help="a Markdown summary for a pull-request comment")
    g = p.add_argument_group("configuration")
    _flag(g, "equivalence", "ini file of equivalent operators / kernel classes on top of the built-in "
                            "table (the classes kernel:CLASS names)", default=None)
    p.add_argument("--advisor-config", dest="advisor_config", metavar="FILE",
                   help="advisor configuration (its warmup_steps is the default warm-up)")
    _add_load_options(p, pair=True)
    g = p.add_argument_group("clusters (BASE and COMP are folders of rank folders or per-rank traces: every "
                             "rank pair is gated, each check reports its worst rank)")
    _flag(g, "ranks", "gate only these ranks, e.g. 0-7,12 (default: every rank)", default=None)
    _flag(g, "jobs", "processes gating rank pairs on this machine (default: every core)", type=int)
    p.set_defaults(scheduler=None)  # rank pairs are gated on this machine
    return p


def _pair_paths(ns: argparse.Namespace) -> tuple[str, str]:
    base = ns.bp or ns.base
    comp = ns.dp or ns.comp
    if ns.bp and ns.base and ns.comp is None:  # `-bp X Y`: the positional is COMP
        comp = comp or ns.base
    if not base or not comp:
        raise UsageError("need two profiles: BASE COMP (or -bp BASE -d COMP)")
    return base, comp


def parse_op_name_map(text: str) -> tuple[tuple[str, str], ...]:
    """Parse ``--op-name-map`` safely (a dict literal; never evaluated as code)."""
    if not text:
        return ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise UsageError("--op-name-map must be a dict literal, e.g. \"{'a': 'b'}\"") from None
    if not isinstance(value, dict):
        raise UsageError("--op-name-map must be a dict, e.g. \"{'a': 'b'}\"")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise UsageError("--op-name-map keys and values must be strings")
        if len(k) > 200 or len(v) > 200:
            raise UsageError("--op-name-map keys and values must be at most 200 characters")
    return tuple(value.items())


def load_options(ns: argparse.Namespace, step: int | None) -> LoadOptions:
    if ns.gpu_flow_cat and len(ns.gpu_flow_cat) > 20:
        raise UsageError("--gpu-flow-cat must be at most 20 characters")
    for name in ("rank", "step", "base_step", "comparison_step"):
        val = getattr(ns, name, None)
        if val is not None and val < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be ≥ 0")
    return LoadOptions(rank=ns.rank, step=step, force=ns.force, gpu_flow_cat=ns.gpu_flow_cat,
                       use_cache=not ns.no_cache)


def compare_options(ns: argparse.Namespace) -> CompareOptions:
    if ns.max_kernel_num is not None and ns.max_kernel_num <= 3:
        raise UsageError("--max-kernel-num must be greater than 3")
    chosen = frozenset(c for c in COMPARISONS if getattr(ns, f"enable_{c}_compare"))
    if ns.use_kernel_type and chosen and "kernel" not in chosen:
        raise UsageError("--use-kernel-type needs the kernel comparison "
                         "(add --enable-kernel-compare)")
    return CompareOptions(
        enabled=chosen or frozenset(COMPARISONS),
        disable_details=ns.disable_details,
        disable_module=ns.disable_module,
        max_kernel_num=ns.max_kernel_num,
        op_name_map=parse_op_name_map(ns.op_name_map),
        use_input_shape=ns.use_input_shape,
        use_kernel_type=ns.use_kernel_type,
        exact_names=ns.exact_names,
    )


def run_request(ns: argparse.Namespace) -> RunRequest:
    """The one request of ``export``, ``summary`` and the app: options checked, every config
    file read (a bad one fails here, before any profile is opened)."""
    from perfcmp_core.request import RunRequest

    base, comp = _pair_paths(ns)
    return RunRequest.read(base, comp, load_options(ns, ns.base_step),
                           load_options(ns, ns.comparison_step), compare_options(ns),
                           mask_file=ns.config, advisor_file=ns.advisor_config,
                           equivalence_file=ns.equivalence)


def cluster_request(ns: argparse.Namespace, request: RunRequest) -> ClusterRequest | None:
    """The cluster comparison when BASE and COMP are folders of ranks and ``--rank`` is not given
    (then ``request`` compares one profile pair, as always)."""
    from perfcmp_core.cluster import ClusterOptions, parse_ranks
    from perfcmp_core.cluster.request import cluster_request as build

    if ns.jobs is not None and ns.jobs < 1:
        raise UsageError("--jobs must be ≥ 1")
    cluster_flags = [f for f, v in (("--ranks", ns.ranks), ("--scheduler", ns.scheduler),
                                    ("--jobs", ns.jobs)) if v is not None]
    if ns.rank is not None:
        if cluster_flags:
            raise UsageError(f"--rank compares one rank pair; {cluster_flags[0]} is for comparing "
                             "whole clusters: give one or the other")
        return None
    selection = parse_ranks(ns.ranks) if ns.ranks is not None else None
    cluster = build(request, selection, ClusterOptions(scheduler=ns.scheduler, jobs=ns.jobs))
    if cluster is None and cluster_flags:
        raise UsageError(f"{cluster_flags[0]} is for comparing two cluster folders (folders of "
                         "rank folders or per-rank traces); BASE and COMP are single profiles")
    return cluster


def cmd_info(ns: argparse.Namespace) -> int:
    import orjson

    from perfcmp_core.explain import explain_profile
    from perfcmp_core.explain.table import side_summary
    from perfcmp_core.info import format_info, profile_info
    from perfcmp_core.load import load_profile

    profile = load_profile(ns.path, load_options(ns, ns.step))
    info = profile_info(profile)
    info["step_time"] = side_summary(explain_profile(profile))
    if ns.json:
        try:
            text = orjson.dumps(info, option=orjson.OPT_INDENT_2).decode()
        except TypeError:  # a non-UTF-8 file name (surrogate escapes): keep it, \u-escaped
            import json

            text = json.dumps(info, indent=2)
        sys.stdout.write(text + "\n")
    else:
        print(format_info(info))
    return 0


def _headless(ns: argparse.Namespace, *, out_dir: str | None, json_path: str | None,
              write_workbook: bool) -> int:
    request = run_request(ns)
    cluster = cluster_request(ns, request)
    if cluster is not None:
        from perfcmp_core.cluster.headless import run_cluster_export

        return run_cluster_export(cluster, out_dir=out_dir, json_path=json_path,
                                  write_workbook=write_workbook)
    from perfcmp_core.headless import run_export

    return run_export(request, out_dir=out_dir, json_path=json_path,
                      write_workbook=write_workbook)


def cmd_export(ns: argparse.Namespace) -> int:
    return _headless(ns, out_dir=ns.output, json_path=ns.json_out, write_workbook=True)


def cmd_summary(ns: argparse.Namespace) -> int:
    return _headless(ns, out_dir=None, json_path=None, write_workbook=False)


def cmd_check(ns: argparse.Namespace) -> int:
    """The gate: the request's configuration files and the whole policy are read and checked
    first (bad input exits 2 before any profile is opened), then the pair or the clusters are
    loaded and gated."""
    from perfcmp_core.compare.kernel_families import class_order
    from perfcmp_core.gate import Outputs, combine, parse_max, read_gate_file, run_check
    from perfcmp_core.request import RunRequest

    base, comp = _pair_paths(ns)
    request = RunRequest.read(base, comp, load_options(ns, ns.base_step), load_options(ns, ns.comparison_step),
                              CompareOptions(), advisor_file=ns.advisor_config, equivalence_file=ns.equivalence)
    classes = class_order(request.equivalence)
    spec = combine(read_gate_file(ns.gate, classes) if ns.gate else None, parse_max(ns.max, classes),
                   alpha=ns.alpha, min_steps=ns.min_steps, warmup_steps=ns.warmup_steps)
    cluster = cluster_request(ns, request)
    return run_check(request, spec, Outputs(ns.junit, ns.json_out, ns.markdown), cluster=cluster)


def cmd_advise(ns: argparse.Namespace) -> int:
    from perfcmp_core.advisor import run_advise
    from perfcmp_core.settings import load_settings

    settings = load_settings(ns.config, ns.advisor_config)  # a bad file fails before the load
    return run_advise(ns.path, load_options(ns, ns.step), ns.advisor_config, ns.json_out, settings=settings)


def _check_before_screen(request: RunRequest, out_dir: str, *, clusters: bool = False) -> RunRequest:
    """What can fail without loading fails here, as one line and exit code 2, before the
    terminal switches to the app: options and config files (read into ``request``), the inputs
    (they exist, their kind is detected, every file they name is readable and passes the size and
    owner checks, a requested Db step exists; a small input is read whole: a truncated gzip, a
    JSON that is not a trace) and the export folder. The in-app error view is
    left for what only loading reveals. Two ``clusters`` were checked as far as finding their
    ranks; a rank's files are checked where it loads (one bad rank is reported, not fatal).
    Returns the request with both inputs as detected here, so that the run does not detect them
    again."""
    from perfcmp_core.export.safe_write import check_dir
    from perfcmp_core.load import check_content, check_input

    if not clusters:
        errors, sources = [], []
        for path, opts in ((request.base, request.base_opts), (request.comp, request.comp_opts)):
            try:  # both inputs: when both are bad, both are named
                sources.append(check_input(path, opts))
                check_content(sources[-1], opts)
            except InputError as exc:
                errors.append(exc)
        if errors:
            raise errors[0] if len(errors) == 1 else both_bad(errors[0], errors[1])
        request = request.with_sources(*sources)
    check_dir(out_dir)
    return request


def cmd_tui(ns: argparse.Namespace) -> int:
    from perfcmp_core.runner import prepare, start_comparison

    from perfcmp_tui.terminal import require_terminal

    require_terminal()  # before anything else: a script must get neither a screen nor a wait
    # The comparison starts before Textual is imported, so its parsing overlaps the app's own
    # start-up. The request is built first: its config files are read (that imports pandas,
    # which the app needs anyway, and the advisor, which the child needs) and a forked child
    # inherits all of it, so it starts parsing at once.
    with gc_paused():  # imports: hundreds of thousands of objects, no cycles
        request = run_request(ns)
        cluster = cluster_request(ns, request)
    request = _check_before_screen(request, ns.output, clusters=cluster is not None)
    prepare()
    if cluster is not None:  # bad input: no process is ever started
        from perfcmp_core.cluster.events import start_cluster

        run = start_cluster(cluster)
    else:
        run = start_comparison(request, serve=True)  # it serves the step changes (S)
    try:
        with gc_paused():
            from perfcmp_tui.app import run_app
            from perfcmp_tui.cluster_app import run_cluster_app
    except BaseException:
        run.close()
        raise
    try:
        if cluster is not None:
            return run_cluster_app(cluster, out_dir=ns.output, mouse=not ns.no_mouse,
                                   first_run=run)
        return run_app(request, out_dir=ns.output, mouse=not ns.no_mouse, first_run=run)
    finally:
        run.close()  # already closed when the app ran; not when it failed to start


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "info": cmd_info,
    "export": cmd_export,
    "summary": cmd_summary,
    "check": cmd_check,
    "advise": cmd_advise,
    "tui": cmd_tui,
}


def _tolerant_streams() -> None:
    """Print what the terminal's encoding cannot hold escaped instead of failing.

    File names copied from other machines may not be valid in the locale's encoding (Python
    hands them over as surrogate escapes); a strict stdout would turn ``info`` on such a folder
    into an internal error.
    """
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _command(args: Sequence[str]) -> str:
    """The subcommand ``args`` start with, else ``tui`` (the app takes two paths).

    A first word that is no subcommand and no existing path but close to a subcommand is a typo
    (``exprot``): a usage error saying so, instead of "no such file" about a profile called
    ``exprot``.
    """
    if args and args[0] in SUBCOMMANDS:
        return args[0]
    if args and not args[0].startswith("-") and not os.path.lexists(args[0]):
        import difflib

        close = difflib.get_close_matches(args[0], list(SUBCOMMANDS), n=1, cutoff=0.6)
        if close:
            raise UsageError(f"unknown command '{args[0]}' (did you mean '{close[0]}'?)")
    return "tui"


def main(argv: Sequence[str] | None = None) -> int:
    one_blas_thread()  # before anything imports numpy
    _tolerant_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        command = _command(args)
        rest = args[1:] if command != "tui" else args
        ns = build_parser(command).parse_args(rest)
        return COMMANDS[command](ns)
    except InputError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except lifetime.Terminated as exc:
        lifetime.remove_temp_files()
        try:
            print(f"{PROG}: {exc}", file=sys.stderr)
        except OSError:  # the terminal that would show it is gone
            pass
        return exc.exit_code
    except BrokenPipeError:
        # `perfcmp-tui info … | head`: the reader left; not an error worth a message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place internal errors are reported
        if debug:
            traceback.print_exc()
        else:
            what = " ".join(str(exc).splitlines())
            print(f"{PROG}: internal error: {type(exc).__name__}: {what} "
                  "(run again with --debug for the traceback)", file=sys.stderr)
        return 1


def entry() -> None:
    """The console script: run a command and end the process.

    By the time a command returns it has written, closed and renamed every output and joined
    every child process (the app has also restored the terminal); all that is left is the
    interpreter freeing the loaded profiles object by object, which took 0.11 s of a 1.4 s
    export of the real pair, and over a second after quitting the app on a busy host. So after
    flushing the standard streams the process ends at once (``os._exit``).
    """
    # SIGTERM / SIGHUP (a supervisor, a dropped SSH connection) unwind like Ctrl+C: temporary
    # files are removed and worker processes stopped on the way out (main reports it).
    lifetime.raise_on_termination()
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that left (`| head`), a terminal that is gone
            pass
    os._exit(code)


if __name__ == "__main__":
    entry()
