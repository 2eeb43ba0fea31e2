"""Architecture rules that keep the engine usable without the UI."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import perfcmp_core


def test_core_imports_without_textual() -> None:
    """Every perfcmp_core module imports in a fresh interpreter without pulling in Textual."""
    modules = [m.name for m in pkgutil.walk_packages(perfcmp_core.__path__, "perfcmp_core.")]
    assert "perfcmp_core.model" in modules and len(modules) > 5
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"perfcmp_core imported Textual: {out.stdout}"


def test_cli_headless_commands_do_not_import_textual() -> None:
    code = (
        "import sys\n"
        "from perfcmp_tui import cli\n"
        "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
