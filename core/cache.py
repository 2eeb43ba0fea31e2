"""A disk cache of loaded profiles, so reopening the same pair is near-instant.

Users reopen the same comparison many times (TUI, then ``export``, then ``summary`` after changing
one option), and parsing a few hundred MB of JSON costs seconds each time. A loaded
:class:`~perfcmp_core.model.Profile` is therefore stored under the user's cache directory
(``$XDG_CACHE_HOME/perfcmp-tui`` or ``~/.cache/perfcmp-tui``, mode 0700, files 0600) and reused
while the inputs are unchanged.

Design points, each answering a way a cache goes wrong:

* **Reading an entry costs little more than its text.** One file per profile (``<key>.pfcol``),
  a columnar layout of our own (the role of Arrow IPC, without needing pyarrow, which is
  optional here): a header (:data:`MAGIC`, :data:`FORMAT`, where the manifest is), the column
  buffers each aligned to :data:`ALIGN` bytes, and a JSON manifest at the end naming every
  table, column, dtype and buffer (offset, count). The file is mapped read-only
  (``mmap``) and numeric columns become frames without a copy (``np.frombuffer`` +
  ``copy=False``): their pages are the page cache's, read when first touched and shared by every
  process reading the entry. Text columns are dictionary-encoded (int codes + the distinct values
  as one UTF-8 blob with int64 offsets); the codes are mapped too and become the profile's
  :attr:`~perfcmp_core.model.Profile.text_codes`, so no text is hashed again.
* **No code runs on read, and no file is trusted.** No pickle anywhere: a file is bytes, JSON and
  plain little-endian numbers of an allowed dtype. Before a buffer is used its offset, length,
  alignment and dtype are checked against the file (no entry, however made, makes the reader
  look outside its own buffers); text offsets must rise within their blob, codes stay within
  their dictionary, bools are 0 or 1; the file must end exactly where the manifest does (a
  truncated entry is refused). A planted or damaged file can at worst be ignored (and deleted).
  Mapped columns are read-only: nothing may write into a loaded profile's tables in place.
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
  owned by the current user; an entry is opened without following a link (``O_NOFOLLOW``) or
  waiting on a FIFO, and must be a regular file.
* **Entries are never changed in place** (written once, then replaced by a rename or deleted), so
  a mapped entry never shrinks under its reader. Entries of earlier layouts (``.npz``, format 3)
  are never read: the next write deletes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import mmap
import os
import stat
import struct
import sys
import time
from contextlib import contextmanager, nullcontext
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator

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

#: Bump when the on-disk layout changes (3: ``.npz`` entries; 4: the mapped columnar file; 5:
#: ``kernels.task_id`` int64).
FORMAT = 5
#: Default size bound of the whole cache directory.
MAX_BYTES = 2 * 1024**3
#: Inputs modified this recently are not cached (see the module docstring).
RACY_SECONDS = 2.0
#: LoadOptions fields that never change the loaded profile (only whether/how it is read).
#: ``step`` too: the entry holds every step and the step is cut from it after reading; ``split``
#: only says how many processes parse the trace.
_NEUTRAL_OPTIONS = frozenset({"force", "use_cache", "step", "split"})
#: Code whose source decides what a profile contains (relative to this package).
_CODE = ("load/*.py", "model.py", "options.py", "timeline.py", "cache.py")
#: The name ending of entries (``<key>.pfcol``).
SUFFIX = ".pfcol"
#: Entries of earlier layouts: never read, deleted by the next prune.
_LEGACY_SUFFIXES = (".npz",)
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
    entry = folder / (key + SUFFIX)
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
    return ((directory or cache_dir()) / (entry_key(src, opts) + SUFFIX)).is_file()


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
    just written, always stays), entries of earlier layouts (no key of this version names them)
    and temporary files left by killed writers."""
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
            if now - st.st_mtime > _STALE_TMP_SECONDS and not path.with_suffix(SUFFIX).exists():
                path.unlink(missing_ok=True)
            continue
        if path.suffix in _LEGACY_SUFFIXES:  # (their locks go as the stale locks above)
            path.unlink(missing_ok=True)
        elif path.suffix == SUFFIX:
            entries.append((st.st_mtime, st.st_size, path))
    total = 0
    for _, size, path in sorted(entries, reverse=True, key=lambda e: (e[2] == keep, e[0])):
        total += size
        if total > max_bytes and path != keep:
            path.unlink(missing_ok=True)
            path.with_suffix(_LOCK_SUFFIX).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# The entry file: one profile as aligned columns behind a JSON manifest
