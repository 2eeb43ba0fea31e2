"""One configuration file for everything a user tunes: ``--config FILE.toml``.

Three things used to have three files, three flags and three INI dialects: OverallMetrics' kernel
masks (``[OP_MASK]``, ``--config``), the equivalence table's operator and kernel classes
(``[op.*]`` / ``[kernel.*]``, ``--equivalence``) and the advisor's stages, categories, rules and
checks (``--advisor-config``). A TOML file given to ``--config`` holds any of them, each table
read on top of the shipped defaults exactly as its INI section would be (the same validation,
the same messages, naming the TOML file)::

    [masks]                      # OverallMetrics (was [OP_MASK]: FA_MASK → fa …)
    fa = ["flash_attention", "my_attn"]

    [kernel.attention]           # kernel classes: one classification for every screen
    names = ["flash", "fmha", "my_attn_kernel"]

    [check.device_idle]          # advisor rules and checks
    threshold = 40

The old INI files keep working with their old flags (``--config`` with ``[OP_MASK]``,
``--equivalence``, ``--advisor-config``); one TOML file replaces them, so giving it together with
either of the other two is refused with a one-line message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .toml_file import read_toml

if TYPE_CHECKING:
    from .advisor.rules import AdvisorConfig
    from .compare.equivalence import Equivalence
    from .compare.masks import Masks

#: Top-level tables of the configuration, by the part of the program that reads them.
MASK_TABLE = "masks"
EQUIVALENCE_TABLES = ("op", "kernel")
ADVISOR_TABLES = ("advisor", "training", "stage", "category", "rule", "check")
#: Tables holding one sub-table per named item (``[kernel.gemm]``), the others hold keys.
_NAMED = frozenset({"op", "kernel", "stage", "category", "rule", "check"})


@dataclass(frozen=True)
class Settings:
    """The three configurations of a run, each the shipped default where the user said nothing."""

    masks: Masks
    advisor: AdvisorConfig
    equivalence: Equivalence
    advisor_file: str | None  # the file the advisor's changes came from (named in its notes)


def _value(value: Any, where: str, path: Path) -> str:
    """A TOML value as the INI text the section readers take (lists comma-separated)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        if "\n" in value:
            raise InputError(path, f"{where}: one line expected")
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        bad = [v for v in value if "," in v or "\n" in v]
        if bad:
            raise InputError(path, f"{where}: item {bad[0]!r} contains a comma or a line break "
                                   "(in a regex item write it \\x2c, in a single-quoted TOML string)")
        return ", ".join(value)
    raise InputError(path, f"{where}: {type(value).__name__} value not supported (a string, a number, "
                           "true/false or a list of strings)")


def _ini(sections: dict[str, dict[str, Any]], path: Path) -> str:
    lines: list[str] = []
    for name, body in sections.items():
        if not isinstance(body, dict):
            raise InputError(path, f"[{name}] must be a table")
        lines.append(f"[{name}]")
        for key, value in body.items():
            if isinstance(value, dict):
                raise InputError(path, f"[{name}] {key}: nested tables are not supported")
            lines.append(f"{key} = {_value(value, f'[{name}] {key}', path)}")
        lines.append("")
    return "\n".join(lines)


def _sections(doc: dict[str, Any], tables: tuple[str, ...], path: Path) -> dict[str, dict[str, Any]]:
    """``{"kernel": {"gemm": {...}}}`` → ``{"kernel.gemm": {...}}`` for the named tables."""
    out: dict[str, dict[str, Any]] = {}
    for table in tables:
        if table not in doc:
            continue
        body = doc[table]
        if not isinstance(body, dict):
            raise InputError(path, f"{table} must be a table ([{table}…])")
        if table in _NAMED:
            for name, item in body.items():
                out[f"{table}.{name}"] = item
        else:
            out[table] = body
    return out


def read_settings(path: str | Path) -> Settings:
    """The run's configurations from one TOML file (each part on top of its shipped default)."""
    from .advisor.rules import load_config
    from .compare.equivalence import builtin_equivalence, load_equivalence
    from .compare.masks import DEFAULT_MASKS, KEYS, load_masks

    p = Path(path)
    doc = read_toml(p)
    known = (MASK_TABLE, *EQUIVALENCE_TABLES, *ADVISOR_TABLES)
    unknown = [k for k in doc if k not in known]
    if unknown:
        raise InputError(p, f"unknown table(s) {', '.join(unknown)} (expected: {', '.join(known)})")
    masks = DEFAULT_MASKS
    if MASK_TABLE in doc:
        body = doc[MASK_TABLE]
        if not isinstance(body, dict):
            raise InputError(p, f"{MASK_TABLE} must be a table ([{MASK_TABLE}])")
        by_field = {f: k for k, f in KEYS.items()}
        wrong = [k for k in body if k not in by_field]
        if wrong:
            raise InputError(p, f"[{MASK_TABLE}]: unknown key(s) {', '.join(wrong)} (expected: {', '.join(by_field)})")
        masks = load_masks(p, _ini({"OP_MASK": {by_field[k]: v for k, v in body.items()}}, p))
    eq = _sections(doc, EQUIVALENCE_TABLES, p)
    adv = _sections(doc, ADVISOR_TABLES, p)
    return Settings(
        masks=masks,
        advisor=load_config(p, _ini(adv, p)) if adv else load_config(None),
        equivalence=load_equivalence(str(p), _ini(eq, p)) if eq else builtin_equivalence(),
        advisor_file=str(p) if adv else None,
    )


def is_toml(path: str | None) -> bool:
    return path is not None and Path(path).suffix.lower() == ".toml"


def load_settings(config: str | None, advisor_file: str | None = None,
                  equivalence_file: str | None = None) -> Settings:
    """The run's configurations from the command line's files: ``config`` a TOML file (the one
    configuration) or a legacy ``[OP_MASK]`` INI file; the two legacy INI files of the other
    flags as before."""
    from .advisor.rules import load_config
    from .compare.equivalence import load_equivalence
    from .compare.masks import load_masks

    if is_toml(config):
        others = [f for f in (advisor_file, equivalence_file) if f is not None]
        if others:
            raise InputError(others[0], f"the TOML configuration {config} replaces --advisor-config and "
                                        "--equivalence: move this file's sections into it (docs/configuration.md)")
        return read_settings(str(config))
    for path in (advisor_file, equivalence_file):
        if is_toml(path):
            raise InputError(path, "a TOML configuration goes to --config (it holds masks, kernel classes "
                                   "and advisor rules alike)")
    return Settings(load_masks(config), load_config(advisor_file), load_equivalence(equivalence_file), advisor_file)
