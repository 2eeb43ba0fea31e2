"""Process lifetime, temporary files, the cache under concurrency, and key bursts (issue 15),
one mechanism at a time; tests/test_tui_lifetime.py checks the same in a real terminal.

Signals are sent at a moment the test controls: the process under test says "ready" on a pipe
once it is inside the write (or the wait) that the signal must interrupt.
"""

from __future__ import annotations

import errno
import mmap
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfcmp_core import cache, lifetime, processes, runner
from perfcmp_core.events import Failed
from perfcmp_core.load import detect
from perfcmp_core.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
linux = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG, O_TMPFILE")


def _wait_ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"ready", (line, proc.stderr.read() if proc.stderr else b"")


def _gone_within(pid: int, seconds: float) -> bool:
    """``pid`` ended (a zombie waiting for init to reap it counts as ended)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        try:  # our own child: reap it, else it stays a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.01)
    return False


# ------------------------------------------------------------------ temp files and signals

WRITER = textwrap.dedent("""
    import sys, time
    from perfcmp_core import lifetime
    from perfcmp_core.export import safe_write
    lifetime.raise_on_termination()            # as the console script does
    if sys.argv[2] == "named":
        safe_write._anonymous = lambda directory, mode: None
    def slow(fh):
        fh.write(b"PK half a workbook")
        fh.flush()
        print("ready", flush=True)
        time.sleep(60)
    try:
        safe_write.safe_write(sys.argv[1] + "/book.xlsx", slow)
    except lifetime.Terminated as exc:
        sys.exit(exc.exit_code)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("mode", ["anonymous", "named"])
def test_signal_mid_write_leaves_no_file(tmp_path: Path, mode: str, sig: int) -> None:
    """SIGTERM / SIGHUP while a workbook is half written: the process ends with 128 + signal
    and the folder is empty: no workbook, no hidden temporary file (named where the system has
    no O_TMPFILE, unnamed otherwise)."""
    if mode == "anonymous" and sys.platform != "linux":
        pytest.skip("O_TMPFILE is Linux only")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    _wait_ready(proc)
    if mode == "named":
        assert [p.name.startswith(".book.xlsx.") for p in tmp_path.iterdir()] == [True]
    else:
        assert list(tmp_path.iterdir()) == []  # even while writing, nothing has a name
    proc.send_signal(sig)
    assert proc.wait(10) == 128 + sig
    assert list(tmp_path.iterdir()) == []


def _scratch_then_wait(folder: str, ready: object) -> None:
    """A worker writing a named scratch file when the signal comes."""
    lifetime.child_started()
    from perfcmp_core.export import safe_write

    safe_write._anonymous = lambda directory, mode: None  # type: ignore[assignment]
    scratch = safe_write.Scratch(Path(folder), prefix=".tmp-", suffix=".pfcol")
    scratch.fh.write(b"half an entry")
    ready.send(b"ready")  # type: ignore[attr-defined]
    time.sleep(60)


@linux
def test_worker_ended_by_signal_removes_its_temporary_file(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_scratch_then_wait, args=(str(tmp_path), writer))
    lifetime.start(proc)
    assert reader.poll(20) and reader.recv() == b"ready"
    assert len(list(tmp_path.iterdir())) == 1
    os.kill(proc.pid, signal.SIGTERM)  # type: ignore[arg-type]
    proc.join(5)
    assert proc.exitcode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------- children die with us

ORPHAN = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time
    from perfcmp_core import lifetime
    def worker():
        lifetime.child_started()
        time.sleep(60)
    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        p = ctx.Process(target=worker)
        lifetime.start(p)
        print(p.pid, flush=True)
        time.sleep(60)
""")


ORPHAN_CHILD = textwrap.dedent("""
    import sys, time
    from perfcmp_core.processes import Child
    def body(conn):
        time.sleep(60)
    if __name__ == "__main__":
        child = Child(body, name="t", method=sys.argv[1], group=True)
        print(child.pid, flush=True)
        time.sleep(60)