# ---------------------------------------------------------------------------------------------
#
#   [0, 64)     header: MAGIC (8 bytes), FORMAT (u32), 0 (u32), manifest offset (u64),
#               manifest length (u64), zero padding; all little-endian
#   [64, m)     the column buffers, each starting on a multiple of ALIGN
#   [m, end)    the manifest (UTF-8 JSON), ending exactly at the end of the file
#
# The manifest holds the metadata, the files the loader read (re-checked on every hit) and per
# table its row count and columns: name, pandas dtype, kind ("num" or "text") and the buffers
# of the column, each ``[numpy dtype, offset, count]``. A numeric column is one buffer ("values");
# a text column three: "codes" (int32/int64, first-seen numbering), "blob" (the distinct values'
# UTF-8 bytes one after the other) and "offsets" (int64, distinct values + 1 of them).


class _Uncachable(Exception):
    """The profile holds something this format cannot restore exactly (then it is not stored)."""


class _Damaged(Exception):
    """The file is not a complete, well-formed entry of this format (then it is deleted)."""


#: The first bytes of every entry (a file not starting with them is not one).
MAGIC = b"PFCMPCOL"
#: Every buffer starts on a multiple of this (cache lines, SIMD loads, any dtype's alignment).
ALIGN = 64
_HEADER = struct.Struct("<8sIIQQ")
_HEADER_BYTES = ALIGN
#: Buffer dtypes an entry may declare: little-endian integers, floats and bools, nothing else
#: (no Python objects, no dtype that numpy would have to interpret from the file).
_NUMERIC = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f4", "<f8"})
_CODES = frozenset({"<i4", "<i8"})


class _Writer:
    """Lays out buffers one after the other, each aligned, and records where each one went."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.at = _HEADER_BYTES
        fh.write(bytes(_HEADER_BYTES))  # the header is written last, once the manifest's place is known

    def put(self, values: np.ndarray) -> list[Any]:
        """Write ``values`` (1-d) at the next aligned offset; returns ``[dtype, offset, count]``."""
        values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
        pad = -self.at % ALIGN
        self.fh.write(bytes(pad))
        self.at += pad
        where = [values.dtype.str, self.at, len(values)]
        self.fh.write(memoryview(values.view(np.uint8)))
        self.at += values.nbytes
        return where

    def finish(self, manifest: dict[str, Any]) -> None:
        """Append the manifest and fill in the header."""
        text = json.dumps(manifest).encode()
        self.fh.write(text)
        self.fh.seek(0)
        self.fh.write(_HEADER.pack(MAGIC, FORMAT, 0, self.at, len(text)))
        self.fh.flush()


def _encode(profile: Profile, fh: BinaryIO) -> None:
    """Write ``profile`` to ``fh`` as one entry (raises :class:`_Uncachable` before writing
    anything that could not be restored exactly)."""
    for name, df in profile.tables().items():
        if not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1):
            raise _Uncachable(f"{name}: index is not 0..n-1")
        if not all(isinstance(col, str) for col in df.columns) or not df.columns.is_unique:
            raise _Uncachable(f"{name}: column names")
    out = _Writer(fh)
    tables: dict[str, Any] = {}
    for name, df in profile.tables().items():
        cols = [[col, str(df[col].dtype), *_encode_column(df[col], out)] for col in df.columns]
        tables[name] = {"rows": len(df), "columns": cols}
    files = sorted(set(profile.meta.files_used))
    out.finish({"format": FORMAT, "meta": dataclasses.asdict(profile.meta), "tables": tables,
                "files": [_stat_record(Path(f)) for f in files]})


def _encode_column(s: pd.Series, out: _Writer) -> tuple[str, dict[str, list[Any]]]:
    """Write one column's buffers; returns its kind ("num" or "text") and where they went."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biuf":
        return "num", {"values": out.put(s.to_numpy())}
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
    return "text", {
        "codes": out.put(codes.astype(np.int32 if len(uniques) < 2**31 else np.int64)),
        "blob": out.put(np.frombuffer(b"".join(encoded), dtype=np.uint8)),
        "offsets": out.put(np.cumsum([0, *map(len, encoded)], dtype=np.int64)),
    }


