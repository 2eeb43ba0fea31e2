"""The advisor's rule book: keyword lists, stage definitions and threshold rules from ``advisor.ini``.

Everything a user may want to tune lives in one readable ini file shipped with the package
(``perfcmp_core/advisor/advisor.ini``): a model whose attention kernel is called ``my_attn``, a DiT
class the default names do not know, a stricter MatMul threshold. ``--advisor-config FILE`` is
read *on top of* the shipped file, so a user file holds only what it changes (one key of one
section, or a new ``[rule.*]`` section). Unknown sections and keys are rejected: a typo such as
``treshold`` would otherwise silently change nothing.

Keyword lists are comma- (or newline-) separated, case-insensitive. A plain item matches as a
substring; an item written ``re:PATTERN`` is a regular expression (searched, not anchored). All
items of a list are compiled into one regex so that a list is tested with one vectorised
``str.contains`` / ``str.extract`` over the distinct texts of a profile.
"""

from __future__ import annotations

import configparser
import re
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..ini import read_ini

#: Device-time categories every item falls into (the seed's four plus the catch-all).
CATEGORIES: tuple[str, ...] = ("FA", "MatMul", "Vector", "Comm", "Other")
COMM_EXPOSED = "Comm exposed"
#: Categories shown per stage: the exposed part of Comm is a row of its own.
ROW_CATEGORIES: tuple[str, ...] = ("FA", "MatMul", "Vector", "Comm", COMM_EXPOSED, "Other")
#: Stage of time no stage claims, and the pseudo-stage of the whole profile.
OTHER, ALL = "Other", "All"

DEFAULT_PATH = "advisor.ini"
_REGEX_PREFIX = "re:"

#: Keys each kind of section accepts (``stage.*`` named ``Other`` accepts only ``names``).
_SECTION_KEYS: dict[str, frozenset[str]] = {
    "advisor": frozenset({"warmup_steps", "top_operators", "region_window", "region_min_kernels",
                          "opaque_modules"}),
    "training": frozenset({"markers"}),
    "stage": frozenset({"names", "kernels", "require"}),
    "category": frozenset({"keywords", "kernel_names"}),
    "rule": frozenset({"stage", "category", "threshold", "of", "finding", "direction", "enabled"}),
    "check": frozenset({"threshold", "direction", "enabled"}),  # and direction_<cause> keys
}
#: The checks beyond the seed's rules (:mod:`.checks`), in report order.
CHECKS: tuple[str, ...] = ("comm_exposed", "device_idle", "syncs", "host_copies", "cast_transdata", "aicpu",
                           "flop_rate")
#: What a check's ``threshold`` counts (a percentage, or syncs per step).
CHECK_UNITS: dict[str, str] = {"syncs": "count"}


@dataclass(frozen=True)
class Keywords:
    """A compiled keyword list (``items`` as written, for messages and docs)."""

    items: tuple[str, ...]
    pattern: re.Pattern[str] | None  # None: empty list, matches nothing
    literals: tuple[str, ...] = ()  # the plain items, lower-cased
    regex: re.Pattern[str] | None = None  # the ``re:`` items alone

    def matches(self, lower: pd.Series) -> np.ndarray:
        """Which of the (lower-cased, distinct) texts contain any item.

        Plain items are tested with ``in`` (C substring search) and only the ``re:`` items with
        the regex engine: a big escaped alternation scanned over long C++ kernel names cost
        ~60 µs a name, which made the advisor the slowest step of a comparison.
        """
        if self.pattern is None or lower.empty:
            return np.zeros(len(lower), dtype=bool)
        lits = self.literals
        texts = lower.tolist()
        hit = np.fromiter((any(w in t for w in lits) for t in texts), dtype=bool, count=len(texts))
        if self.regex is not None and not hit.all():
            rest = np.flatnonzero(~hit)
            search = self.regex.search
            hit[rest] = [search(texts[i]) is not None for i in rest.tolist()]
        return hit

    @property
    def source(self) -> str:
        """The regex text (used to build per-stage alternations)."""
        return self.pattern.pattern if self.pattern is not None else ""


