"""Issue 15 in a real terminal: no orphans, no spinning, no lost keys — in tmux and through SSH.

Every test runs the installed ``perfcmp-tui`` in tmux (``tests/test_tui_e2e.py``'s
:class:`Terminal`), and the SSH variants through ``ssh -t`` to the loopback sshd that ``.ci/run``
starts (they skip without one).

*Processes of ours* are found by an environment tag: the command runs with
``PERFCMP_TEST_TAG=<unique>`` and every process it starts — the forked comparison child, its
loader and background workers, spawned children, multiprocessing's resource tracker — inherits
it, so ``/proc/*/environ`` names exactly them (zombies, already gone, have no environment).

*Timing.* The issue's bounds (everything gone within 1 s of the signal; exit within 1 s without a
terminal) are behavioural requirements, checked by polling until the condition holds, for at most
the bound times :func:`slack`: 1 on an idle machine, up to 4 when the load average says the
2 cores are shared (CI runs beside other jobs), or ``PERFCMP_TIME_SLACK``. The defects they guard
against fail any bound (an orphan stayed a minute and more; the app without a terminal spun
forever); the design itself ends everything in well under a second (``core/processes.py`` GRACE_S,
``tui/terminal.py`` EXIT_AFTER_S).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from perfcmp_core.cache import SUFFIX as CACHE_SUFFIX
from tests.test_tui_e2e import EXE, READY, ROOT, Terminal
from tests.tui_support import operators_named, tables

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not EXE.exists(), reason="perfcmp-tui is not installed"),
]

TAG = "PERFCMP_TEST_TAG"
NPU = (str(ROOT / "fixtures/npu_text/base_ascend_pt"), str(ROOT / "fixtures/npu_text/comp_ascend_pt"))
DB = (str(ROOT / "fixtures/npu_db/base_ascend_pt"), str(ROOT / "fixtures/npu_db/comp_ascend_pt"))
SSH_ENV = ("PERFCMP_SSH_PORT", "PERFCMP_SSH_KEY", "PERFCMP_SSH_USER")
needs_ssh = pytest.mark.skipif(not all(os.environ.get(v) for v in SSH_ENV),
                               reason="no loopback sshd (.ci/run starts one and sets PERFCMP_SSH_*)")
RESTORED = {"alternate_on": "0", "mouse_any_flag": "0", "cursor_flag": "1"}
ALT_SCREEN = "\x1b[?1049h"


# ------------------------------------------------------------------------------------ helpers


def slack() -> float:
    """How much slower than an idle machine this one is now (see the module docstring)."""
    if os.environ.get("PERFCMP_TIME_SLACK"):
        return float(os.environ["PERFCMP_TIME_SLACK"])
    return max(1.0, min(4.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


def ours(tag: str) -> list[int]:
    """Live processes started with ``PERFCMP_TEST_TAG=tag``."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def within(seconds: float, done: Callable[[], bool], what: str) -> float:
    """Poll ``done`` until it holds; fail when it has not after ``seconds`` × :func:`slack`.
    Returns the time it took."""
    t0 = time.monotonic()
    limit = seconds * slack()
    while not done():
        if time.monotonic() - t0 > limit:
            raise AssertionError(f"{what}: not within {limit:.2f} s ({seconds} s × slack)")
        time.sleep(0.02)
    return time.monotonic() - t0


def temp_files(*folders: Path) -> list[str]:
    """Temporary files of our writers (named ones, where O_TMPFILE is unavailable)."""
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.name.startswith(".tmp-") or path.name.endswith(".part"):
                found.append(str(path))
    return found


def app(*args: str, tag: str, cache: Path | None = None, env: str = "") -> str:
    """The installed app with a tag (and a private cache, else --no-cache), as over SSH."""
    where = f"XDG_CACHE_HOME={shlex.quote(str(cache))}" if cache else ""
    extra = [] if cache else ["--no-cache"]
    return (f"env -u COLORTERM TERM=xterm-256color {TAG}={tag} {where} {env} "
            + " ".join(shlex.quote(a) for a in (str(EXE), *args, *extra)))


def ssh_command(remote: str, tty: bool = True) -> str:
    port, key, user = (os.environ[v] for v in SSH_ENV)
    args = ["ssh", *(["-t"] if tty else ["-T"]), "-p", port, "-i", key, "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"{user}@127.0.0.1",
            f"cd {shlex.quote(str(ROOT))} && {remote}"]
    return "env -u COLORTERM TERM=xterm-256color " + " ".join(map(shlex.quote, args))