def _decode(buf: mmap.mmap | bytes) -> Profile:
    """The profile held by one entry's bytes (raises :class:`_Damaged` or :class:`_Uncachable`).

    Numeric columns and text codes are views of ``buf`` (read-only; no copy): the frames are
    built with ``copy=False`` and keep ``buf`` alive. Every offset, length, dtype and code is
    checked before use, so no file, however made, reads outside its own buffers."""
    size = len(buf)
    if size < _HEADER_BYTES:
        raise _Damaged("shorter than the header")
    magic, fmt, _, at, length = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC or fmt != FORMAT:
        raise _Damaged("not an entry of this format")
    if at < _HEADER_BYTES or at + length != size:
        raise _Damaged("manifest outside the file (truncated?)")
    manifest = json.loads(bytes(buf[at:size]))
    if manifest["format"] != FORMAT or set(manifest["tables"]) != set(SCHEMAS):
        raise _Uncachable("format or table set differs")
    for path, fsize, mtime in manifest["files"]:
        if _stat_record(Path(path)) != [path, fsize, mtime]:
            raise _Uncachable(f"{path} changed")
    column = _Columns(buf, at)
    tables = {}
    text_codes = {}
    for name in SCHEMAS:
        spec = manifest["tables"][name]
        rows = spec["rows"]
        if type(rows) is not int or rows < 0:
            raise _Damaged(f"{name}: row count {rows!r}")
        cols = {}
        for col, dtype, kind, parts in spec["columns"]:
            if not isinstance(col, str) or col in cols:
                raise _Damaged(f"{name}: column name {col!r}")
            if kind == "num":
                cols[col] = column.numeric(parts["values"], rows, dtype)
            elif kind == "text":
                values, codes, distinct = column.text(parts, rows, dtype)
                if dtype == "object":  # the stored numbering is the profile's: no text is hashed again
                    text_codes[(name, col)] = (codes, distinct)
                cols[col] = values
            else:
                raise _Damaged(f"{name}.{col}: kind {kind!r}")
        tables[name] = pd.DataFrame(cols, index=pd.RangeIndex(rows), columns=list(cols), copy=False)
    meta = {**manifest["meta"], "notes": [from_plain(n) for n in manifest["meta"]["notes"]]}
    profile = Profile(meta=ProfileMeta(**meta), **tables)
    profile.text_codes.update(text_codes)
    return profile


