"""The gate's reports: terminal, JUnit XML, JSON and Markdown (a pull-request comment).

Every report shows, per check: base and comparison per-step means, the change, the limit and the
verdict with its reason; a failed check lists its top contributors. Text from the profiles (op,
kernel and module names) is escaped for each format: XML by the writer (control characters
dropped: XML 1.0 cannot hold them), Markdown with ``|``, ``<``, ``>`` and backticks made inert,
so a planted name can neither break the table nor inject HTML into a review page. Files are
written through :func:`~perfcmp_core.export.safe_write.safe_write` (complete or absent, never
clobbering an existing file).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

import orjson

from .. import __version__
from ..export.safe_write import safe_write
from .run import GateResult, Outputs
from .series import SideSeries
from .spec import GateSpec
from .stats import EXACT
from .verdict import FAIL, PASS, SKIP, Verdict, format_change, format_value

_MARK = {PASS: "PASS", FAIL: "FAIL", SKIP: "SKIP"}
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def noise_policy(spec: GateSpec) -> str:
    """The noise test as every report states it."""
    return (f"noise test: one-sided Mann-Whitney U on per-step values, α = {spec.alpha:g}, when both sides "
            f"have ≥ {spec.min_steps} analysed steps (else the limit alone decides)")


def check_title(v: Verdict) -> str:
    return f"{v.metric} ≤ {v.limit}"


def change_text(v: Verdict) -> str:
    ratio = "" if v.ratio is None else f" ({100 * v.ratio:+.1f} %)"
    return format_change(v.change, v.unit) + ratio


def noise_text(v: Verdict) -> str:
    if v.status == SKIP:
        return "—"
    if v.test is None:
        return "noise not assessed"
    method = "exact" if v.test.method == EXACT else "normal approx."
    return f"U = {v.test.u:g}, p = {v.test.p:.3g} ({method})"


def _steps_line(result: GateResult) -> str:
    if result.is_cluster:
        return f"{len(result.ranks)} rank pairs gated; each check shows its worst rank"
    pair = result.pair
    assert pair is not None

    def side(s: SideSeries) -> str:
        n = len(s.steps)
        text = "whole profile (no step markers)" if s.steps == (-1,) else f"{n} step{'s' * (n != 1)}"
        warm = ", ".join(map(str, s.warmup))
        return text + (f" (warm-up step{'s' * (len(s.warmup) != 1)} {warm} left out)" if s.warmup else "")
    return f"analysed: base {side(pair.base)}, comparison {side(pair.comp)}"


# ------------------------------------------------------------------------------ terminal

def terminal_report(result: GateResult) -> str:
    lines = [f"Performance gate: base {result.base} vs comparison {result.comp}",
             _steps_line(result), noise_policy(result.spec)]
    rows = [("check", "base/step", "comparison/step", "change", "limit", "verdict")]
    for v in result.verdicts:
        rows.append((v.metric + (f" (rank {v.rank})" if v.rank is not None else ""), format_value(v.base, v.unit),
                     format_value(v.comp, v.unit), change_text(v), v.limit, _MARK[v.status]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines.append("")
    for i, r in enumerate(rows):
        lines.append("  " + "  ".join(c.ljust(w) if j in (0, 5) else c.rjust(w)
                                      for j, (c, w) in enumerate(zip(r, widths))).rstrip())
        if i:
            v = result.verdicts[i - 1]
            lines.append(f"      {v.reason}; {noise_text(v)}" if v.test else f"      {v.reason}")
            lines += [f"      contributor: {c}" for c in v.contributors]
            lines += [f"      {line}" for line in _ranks_line(result, i - 1)]
    failed, skipped = len(result.failed), sum(v.status == SKIP for v in result.verdicts)
    lines.append("")
    if failed:
        summary = f"REGRESSION: {failed} of {len(result.verdicts)} checks failed"
    elif skipped == len(result.verdicts):
        summary = "NOTHING CHECKED: every check was skipped (exit 0)"
    else:
        summary = f"PASS: {len(result.verdicts) - skipped} of {len(result.verdicts)} checks passed"
    lines.append(summary + (f", {skipped} skipped" if skipped else ""))
    return "\n".join(lines)


def _ranks_line(result: GateResult, index: int) -> list[str]:
    if not result.is_cluster:
        return []
    failing = result.failing_ranks(index)
    if not failing:
        return []
    return [f"ranks failing this check: {', '.join(map(str, failing))} (of {len(result.ranks)})"]


# ------------------------------------------------------------------------------ JSON

def json_document(result: GateResult) -> dict[str, Any]:
    spec = result.spec
    return {
        "tool": "perfcmp-tui check", "version": __version__,
        "base": result.base, "comparison": result.comp,
        "passed": not result.failed, "exit_code": result.exit_code,
        "policy": {"alpha": spec.alpha, "min_steps": spec.min_steps, "warmup_steps": spec.warmup_steps,
                   "gate_file": spec.source or None, "test": "one-sided Mann-Whitney U on per-step values"},
        "checks": [{**_verdict_json(v), "failing_ranks": result.failing_ranks(i) if result.is_cluster else None}
                   for i, v in enumerate(result.verdicts)],
        "ranks": None if result.pair is not None else {
            str(rank): [_verdict_json(v) for v in verdicts] for rank, verdicts in result.ranks.items()},
        "steps": None if result.pair is None else {
            side: {"analysed": list(s.steps), "warmup": list(s.warmup)}
            for side, s in (("base", result.pair.base), ("comparison", result.pair.comp))},
    }


def _verdict_json(v: Verdict) -> dict[str, Any]:
    unit = "bytes" if v.unit == "bytes" else "ns"
    return {"metric": v.metric, "unit": unit, "limit": v.limit, "base": v.base, "comparison": v.comp,
            "change": v.change, "change_ratio": v.ratio, "allowed": v.allowed, "verdict": v.status,
            "reason": v.reason, "base_steps": v.base_steps, "comparison_steps": v.comp_steps,
            "noise": None if v.test is None else {"u": v.test.u, "p": v.test.p, "method": v.test.method},
            "contributors": list(v.contributors), "rank": v.rank}


# ------------------------------------------------------------------------------ JUnit

def junit_xml(result: GateResult) -> bytes:
    """One test case per check; a failure carries the reason and contributors, a skip its reason."""
    suite = ET.Element("testsuite", name="perfcmp-tui check", tests=str(len(result.verdicts)),
                       failures=str(len(result.failed)),
                       skipped=str(sum(v.status == SKIP for v in result.verdicts)), errors="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("base", result.base), ("comparison", result.comp), ("policy", noise_policy(result.spec))):
        ET.SubElement(props, "property", name=name, value=_xml(value))
    for v in result.verdicts:
        case = ET.SubElement(suite, "testcase", classname="perfcmp-tui.check", name=_xml(check_title(v)))
        summary = _xml(_one_line(v))
        if v.status == FAIL:
            node = ET.SubElement(case, "failure", message=summary, type="regression")
            node.text = _xml("\n".join([summary, *(f"contributor: {c}" for c in v.contributors)]))
        elif v.status == SKIP:
            ET.SubElement(case, "skipped", message=_xml(v.reason))
        else:
            ET.SubElement(case, "system-out").text = summary
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _one_line(v: Verdict) -> str:
    rank = f" on rank {v.rank}" if v.rank is not None else ""
    return (f"{v.metric}{rank}: {format_value(v.base, v.unit)} → {format_value(v.comp, v.unit)} per step, "
            f"{change_text(v)}, limit {v.limit}: {v.reason}" + (f"; {noise_text(v)}" if v.test else ""))


def _xml(text: str) -> str:
    return _CONTROL.sub("", text)


# ------------------------------------------------------------------------------ Markdown

def markdown(result: GateResult) -> str:
    failed = result.failed
    head = "❌ **Performance regression**" if failed else "✅ **Performance gate passed**"
    lines = [f"### {head}: {_md(result.base)} → {_md(result.comp)}", "",
             f"{_md(_steps_line(result))}. {_md(noise_policy(result.spec))}.", "",
             "| Check | Base / step | Comparison / step | Change | Limit | Verdict | Noise |",
             "|---|---:|---:|---:|---:|---|---|"]
    for v in result.verdicts:
        rank = f" (rank {v.rank})" if v.rank is not None else ""
        lines.append(f"| {_md(v.metric)}{rank} | {format_value(v.base, v.unit)} | {format_value(v.comp, v.unit)} | "
                     f"{_md(change_text(v))} | {_md(v.limit)} | {_MARK[v.status]} | {_md(noise_text(v))} |")
    for i, v in enumerate(result.verdicts):
        if v.status != FAIL:
            continue
        lines += ["", f"**{_md(v.metric)}**: {_md(v.reason)}"]
        lines += [f"- {_md(c)}" for c in v.contributors]
        lines += [f"- {_md(line)}" for line in _ranks_line(result, i)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    text = _CONTROL.sub("", " ".join(str(text).splitlines()))
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
            .replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*").replace("_", "\\_"))


# ------------------------------------------------------------------------------ files

def write_reports(result: GateResult, outputs: Outputs) -> Iterator[tuple[str, Path]]:
    """Write each report asked for; yields (kind, path written)."""
    jobs = (("JUnit report", outputs.junit, lambda: junit_xml(result)),
            ("JSON report", outputs.json, lambda: orjson.dumps(json_document(result), option=orjson.OPT_INDENT_2
                                                                 | orjson.OPT_APPEND_NEWLINE)),
            ("Markdown report", outputs.markdown, lambda: markdown(result).encode("utf-8")))
    for kind, path, render in jobs:
        if path:
            data = render()
            yield kind, safe_write(path, lambda fh, data=data: fh.write(data))
