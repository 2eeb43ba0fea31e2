"""Architecture rules that keep the engine usable without the UI."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

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


# ------------------------------------------------------------------------------------ layers

#: perfcmp_core's modules from the bottom up: a module imports only its own layer and lower ones
#: (at run time; imports for type checking only do not count). A prefix ending in "." names a
#: package and everything in it; the last layer takes every module not named before.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("perfcmp_core", "perfcmp_core.errors", "perfcmp_core.options", "perfcmp_core.gcpause",
     "perfcmp_core.heap", "perfcmp_core.timeline", "perfcmp_core.lifetime", "perfcmp_core.events",
     "perfcmp_core.export.safe_write", "perfcmp_core.compat", "perfcmp_core.notes", "perfcmp_core.ini",
     "perfcmp_core.text_codes", "perfcmp_core.transfer", "perfcmp_core.processes"),
    ("perfcmp_core.model",),
    ("perfcmp_core.cache",),
    ("perfcmp_core.load.",),
    ("perfcmp_core.device_time", "perfcmp_core.info", "perfcmp_core.insight",
     "perfcmp_core.compare.", "perfcmp_core.explain.", "perfcmp_core.lanes."),
    ("perfcmp_core.advisor.",),
    ("perfcmp_core.view", "perfcmp_core.export."),
)


def _layer(module: str) -> int:
    for i, names in enumerate(LAYERS):
        for name in names:
            if module == name or (name.endswith(".") and (module + ".").startswith(name)):
                return i
    return len(LAYERS)


def _runtime_imports(path: Path, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """perfcmp_core modules ``path`` imports, anywhere but under ``if TYPE_CHECKING:``
    (``modules``: every module name of the package)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if is_package else module.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from . import npu_files`` imports a submodule: count it as such.
            found.update(f"{target}.{a.name}" for a in node.names
                         if f"{target}.{a.name}" in modules)
    return {m for m in found if m == "perfcmp_core" or m.startswith("perfcmp_core.")}


def core_modules() -> dict[str, tuple[Path, bool]]:
    """Every perfcmp_core module below the package: its source file, and whether it is a package."""
    root = Path(perfcmp_core.__path__[0])
    out = {}
    for info in pkgutil.walk_packages(perfcmp_core.__path__, "perfcmp_core."):
        rel = info.name.split(".")[1:]
        path = root.joinpath(*rel, "__init__.py") if info.ispkg else root.joinpath(*rel[:-1], rel[-1] + ".py")
        out[info.name] = (path, info.ispkg)
    return out


def test_imports_only_run_down_the_layers() -> None:
    """load/ never reaches into compare/, the cache never into load/, compare/ never into the
    advisor or the writers …: the engine is a stack, and no import runs back up it."""
    modules = core_modules()
    bad = []
    for name, (path, is_package) in modules.items():
        for target in _runtime_imports(path, name, is_package, set(modules)):
            if _layer(target) > _layer(name):
                bad.append(f"{name} imports {target}")
    assert bad == []
