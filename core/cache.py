"""A disk cache of loaded profiles, so reopening the same pair is near-instant.

Users reopen the same comparison many times (TUI, then ``export``, then ``summary`` after changing
one option), and parsing a few hundred MB of JSON costs seconds each time. A loaded
:class:`~perfcmp_core.model.Profile` is therefore stored under the user's cache directory
(``$XDG_CACHE_HOME/perfcmp-tui`` or ``~/.cache/perfcmp-tui``, mode 0700, files 0600) and reused
while the inputs are unchanged.

Design points, each answering a way a cache goes wrong:

* **No code runs on read.** One ``.npz`` per profile, read with ``allow_pickle=False``: numeric
  columns as plain arrays, text columns dictionary-encoded (int codes + the distinct values as one
  UTF-8 blob with int64 offsets), metadata as JSON bytes. No pickle anywhere, so a planted or
  damaged file can at worst be ignored.
* **Stale entries are impossible to hit.** The key hashes the given path, every file the input
  resolves to (absolute path, size, mtime in ns), the load options that change the result (not
  the step: an entry holds the whole profile and a chosen step is cut from it after reading, so
  picking another step parses nothing), the
  package version and the source of the code that produces profiles (so editing a loader
  invalidates its entries). The entry itself records size/mtime of every file the loader actually
  read (``ProfileMeta.files_used``), re-checked on every hit.
* **Racy writes are not cached.** An input modified within :data:`RACY_SECONDS` of the load may be
  rewritten again with the same size inside one timestamp tick; such loads are not stored (git's
  "racy clean" rule). Real profiles are minutes or days old; freshly generated test files are not.
* **Corrupt or partial entries are ignored** (and removed); entries are written to a scratch file
  (:class:`~perfcmp_core.export.safe_write.Scratch`: unnamed where the system allows, so a writer
  killed even by SIGKILL leaves nothing) and renamed into place, so readers never see half an
  entry, and two processes storing the same entry at once each publish a complete one.
* **Written once.** Two processes loading the same profile at once: the second waits for the
  first one's entry (a per-entry ``flock``, see :func:`_loading`) instead of parsing again.
* **Bounded.** After each write, the least recently used entries beyond :data:`MAX_BYTES` go.
* **Never written inside input folders**, and never trusted unless the directory and the file are
  owned by the current user.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import time
from contextlib import contextmanager, nullcontext
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pandas as pd

from . import __version__
from .export.safe_write import Scratch
from .compat import factorize_text
from .model import SCHEMAS, Profile, ProfileMeta
from .notes import MACHINE, Note, from_plain
from .options import LoadOptions

if TYPE_CHECKING:  # the loaders call the cache; at run time it needs only a Source's fields
    from .load.detect import Source

#: Bump when the on-disk layout changes.
FORMAT = 3
#: Default size bound of the whole cache directory.
MAX_BYTES = 2 * 1024**3
#: Inputs modified this recently are not cached (see the module docstring).
RACY_SECONDS = 2.0
#: LoadOptions fields that never change the loaded profile (only whether/how it is read).
#: ``step`` too: the entry holds every step and the step is cut from it after reading.
_NEUTRAL_OPTIONS = frozenset({"force", "use_cache", "step"})
#: Code whose source decides what a profile contains (relative to this package).
_CODE = ("load/*.py", "model.py", "options.py", "timeline.py", "cache.py")
_SUFFIX = ".npz"
_TMP_PREFIX = ".tmp-"
#: Next to each entry: the lock held while it is being loaded (see :func:`_loading`).
_LOCK_SUFFIX = ".lock"
#: Longest wait for another process loading the same profile.
LOCK_WAIT_S = 30.0
#: A temporary file older than this is left over from a killed writer.
_STALE_TMP_SECONDS = 3600.0


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/perfcmp-tui`` (when absolute, per the XDG spec) or ``~/.cache/perfcmp-tui``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "perfcmp-tui"


def cached_load(src: Source, opts: LoadOptions, read: Callable[[Source, LoadOptions], Profile],
                *, directory: Path | None = None, max_bytes: int = MAX_BYTES) -> Profile:
    """``read(src, opts)`` through the cache: a valid entry is returned instead of reading; a
    fresh result is stored. Any cache problem (unwritable home, full disk, damaged entry) only
    costs the speed-up, never the load; one that keeps the cache from working (a read-only or
    full folder, someone else's folder) is reported as a note of the profile."""
    wanted = directory or cache_dir()
    folder, problem = _usable_dir(wanted)
    if folder is None:
        return _noted(read(src, opts), wanted, problem)
    key = entry_key(src, opts)
    entry = folder / (key + _SUFFIX)
    inputs = [str(p) for p in (src.trace, src.db, *src.files.values()) if p is not None]
    # Racy inputs are not stored: nothing to wait for behind another process's load.
    with (nullcontext() if _racy(inputs) else _loading(folder / (key + _LOCK_SUFFIX))):
        profile = _read_entry(entry)
        if profile is not None:
            return profile
        profile = read(src, opts)
        problem = _write_entry(folder, entry, profile, max_bytes)
    return _noted(profile, folder, problem) if problem else profile


@contextmanager
def _loading(lock: Path) -> Iterator[None]:
    """Hold the lock of one entry while loading it: a second process opening the same profile
    at the same time (two app instances, the app and an ``export``) waits for the first one's
    entry instead of parsing the input again, so the entry is written once. Best effort: it
    waits at most :data:`LOCK_WAIT_S` (a holder may be stopped with Ctrl+Z), and where locks do
    not work it goes on without (entries are replaced atomically either way). The lock is the
    kernel's (``flock``): it goes with the process holding it, however that process ends."""
    try:
        import fcntl
    except ImportError:  # no flock on this system
        yield
        return
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:  # a read-only cache folder: nothing will be written to wait for
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            except OSError:  # a file system without locks
                break
        yield
    finally:
        os.close(fd)  # releases the lock


def _noted(profile: Profile, folder: Path, problem: str) -> Profile:
    # About this machine, not the input: both sides' copies are one note, said without a side.
    profile.meta.notes.append(Note(f"profile cache: {folder}: {problem}; loaded without it "
                                   "(reopening parses the input again)", origin=MACHINE))
    return profile


def has_entry(src: Source, opts: LoadOptions, *, directory: Path | None = None) -> bool:
    """Whether an entry for ``src`` is stored (not whether it is still valid: that is checked
    when it is read)."""
    return ((directory or cache_dir()) / (entry_key(src, opts) + _SUFFIX)).is_file()


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------


def entry_key(src: Source, opts: LoadOptions) -> str:
    """sha256 over what decides the loaded profile (see the module docstring)."""
    files = sorted({str(p) for p in (src.trace, src.db, *src.files.values()) if p is not None})
    options = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)
               if f.name not in _NEUTRAL_OPTIONS}
    ident = {
        "format": FORMAT,
        "version": __version__,
        "libraries": [pd.__version__, np.__version__],  # dtype names and layouts follow them
        "code": _code_fingerprint(),
        "given": src.given,
        "resolved": str(Path(src.given).expanduser().absolute()),
        "options": options,
        "files": [_stat_record(Path(f)) for f in files],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


@cache
def _code_fingerprint() -> str:
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for pattern in _CODE for p in root.glob(pattern)):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _stat_record(path: Path) -> list[Any]:
    """[absolute path, size, mtime_ns], or [path, -1, -1] when it cannot be stat'ed."""
    try:
        st = path.stat()
    except OSError:
        return [str(path.absolute()), -1, -1]
    return [str(path.absolute()), st.st_size, st.st_mtime_ns]