class _Columns:
    """Checked views of the buffers of one entry (``buf[:end]``, end = the manifest's offset)."""

    def __init__(self, buf: mmap.mmap | bytes, end: int) -> None:
        self.buf, self.end = buf, end

    def array(self, where: Any, allowed: frozenset[str], count: int | None = None) -> np.ndarray:
        """The buffer ``where`` = ``[dtype, offset, count]``, after checking that the dtype is
        allowed, the offset aligned and the whole buffer inside the column area (and, given
        ``count``, that it holds that many values)."""
        dtype, offset, n = where
        if dtype not in allowed or type(offset) is not int or type(n) is not int:
            raise _Damaged(f"buffer {where!r}")
        itemsize = np.dtype(dtype).itemsize
        if (offset % ALIGN or n < 0 or (count is not None and n != count)
                or offset < _HEADER_BYTES or offset + n * itemsize > self.end):
            raise _Damaged(f"buffer {where!r} outside the file")
        values = np.frombuffer(self.buf, dtype=dtype, count=n, offset=offset)
        return values if values.dtype.isnative else values.astype(values.dtype.newbyteorder("="))

    def numeric(self, where: Any, rows: int, dtype: str) -> np.ndarray:
        values = self.array(where, _NUMERIC, rows)
        if np.dtype(dtype) != values.dtype:
            raise _Damaged(f"column dtype {dtype!r} holds {values.dtype}")
        if values.dtype.kind == "b" and len(values) and values.view(np.uint8).max() > 1:
            raise _Damaged("bool column holds other bytes than 0 and 1")
        return values

    def text(self, parts: Any, rows: int, dtype: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
        """The column, and its codes (first-seen order, as stored) and distinct values."""
        pandas_dtype = pd.api.types.pandas_dtype(dtype)
        string_dtype = isinstance(pandas_dtype, pd.StringDtype)  # dtype-neutral: reads the stored dtype, makes none
        if not (pandas_dtype == object or string_dtype):
            raise _Damaged(f"text column of dtype {dtype!r}")
        blob = self.array(parts["blob"], frozenset({"|u1"})).tobytes()
        offsets = self.array(parts["offsets"], frozenset({"<i8"}))
        if (len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(blob)
                or (np.diff(offsets) < 0).any()):
            raise _Damaged("text offsets")
        bounds = offsets.tolist()
        uniques = np.array([blob[a:b].decode("utf-8", "surrogatepass")
                            for a, b in zip(bounds[:-1], bounds[1:])] + [None], dtype=object)
        codes = self.array(parts["codes"], _CODES, rows)
        lowest = -1 if string_dtype else 0  # only a string dtype holds NA
        if len(codes) and (codes.min() < lowest or codes.max() >= len(uniques) - 1):
            raise _Damaged("text codes out of range")
        column = pd.Series(uniques[codes], dtype=pandas_dtype, copy=False)
        return column, codes, uniques[:-1]


# ---------------------------------------------------------------------------------------------
# Entries on disk
# ---------------------------------------------------------------------------------------------


def _read_entry(entry: Path) -> Profile | None:
    """The cached profile, or None on a miss; a damaged entry is deleted so it gets rewritten."""
    try:  # never through a link; never blocking on a FIFO planted under the entry's name
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid():
                return None
            if not stat.S_ISREG(st.st_mode):
                raise _Damaged("not a regular file")
            buf = _map(fd, st.st_size)
        finally:
            os.close(fd)  # the mapping stays valid without the descriptor
        profile = _decode(buf)
        os.utime(entry)  # least-recently-used order for pruning
        return profile
    # Whatever a damaged or foreign file makes struct, json, numpy or pandas raise, the answer
    # is the same: not a usable entry. Reading the input again is always correct.
    except Exception:  # noqa: BLE001
        entry.unlink(missing_ok=True)
        return None


def _map(fd: int, size: int) -> mmap.mmap | bytes:
    """The file's bytes: mapped read-only (pages shared with the page cache, read when touched),
    or read whole where the file system cannot map files. Safe to keep mapped: entries are never
    changed in place (written once, then replaced by a rename or deleted), so the file under a
    mapping never shrinks."""
    if size == 0:
        raise _Damaged("empty")
    # Python 3.13+ need not keep a duplicate descriptor per mapping (a cluster maps many entries).
    no_fd: dict[str, Any] = {"trackfd": False} if sys.version_info >= (3, 13) else {}
    try:
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ, **no_fd)
    except (OSError, ValueError):
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
        return b"".join(chunks)


def _write_entry(folder: Path, entry: Path, profile: Profile, max_bytes: int) -> str:
    """Store ``profile``; returns why it could not be written ("" when it was, or when it is
    not meant to be: racy inputs, content this format cannot restore)."""
    if _racy(profile.meta.files_used):
        return ""
    try:
        with Scratch(folder, prefix=_TMP_PREFIX, suffix=SUFFIX) as scratch:  # mode 0600
            try:
                _encode(profile, scratch.fh)
            except _Uncachable:
                return ""
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
