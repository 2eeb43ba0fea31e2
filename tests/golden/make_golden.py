"""Regenerate the golden values in this folder by running the reference tool (msprof-analyze 26.2.0).

Usage (from the repository root; needs the reference installed at /tmp/peer and the real samples
under ../shared/data for the ``real_*`` pairs)::

    .venv/bin/python tests/golden/make_golden.py [PAIR ...]

For every pair it runs ``msprof-analyze compare -d COMP -bp BASE -o OUT --force`` with paths
relative to the repository root, reads every sheet of the produced workbook (header on row 3,
data from row 4) and writes ``tests/golden/<pair>.json``::

    {"reference": ..., "command": ..., "terminal": [table lines], "sheets": {name: {"header": [...],
     "rows": [[...], ...], "total_rows": n}}}

The terminal lines are the "Model Profiling Time Distribution" table the reference prints.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import openpyxl

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
PEER = Path("/tmp/peer/bin/msprof-analyze")
GOLDEN = Path(__file__).resolve().parent
REFERENCE = "msprof-analyze 26.2.0"
#: The real torch_npu exports (AlexNet DDP, 2 ranks), relative to the repository root.
REAL_NPU = "../shared/data/npu-real-runs"

#: The real torch_npu Text exports (AlexNet, 2-rank DDP), relative to the repository root.
_TEXT = f"{REAL_NPU}/text"

#: pair name → (comparison, base, extra options, sheets to keep (None = all), max rows per sheet)
PAIRS: dict[str, tuple[str, str, list[str], list[str] | None, int | None]] = {
    "gpu": ("fixtures/gpu/comp.pt.trace.json", "fixtures/gpu/base.pt.trace.json", [], None, None),
    "gpu_operator": ("fixtures/gpu/comp.pt.trace.json", "fixtures/gpu/base.pt.trace.json", ["--disable_module"],
                     ["OperatorCompareStatistic", "OperatorCompare"], None),
    "npu_text": ("fixtures/npu_text/comp_ascend_pt", "fixtures/npu_text/base_ascend_pt", [], None, None),
    "npu_db": ("fixtures/npu_db/comp_ascend_pt", "fixtures/npu_db/base_ascend_pt", [], None, None),
    "npu_ms": ("fixtures/npu_ms/comp_ascend_ms", "fixtures/npu_ms/base_ascend_ms", [], None, None),
    "gpu_vs_npu_text": ("fixtures/npu_text/comp_ascend_pt", "fixtures/gpu/base.pt.trace.json", [], None, None),
    "npu_infer": ("fixtures/npu_infer/dit_vae_fa_ascend_pt", "fixtures/npu_infer/dit_vae_ascend_pt", [], None, None),
    "real_gpu": ("/tmp/trace_diff_test.pt.trace.json", "/tmp/trace_diff_control.pt.trace.json", [],
                 ["OverallMetrics", "OperatorCompareStatistic", "CommunicationCompare", "ApiCompare"], 200),
    "real_npu_text": (f"{_TEXT}/level1/rank1_ascend_pt", f"{_TEXT}/level1/rank0_ascend_pt", [], None, None),
    "real_npu_text_l0_l1": (f"{_TEXT}/level1/rank0_ascend_pt", f"{_TEXT}/level0/rank0_ascend_pt", [], None, None),
    "real_h100_vs_npu_text": (f"{_TEXT}/level1/rank0_ascend_pt",
                              "/tmp/bert-small_h100.pt.trace.json", [], None, None),
    "real_npu_db": (f"{REAL_NPU}/db/level1/rank1_ascend_pt", f"{REAL_NPU}/db/level1/rank0_ascend_pt", [], None, None),
    "real_npu_text_vs_db": (f"{REAL_NPU}/db/level1/rank0_ascend_pt", f"{REAL_NPU}/text/level1/rank0_ascend_pt", [],
                            None, None),
}

#: Real GPU traces the reference reads only uncompressed (it rejects ``.json.gz``): the path a
#: pair names → the ``shared/data`` file it is gunzipped from.
GUNZIPPED = {
    "/tmp/trace_diff_control.pt.trace.json": "gpu-real/trace_diff_control.pt.trace.json.gz",
    "/tmp/trace_diff_test.pt.trace.json": "gpu-real/trace_diff_test.pt.trace.json.gz",
    "/tmp/bert-small_h100.pt.trace.json": "gpu-real/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
}


def _gunzip_real(paths: tuple[str, ...]) -> None:
    for name in paths:
        dst = Path(name)
        if name in GUNZIPPED and not dst.exists():
            with gzip.open(DATA / GUNZIPPED[name], "rb") as src, dst.open("wb") as out:
                shutil.copyfileobj(src, out)


def _cell(v: object) -> object:
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def run_pair(name: str) -> dict:
    comp, base, extra, keep, limit = PAIRS[name]
    _gunzip_real((comp, base))
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(PEER), "compare", "-d", comp, "-bp", base, "-o", out, "--force", *extra]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
        books = list(Path(out).glob("*.xlsx"))
        if len(books) != 1:
            raise RuntimeError(f"{name}: no workbook produced\n{proc.stdout}\n{proc.stderr}")
        wb = openpyxl.load_workbook(books[0], read_only=True)
        sheets = {}
        for ws in wb.worksheets:
            if keep is not None and ws.title not in keep:
                continue
            rows = [[_cell(c) for c in r] for r in ws.iter_rows(min_row=3, values_only=True)]
            header, data = (rows[0], rows[1:]) if rows else ([], [])
            sheets[ws.title] = {"header": header, "rows": data[:limit] if limit else data, "total_rows": len(data)}
        wb.close()
    terminal = [line for line in proc.stdout.splitlines() if line.startswith(("+", "|"))]
    shown = " ".join(["msprof-analyze", "compare", "-d", comp, "-bp", base, "-o", "OUT", "--force", *extra])
    return {"reference": REFERENCE, "command": shown, "terminal": terminal, "sheets": sheets}


def dump(doc: dict) -> str:
    """JSON with one table row per line, so diffs of a regenerated golden stay readable."""
    lines = ["{", f'  "reference": {json.dumps(doc["reference"])},', f'  "command": {json.dumps(doc["command"])},',
             '  "terminal": ' + json.dumps(doc["terminal"], ensure_ascii=False, indent=4).replace("\n", "\n  ") + ",",
             '  "sheets": {']
    sheet_items = list(doc["sheets"].items())
    for i, (title, sheet) in enumerate(sheet_items):
        rows = ",\n".join("        " + json.dumps(r, ensure_ascii=False) for r in sheet["rows"])
        lines.append(f"    {json.dumps(title)}: {{")
        lines.append(f'      "header": {json.dumps(sheet["header"], ensure_ascii=False)},')
        lines.append(f'      "total_rows": {sheet["total_rows"]},')
        lines.append('      "rows": [' + ("\n" + rows + "\n      " if rows else "") + "]")
        lines.append("    }" + ("," if i < len(sheet_items) - 1 else ""))
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    for name in argv or list(PAIRS):
        doc = run_pair(name)
        (GOLDEN / f"{name}.json").write_text(dump(doc), encoding="utf-8")
        print(name, {t: s["total_rows"] for t, s in doc["sheets"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
