"""Reading the project's configuration files (TOML), with every failure as one line.

One reader for every TOML file the user hands us (the kernel-class / advisor configuration, a
``check`` gate file), so that a missing file, a non-UTF-8 file and a syntax error read the same
everywhere: :class:`~perfcmp_core.errors.InputError` naming the file, the line and the problem.
Python 3.11 reads TOML with the standard library's ``tomllib``; Python 3.10 needs ``tomli``, the
same parser published separately (a conditional dependency in ``pyproject.toml``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by the Python 3.10 CI environment
    import tomli as tomllib


def read_toml(path: str | Path) -> dict[str, Any]:
    """The document in ``path`` as plain Python values (tables are dicts).

    Raises :class:`InputError` for a file that cannot be read, is not UTF-8 or is not TOML; the
    parser's message already names the line and column.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(p, f"cannot read configuration ({exc.strerror or exc})") from None
    return parse_toml(data, p)


def parse_toml(data: bytes, path: str | Path) -> dict[str, Any]:
    """Parse TOML ``data`` read from ``path`` (the name used in the error message)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "configuration is not UTF-8 text") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"invalid TOML ({str(exc).splitlines()[0]})") from None
