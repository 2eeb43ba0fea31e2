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
  resolves to (absolute path, size, mtime in ns), the load options that change the result, the
  package version and the source of the code that produces profiles (so editing a loader
  invalidates its entries). The entry itself records size/mtime of every file the loader actually
  read (``ProfileMeta.files_used``), re-checked on every hit.
* **Racy writes are not cached.** An input modified within :data:`RACY_SECONDS` of the load may be
  rewritten again with the same size inside one timestamp tick; such loads are not stored (git's
  "racy clean" rule). Real profiles are minutes or days old; freshly generated test files are not.
* **Corrupt or partial entries are ignored** (and removed); entries are written to a temporary file
  and renamed into place, so readers never see half an entry.
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
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from . import __version__
from .load.detect import Source
from .model import SCHEMAS, Profile, ProfileMeta
from .options import LoadOptions

#: Bump when the on-disk layout changes.
FORMAT = 1
#: Default size bound of the whole cache directory.
MAX_BYTES = 2 * 1024**3
#: Inputs modified this recently are not cached (see the module docstring).
RACY_SECONDS = 2.0
#: LoadOptions fields that never change the loaded profile (only whether/how it is read).
_NEUTRAL_OPTIONS = frozenset({"force", "use_cache"})
#: Code whose source decides what a profile contains (relative to this package).
_CODE = ("load/*.py", "model.py", "options.py", "cache.py")
_SUFFIX = ".npz"
_TMP_PREFIX = ".tmp-"
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
    costs the speed-up, never the load."""
    folder = _usable_dir(directory or cache_dir())
    if folder is None:
        return read(src, opts)
    entry = folder / (entry_key(src, opts) + _SUFFIX)
    profile = _read_entry(entry)
    if profile is not None:
        return profile
    profile = read(src, opts)
    _write_entry(folder, entry, profile, max_bytes)
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


def _usable_dir(folder: Path) -> Path | None:
    """Create ``folder`` (0700) if needed; None unless it is a real directory owned by us."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return None  # a symlink or someone else's folder: do not trust what it holds
        if st.st_mode & 0o077:
            folder.chmod(0o700)
    except OSError:
        return None
    return folder


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
        if path.name.startswith(_TMP_PREFIX):
            if now - st.st_mtime > _STALE_TMP_SECONDS:
                path.unlink(missing_ok=True)
            continue
        if path.suffix == _SUFFIX:
            entries.append((st.st_mtime, st.st_size, path))
    total = 0
    for _, size, path in sorted(entries, reverse=True, key=lambda e: (e[2] == keep, e[0])):
        total += size
        if total > max_bytes and path != keep:
            path.unlink(missing_ok=True)


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
    text_dtype = isinstance(s.dtype, pd.StringDtype)
    if not text_dtype and not (s.dtype == object and pd.api.types.infer_dtype(s, skipna=False)
                               in ("string", "empty")):
        raise _Uncachable(f"column {s.name!r} of dtype {s.dtype}")
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    # An object column holding NA cannot say whether it was None or NaN; do not guess.
    if not text_dtype and (codes < 0).any():
        raise _Uncachable(f"column {s.name!r} holds missing values")
    encoded = [u.encode("utf-8", "surrogatepass") for u in uniques]
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
    return Profile(meta=ProfileMeta(**manifest["meta"]), **tables)


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


def _write_entry(folder: Path, entry: Path, profile: Profile, max_bytes: int) -> None:
    if _racy(profile.meta.files_used):
        return
    try:
        arrays = _encode(profile)
    except _Uncachable:
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=_TMP_PREFIX, suffix=_SUFFIX)  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, entry)
        tmp = None
        _prune(folder, max_bytes, entry)
    except OSError:
        pass  # full disk, quota, read-only home: the profile is loaded all the same
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


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
