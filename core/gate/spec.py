"""What a gate checks: metrics, limits and the noise test's settings — parsed before any loading.

``perfcmp-tui check`` reads its policy from ``--max METRIC=LIMIT`` options and from a gate file
(TOML, read by :mod:`perfcmp_core.toml_file` like every configuration file). Everything here is
validated up front, so a typo in a metric or a limit fails in a second with one line (exit 2)
instead of after loading two large profiles.

Metrics (case-insensitive): ``E2E``, ``Computing``, ``Uncovered Communication``, ``Free`` (the
three parts of the step explanation, which add up to E2E), a cause of a part as ``PART.CAUSE``
(``idle.sync``, ``idle.host``, ``communication.wait`` …, :mod:`perfcmp_core.explain.idle`),
``Mem Usage`` (peak reserved device memory), a kernel class as ``kernel:CLASS`` (the classes of
the equivalence table: ``kernel:GEMM``), and ``op:PATTERN`` / ``module:PATTERN`` (device time of
the kernels launched under a host op / inside an ``nn.Module`` whose name matches the shell-style
``PATTERN``: ``op:aten::mm``, ``module:*LlamaMLP*``).

Limits are growths per step: relative (``+5%``) or absolute (``+2ms``, ``+500us``, ``+1GiB``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..errors import InputError, UsageError
from ..explain.explanation import COMMUNICATION, COMPUTE, IDLE
from ..explain.idle import CAUSES

TIME, BYTES = "time", "bytes"
E2E, PART, CAUSE, KERNEL, MEMORY, OP, MODULE = "e2e", "part", "cause", "kernel", "memory", "op", "module"

#: Default significance level of the noise test.
ALPHA = 0.05
#: Fewest analysed steps per side for the noise test (5 against 5: the smallest one-sided exact
#: Mann-Whitney p-value is 1/252 ≈ 0.004, so the test can reject at the usual levels).
MIN_STEPS = 5

_PART_NAMES = {
    "computing": COMPUTE, "computing time": COMPUTE, "compute": COMPUTE,
    "uncovered communication": COMMUNICATION, "uncovered communication time": COMMUNICATION,
    "communication": COMMUNICATION,
    "free": IDLE, "free time": IDLE, "idle": IDLE,
}
PART_TITLES = {COMPUTE: "Computing", COMMUNICATION: "Uncovered Communication", IDLE: "Free"}
NOT_SPLIT = "not split"
_COMM_CAUSES = ("wait", "transmit", NOT_SPLIT)
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_BYTE_UNITS = {"b": 1.0, "kib": 2.0 ** 10, "mib": 2.0 ** 20, "gib": 2.0 ** 30, "tib": 2.0 ** 40,
               "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}
_LIMIT = re.compile(r"^\+?\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|[a-zµ]+)$", re.IGNORECASE)
_SETTINGS = {"alpha", "min_steps", "warmup_steps"}


@dataclass(frozen=True)
class Metric:
    """One thing a gate measures per step."""

    name: str  # as shown: "E2E", "idle.sync", "kernel:GEMM", "op:aten::mm"
    kind: str  # E2E | PART | CAUSE | KERNEL | MEMORY | OP | MODULE
    part: str = ""  # PART / CAUSE / KERNEL: the explanation's part
    cause: str = ""  # CAUSE / KERNEL: the cause (a kernel class is the cause of compute)
    pattern: str = ""  # OP / MODULE

    @property
    def unit(self) -> str:
        return BYTES if self.kind == MEMORY else TIME


@dataclass(frozen=True)
class Limit:
    """The growth per step a metric may show: ``relative`` (a fraction of the base) or
    ``absolute`` (ns or bytes)."""

    text: str
    relative: float | None = None
    absolute: float | None = None

    def allowed(self, base: float) -> float:
        """The largest growth over ``base`` that passes."""
        return base * self.relative if self.relative is not None else float(self.absolute or 0.0)


@dataclass(frozen=True)
class Check:
    metric: Metric
    limit: Limit


@dataclass(frozen=True)
class GateSpec:
    """The whole policy: the checks in order, and the noise test's settings."""

    checks: tuple[Check, ...]
    alpha: float = ALPHA
    min_steps: int = MIN_STEPS
    warmup_steps: int | None = None  # None: the advisor's (its ``[advisor] warmup_steps``)
    source: str = ""  # the gate file, "" when only --max was given


def parse_metric(text: str, classes: list[str], where: str | None = None) -> Metric:
    """The metric ``text`` names; ``classes`` are the known kernel classes. ``where`` names the
    gate file for the error message (None: the command line)."""
    raw = text.strip()
    low = " ".join(raw.lower().split())
    prefix, sep, rest = raw.partition(":")
    if sep and prefix.strip().lower() in (OP, MODULE):
        pattern = rest.strip()
        if not pattern:
            _fail(where, f"metric '{raw}' needs a name or pattern after '{prefix}:'")
        return Metric(f"{prefix.strip().lower()}:{pattern}", prefix.strip().lower(), pattern=pattern)
    if sep and prefix.strip().lower() == KERNEL:
        return _kernel(rest.strip(), classes, raw, where)
    if low in ("e2e", "e2e time", "step", "step time"):
        return Metric("E2E", E2E)
    if low in ("mem usage", "memory", "mem"):
        return Metric("Mem Usage", MEMORY)
    if low in _PART_NAMES:
        part = _PART_NAMES[low]
        return Metric(PART_TITLES[part], PART, part=part)
    head, dot, tail = low.partition(".")
    if dot and head in _PART_NAMES:
        part = _PART_NAMES[head]
        if part == COMPUTE:
            return _kernel(raw.partition(".")[2].strip(), classes, raw, where)
        known = CAUSES if part == IDLE else _COMM_CAUSES
        if tail in known:
            return Metric(f"{part}.{tail}", CAUSE, part=part, cause=tail)
        _fail(where, f"unknown metric '{raw}': the causes of {part} are {', '.join(known)}")
    _fail(where, f"unknown metric '{raw}' (known: E2E, Computing, Uncovered Communication, Free, "
                 "Mem Usage, idle.CAUSE, kernel:CLASS, op:PATTERN, module:PATTERN; docs/ci.md)")


