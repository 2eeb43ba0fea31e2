"""The app under faults: Ctrl+C while loading, an export that fails.

Loading errors (error view, retry, exit code) are covered in test_tui_app.py and, in a real
terminal, test_tui_e2e.py; here: Ctrl+C in a real terminal while a big trace is still being
parsed must end the app *and* its comparison processes and give the terminal back, and an export
that cannot be written must say why and leave the app running.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tui_support import aio, make_app, settle
from tests.test_tui_e2e import EXE, Terminal, app_command

ROOT = Path(__file__).resolve().parents[1]


def _spawned_children() -> set[int]:
    """PIDs of multiprocessing children: spawned ones name multiprocessing on their command line;
    forked ones (the app's first comparison run and its workers) repeat the app's command line
    under a parent that runs it too."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    procs = {}
    for line in out.splitlines():
        pid, ppid, *args = line.split(None, 2)
        procs[int(pid)] = (int(ppid), args[0] if args else "")
    ours = {pid for pid, (_, args) in procs.items() if str(EXE.parent) in args}
    return {pid for pid in ours
            if "multiprocessing" in procs[pid][1] or procs[pid][0] in ours}


@aio
async def test_failed_export_says_why_and_keeps_the_app(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("mine")
    app = make_app("npu")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        app.export_workbook(str(blocker))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not app._notifications:
            await pilot.pause(0.1)
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("export failed:") and "not-a-folder" in m and "is a file" in m
                   for m in messages), messages
        assert app.is_running and app.pane.spec.id == "overall"
        await pilot.press("2")  # still usable
        assert app.pane.spec.id == "operators"
    assert blocker.read_text() == "mine"


@pytest.mark.skipif(sys.platform != "linux", reason="ps/tmux based")
def test_ctrl_c_while_loading_ends_everything(tmp_path: Path) -> None:
    import shutil

    if shutil.which("tmux") is None or not EXE.exists():
        pytest.skip("needs tmux and the installed perfcmp-tui")
    big = tmp_path / "big.pt.trace.json"
    # A trace large enough that parsing is still running when Ctrl+C arrives (~40x the fixture).
    subprocess.run([sys.executable, str(ROOT / "bench" / "scale_trace.py"),
                    str(ROOT / "fixtures" / "gpu" / "base.pt.trace.json"), "40", str(big)],
                   check=True, capture_output=True)
    before = _spawned_children()
    term = Terminal(app_command(str(big), str(big)), size=(100, 30))
    try:
        term.wait("Esc / q cancels", timeout=30)
        assert _spawned_children() - before, "no comparison process was started"
        term.keys("C-c")
        screen = term.wait("EXIT:", timeout=30)
        assert "EXIT:0" in screen
        assert term.flags() == {"alternate_on": "0", "mouse_any_flag": "0", "cursor_flag": "1"}
        deadline = time.monotonic() + 10
        while _spawned_children() - before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not (_spawned_children() - before), "comparison processes outlived the app"
    finally:
        term.close()