# ---------------------------------------------------------------------------------------------
# Directory
# ---------------------------------------------------------------------------------------------


def _usable_dir(folder: Path) -> tuple[Path | None, str]:
    """Create ``folder`` (0700) if needed: ``(folder, "")`` when it is a real directory owned by
    us, else ``(None, why not)``."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode):
            return None, "is not a folder"  # a symlink: do not trust what it holds
        if st.st_uid != os.geteuid():
            return None, f"is owned by uid {st.st_uid}, not by you"
        if st.st_mode & 0o077:
            folder.chmod(0o700)
    except OSError as exc:
        return None, f"cannot be created ({exc.strerror or exc})"
    return folder, ""


def _prune(folder: Path, max_bytes: int, keep: Path) -> None:
    """Delete least recently used entries until the folder fits ``max_bytes`` (``keep``, the entry
    just written, always stays) and temporary files left by killed writers."""
    now = time.time()
    entries: list[tuple[float, int, Path]] = []
    for path in folder.iterdir():
        try:
            st = path.lstat()
        except OSError:
            continue
        if path.name.startswith(_TMP_PREFIX) or path.suffix == _LOCK_SUFFIX:
            # Temporary files of killed writers (only where the system has no unnamed files),
            # locks of entries long gone: empty files, but they must not accumulate.
            if now - st.st_mtime > _STALE_TMP_SECONDS and not path.with_suffix(_SUFFIX).exists():
                path.unlink(missing_ok=True)
            continue
        if path.suffix == _SUFFIX:
            entries.append((st.st_mtime, st.st_size, path))
    total = 0
    for _, size, path in sorted(entries, reverse=True, key=lambda e: (e[2] == keep, e[0])):
        total += size
        if total > max_bytes and path != keep:
            path.unlink(missing_ok=True)
            path.with_suffix(_LOCK_SUFFIX).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Encoding: Profile <-> arrays
# ---------------------------------------------------------------------------------------------


class _Uncachable(Exception):
    """The profile holds something this format cannot restore exactly (then it is not stored)."""


def _encode(profile: Profile) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    tables: dict[str, Any] = {}
    for ti, (name, df) in enumerate(profile.tables().items()):
        if not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1):
            raise _Uncachable(f"{name}: index is not 0..n-1")
        cols = []
        for ci, col in enumerate(df.columns):
            if not isinstance(col, str):
                raise _Uncachable(f"{name}: non-text column name {col!r}")
            kind = _encode_column(df[col], f"t{ti}c{ci}", arrays)
            cols.append([col, str(df[col].dtype), kind])
        tables[name] = {"rows": len(df), "columns": cols}
    files = sorted(set(profile.meta.files_used))
    manifest = {"format": FORMAT, "meta": dataclasses.asdict(profile.meta), "tables": tables,
                "files": [_stat_record(Path(f)) for f in files]}
    arrays["manifest"] = np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8)
    return arrays


def _encode_column(s: pd.Series, key: str, arrays: dict[str, np.ndarray]) -> str:
    """Store one column under ``key*``; returns its kind: "num" or "text"."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biuf":
        arrays[key] = s.to_numpy()
        return "num"
    text_dtype = isinstance(s.dtype, pd.StringDtype)  # dtype-neutral: reads a column's dtype, makes none
    if not text_dtype and not (s.dtype == object and pd.api.types.infer_dtype(s, skipna=False)
                               in ("string", "empty")):
        raise _Uncachable(f"column {s.name!r} of dtype {s.dtype}")
    codes, uniques = factorize_text(s, use_na_sentinel=True)  # exact for texts holding NUL
    # An object column holding NA cannot say whether it was None or NaN; do not guess.
    if not text_dtype and (codes < 0).any():
        raise _Uncachable(f"column {s.name!r} holds missing values")
    # Through a list: iterating a pandas string array boxes each value in Python (0.2 s of the
    # 0.6 s that storing one side of the 32x92 Db pair took).
    encoded = [u.encode("utf-8", "surrogatepass") for u in np.asarray(uniques, dtype=object).tolist()]
    arrays[key + "_codes"] = codes.astype(np.int32 if len(uniques) < 2**31 else np.int64)
    arrays[key + "_blob"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    arrays[key + "_offsets"] = np.cumsum([0, *map(len, encoded)], dtype=np.int64)
    return "text"


def _decode(data: Any) -> Profile:
    manifest = json.loads(bytes(data["manifest"]))
    if manifest["format"] != FORMAT or set(manifest["tables"]) != set(SCHEMAS):
        raise _Uncachable("format or table set differs")
    for path, size, mtime in manifest["files"]:
        if _stat_record(Path(path)) != [path, size, mtime]:
            raise _Uncachable(f"{path} changed")
    tables = {}
    for ti, name in enumerate(SCHEMAS):
        spec = manifest["tables"][name]
        cols = {}
        for ci, (col, dtype, kind) in enumerate(spec["columns"]):
            key = f"t{ti}c{ci}"
            values = data[key] if kind == "num" else _decode_text(data, key, dtype)
            if len(values) != spec["rows"]:
                raise _Uncachable(f"{name}.{col}: row count")
            cols[col] = values
        tables[name] = pd.DataFrame(cols, index=pd.RangeIndex(spec["rows"]),
                                    columns=[c[0] for c in spec["columns"]])
    meta = {**manifest["meta"], "notes": [from_plain(n) for n in manifest["meta"]["notes"]]}
    return Profile(meta=ProfileMeta(**meta), **tables)


def _decode_text(data: Any, key: str, dtype: str) -> pd.Series:
    blob = bytes(data[key + "_blob"])
    offsets = data[key + "_offsets"].tolist()
    uniques = np.array([blob[a:b].decode("utf-8", "surrogatepass")
                        for a, b in zip(offsets[:-1], offsets[1:])] + [None], dtype=object)
    codes = data[key + "_codes"]
    if len(codes) and (codes.min() < -1 or codes.max() >= len(uniques) - 1):
        raise _Uncachable(f"{key}: codes out of range")
    return pd.Series(uniques[codes], dtype=pd.api.types.pandas_dtype(dtype), copy=False)


# ---------------------------------------------------------------------------------------------
# Entries on disk
# ---------------------------------------------------------------------------------------------


def _read_entry(entry: Path) -> Profile | None:
    """The cached profile, or None on a miss; a damaged entry is deleted so it gets rewritten."""
    try:
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_uid != os.geteuid():
                return None
            with np.load(fh, allow_pickle=False) as data:
                profile = _decode(data)
        os.utime(entry)  # least-recently-used order for pruning
        return profile
    # Whatever a damaged or foreign file makes numpy, zipfile or json raise, the answer is the
    # same: not a usable entry. Reading the input again is always correct.
    except Exception:  # noqa: BLE001
        entry.unlink(missing_ok=True)
        return None


def _write_entry(folder: Path, entry: Path, profile: Profile, max_bytes: int) -> str:
    """Store ``profile``; returns why it could not be written ("" when it was, or when it is
    not meant to be: racy inputs, content this format cannot restore)."""
    if _racy(profile.meta.files_used):
        return ""
    try:
        arrays = _encode(profile)
    except _Uncachable:
        return ""
    try:
        with Scratch(folder, prefix=_TMP_PREFIX, suffix=_SUFFIX) as scratch:  # mode 0600
            np.savez(scratch.fh, **arrays)
            scratch.fh.flush()
            scratch.replace(entry)
        _prune(folder, max_bytes, entry)
    except OSError as exc:  # full disk, quota, read-only home: the profile is loaded all the same
        return f"cannot be written ({exc.strerror or exc})"
    return ""


def _racy(files: list[str]) -> bool:
    """True when an input was modified too recently to trust its size+mtime as identity."""
    now = time.time_ns()
    for f in files:
        try:
            mtime = os.stat(f).st_mtime_ns
        except OSError:
            return True
        if now - mtime < RACY_SECONDS * 1e9:
            return True
    return False