def unique(name: str) -> str:
    return f"{name}-{os.getpid()}-{time.monotonic_ns()}"


@pytest.fixture
def terminals() -> Iterator[Callable[..., Terminal]]:
    made: list[Terminal] = []

    def make(command: str, size: tuple[int, int] = (100, 30), limit: int = 300) -> Terminal:
        made.append(Terminal(command, size, limit))
        return made[-1]

    yield make
    for term in made:
        term.close()


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Both GPU fixture traces scaled 20× (bench/scale_trace.py), dated an hour back so that
    the cache stores them (it skips inputs modified in the last seconds)."""
    folder = tmp_path_factory.mktemp("big")
    made = []
    for name in ("base", "comp"):
        out = folder / f"{name}20.pt.trace.json"
        subprocess.run([sys.executable, str(ROOT / "bench" / "scale_trace.py"),
                        str(ROOT / "fixtures" / "gpu" / f"{name}.pt.trace.json"), "20", str(out)],
                       check=True, capture_output=True)
        old = time.time() - 3600
        os.utime(out, (old, old))
        made.append(str(out))
    return made[0], made[1]


def wait_loading(term: Terminal, tag: str) -> None:
    """Until the app is loading: progress panel up, loader worker running (app, resource
    tracker, comparison child, loader worker: four processes)."""
    term.wait("Esc / q cancels", timeout=60)
    t0 = time.monotonic()
    while len(ours(tag)) < 4:
        assert time.monotonic() - t0 < 30, f"the load never started: {ours(tag)}"
        assert "Esc / q cancels" in term.screen(), "the load ended before it could be interrupted"
        time.sleep(0.02)


def assert_clean_cache(cache: Path) -> None:
    """Every entry left is complete (it decodes), and no temporary file is left."""
    from perfcmp_core import cache as cache_module

    folder = cache / "perfcmp-tui"
    for entry in folder.glob("*" + CACHE_SUFFIX) if folder.exists() else ():
        assert cache_module._read_entry(entry) is not None, f"torn cache entry {entry.name}"


# ------------------------------------------------------------------ 1. a dropped connection


def _pid_of_app(tag: str) -> int:
    pids = ours(tag)
    # The app is the one whose parent is not ours (the shell tmux runs).
    mine = set(pids)
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        if ppid not in mine:
            return pid
    raise AssertionError(f"no app process among {pids}")


@pytest.mark.parametrize("how", ["kill-session", "SIGHUP", "SIGTERM", "SIGKILL"])
def test_connection_lost_while_loading_leaves_nothing(terminals, big_pair, tmp_path: Path,
                                                      how: str) -> None:
    """Killing the session (the pty hangs up, as an SSH drop does), SIGHUP, SIGTERM or even
    SIGKILL of the app during a 20× load: no process of ours 1 s later, no temporary file, no
    torn cache entry."""
    tag, cache, out = unique("drop"), tmp_path / "cache", tmp_path / "out"
    term = terminals(app(*big_pair, "-o", str(out), tag=tag, cache=cache))
    wait_loading(term, tag)
    if how == "kill-session":
        term.tmux("kill-session", "-t", "e")
    else:
        os.kill(_pid_of_app(tag), getattr(signal, how))
    took = within(1.0, lambda: not ours(tag), f"processes of ours after {how}")
    assert not temp_files(cache, tmp_path), temp_files(cache, tmp_path)
    assert_clean_cache(cache)
    if how in ("SIGHUP", "SIGTERM"):  # the terminal is still there: restored, 128 + signal
        code = 128 + getattr(signal, how)
        term.wait(f"EXIT:{code}", timeout=10)
        assert term.flags() == RESTORED
    print(f"{how}: gone in {took:.3f} s")


def test_terminal_gone_without_a_hangup_signal(tmp_path: Path) -> None:
    """A pty that is not the app's controlling terminal sends no SIGHUP when its other side
    closes; the app notices the hang-up itself and ends (exit 129) with everything it started."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    tag = unique("pollhup")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", **{TAG: tag})
    env.pop("COLORTERM", None)
    proc = subprocess.Popen([str(EXE), *NPU, "--no-cache"], stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True, env=env, cwd=ROOT)
    os.close(slave)
    try:
        seen, t0 = b"", time.monotonic()
        while READY.encode() not in seen:
            assert time.monotonic() - t0 < 60, seen[-500:]
            if select.select([master], [], [], 0.2)[0]:
                seen += os.read(master, 65536)
        os.close(master)
        within(1.0, lambda: proc.poll() is not None and not ours(tag), "app after the hang-up")
        assert proc.returncode == 128 + signal.SIGHUP
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------ 2. no terminal


