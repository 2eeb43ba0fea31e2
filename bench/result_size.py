#!/usr/bin/env python3
"""What a comparison's result costs once made, per checkout: sent, held, prepared.

    .venv/bin/python bench/result_size.py --a /tmp/before --b . \\
        --pair bench/data/gpu-x8/base.pt.trace.json bench/data/gpu-x8/comp.pt.trace.json

For each checkout (its ``core/`` and ``tui/`` imported as ``bench/ab.py`` does, in a process of
its own) the pair is compared in process (``--no-cache``) and the result's tables are measured:

* **sent**: their pickled size, what the app's comparison process sends it;
* **held**: what the app holds once they arrive (unpickled) and once every table's view is
  prepared (``TableView.prepare``, built as each table arrives), as traced by ``tracemalloc``
  (Python objects, numpy and pandas buffers);
* the CPU time of ``prepare`` and of writing the workbook.

Peak memory of a whole run is ``bench/compare.py``'s (summed PSS of the process tree); the
headless export's peak is that of loading, so it says little about the result.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ab import IMPORT_CHECKOUT

HERE = Path(__file__).resolve().parent

MEASURE = IMPORT_CHECKOUT + """
import gc, pickle, tempfile, time, tracemalloc
from perfcmp_core.collect import collect
from perfcmp_core.export.xlsx import write_workbook
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_core.view import TableView

load = LoadOptions(use_cache=False)
result = collect(comparison_events(RunRequest.read(sys.argv[2], sys.argv[3], load, load, CompareOptions())),
                 sys.argv[2], sys.argv[3])
blobs = {n: pickle.dumps(t, protocol=5) for n, t in result.tables.items()}
with tempfile.TemporaryDirectory() as out:
    c0 = time.process_time()
    write_workbook(result, out)
    book = time.process_time() - c0
del result
gc.collect()
tracemalloc.start()
tables = {n: pickle.loads(b) for n, b in blobs.items()}
held = tracemalloc.get_traced_memory()[0]
c0 = time.process_time()
views = [TableView(t).prepare() for t in tables.values()]
prepare = time.process_time() - c0
viewed = tracemalloc.get_traced_memory()[0]
print(f"  sent {sum(map(len, blobs.values())) / 1e6:.1f} MB pickled ({len(blobs)} tables; largest "
      f"{max(blobs, key=lambda n: len(blobs[n]))} {max(map(len, blobs.values())) / 1e6:.1f} MB)")
print(f"  held {held / 1e6:.1f} MB, with prepared views {viewed / 1e6:.1f} MB")
print(f"  CPU: prepare {prepare:.2f} s, workbook {book:.2f} s")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, type=Path, help="checkout A (before)")
    ap.add_argument("--b", type=Path, help="checkout B (after)")
    ap.add_argument("--pair", nargs=2, required=True, metavar=("BASE", "COMP"))
    ns = ap.parse_args()
    for checkout in (ns.a, ns.b):
        if checkout is None:
            continue
        print(f"{checkout.resolve()}:", flush=True)
        proc = subprocess.run([sys.executable, "-c", MEASURE, str(checkout.resolve()),
                               *(str(Path(p).resolve()) for p in ns.pair)], cwd=HERE)
        if proc.returncode:
            return proc.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
