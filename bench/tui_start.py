"""Time from launching ``perfcmp-tui BASE COMP`` to an interactive Overall screen.

The real command runs in a pseudo-terminal (Python's ``pty``) of a fixed size, exactly as a user
starts it; everything it draws is read back with a timestamp. Per run it records

* **table**: the OverallMetrics table is on screen (its status line ``Overall metrics`` and its
  ``E2E Time`` row were drawn);
* **interactive**: right after that, ``?`` is pressed; the moment the help screen is drawn. This is
  the figure the target ("overall screen interactive ≤ 2 s after launch") is about: a screen that
  is drawn but too busy to answer a key does not count.

Variants: ``cold`` runs with ``--no-cache``; ``cached`` reads a profile cache primed by an
untimed run (a private ``XDG_CACHE_HOME`` under a temporary folder, so the user's cache is left
alone). Each variant first runs once untimed (bytecode written, the traces in the page cache, the
profile cache primed); then the variants alternate run by run, so load from other processes hits
both alike. Medians are printed. Examples::

    .venv/bin/python bench/tui_start.py                      # 7 runs of each variant
    .venv/bin/python bench/tui_start.py --runs 3 --variants cold
    .venv/bin/python bench/tui_start.py --json bench/out/tui_start.json
"""

from __future__ import annotations

import argparse
import codecs
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "gpu-real"
NAMES = ("trace_diff_control.pt.trace.json", "trace_diff_test.pt.trace.json")
#: The pair timed by default; ``--pair DIR`` or ``--pair BASE COMP`` picks another.
PAIR = (DATA / NAMES[0], DATA / NAMES[1])
EXE = Path(sys.executable).parent / "perfcmp-tui"

#: Drawn only once the OverallMetrics table is shown (the status line names the table; the last
#: row of the table). Both must have been drawn.
TABLE_MARKS = ("Overall metrics", "E2E Time")
#: The first line of the help screen (`?`).
HELP_MARK = "perfcmp-tui keys"
#: The error screen's keys: the comparison failed.
ERROR_MARK = "r retry · Esc close · q quit"

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1bP[^\x1b]*\x1b\\"  # DCS
    r"|\x1b[()*+][0-9A-Za-z]"  # charset designation
    r"|\x1b[@-_=>78]"  # other two-character escapes
)


class Screen:
    """The text the app wrote, escapes removed, scanned for markers as it arrives."""

    def __init__(self) -> None:
        self.text = ""
        self._pending = ""

    def feed(self, data: str, final: bool = False) -> None:
        data = self._pending + data
        cut = len(data) if final else data.rfind("\x1b")
        if cut < 0:
            cut = len(data)
        self.text += _ESCAPES.sub("", data[:cut])
        self._pending = data[cut:]

    def has(self, *marks: str) -> bool:
        return all(m in self.text for m in marks)


def _spawn(args: list[str], env: dict[str, str], size: tuple[int, int]) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # child: size the terminal before the app asks for it, then become the app
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
            os.execve(args[0], args, env)
        finally:
            os._exit(127)
    return pid, fd


def _read(fd: int, timeout: float) -> bytes | None:
    """What the app wrote within ``timeout`` (b"" when nothing), None once the terminal closed."""
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return b""
    try:
        data = os.read(fd, 1 << 16)
    except OSError:  # EIO: the app exited and closed the pty
        return None
    return data or None