@pytest.mark.parametrize("redirect", ["</dev/null >{out}", ">{out}", "</dev/null >{out} 2>{err}"],
                         ids=["no-stdin", "no-stdout", "no-terminal-at-all"])
def test_without_a_terminal_exits_2_at_once(terminals, tmp_path: Path, redirect: str) -> None:
    """cron, nohup, ``ssh host cmd`` without -t: exit 2 within 1 s, one line naming the
    headless commands, nothing (no escape code) written to the redirected output."""
    out, err = tmp_path / "out", tmp_path / "err"
    tag = unique("notty")
    command = app(*NPU, tag=tag) + " " + redirect.format(out=out, err=err)
    timed = f"s=$(date +%s%N); {command}; echo EXIT:$? MS:$(( ($(date +%s%N) - s) / 1000000 ))"
    term = terminals(f"sh -c {shlex.quote(timed)}", size=(300, 30))
    screen = term.wait("EXIT:", timeout=30)
    match = re.search(r"EXIT:(\d+) MS:(\d+)", screen)
    assert match and match.group(1) == "2", screen
    assert int(match.group(2)) <= 1000 * slack(), f"took {match.group(2)} ms"
    assert out.read_bytes() == b""
    message = err.read_text() if err.exists() else screen
    line = next(ln for ln in message.splitlines() if "perfcmp-tui: error:" in ln)
    assert "is not a terminal" in line and "perfcmp-tui summary" in line and "perfcmp-tui export" in line
    if err.exists():
        assert message.count("\n") == 1 and "\x1b" not in message
    assert not ours(tag)


# ------------------------------------------------------------------- 3. before the screen


def _bytes_written(term: Terminal, log: Path) -> str:
    return log.read_bytes().decode("utf-8", "replace") if log.exists() else ""


def _before_screen(terminals, command: str, log: Path) -> str:
    """Run ``command`` in tmux (after 0.5 s, so that every byte it writes is logged) and return
    the screen once it exited by itself; it must not have switched to the app's screen."""
    term = terminals(f"sleep 0.5; {command}", size=(300, 30))  # wide: the line stays one row
    term.tmux("pipe-pane", "-t", "e", "-o", f"cat >> {shlex.quote(str(log))}")
    screen = term.wait("EXIT:", timeout=60)
    assert "EXIT:2" in screen, screen
    assert ALT_SCREEN not in _bytes_written(term, log), "the app's screen was opened"
    return screen


def _error_line(screen: str) -> str:
    lines = [ln for ln in screen.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("perfcmp-tui: error:")]
    assert len(errors) == 1, screen
    return errors[0]


def test_bad_inputs_fail_before_the_screen(terminals, tmp_path: Path) -> None:
    """A nonexistent path, a bad config, a bad advisor config, a step the Db does not have and
    an export folder that is a file: one line, exit 2, and the app's screen never opens."""
    bad_ini = tmp_path / "masks.ini"
    bad_ini.write_text("[OP_MASK]\nthis is not = = an ini line\n[[[\n")
    bad_rules = tmp_path / "rules.ini"
    bad_rules.write_text("[rule.x]\nthreshold = lots\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = [
        (("/nonexistent/trace.pt.trace.json", NPU[1]), "/nonexistent/trace.pt.trace.json",
         "no such file or directory"),
        ((*NPU, "--config", str(bad_ini)), str(bad_ini), ""),
        ((*NPU, "--advisor-config", str(bad_rules)), str(bad_rules), ""),
        ((*DB, "--comparison-step", "99"), DB[1], "has no step 99; available steps: 1, 2, 3"),
        ((*NPU, "-o", str(a_file)), str(a_file), "is a file"),
    ]
    for i, (args, names, problem) in enumerate(cases):
        tag = unique("pre")
        screen = _before_screen(terminals, app(*args, tag=tag), tmp_path / f"log{i}")
        line = _error_line(screen)
        assert names in line.replace(" ", "") or names in line, (names, line)
        assert problem in line, line
        within(1.0, lambda: not ours(tag), "processes of ours after a bad input")


