"""End to end: the installed ``perfcmp-tui`` in a real terminal (tmux), and through ``ssh -t``.

tmux is the terminal: it runs the command in a pty of a given size with a given TERM, and
``capture-pane`` reads back what is on screen (``-e``: with the colour codes the app sent).
After quitting, tmux's pane flags tell whether the app restored the terminal (alternate screen
left, mouse reporting off, cursor shown).

The ssh variant needs a loopback sshd: ``.ci/run`` starts one with a throwaway key and exports
PERFCMP_SSH_PORT, PERFCMP_SSH_KEY and PERFCMP_SSH_USER; without them the test skips.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "perfcmp-tui"
NPU = ("fixtures/npu_text/base_ascend_pt", "fixtures/npu_text/comp_ascend_pt")
#: the title of the Overall screen's first view (StepTime): the comparison has been shown
READY = "Where the time went"

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not EXE.exists(), reason="perfcmp-tui is not installed in this environment"),
]


class Terminal:
    """One tmux pane on a private server; the command's exit status is printed when it ends.

    The command is capped (5 minutes unless ``limit`` says otherwise), so a test that dies before
    closing its terminal leaves nothing running for long.
    """

    def __init__(self, command: str, size: tuple[int, int] = (80, 24), limit: int = 300) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pcmp-tmux-"))  # short: sockets have a length cap
        wrapped = f"timeout --foreground {limit} {command}; echo EXIT:$?; sleep 60"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "e", "-x", str(size[0]),
                  "-y", str(size[1]), wrapped)

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", str(self.dir / "sock"), *args], capture_output=True,
                             text=True, check=True, cwd=ROOT)
        return out.stdout

    def screen(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "e")

    def flags(self) -> dict[str, str]:
        names = ("alternate_on", "mouse_any_flag", "cursor_flag")
        values = self.tmux("display", "-p", "-t", "e", " ".join(f"#{{{n}}}" for n in names))
        return dict(zip(names, values.split()))

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "e", key)
            time.sleep(0.15)

    def wait(self, *texts: str, absent: str = "", timeout: float = 90.0) -> str:
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if all(t in screen for t in texts) and not (absent and absent in screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {texts!r}; screen:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.dir / "sock"), "kill-server"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def app_command(*args: str, env: str = "TERM=xterm-256color") -> str:
    """The installed app, with ``env`` and without COLORTERM (as over SSH)."""
    exe = shlex.quote(str(EXE))
    return f"env -u COLORTERM {env} {exe} {' '.join(map(shlex.quote, args))} --no-cache"


def check_session(term: Terminal) -> None:
    """Drive the app over the NPU pair: overall, screens, sort, quit; terminal restored."""
    # fixtures/README.md: 3 steps each; +36 µs/step of device work → E2E +0.108 ms.
    screen = term.wait(READY, "E2E", absent="Esc / q cancels")
    lines = screen.splitlines()
    assert lines[0].strip() == "BASE fixtures/npu_text/base_ascend_pt  · NPU Text · 3 steps"
    assert lines[1].strip() == "COMP fixtures/npu_text/comp_ascend_pt  · NPU Text · 3 steps"
    assert re.search(r"^ E2E .*▲ +\+0\.108 ms", screen, re.M)
    assert "▾ Computing" in screen and "q Quit" in screen
    term.keys("v")
    assert "▾ Computing Time" in term.wait("Overall metrics")
    term.keys("4")
    # fixtures/README.md #3: the dp all-reduce +90 µs per call, 3 calls.
    screen = term.wait("Communication (µs)")
    assert re.search(r"▸ allreduce .* \+270\.00", screen)
    term.keys("Enter")
    assert "Notify_Wait" in term.wait("Notify_Wait")
    term.keys("Q")
    screen = term.wait("EXIT:0")
    assert READY not in screen  # the alternate screen is gone
    assert term.flags() == {"alternate_on": "0", "mouse_any_flag": "0", "cursor_flag": "1"}


@pytest.fixture
def terminal_factory():
    made: list[Terminal] = []

    def make(command: str, size: tuple[int, int] = (80, 24)) -> Terminal:
        made.append(Terminal(command, size))
        return made[-1]
    yield make
    for term in made:
        term.close()


def test_installed_app_in_a_real_terminal(terminal_factory) -> None:
    check_session(terminal_factory(app_command(*NPU)))


def sgr_codes(screen: str) -> set[str]:
    """Every SGR parameter list the screen carries (``38;5;208``, ``1``, ``39`` …)."""
    return set(re.findall(r"\x1b\[([0-9;]*)m", screen))


def colours(codes: set[str]) -> set[str]:
    """Colour selections among SGR codes, defaults (39/49) and attributes excluded."""
    found = set()
    for code in codes:
        parts = code.split(";")
        i = 0
        while i < len(parts):
            p = parts[i]
            if p in ("38", "48"):
                found.add(";".join(parts[i:i + (5 if parts[i + 1] == "2" else 3)]))
                i += 5 if parts[i + 1] == "2" else 3
                continue
            if p.isdigit() and (30 <= int(p) <= 37 or 40 <= int(p) <= 47 or 90 <= int(p) <= 107):
                found.add(p)
            i += 1
    return found


@pytest.mark.parametrize("env,expect", [
    ("TERM=xterm", "16"),  # 16 colours: what SSH gives when only TERM is forwarded
    ("TERM=xterm-256color", "256"),
    ("TERM=xterm-256color NO_COLOR=1", "none"),
])
def test_colour_depth_follows_the_terminal(terminal_factory, env: str, expect: str) -> None:
    term = terminal_factory(app_command(*NPU, env=env))
    term.wait(READY, "E2E", absent="Esc / q cancels")
    found = colours(sgr_codes(term.screen(escapes=True)))
    truecolor = {c for c in found if c.startswith(("38;2", "48;2"))}
    indexed = {c for c in found if c.startswith(("38;5", "48;5"))}
    assert not truecolor
    if expect == "16":
        assert found and not indexed
    elif expect == "256":
        assert indexed
    else:
        assert not found
        # Without colour the cursor row is still marked (reverse video) and signs stay.
        assert any("7" in c.split(";") for c in sgr_codes(term.screen(escapes=True)))
        assert "▲" in term.screen()
    term.keys("Q")
    term.wait("EXIT:0")


def test_no_mouse_flag(terminal_factory) -> None:
    term = terminal_factory(app_command(*NPU, "--no-mouse"))
    term.wait(READY, absent="Esc / q cancels")
    assert term.flags()["mouse_any_flag"] == "0" and term.flags()["alternate_on"] == "1"
    term.keys("Q")
    term.wait("EXIT:0")


def test_bad_input_shows_the_error_and_restores_the_terminal(terminal_factory, tmp_path: Path) -> None:
    # Too big to be read before the screen opens (a small one is reported there, as one line:
    # tests/test_tui_review.py): the load in the app finds the problem.
    from perfcmp_core.load import PRECHECK_BYTES

    bad = tmp_path / "broken.pt.trace.json"
    bad.write_text("{not json" + " " * PRECHECK_BYTES)
    term = terminal_factory(app_command(str(bad), NPU[1]))
    screen = term.wait("Cannot read the input")
    # The path wraps wherever the temporary folder's length puts it: read the dialog joined up.
    joined = "".join(line.strip(" █") for line in screen.splitlines())
    assert "broken.pt.trace.json: is not valid JSON" in joined
    term.keys("q")
    term.wait("EXIT:2")
    assert term.flags() == {"alternate_on": "0", "mouse_any_flag": "0", "cursor_flag": "1"}


def test_wide_terminal_and_resize(terminal_factory) -> None:
    """The pty's size wins over stale COLUMNS/LINES, and a resize re-lays the screen out."""
    term = terminal_factory(app_command(*NPU, env="TERM=xterm-256color COLUMNS=80 LINES=24"),
                            size=(200, 50))
    term.wait(READY, absent="Esc / q cancels")
    term.keys("v")
    screen = term.wait("Overall metrics", "Number")
    lines = screen.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Index"))
    # Headers wider than their column take two lines: "Diff" over "Duration(ms)", "Base" over
    # "Number"; the ratio reads Δ% (the change).
    first, second = lines[at].split(), lines[at + 1].split()
    assert first[:6] == ["Index", "Diff", "Δ%", "Base", "Comp", "Base"]
    assert second[:3] == ["Duration(ms)", "Duration(ms)", "Duration(ms)"]
    assert second.count("Number") == 2
    term.tmux("resize-window", "-t", "e", "-x", "80", "-y", "24")
    screen = term.wait("Δ%", absent="Number")
    assert len(screen.splitlines()) == 24 and max(len(line) for line in screen.splitlines()) <= 80
    term.keys("Q")
    term.wait("EXIT:0")