@dataclass(frozen=True)
class StageSpec:
    """One inference stage: how its names look, which kernels are typical of it, and which kernel a
    kernel-region must contain to count as this stage (``require``)."""

    name: str
    names: Keywords
    kernels: Keywords
    require: Keywords


@dataclass(frozen=True)
class Rule:
    """``stage``'s ``category`` above ``threshold`` % → a finding with an optimisation direction.

    ``of`` is what the percentage is of: ``stage`` (the stage's device busy time, like the Share
    column) or ``comm`` (the stage's communication time — for ``Comm exposed`` this asks "how much
    of the communication does compute fail to hide").
    """

    key: str
    stage: str
    category: str
    threshold: float  # percent
    of: str
    finding: str
    direction: str


@dataclass(frozen=True)
class Check:
    """One check of :mod:`.checks`: its threshold, and its direction (``direction``) or, where
    the check names a cause, one direction per cause (``direction_<cause>``)."""

    key: str
    threshold: float
    directions: dict[str, str]  # cause ("" = the default) → direction

    def direction_for(self, cause: str) -> str:
        return self.directions.get(cause) or self.directions.get("", "")


@dataclass(frozen=True)
class AdvisorConfig:
    source: str  # file(s) it was read from, for messages
    warmup_steps: int
    top_operators: int
    region_window: int
    region_min_kernels: int
    training: Keywords
    opaque_modules: Keywords  # wrapper modules that hide the model inside (torch.compile)
    stages: tuple[StageSpec, ...]  # real stages in file order (never "Other")
    other_names: Keywords  # names that pin time to "Other" (text encoders …)
    categories: dict[str, Keywords]  # CATEGORIES → keywords (classification text)
    kernel_names: dict[str, Keywords]  # CATEGORIES → kernel-name patterns, decisive before keywords
    rules: tuple[Rule, ...]
    checks: dict[str, Check] = field(default_factory=dict)  # enabled checks by key

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Real stages then Other: index = stage code used throughout the advisor."""
        return (*(s.name for s in self.stages), OTHER)


def split_items(value: str) -> tuple[str, ...]:
    """``"a, b,\\n c,,"`` → ``("a", "b", "c")``."""
    return tuple(item.strip() for item in re.split(r"[,\n]", value) if item.strip())


def compile_keywords(items: tuple[str, ...], where: str, path: str) -> Keywords:
    """One case-insensitive alternation of the items (substrings escaped, ``re:`` items verbatim)."""
    parts: list[str] = []
    regex_parts: list[str] = []
    literals: list[str] = []
    for item in items:
        if item.lower().startswith(_REGEX_PREFIX):
            body = item[len(_REGEX_PREFIX):]
            try:
                named = re.compile(body).groupindex
            except re.error as exc:
                raise InputError(path, f"{where}: invalid regex {body!r} ({exc})") from None
            if named:  # the advisor names its own groups when it combines the stage lists
                raise InputError(path, f"{where}: regex {body!r} uses named groups; use (...) or (?:...)")
            parts.append(f"(?:{body})")
            regex_parts.append(f"(?:{body})")
        else:
            parts.append(re.escape(item.lower()))
            literals.append(item.lower())
    if not parts:
        return Keywords(items, None)
    flags = re.IGNORECASE | re.DOTALL
    try:
        # Python 3.10 only warns about a global flag such as (?i) that is not at the start, where
        # 3.11 refuses it: the same file must be refused on every supported Python.
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            return Keywords(items, re.compile("|".join(parts), flags), tuple(literals),
                            re.compile("|".join(regex_parts), flags) if regex_parts else None)
    except (re.error, DeprecationWarning) as exc:
        raise InputError(path, f"{where}: the regex items cannot be combined ({exc})") from None


def _kind(section: str, path: str) -> str:
    kind, _, name = section.partition(".")
    if kind in ("advisor", "training") and not name:
        return kind
    if kind in ("stage", "rule", "category", "check") and name:
        return kind
    raise InputError(path, f"unknown section [{section}] (expected [advisor], [training], "
                           "[stage.NAME], [category.NAME], [rule.NAME], [check.NAME])")


def _int(value: str, where: str, path: str, minimum: int) -> int:
    try:
        out = int(value)
    except ValueError:
        raise InputError(path, f"{where}: {value!r} is not an integer") from None
    if out < minimum:
        raise InputError(path, f"{where}: must be ≥ {minimum}, got {out}")
    return out


def _validate_keys(parser: configparser.ConfigParser, path: str) -> None:
    for section in parser.sections():
        kind = _kind(section, path)
        allowed = _SECTION_KEYS[kind]
        if section == f"stage.{OTHER}":
            allowed = frozenset({"names"})
        unknown = [k for k in parser[section] if k not in allowed and not (kind == "check" and k.startswith("direction_"))]
        if unknown:
            raise InputError(path, f"[{section}]: unknown key(s) {', '.join(unknown)} "
                                   f"(expected: {', '.join(sorted(allowed))})")
        if kind == "check" and section.partition(".")[2] not in CHECKS:
            raise InputError(path, f"unknown check [{section}] (checks: {', '.join(CHECKS)})")
        if kind == "category" and section.partition(".")[2] not in CATEGORIES:
            raise InputError(path, f"unknown category [{section}] (categories: {', '.join(CATEGORIES)})")
        if section == f"stage.{ALL}":
            raise InputError(path, f"[{section}]: '{ALL}' is the whole profile, not a stage")


def _enabled(sec: configparser.SectionProxy, section: str, path: str) -> bool:
    try:
        return sec.getboolean("enabled", fallback=True)
    except ValueError:
        raise InputError(path, f"[{section}] enabled: {sec['enabled']!r} is not yes/no") from None


def _threshold(sec: configparser.SectionProxy, section: str, path: str) -> float:
    raw = sec.get("threshold", "").strip().rstrip("%")
    try:
        return float(raw)
    except ValueError:
        raise InputError(path, f"[{section}] threshold: {raw!r} is not a number") from None


def _rule(parser: configparser.ConfigParser, section: str, stages: tuple[str, ...], path: str) -> Rule | None:
    sec = parser[section]
    key = section.partition(".")[2]
    if not _enabled(sec, section, path):
        return None
    for required in ("stage", "category", "threshold"):
        if not sec.get(required, "").strip():
            raise InputError(path, f"[{section}]: missing {required} =")
    stage, category = sec["stage"].strip(), sec["category"].strip()
    if stage not in (*stages, ALL):
        raise InputError(path, f"[{section}] stage: {stage!r} is not one of {', '.join((*stages, ALL))}")
    if category not in ROW_CATEGORIES:
        raise InputError(path, f"[{section}] category: {category!r} is not one of {', '.join(ROW_CATEGORIES)}")
    threshold = _threshold(sec, section, path)
    if not 0 <= threshold <= 100:
        raise InputError(path, f"[{section}] threshold: {threshold} is not a percentage (0–100)")
    of = sec.get("of", "stage").strip().lower()
    if of not in ("stage", "comm"):
        raise InputError(path, f"[{section}] of: {of!r} is not 'stage' or 'comm'")
    finding = sec.get("finding", "").strip() or f"{stage} {category} share high"
    return Rule(key, stage, category, threshold, of, finding, sec.get("direction", "").strip())


def _check(parser: configparser.ConfigParser, section: str, path: str) -> Check | None:
    sec = parser[section]
    key = section.partition(".")[2]
    if not _enabled(sec, section, path):
        return None
    threshold = _threshold(sec, section, path)
    if threshold < 0 or (CHECK_UNITS.get(key) != "count" and threshold > 100):
        raise InputError(path, f"[{section}] threshold: {threshold} is out of range")
    directions = {k.partition("_")[2]: v.strip() for k, v in sec.items() if k.startswith("direction")}
    return Check(key, threshold, directions)


def _default_text() -> str:
    return resources.files(__package__).joinpath(DEFAULT_PATH).read_text(encoding="utf-8")


def load_config(path: str | Path | None, text: str | None = None) -> AdvisorConfig:
    """The shipped rules, with ``path``'s sections and keys read on top when given (``text``:
    those sections already in hand, from the TOML configuration, :mod:`perfcmp_core.settings`).

    Raises :class:`InputError` naming the file for an unreadable file, bad ini syntax, an unknown
    section/key, an invalid regex or an invalid rule.
    """
    parser = configparser.ConfigParser(interpolation=None, default_section="\x00defaults")
    parser.optionxform = str.lower  # type: ignore[assignment, method-assign]
    default = Path(__file__).with_name(DEFAULT_PATH)
    read_ini(parser, default, "advisor config", _default_text())
    where = str(default)
    if path is not None:
        where = str(path)
        read_ini(parser, Path(path), "advisor config", text)
    _validate_keys(parser, where)

    def keywords(section: str, key: str) -> Keywords:
        value = parser.get(section, key, fallback="")
        return compile_keywords(split_items(value), f"[{section}] {key}", where)

    def number(key: str, minimum: int) -> int:  # the shipped file defines every [advisor] key
        return _int(parser.get("advisor", key), f"[advisor] {key}", where, minimum)

    stages = tuple(
        StageSpec(s.partition(".")[2], keywords(s, "names"), keywords(s, "kernels"), keywords(s, "require"))
        for s in parser.sections() if s.startswith("stage.") and s != f"stage.{OTHER}"
    )
    stage_names = (*(s.name for s in stages), OTHER)
    rules = tuple(r for s in parser.sections() if s.startswith("rule.")
                  if (r := _rule(parser, s, stage_names, where)) is not None)
    checks = {c.key: c for s in parser.sections() if s.startswith("check.")
              if (c := _check(parser, s, where)) is not None}
    return AdvisorConfig(
        source=where,
        warmup_steps=number("warmup_steps", 0),
        top_operators=number("top_operators", 1),
        region_window=number("region_window", 1),
        region_min_kernels=number("region_min_kernels", 1),
        training=keywords("training", "markers"),
        opaque_modules=keywords("advisor", "opaque_modules"),
        stages=stages,
        other_names=keywords(f"stage.{OTHER}", "names"),
        categories={c: keywords(f"category.{c}", "keywords") for c in CATEGORIES},
        kernel_names={c: keywords(f"category.{c}", "kernel_names") for c in CATEGORIES},
        rules=rules,
        checks=checks,
    )


@dataclass(frozen=True)
class Finding:
    """A rule that tripped on one analysed profile, with the numbers that tripped it."""

    rule: Rule
    value: float  # the compared fraction (0–1): of the stage busy time or of its communication
    share: float  # the row's share of its stage's busy time (0–1)
    time_ns: float  # mean per step
    stage_busy_ns: float
    comm_ns: float  # the stage's communication time (mean per step)

    @property
    def headline(self) -> str:
        basis = "of its communication" if self.rule.of == "comm" else "of stage time"
        return (f"{self.rule.finding}: {self.value * 100:.2f}% {basis} > "
                f"{self.rule.threshold:g}%")


def evaluate(rules: tuple[Rule, ...], summary: pd.DataFrame) -> list[Finding]:
    """The rules whose figure exceeds their threshold, in rule order.

    ``summary`` holds one row per (stage, category) with ``time_ns``, ``share`` and, per stage,
    ``busy_ns`` and ``comm_ns``. A stage absent from the profile trips nothing.
    """
    found: list[Finding] = []
    index = summary.set_index(["stage", "category"])
    for rule in rules:
        if (rule.stage, rule.category) not in index.index:
            continue
        row = index.loc[(rule.stage, rule.category)]
        busy, comm = float(row["busy_ns"]), float(row["comm_ns"])
        if busy <= 0:
            continue
        if rule.of == "comm":
            if comm <= 0:
                continue
            value = float(row["time_ns"]) / comm
        else:
            value = float(row["share"])
        if value * 100 > rule.threshold:
            found.append(Finding(rule, value, float(row["share"]), float(row["time_ns"]), busy, comm))
    return found