def test_unreadable_file_fails_before_the_screen(terminals, tmp_path: Path) -> None:
    """A file the user cannot read (mode 000). Permission bits do not stop root, and dropping to
    another user does not work here either (the interpreter may live under /root), so under root
    the app runs with the two capabilities that bypass permission bits (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH) removed from its bounding set (``setpriv``): still root, still the
    files' owner, but held to the mode bits like anyone else."""
    prefix = ""
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to drop root's permission override")
        prefix = "setpriv --bounding-set=-dac_override,-dac_read_search "
    trace = tmp_path / "secret.pt.trace.json"
    shutil.copy(ROOT / "fixtures/gpu/base.pt.trace.json", trace)
    trace.chmod(0)
    tag = unique("unreadable")
    screen = _before_screen(terminals, prefix + app(str(trace), NPU[1], tag=tag),
                            tmp_path / "log")
    line = _error_line(screen)
    assert "secret.pt.trace.json" in line and "permission denied" in line.lower(), line
    within(1.0, lambda: not ours(tag), "processes of ours after a bad input")


# ------------------------------------------------------------------------------- 4. keys


def _operators_screen(term: Terminal) -> None:
    term.wait(READY, "E2E", absent="Esc / q cancels")
    term.keys("2")
    term.wait("Operators: device time per name")


def _status(screen: str) -> str:
    return next(ln for ln in screen.splitlines() if "Operators: device time per name" in ln)


def test_keys_typed_after_slash_go_into_the_filter(terminals) -> None:
    """``/aten`` in one burst lands in the filter (before the fix: an empty filter, TOTAL toggled
    and the export dialog open); ``Enter d`` in the same burst keeps it and sorts by Diff."""
    tag = unique("keys")
    term = terminals(app(*NPU, tag=tag))
    _operators_screen(term)
    term.tmux("send-keys", "-t", "e", "-l", "|aten")
    screen = term.wait("filter “aten”")
    assert "Export workbook" not in screen and "[ TOTAL ] only" not in screen
    assert re.search(r"▊\s+aten\s", screen), screen  # the open filter box holds it
    term.tmux("send-keys", "-t", "e", "-l", "\rd")
    screen = term.wait("sort Diff")
    status = _status(screen)
    total = len(tables("npu")["OperatorCompareStatistic"].data)
    assert "filter “aten”" in status and f"{operators_named('npu', 'aten')}/{total} rows" in status
    rows = [ln for ln in screen.splitlines() if ln.startswith("aten::")]
    assert rows and all(ln.startswith("aten::") for ln in rows)
    term.keys("Q")
    term.wait("EXIT:0")


def test_bracketed_paste_goes_into_the_filter(terminals) -> None:
    """A paste (tmux paste-buffer -p: bracketed) on the table filters it by the pasted text;
    into the open filter box it is inserted where the cursor is."""
    tag = unique("paste")
    term = terminals(app(*NPU, tag=tag))
    _operators_screen(term)
    term.tmux("set-buffer", "-b", "p", "aten::lin")
    term.tmux("paste-buffer", "-p", "-b", "p", "-t", "e")
    assert "1/35 rows" in _status(term.wait("filter “aten::lin”"))
    term.tmux("set-buffer", "-b", "p", "ear")
    term.tmux("paste-buffer", "-p", "-b", "p", "-t", "e")
    status = _status(term.wait("filter “aten::linear”"))
    assert "1/35 rows" in status
    term.keys("Enter")
    term.keys("Q")
    term.wait("EXIT:0")


# ------------------------------------------------------------------------------- 5. SSH


@needs_ssh
def test_ssh_session_dropped_while_loading(terminals, big_pair, tmp_path: Path) -> None:
    """``ssh -t`` into the app, then the client dies (kill -9, as a lost network or a closed
    laptop does): sshd hangs the pty up, and every process of ours is gone 1 s later."""
    tag, cache = unique("sshdrop"), tmp_path / "cache"
    term = terminals(ssh_command(app(*big_pair, tag=tag, cache=cache)))
    wait_loading(term, tag)
    clients = [int(p) for p in subprocess.run(["pgrep", "-f", f"^ssh .*{TAG}={tag}"],
                                              capture_output=True, text=True).stdout.split()]
    assert clients, "no ssh client found"
    for pid in clients:
        os.kill(pid, signal.SIGKILL)
    within(1.0, lambda: not ours(tag), "processes of ours after the ssh client died")
    assert not temp_files(cache)
    assert_clean_cache(cache)