SSH_ENV = ("PERFCMP_SSH_PORT", "PERFCMP_SSH_KEY", "PERFCMP_SSH_USER")


@pytest.mark.skipif(not all(os.environ.get(v) for v in SSH_ENV),
                    reason="no loopback sshd (.ci/run starts one and sets PERFCMP_SSH_*)")
def test_through_ssh(terminal_factory) -> None:
    """``ssh -t`` forwards TERM (not COLORTERM); the remote side runs the same installed app."""
    port, key, user = (os.environ[v] for v in SSH_ENV)
    remote = f"cd {shlex.quote(str(ROOT))} && {shlex.quote(str(EXE))} {NPU[0]} {NPU[1]} --no-cache"
    ssh = ["ssh", "-t", "-p", port, "-i", key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
           "-o", "LogLevel=ERROR", f"{user}@127.0.0.1", remote]
    check_session(terminal_factory("env -u COLORTERM TERM=xterm-256color "
                                   + " ".join(map(shlex.quote, ssh))))


def test_pictures_notes_kernels_and_a_step_rerun(terminal_factory) -> None:
    """The new views in the installed app: Overall's bars and step sparkline (44 rows: shown),
    a screen's note line and `!`, `K` on an operator, and `S` rerunning on step 1 — a fresh
    child process whose E2E is StepCompare's first row (tests/test_step_compare.py)."""
    term = terminal_factory(app_command(*NPU), size=(160, 44))
    screen = term.wait(READY, "E2E per step", absent="Esc / q cancels")
    assert re.search(r"^ Base █+.* ms$", screen, re.M) and re.search(r"^ Comp █+.* ms$", screen, re.M)
    term.keys("2")
    screen = term.wait("note: base: 12 kernels")
    term.keys("!")
    term.wait("Notes of this run", "Operators (also: Modules)")
    term.keys("Escape", "K")
    term.wait("Kernels of ", "largest difference first")
    term.keys("q", "1", "S")
    term.wait("Compare one step", "step 3")
    term.keys("Down", "Enter")
    # The header names the step each side is cut to.
    screen = term.wait(READY, "NPU Text · step 1", absent="Esc / q cancels",
                       timeout=120)
    e2e = re.search(r"^ E2E +([\d.,]+) ms →", screen, re.M)
    from tui_support import tables

    step1 = tables("npu")["StepCompare"].data["base_e2e"].iloc[0]
    assert e2e is not None and e2e.group(1) == f"{step1:,.3f}", screen
    term.keys("Q")
    term.wait("EXIT:0")


