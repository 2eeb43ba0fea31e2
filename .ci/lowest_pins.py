"""Print pip pins (``name==version``) for the lowest versions pyproject.toml declares.

CI's second environment installs these, so the declared lower bounds are the versions actually
tested (issue 31). Every runtime dependency with a ``>=`` bound is pinned to it; a dependency
whose marker does not apply to this Python (``tomli`` on 3.11+) is left out. Test tools keep
their newest release: they are not what users run.

Usage: python .ci/lowest_pins.py [pyproject.toml] > pins.txt
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib, and this runs before anything is installed
    tomllib = None

_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)\s*(?:;\s*(.*))?$")


def _dependencies(text: str) -> list[str]:
    if tomllib is not None:
        return list(tomllib.loads(text)["project"]["dependencies"])
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.S | re.M)
    if block is None:
        raise SystemExit("pyproject.toml: no [project] dependencies list")
    return re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)


def _marker_applies(marker: str | None) -> bool:
    if not marker:
        return True
    m = re.fullmatch(r"""python_version\s*(<|>=)\s*["'](\d+)\.(\d+)["']""", marker.strip())
    if m is None:
        raise SystemExit(f"pyproject.toml: marker {marker!r} is not understood by {__file__}")
    here, there = sys.version_info[:2], (int(m.group(2)), int(m.group(3)))
    return here < there if m.group(1) == "<" else here >= there


def pins(text: str) -> list[str]:
    out = []
    for dep in _dependencies(text):
        m = _REQ.match(dep)
        if m is None:
            raise SystemExit(f"pyproject.toml: dependency {dep!r} has no '>=' lower bound")
        if _marker_applies(m.group(3)):
            out.append(f"{m.group(1)}=={m.group(2)}")
    return out


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "pyproject.toml")
    print("\n".join(pins(path.read_text(encoding="utf-8"))))
