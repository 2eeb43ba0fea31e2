#!/usr/bin/env python3
"""Refactoring check: every output of the headless commands on the fixtures, before and after.

    .venv/bin/python bench/same_outputs.py write /tmp/before     # on the old code
    .venv/bin/python bench/same_outputs.py write /tmp/after      # on the new code
    .venv/bin/python bench/same_outputs.py compare /tmp/before /tmp/after

``write`` runs the installed ``perfcmp-tui`` (``--no-cache``) on every fixture pair, with the
option variants that change what is computed, and stores per case: the workbook, the ``--json``
document, the terminal output of ``export`` and ``summary``; and ``advise`` (text and JSON) on
every fixture profile. ``compare`` then checks them byte for byte. Only what carries the time of
the run is left out, and said so:

* ``docProps/core.xml`` of the workbook (openpyxl's created/modified timestamps);
* the ``Generated (UTC)`` row of the README sheet (``sheet<N>.xml`` of the last sheet): that one
  cell's text is replaced by ``<time>`` before comparing;
* the workbook's file name (``performance_comparison_result_<time>.xlsx``) and the time stamp
  its timeline files' names share (``…_<time>_timeline.svg``), in file names and in the terminal
  output, and the output folder in the terminal output; the checkout's folder in the JSON documents (the advisor
  names its rules file by path), so two checkouts compare;
* zip container metadata (member dates): members are compared by name and content.

Speed is not measured here (``bench/compare.py`` does that).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "perfcmp-tui"

PAIRS = {
    "gpu": ("gpu/base.pt.trace.json", "gpu/comp.pt.trace.json"),
    "gpu_gz": ("gpu/base.pt.trace.json.gz", "gpu/comp.pt.trace.json"),
    "mixed": ("gpu/base.pt.trace.json", "npu_text/comp_ascend_pt"),
    "npu": ("npu_text/base_ascend_pt", "npu_text/comp_ascend_pt"),
    "db": ("npu_db/base_ascend_pt", "npu_db/comp_ascend_pt"),
    "db_text": ("npu_db/base_ascend_pt", "npu_text/comp_ascend_pt"),
    "ms": ("npu_ms/base_ascend_ms", "npu_ms/comp_ascend_ms"),
    "infer": ("npu_infer/dit_vae_ascend_pt", "npu_infer/dit_vae_fa_ascend_pt"),
    "gpu_npu_infer": ("gpu/base.pt.trace.json", "npu_infer/dit_vae_ascend_pt"),
}
#: Option variants, each run on the pairs listed (all pairs when None).
VARIANTS: dict[str, tuple[list[str], list[str] | None]] = {
    "default": ([], None),
    "no_module": (["--disable-module"], ["npu", "mixed", "gpu", "db"]),
    "no_details": (["--disable-details"], ["npu", "mixed", "ms"]),
    "kernel_type": (["--use-kernel-type"], ["npu", "db", "ms"]),
    "input_shape": (["--use-input-shape"], ["npu", "gpu"]),
    "max_kernel": (["--max-kernel-num", "4"], ["npu", "mixed"]),
    "name_map": (["--op-name-map", "{'aten::linear': 'aten::matmul'}"], ["npu"]),
    "only_ops_mem": (["--enable-operator-compare", "--enable-memory-compare"], ["npu", "mixed"]),
    "only_profiling": (["--enable-profiling-compare"], ["npu", "gpu"]),
    "steps": (["--base-step", "2", "--comparison-step", "3"], ["npu", "gpu", "db"]),
}
PROFILES = ["gpu/base.pt.trace.json", "npu_text/comp_ascend_pt", "npu_db/base_ascend_pt",
            "npu_ms/comp_ascend_ms", "npu_infer/dit_vae_ascend_pt",
            "npu_infer/dit_vae_fa_ascend_pt"]
_BOOK = re.compile(r"performance_comparison_result_\d{14}(_\d+)?\.xlsx")
#: The time-stamped stem the workbook's companion files share (``<stem>_timeline.svg``/``.txt``):
#: names and the terminal output's mentions of them are compared with it replaced.
_STEM = re.compile(r"performance_comparison_result_\d{14}(_\d+)?")
_STEM_BYTES = re.compile(_STEM.pattern.encode())
_GENERATED = re.compile(rb"(Generated \(UTC\)</t></is></c><c [^>]*><is><t[^>]*>)[^<]*")


def _run(args: list[str], out: Path, root: Path) -> None:
    """Run one command; keep its exit code and output, with the output folder named ``<out>``."""
    proc = subprocess.run([str(EXE), *args], capture_output=True, text=True, cwd=ROOT)
    text = f"exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
    out.write_text(_STEM.sub("<workbook>", _BOOK.sub("<workbook>", text)).replace(str(root), "<out>"))
    for doc in out.parent.glob("*.json"):  # the advisor names its rules file by install path
        doc.write_text(doc.read_text().replace(str(ROOT), "<checkout>"))


def write(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    n = 0
    for variant, (extra, only) in VARIANTS.items():
        for pair, (base, comp) in PAIRS.items():
            if only is not None and pair not in only:
                continue
            case = folder / f"{pair}-{variant}"
            case.mkdir()
            paths = [f"fixtures/{base}", f"fixtures/{comp}"]  # relative: any checkout compares
            _run(["export", *paths, "-o", str(case / "book"), "--json", str(case / "all.json"),
                  "--no-cache", *extra], case / "export.txt", folder)
            _run(["summary", *paths, "--no-cache", *extra], case / "summary.txt", folder)
            n += 1
    for i, profile in enumerate(PROFILES):
        case = folder / f"advise-{i}"
        case.mkdir()
        _run(["advise", f"fixtures/{profile}", "--json", str(case / "advise.json"), "--no-cache"],
             case / "advise.txt", folder)
        n += 1
    print(f"{n} cases written to {folder}")


def _parts(book: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(book) as z:
        parts = {i.filename: z.read(i) for i in z.infolist()}
    parts.pop("docProps/core.xml", None)
    return {name: _GENERATED.sub(rb"\1<time>", data) for name, data in parts.items()}


def _files(case: Path) -> dict[str, Path]:
    return {str(p.relative_to(case)): p for p in sorted(case.rglob("*")) if p.is_file()}


def compare(a: Path, b: Path) -> int:
    bad = 0
    cases = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    parts_checked = 0
    for name in cases:
        fa, fb = _files(a / name), _files(b / name)
        books_a = {_STEM.sub("<workbook>", _BOOK.sub("<workbook>", k)): v for k, v in fa.items()}
        books_b = {_STEM.sub("<workbook>", _BOOK.sub("<workbook>", k)): v for k, v in fb.items()}
        if books_a.keys() != books_b.keys():
            print(f"{name}: files differ: {sorted(books_a)} vs {sorted(books_b)}")
            bad += 1
            continue
        for rel, pa in books_a.items():
            pb = books_b[rel]
            if pa.suffix == ".xlsx":
                xa, xb = _parts(pa), _parts(pb)
                parts_checked += len(xa)
                if xa.keys() != xb.keys():
                    print(f"{name}/{rel}: parts differ: {sorted(xa)} vs {sorted(xb)}")
                    bad += 1
                for part in sorted(xa.keys() & xb.keys()):
                    if xa[part] != xb[part]:
                        print(f"{name}/{rel}: part {part} differs")
                        bad += 1
            elif _STEM_BYTES.sub(b"<workbook>", pa.read_bytes()) != _STEM_BYTES.sub(b"<workbook>", pb.read_bytes()):
                print(f"{name}/{rel} differs")
                bad += 1
    print(f"{len(cases)} cases, {parts_checked} workbook parts compared: "
          + ("identical" if not bad else f"{bad} difference(s)"))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("folder", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    ns = ap.parse_args()
    if ns.cmd == "write":
        write(ns.folder)
        return 0
    return compare(ns.a, ns.b)


if __name__ == "__main__":
    sys.exit(main())
