"""The equivalence table: which differently named operators do the same work, and which kernel
class every kernel belongs to, across CUDA, ROCm, torch_npu and MindSpore.

The table is data (``equivalence.ini`` next to this module, documented there and in
docs/matching.md) so that a user can read it, extend it and override it with ``--equivalence
FILE`` without touching code. This module only reads and validates it:

* ``[op.ID]`` sections become a name → class lookup used by :mod:`.names` to derive pairing keys;
* ``[kernel.ID]`` sections become an ordered list of kernel-class rules used by
  :mod:`.kernel_families`.

A user file is read on top of the built-in one: a section with a built-in ID replaces it, a new
ID adds one (new kernel classes are tried before the built-in ones), and a name listed in a user
``[op.*]`` section leaves every built-in class, so the user always wins. Unknown sections and keys
are input errors (exit code 2), because a typo would otherwise silently change nothing.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

BUILTIN = "equivalence.ini"
#: Name lists of an ``[op.*]`` section, one per family of software that writes the names.
OP_NAME_KEYS: tuple[str, ...] = ("torch", "torch_npu", "mindspore", "library")
OP_KEYS = frozenset({"label", "source", "enabled", *OP_NAME_KEYS})
KERNEL_KEYS = frozenset({"label", "names", "tasks", "ops", "enabled"})
_REGEX = "re:"


@dataclass(frozen=True)
class Patterns:
    """A case-insensitive pattern list: plain items are substrings, ``re:`` items regexes."""

    items: tuple[str, ...]
    literals: tuple[str, ...]
    regex: re.Pattern[str] | None

    def matches(self, lower: Sequence[str]) -> np.ndarray:
        """Which of the (lower-cased) texts contain any item."""
        texts = list(lower)
        lits = self.literals
        hit = np.fromiter((any(w in t for w in lits) for t in texts), dtype=bool, count=len(texts))
        if self.regex is not None and not hit.all():
            search = self.regex.search
            rest = np.flatnonzero(~hit)
            hit[rest] = [search(texts[i]) is not None for i in rest.tolist()]
        return hit


@dataclass(frozen=True)
class OpClass:
    id: str
    label: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class KernelRule:
    id: str
    label: str
    names: Patterns  # kernel name / NPU op type
    tasks: Patterns  # task type (GPU trace category, NPU Task Type)
    ops: Patterns  # launching host op


@dataclass(frozen=True, eq=False)
class Equivalence:
    """The merged table (built-in, then the user's file)."""

    source: str
    ops: tuple[OpClass, ...]
    kernels: tuple[KernelRule, ...]
    lookup: dict[str, OpClass]  # op name → its class (a name belongs to at most one class)


def split_items(value: str) -> tuple[str, ...]:
    """``"a, b,\\n c,,"`` → ``("a", "b", "c")``."""
    return tuple(item.strip() for item in re.split(r"[,\n]", value) if item.strip())


def compile_patterns(items: tuple[str, ...], where: str) -> Patterns:
    literals: list[str] = []
    regexes: list[str] = []
    for item in items:
        if item.startswith(_REGEX):
            body = item[len(_REGEX):]
            try:
                re.compile(body)
            except re.error as exc:
                raise InputError(where, f"invalid regular expression {body!r} ({exc})") from None
            regexes.append(f"(?:{body})")
        else:
            literals.append(item.lower())
    regex = re.compile("|".join(regexes), re.IGNORECASE) if regexes else None
    return Patterns(items, tuple(literals), regex)


def _read(parser: configparser.ConfigParser, text: str, where: str) -> None:
    try:
        parser.read_string(text, source=where)
    except configparser.Error as exc:
        raise InputError(where, f"invalid ini file ({str(exc).splitlines()[0]})") from None


def _parser() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # keys as written
    return parser


def _enabled(section: configparser.SectionProxy, where: str) -> bool:
    try:
        return section.getboolean("enabled", fallback=True)
    except ValueError:
        raise InputError(where, f"[{section.name}] enabled must be yes or no") from None


def _sections(parser: configparser.ConfigParser, where: str) -> tuple[dict[str, OpClass | None],
                                                                       dict[str, KernelRule | None]]:
    """The ``[op.*]`` and ``[kernel.*]`` sections of one file, in file order (None = disabled)."""
    ops: dict[str, OpClass | None] = {}
    kernels: dict[str, KernelRule | None] = {}
    for name in parser.sections():
        kind, _, ident = name.partition(".")
        section = parser[name]
        allowed = OP_KEYS if kind == "op" else KERNEL_KEYS if kind == "kernel" else None
        if allowed is None or not ident:
            raise InputError(where, f"unknown section [{name}] (expected [op.ID] or [kernel.ID])")
        unknown = sorted(set(section) - allowed)
        if unknown:
            raise InputError(where, f"unknown key(s) in [{name}]: {', '.join(unknown)} "
                                    f"(expected: {', '.join(sorted(allowed))})")
        enabled = _enabled(section, where)
        label = section.get("label", ident).strip() or ident
        if kind == "op":
            names = tuple(n for key in OP_NAME_KEYS for n in split_items(section.get(key, "")))
            ops[ident] = OpClass(ident, label, names) if enabled else None
        else:
            rule = KernelRule(ident, label, *(compile_patterns(split_items(section.get(key, "")), where)
                                              for key in ("names", "tasks", "ops")))
            kernels[ident] = rule if enabled else None
    return ops, kernels


def _builtin_text() -> str:
    return resources.files(__package__).joinpath(BUILTIN).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def builtin_equivalence() -> Equivalence:
    """The built-in table alone (parsed once per process: it is part of the package)."""
    return _merged(None)


def load_equivalence(path: str | None = None, text: str | None = None) -> Equivalence:
    """The built-in table, with ``path`` (a user file) read on top of it when given (``text``:
    its sections already in hand, from the TOML configuration, :mod:`perfcmp_core.settings`).

    The command line calls this once, into the run request (:class:`perfcmp_core.request.
    RunRequest`), so a bad file fails before any profile is opened and is never read again."""
    return builtin_equivalence() if path is None else _merged(path, text)


def _merged(path: str | None, text: str | None = None) -> Equivalence:
    base = _parser()
    _read(base, _builtin_text(), f"perfcmp_core/compare/{BUILTIN}")
    ops, kernels = _sections(base, BUILTIN)
    source = BUILTIN
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8") if text is None else text
        except OSError as exc:
            raise InputError(p, f"cannot read equivalence table ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise InputError(p, "equivalence table is not UTF-8 text") from None
        user = _parser()
        _read(user, text, str(p))
        user_ops, user_kernels = _sections(user, str(p))
        taken = {n for cls in user_ops.values() if cls is not None for n in cls.names}
        ops = {k: (OpClass(v.id, v.label, tuple(n for n in v.names if n not in taken)) if v else None)
               for k, v in ops.items()}
        ops.update(user_ops)
        new = {k: v for k, v in user_kernels.items() if k not in kernels}
        kernels = {**new, **{k: user_kernels.get(k, v) for k, v in kernels.items()}}
        source = f"{BUILTIN} + {p}"
    classes = tuple(v for v in ops.values() if v is not None)
    seen: dict[str, str] = {}
    for cls in classes:
        for n in cls.names:
            if n in seen and seen[n] != cls.id:
                raise InputError(source, f"{n!r} is listed in both [op.{seen[n]}] and [op.{cls.id}]")
            seen[n] = cls.id
    return Equivalence(source, classes, tuple(v for v in kernels.values() if v is not None),
                       {n: cls for cls in classes for n in cls.names})