def run_once(variant: str, env: dict[str, str], size: tuple[int, int],
             timeout: float, pair: tuple[Path, Path] = PAIR) -> dict[str, float]:
    args = [str(EXE), *map(str, pair), "--force"] + (["--no-cache"] if variant == "cold" else [])
    screen = Screen()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # characters split over reads
    t0 = time.perf_counter()
    pid, fd = _spawn(args, env, size)
    result: dict[str, float] = {}
    try:
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            chunk = _read(fd, 0.005)
            if chunk is None:
                raise RuntimeError(f"the app exited early; screen text:\n{screen.text[-2000:]}")
            now = time.perf_counter()
            screen.feed(decoder.decode(chunk), final=not chunk)
            if ERROR_MARK in screen.text:
                raise RuntimeError(f"the comparison failed; screen text:\n{screen.text[-2000:]}")
            if "table" not in result and screen.has(*TABLE_MARKS):
                result["table"] = now - t0
                os.write(fd, b"?")
            elif "table" in result and HELP_MARK in screen.text:
                result["interactive"] = now - t0
                break
        else:
            hint = ("; its E2E Time row is below the screen's last line: pass a taller --size "
                    "(the NPU pairs of bench/data/bigrun-32x92 need about 200x90)"
                    if "table" not in result and TABLE_MARKS[0] in screen.text else "")
            raise RuntimeError(f"no interactive overall screen within {timeout:.0f} s{hint}; "
                               f"screen text:\n{screen.text[-2000:]}")
        os.write(fd, b"\x11")  # Ctrl+Q: quit (kills the comparison still running)
        end = time.perf_counter() + 10
        while time.perf_counter() < end and _read(fd, 0.05) is not None:
            pass
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="timed runs per variant (7)")
    ap.add_argument("--variants", default="cold,cached", help="cold, cached or both (both)")
    ap.add_argument("--size", default="160x44", help="terminal COLSxROWS (160x44)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per run before failing")
    ap.add_argument("--pause", type=float, default=1.0,
                    help="seconds between runs, for the killed child processes to go (1)")
    ap.add_argument("--json", metavar="FILE", help="also write every run's figures here")
    ap.add_argument("--pair", nargs="+", type=Path, metavar="PATH", default=[DATA],
                    help="the inputs: a folder holding the two traces (default bench/data/gpu-real; "
                         "bench/data/gpu-x8 for the 8x pair) or BASE COMP (e.g. the 0.9 GB NPU pair "
                         "of bench/data/bigrun-32x92, to time reopening it from the cache; "
                         "with --size 200x90, as its Overall table is taller than 44 rows)")
    ns = ap.parse_args()
    if len(ns.pair) == 1:
        pair = (ns.pair[0] / NAMES[0], ns.pair[0] / NAMES[1])
    elif len(ns.pair) == 2:
        pair = (ns.pair[0], ns.pair[1])
    else:
        ap.error("--pair takes a folder or BASE COMP")
    for path in (EXE, *pair):
        if not path.exists():
            sys.exit(f"missing {path} (install with pip install -e .; the real pair is made by "
                     "bench/compare.py --inputs real)")
    cols, rows = (int(v) for v in ns.size.lower().split("x"))
    variants = [v.strip() for v in ns.variants.split(",") if v.strip()]
    cache_home = Path(tempfile.mkdtemp(prefix="perfcmp-tui-start-"))
    # Bytecode may be written (a user's install has it after the first run); a stale terminal
    # size must not pin the app's.
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "COLORTERM", "PYTHONDONTWRITEBYTECODE")}
    env.update(TERM="xterm-256color", XDG_CACHE_HOME=str(cache_home))
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    try:
        for variant in variants:  # untimed: writes bytecode, primes the cache and the page cache
            run_once(variant, env, (cols, rows), ns.timeout, pair)
            time.sleep(ns.pause)
        for i in range(ns.runs):
            order = variants if i % 2 == 0 else variants[::-1]
            for variant in order:
                r = run_once(variant, env, (cols, rows), ns.timeout, pair)
                runs[variant].append(r)
                print(f"  run {i + 1} {variant:<6}  table {r['table']:.3f} s  "
                      f"interactive {r['interactive']:.3f} s", flush=True)
                time.sleep(ns.pause)
    finally:
        shutil.rmtree(cache_home, ignore_errors=True)
    load = os.getloadavg()[0]
    name = " vs ".join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in pair)
    print(f"\nperfcmp-tui on {name}, {cols}x{rows}, {ns.runs} runs, "
          f"load average {load:.1f} at the end; medians (min–max):")
    summary = {}
    for variant, rs in runs.items():
        line = [f"  {variant:<6}"]
        for key in ("table", "interactive"):
            vals = [r[key] for r in rs]
            summary[f"{variant}_{key}"] = statistics.median(vals)
            line.append(f"{key} {statistics.median(vals):.2f} s "
                        f"({min(vals):.2f}–{max(vals):.2f})")
        print("   ".join(line))
    if ns.json:
        Path(ns.json).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.json).write_text(json.dumps({"size": [cols, rows], "load": load,
                                             "medians": summary, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