""")


@linux
@pytest.mark.parametrize("start", ["fork", "spawn"])
@pytest.mark.parametrize("script_text", [ORPHAN, ORPHAN_CHILD], ids=["process", "Child"])
def test_children_die_when_the_parent_is_killed(tmp_path: Path, start: str, script_text: str) -> None:
    """SIGKILL leaves a parent no chance to clean up: its children notice on their own
    (PR_SET_PDEATHSIG) and are gone within a second; before, a comparison child stayed,
    re-parented to PID 1, for minutes."""
    script = tmp_path / "orphan.py"
    script.write_text(script_text)
    proc = subprocess.Popen([sys.executable, str(script), start], stdout=subprocess.PIPE,
                            cwd=ROOT)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    time.sleep(0.5 if start == "fork" else 3.0)  # a spawned child imports first
    proc.kill()
    proc.wait()
    assert _gone_within(child, 2.0), "the child outlived its parent"


def _ignores_sigterm() -> object:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    yield Failed("never", is_input=False)
    time.sleep(60)


@linux
def test_close_kills_a_child_that_ignores_sigterm() -> None:
    """A run whose child does not end on SIGTERM is SIGKILLed after the grace period."""
    run = runner.ChildRun(_ignores_sigterm)
    time.sleep(0.5)  # let it install SIG_IGN
    pid = run.pid
    t0 = time.monotonic()
    run.close()
    assert time.monotonic() - t0 < processes.GRACE_S + 1.5
    assert _gone_within(pid, 1.0)


# ------------------------------------------------------------------------- the cache


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "in" / "base.pt.trace.json"
    trace.parent.mkdir()
    trace.write_bytes((ROOT / "fixtures/gpu/base.pt.trace.json").read_bytes())
    old = time.time() - 3600
    os.utime(trace, (old, old))
    return trace


def _load_counting(trace: str, folder: str, log: str, start: object) -> None:
    """Load ``trace`` through the cache; append a line to ``log`` when really parsing."""
    from perfcmp_core.load import _read

    def counting(src, opts):  # type: ignore[no-untyped-def]
        with open(log, "a") as fh:
            fh.write("parsed\n")
        time.sleep(0.5)  # long enough for the other process to arrive meanwhile
        return _read(src, opts)

    start.wait()  # type: ignore[attr-defined]
    profile = cache.cached_load(detect(trace), LoadOptions(), counting, directory=Path(folder))
    assert len(profile.kernels) > 0


@linux
def test_two_processes_loading_the_same_profile_parse_it_once(tmp_path: Path) -> None:
    """Two instances open the same input at the same moment: the second waits for the first
    one's entry (per-entry lock) instead of parsing again; the entry is complete."""
    trace, folder, log = _trace(tmp_path), tmp_path / "cache", tmp_path / "parses"
    ctx = mp.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_load_counting, args=(str(trace), str(folder), str(log), start))
             for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert log.read_text() == "parsed\n"
    [entry] = folder.glob("*" + cache.SUFFIX)
    assert cache._read_entry(entry) is not None
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]


def _summary(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from perfcmp_tui.cli import main

    code = main(["summary", *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("problem", ["read-only", "full"])
def test_unusable_cache_folder_works_without_it_and_says_so_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        problem: str) -> None:
    """A read-only or full cache folder: the comparison runs as without a cache, and one note
    (not one per input) says why."""
    base = _trace(tmp_path)
    comp = tmp_path / "in" / "comp.pt.trace.json"
    comp.write_bytes((ROOT / "fixtures/gpu/comp.pt.trace.json").read_bytes())
    old = time.time() - 3600
    os.utime(comp, (old, old))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "xdg" / "perfcmp-tui"
    folder.mkdir(parents=True, mode=0o700)
    want = {"read-only": os.strerror(errno.EROFS), "full": os.strerror(errno.ENOSPC)}[problem]

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS if problem == "read-only" else errno.ENOSPC, want)

    # Root writes into a mode-0500 folder anyway and no test may fill a real disk: the cache's
    # one way of creating files refuses as the file system would (the loaders fork, so the
    # patch reaches them).
    monkeypatch.setattr(cache.Scratch, "__init__", refuse)
    code, out = _summary(capsys, str(base), str(comp))
    assert code == 0 and "Model Profiling Time Distribution" in out
    notes = [ln for ln in out.splitlines() if ln.startswith("note: profile cache: ")]
    assert notes == [f"note: profile cache: {folder}: cannot be written ({want}); loaded without "
                     "it (reopening parses the input again)"]
    assert not list(folder.glob("*" + cache.SUFFIX))


def test_cache_folder_that_cannot_be_created_is_one_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = _trace(tmp_path)
    blocker = tmp_path / "xdg"
    blocker.write_text("a file where the cache folder's parent should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    code, out = _summary(capsys, str(base), str(base))
    notes = [ln for ln in out.splitlines() if ln.startswith("note: profile cache: ")]
    assert code == 0 and len(notes) == 1 and "cannot be created" in notes[0]


def test_entry_is_written_atomically_even_when_replaced(tmp_path: Path) -> None:
    """Replacing an entry (a second writer) swaps complete files: a reader that opened the old
    one keeps reading it whole."""
    trace = _trace(tmp_path)
    folder = tmp_path / "cache"
    from perfcmp_core.load import _read

    first = cache.cached_load(detect(str(trace)), LoadOptions(), _read, directory=folder)
    [entry] = folder.glob("*" + cache.SUFFIX)
    with open(entry, "rb") as held:
        mapped = mmap.mmap(held.fileno(), 0, access=mmap.ACCESS_READ)
        cache._write_entry(folder, entry, first, cache.MAX_BYTES)  # a second writer
        assert len(cache._decode(mapped).kernels) == len(first.kernels)
        assert len(cache._decode(held.read()).kernels) == len(first.kernels)
    assert cache._read_entry(entry) is not None