def _kernel(name: str, classes: list[str], raw: str, where: str | None) -> Metric:
    by_lower = {c.lower(): c for c in classes}
    found = by_lower.get(" ".join(name.lower().split()))
    if found is None:
        _fail(where, f"unknown kernel class in metric '{raw}' (classes: {', '.join(classes)})")
    return Metric(f"kernel:{found}", KERNEL, part=COMPUTE, cause=str(found))


def parse_limit(text: object, metric: Metric, where: str | None = None) -> Limit:
    """``+5%`` / ``+2ms`` / ``+1GiB`` for ``metric`` (a time unit on a size is an error)."""
    if not isinstance(text, str):
        _fail(where, f"limit of {metric.name} must be a string such as \"+5%\" or \"+2ms\", not {text!r}")
    raw = text.strip()
    m = _LIMIT.match(raw)
    if not m:
        _fail(where, f"cannot read limit '{raw}' of {metric.name}: a growth per step such as +5%, "
                     "+2ms or +1GiB")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit == "%":
        return Limit(raw, relative=value / 100.0)
    units = _BYTE_UNITS if metric.unit == BYTES else _TIME_UNITS
    if unit not in units:
        kind = "a size (B, KiB, MiB, GiB, KB, MB, GB)" if metric.unit == BYTES else "a time (ns, us, ms, s)"
        _fail(where, f"limit '{raw}' of {metric.name}: unit '{m.group(2)}' is not {kind} or %")
    return Limit(raw, absolute=value * units[unit])


def parse_max(items: list[str], classes: list[str]) -> list[Check]:
    """``--max METRIC=LIMIT`` options, in order."""
    out = []
    for item in items:
        name, eq, limit = item.rpartition("=")
        if not eq or not name.strip():
            raise UsageError(f"--max '{item}': expected METRIC=LIMIT, e.g. E2E=+5%")
        metric = parse_metric(name, classes)
        out.append(Check(metric, parse_limit(limit, metric)))
    return out


def read_gate_file(path: str, classes: list[str]) -> GateSpec:
    """The gate file: a ``[max]`` table of metric = limit, and optional ``[gate]`` settings."""
    from ..toml_file import read_toml

    doc = read_toml(path)
    where = str(Path(path))
    unknown = sorted(set(doc) - {"gate", "max"})
    if unknown:
        _fail(where, f"unknown table or key '{unknown[0]}' (a gate file holds [gate] and [max])")
    settings = _table(doc, "gate", where)
    bad = sorted(set(settings) - _SETTINGS)
    if bad:
        _fail(where, f"unknown setting [gate] {bad[0]} (known: {', '.join(sorted(_SETTINGS))})")
    limits = _flat(_table(doc, "max", where))
    checks = []
    for name, limit in limits.items():
        metric = parse_metric(name, classes, where)
        checks.append(Check(metric, parse_limit(limit, metric, where)))
    alpha = settings.get("alpha", ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        _fail(where, f"[gate] alpha must be a number between 0 and 1, not {alpha!r}")
    return GateSpec(tuple(checks), float(alpha), _count(settings, "min_steps", MIN_STEPS, 2, where),
                    _count(settings, "warmup_steps", None, 0, where), where)


def combine(spec: GateSpec | None, extra: list[Check], *, alpha: float | None, min_steps: int | None,
            warmup_steps: int | None) -> GateSpec:
    """The gate file's policy with the command line on top: a ``--max`` for a metric the file
    also limits replaces its limit; ``--alpha`` / ``--min-steps`` / ``--warmup-steps`` replace
    the file's settings."""
    base = spec or GateSpec(())
    checks = {c.metric.name: c for c in base.checks}
    for c in extra:
        checks[c.metric.name] = c
    if not checks:
        raise UsageError("nothing to check: give --max METRIC=LIMIT (e.g. --max E2E=+5%) or --gate FILE")
    if alpha is not None and not 0 < alpha < 1:
        raise UsageError("--alpha must be between 0 and 1")
    if min_steps is not None and min_steps < 2:
        raise UsageError("--min-steps must be ≥ 2")
    if warmup_steps is not None and warmup_steps < 0:
        raise UsageError("--warmup-steps must be ≥ 0")
    return GateSpec(tuple(checks.values()), base.alpha if alpha is None else alpha,
                    base.min_steps if min_steps is None else min_steps,
                    base.warmup_steps if warmup_steps is None else warmup_steps, base.source)


def _table(doc: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        _fail(where, f"'{name}' must be a table ([{name}])")
    return value


def _flat(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``idle.sync = "+1ms"`` unquoted is TOML for ``idle = {sync = "+1ms"}``: joined back."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _count(settings: dict[str, Any], key: str, default: int | None, minimum: int, where: str) -> int | None:
    value = settings.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(where, f"[gate] {key} must be a whole number ≥ {minimum}, not {value!r}")
    return int(value)


def _fail(where: str | None, problem: str) -> NoReturn:
    if where is None:
        raise UsageError(problem)
    raise InputError(where, problem)
