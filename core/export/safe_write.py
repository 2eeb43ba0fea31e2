"""Atomic, never-overwriting output files.

A result file is the product of a long run; losing an earlier one to a name clash (the reference
names workbooks by the second, so two runs in the same second collide) or leaving a half-written
file behind after a crash are both worse than an odd file name. So every output is written to a
temporary file in the target directory and then *published* under a name nobody holds yet: the
requested name, else ``<stem>_1<suffix>``, ``<stem>_2<suffix>``… Publishing is a hard link (which
fails instead of replacing an existing name) or, on file systems without hard links, an exclusive
create of the final name followed by a rename onto it. On any failure the temporary file is
removed, so a crash leaves either nothing or a complete file.

A character device or a pipe given as the target (``/dev/stdout``, a FIFO) is written straight
into: it holds no file that could be lost, and cannot be replaced by a rename.

Whatever fails while writing — a full disk, a quota, a file system gone read-only — is a problem
of the destination the user chose: :func:`safe_write` raises it as an :class:`InputError` naming
that destination (one line, exit 2), for every writer alike.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from os import PathLike
from pathlib import Path
from typing import BinaryIO

from perfcmp_core.errors import InputError

#: Mode of output directories we create (the reference's choice: owner rwx, group r-x).
DIR_MODE = 0o750
#: Mode of published files: readable by the group that can enter the directory, nobody else.
FILE_MODE = 0o640
#: How many ``_N`` suffixes to try before giving up (a guard against a pathological directory).
MAX_SUFFIX = 9999


def ensure_dir(path: str | PathLike[str]) -> Path:
    """Return ``path`` as a directory we can write into, creating it (mode 0750) if missing.

    Raises :class:`InputError` naming the path when it is a file, cannot be created or is not
    writable — the user chose it, so it is an input problem, not an internal error.
    """
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise InputError(directory, "output path is a file, not a directory")
    try:
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create output directory ({exc.strerror or exc})"
        raise InputError(directory, problem) from exc
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(directory, "output directory is not writable")
    return directory


def check_dir(path: str | PathLike[str]) -> Path:
    """Check that :func:`ensure_dir` would succeed on ``path``, without creating anything.

    Used before a long comparison so that a bad ``-o`` fails first, yet a run that then fails on
    its input leaves no empty output folder behind. The nearest existing ancestor must be a
    writable directory (a missing folder is created only when the result is written).
    """
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise InputError(directory, "output path is a file, not a directory")
    existing = directory.absolute()
    while not existing.exists():
        if existing.is_symlink():
            problem = f"{existing} is a broken symbolic link"
            raise InputError(directory, f"cannot create output directory ({problem})")
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(directory, f"cannot create output directory ({existing} is a file)")
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == directory.absolute():
            raise InputError(directory, "output directory is not writable")
        raise InputError(directory, f"cannot create output directory ({existing} is not writable)")
    return directory


def _candidates(target: Path) -> Iterator[Path]:
    """The names tried in order: ``target`` itself, then ``<stem>_1<suffix>``, ``_2``…"""
    yield target
    for n in range(1, MAX_SUFFIX + 1):
        yield target.with_name(f"{target.stem}_{n}{target.suffix}")


def safe_write(target: str | PathLike[str], write: Callable[[BinaryIO], None], *,
               where: str | PathLike[str] | None = None) -> Path:
    """Run ``write(fh)`` on a temporary file next to ``target`` and publish it without clobbering.

    ``fh`` is a seekable binary file (zip writers need to seek), except for a device or pipe
    target, which gets the stream itself. Returns the path actually written, which differs from
    ``target`` when that name was taken. An ``OSError`` on the way becomes an ``InputError``
    naming ``where`` (default: ``target``); the temporary file is gone by then.
    """
    try:
        return _write(Path(target), write)
    except OSError as exc:
        problem = f"cannot write the result here ({exc.strerror or exc})"
        raise InputError(target if where is None else where, problem) from exc


def _write(target: Path, write: Callable[[BinaryIO], None]) -> Path:
    if _is_stream(target):
        with open(target, "wb") as fh:
            write(fh)
        return target
    directory = ensure_dir(target.parent)
    if target.is_dir():
        raise InputError(target, "is a directory; expected a file name")
    try:
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise InputError(directory, f"cannot create a file here ({exc.strerror or exc})") from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w+b") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        return _publish(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _is_stream(target: Path) -> bool:
    """True for an existing character device or FIFO (a block device is refused: writing one
    would destroy a disk)."""
    try:
        mode = target.stat().st_mode
    except OSError:
        return False
    if stat.S_ISBLK(mode):
        raise InputError(target, "is a block device; expected a file name")
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _publish(tmp: Path, target: Path) -> Path:
    """Give ``tmp``'s content the first free name among :func:`_candidates`; never replace one."""
    for name in _candidates(target):
        try:
            os.link(tmp, name)
            return name
        except FileExistsError:
            continue
        except OSError:
            # No hard links here (some network / FAT / FUSE file systems): claim the name
            # exclusively, then rename our complete file onto the placeholder we own.
            pass
        try:
            fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        except FileExistsError:
            continue
        os.close(fd)
        try:
            os.replace(tmp, name)
        except OSError:
            name.unlink(missing_ok=True)
            raise
        return name
    raise InputError(target, f"more than {MAX_SUFFIX} files with this name already exist")