@needs_ssh
def test_ssh_keys_and_quit(terminals) -> None:
    """Through ``ssh -t``: the burst after ``/`` lands in the filter, Q quits, terminal restored."""
    tag = unique("sshkeys")
    term = terminals(ssh_command(app(*NPU, tag=tag)))
    _operators_screen(term)
    term.tmux("send-keys", "-t", "e", "-l", "|aten")
    screen = term.wait("filter “aten”")
    assert "Export workbook" not in screen
    term.tmux("send-keys", "-t", "e", "-l", "\r")
    term.keys("Q")
    term.wait("EXIT:0")
    assert term.flags() == RESTORED
    assert not ours(tag)


@needs_ssh
def test_ssh_without_a_tty_exits_2(terminals) -> None:
    """``ssh host perfcmp-tui A B`` (no -t): one line, exit 2, at once."""
    tag = unique("sshnotty")
    term = terminals(ssh_command(app(*NPU, tag=tag), tty=False), size=(300, 30))
    screen = term.wait("EXIT:", timeout=30)
    assert "EXIT:2" in screen
    assert "is not a terminal" in _error_line(screen)
    assert not ours(tag)


# ------------------------------------------------------------- 6. concurrency and repetition


def test_two_instances_open_the_same_pair_at_once(terminals, big_pair, tmp_path: Path) -> None:
    """Both show the same results; the cache ends with one complete entry per input, no
    temporary file (the second instance waits for the first one's entry: tests/test_lifetime.py
    counts the parses)."""
    cache = tmp_path / "cache"
    tags = [unique("twin-a"), unique("twin-b")]
    terms = [terminals(app(*big_pair, tag=t, cache=cache)) for t in tags]
    screens = [t.wait(READY, "E2E", absent="Esc / q cancels", timeout=120)
               for t in terms]
    e2e = [next(ln for ln in s.splitlines() if ln.lstrip().startswith("E2E")) for s in screens]
    assert e2e[0] == e2e[1]
    for t in terms:
        t.keys("Q")
        t.wait("EXIT:0")
    folder = cache / "perfcmp-tui"
    assert len(list(folder.glob("*" + CACHE_SUFFIX))) == 2
    assert not temp_files(cache)
    assert_clean_cache(cache)
    assert not any(ours(t) for t in tags)


def test_fifty_open_quit_cycles(terminals, tmp_path: Path) -> None:
    """Fifty times: open the app, quit (Ctrl+Q as soon as it is drawn: loading or not, after
    the first run, which fills the cache). Nothing accumulates: no process, no temporary file,
    the cache holds the same two entries (and their locks) as after the first run."""
    cache, tag = tmp_path / "cache", unique("cycles")
    inputs = tmp_path / "in"
    for side in NPU:  # copies dated back, so that the cache stores them
        shutil.copytree(side, inputs / Path(side).name)
    old = time.time() - 3600
    for path in inputs.rglob("*"):
        os.utime(path, (old, old))
    pair = [str(inputs / Path(side).name) for side in NPU]
    loop = (f"for i in $(seq 50); do {app(*pair, tag=tag, cache=cache)}; echo DONE:$i:$?; done; "
            "echo ALL-DONE")
    term = terminals(f"sh -c {shlex.quote(loop)}", limit=1800)  # ~2 s a cycle on an idle CI host
    first: list[str] = []
    for i in range(1, 51):
        if i == 1:
            term.wait(READY, "E2E", absent="Esc / q cancels", timeout=60)
        else:
            term.wait("BASE ", "q Quit", timeout=60)
        term.keys("C-q")
        term.wait(f"DONE:{i}:0", timeout=30)
        if i == 1:
            first = sorted(p.name for p in (cache / "perfcmp-tui").iterdir())
    term.wait("ALL-DONE")
    within(1.0, lambda: not ours(tag), "processes of ours after fifty cycles")
    assert sorted(p.name for p in (cache / "perfcmp-tui").iterdir()) == first
    assert len([n for n in first if n.endswith(CACHE_SUFFIX)]) == 2
    assert not temp_files(cache, tmp_path)
    assert_clean_cache(cache)