def test_search_next_unchanged_notes_step_and_kernels(terminal_factory) -> None:
    """The keys of issue 16 in the installed app, each screen checked against core's tables:
    `/` with alternatives and `n`, `u`, `!`, `K` and `S` choosing step 2."""
    import numpy as np
    import pandas as pd

    from perfcmp_core.compare.kernel_drill import op_kernels
    from perfcmp_core.view import screen_text
    from tui_support import tables

    core = tables("npu")
    stat = core["OperatorCompareStatistic"]
    term = terminal_factory(app_command(*NPU), size=(160, 44))
    term.wait(READY, "E2E per step", absent="Esc / q cancels")

    # `/ a|b`: the rows whose text matches either alternative (counted here from core's table).
    term.keys("2")
    term.wait("Operators: device time per name", f"{len(stat.data)}/{len(stat.data)} rows")
    either = re.compile("aten::linear|aten::gelu", re.I)
    text = stat.data[["name", "matched_as"]].astype(str)
    hits = text["name"].str.contains(either) | text["matched_as"].str.contains(either)
    assert hits.sum() == 2
    term.keys("|")
    term.tmux("send-keys", "-t", "e", "-l", "aten::linear|aten::gelu")
    term.keys("Enter")
    screen = term.wait(f"{hits.sum()}/{len(stat.data)} rows")
    for name in stat.data.loc[hits, "name"]:
        assert re.search(rf"^ *{re.escape(name)} ", screen, re.M), screen
    # `n` / `N`: the cell cursor on the next / previous matching cell after the cursor (on the
    # first row), named in full on the line under the table.
    order = stat.data.loc[hits].sort_values("diff", ascending=False, kind="stable")["name"].tolist()
    term.keys("n")
    term.wait(f"Operator Name: {order[1]}")
    term.keys("N")
    term.wait(f"Operator Name: {order[0]}")

    # `u` on API: only the rows with a difference stay (every Diff 0 and Δ% 0 hidden).
    api = core["ApiCompare"]
    changed = np.zeros(len(api.data), dtype=bool)
    for col in api.columns:
        if col.role in ("diff", "ratio"):
            v = pd.to_numeric(api.data[col.key], errors="coerce").to_numpy(dtype="float64")
            changed |= ~np.isnan(v) & (v != (1.0 if col.role == "ratio" else 0.0))
    term.keys("7")
    term.wait(f"{len(api.data)}/{len(api.data)} rows")
    term.keys("u")
    term.wait(f"{int(changed.sum())}/{len(api.data)} rows")

    # `!`: every note of the operator tables, in full.
    term.keys("!")
    screen = term.wait("Notes of this run")
    flat = " ".join(" ".join(line.strip(" █").split()) for line in screen.splitlines())
    for note in stat.notes:
        assert " ".join(note.split()) in flat, screen
    term.keys("Escape")

    # `K` on the cursor row (aten::linear, still filtered): its kernels, base vs comparison, as
    # core's kernel drill makes them from the operator's matched rows.
    term.keys("2")
    term.wait(f"Operator Name: {order[0]}")
    pairs = core["OperatorCompare"]
    rows = np.flatnonzero(pairs.data["base_name"].to_numpy() == order[0])
    want = op_kernels(pairs, ("base_details", "comp_details"), rows, order[0])
    term.keys("K")
    screen = term.wait(f"Kernels of {order[0]}: {len(want.data)} kernel names")
    diff_col = want.column("diff_us")
    for kernel, d in zip(want.data["kernel"], want.data["diff_us"]):
        assert re.search(rf"^ *█ {re.escape(kernel)} +{re.escape(screen_text(d, diff_col))} ",
                         screen, re.M), (kernel, screen)
    assert want.data["kernel"].iloc[0] == "aclnnAddmm_MatMulV3Common_MatMulV3"  # the +90 µs

    # `S` → step 2: a rerun whose E2E is StepCompare's second row on both sides.
    term.keys("q", "1", "S")
    term.wait("Compare one step", "step 3")
    term.keys("Down", "Down", "Enter")
    screen = term.wait(READY, "NPU Text · step 2", absent="Esc / q cancels",
                       timeout=120)
    e2e = re.search(r"^ E2E +([\d.,]+) ms → +([\d.,]+) ms", screen, re.M)
    steps = core["StepCompare"].data
    assert e2e is not None, screen
    assert e2e.groups() == (f"{steps['base_e2e'].iloc[1]:,.3f}", f"{steps['comp_e2e'].iloc[1]:,.3f}")
    term.keys("Q")
    term.wait("EXIT:0")
