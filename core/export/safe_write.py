"""Atomic, never-overwriting output files that a killed writer cannot leave behind.

A result file is the product of a long run; losing an earlier one to a name clash (the reference
names workbooks by the second, so two runs in the same second collide) or leaving a half-written
file behind after a crash are both worse than an odd file name. So every output is written to a
:class:`Scratch` file in the target directory and then *published* under a name nobody holds yet:
the requested name, else ``<stem>_1<suffix>``, ``<stem>_2<suffix>``… Publishing is a hard link
(which fails instead of replacing an existing name) or, on file systems without hard links, an
exclusive create of the final name followed by a rename onto it.

Where the system allows it (Linux, ``O_TMPFILE``) the scratch file has no name at all until it is
published: a writer killed at any moment, even by SIGKILL or a power cut, leaves nothing. Elsewhere
it is a hidden ``.<name>.<random>.part`` file, removed by every way out of the writer, signals
included (:func:`perfcmp_core.lifetime.removed_on_signal`).

A character device or a pipe given as the target (``/dev/stdout``, a FIFO) is written straight
into: it holds no file that could be lost, and cannot be replaced by a rename.

Whatever fails while writing — a full disk, a quota, a file system gone read-only — is a problem
of the destination the user chose: :func:`safe_write` raises it as an :class:`InputError` naming
that destination (one line, exit 2), for every writer alike.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from os import PathLike
from pathlib import Path
from typing import BinaryIO

from perfcmp_core.errors import InputError
from perfcmp_core.lifetime import removed_on_signal

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


class Scratch:
    """A file being written in ``directory``: invisible until published, gone if the writer dies.

    ``fh`` is a seekable binary file (zip writers need to seek). Publish it with
    :meth:`link_as` (never replaces a name) or :meth:`replace` (atomically replaces one); then,
    or after a failure, :meth:`close` removes whatever is left of it. Use it as a context manager.
    """

    def __init__(self, directory: Path, prefix: str, suffix: str, mode: int = 0o600) -> None:
        self.directory = directory
        self._prefix, self._suffix, self._mode = prefix, suffix, mode
        self.path: Path | None = None  # the name while it has one (not with O_TMPFILE)
        self._guard: AbstractContextManager[None] | None = None
        fd = _anonymous(directory, mode)
        if fd is None:
            fd = self._named()
        self.fh: BinaryIO = os.fdopen(fd, "w+b")

    def _named(self) -> int:
        fd, name = tempfile.mkstemp(dir=self.directory, prefix=self._prefix, suffix=self._suffix)
        self.path = Path(name)
        self._guard = removed_on_signal(name)
        self._guard.__enter__()
        os.fchmod(fd, self._mode)
        return fd

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sync(self) -> None:
        """Flush and fsync the content (before publishing it)."""
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def link_as(self, name: Path) -> None:
        """Give the content the name ``name``; FileExistsError when it is taken (never replaced).
        Other OSError: this file system has no hard links."""
        if self.path is not None:
            os.link(self.path, name)
            return
        try:
            _link_fd(self.fh.fileno(), name)
        except FileExistsError:
            raise
        except OSError:
            self._name_it()  # the caller's fallback needs a named file
            raise

    def replace(self, name: Path) -> None:
        """Atomically put the content at ``name``, replacing what was there."""
        if self.path is None:
            self._link_hidden()
        assert self.path is not None
        os.replace(self.path, name)
        self._release_name()

    def _link_hidden(self) -> None:
        """Name an anonymous file with a hidden random name, for a rename (a link cannot
        replace); falls back to copying where links are refused."""
        for _ in range(100):
            hidden = self.directory / f"{self._prefix}{secrets.token_hex(8)}{self._suffix}"
            guard = removed_on_signal(hidden)
            guard.__enter__()
            try:
                _link_fd(self.fh.fileno(), hidden)
            except FileExistsError:
                guard.__exit__(None, None, None)
                continue
            except OSError:
                guard.__exit__(None, None, None)
                self._name_it()
                return
            self.path, self._guard = hidden, guard
            return
        self._name_it()

    def publish_exclusive(self, name: Path) -> None:
        """Without hard links: claim ``name`` exclusively (FileExistsError when taken), then
        rename the complete content onto the placeholder we own."""
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, self._mode)
        os.close(fd)
        try:
            self.replace(name)
        except OSError:
            name.unlink(missing_ok=True)
            raise

    def _name_it(self) -> None:
        """Copy an anonymous file's content into a named one (a link to it was refused)."""
        old = self.fh
        self.fh = os.fdopen(self._named(), "w+b")
        old.seek(0)
        shutil.copyfileobj(old, self.fh)
        old.close()
        self.sync()

    def _release_name(self) -> None:
        self.path = None
        if self._guard is not None:
            self._guard.__exit__(None, None, None)
            self._guard = None

    def close(self) -> None:
        """Close the file; an unpublished named file is removed (an anonymous one just goes)."""
        self.fh.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self._release_name()


def _anonymous(directory: Path, mode: int) -> int | None:
    """An unnamed file in ``directory`` (Linux ``O_TMPFILE``), or None where there is none."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        fd = os.open(directory, flag | os.O_RDWR, mode)
    except OSError:  # a file system without O_TMPFILE (EOPNOTSUPP, EISDIR, EINVAL …)
        return None
    os.fchmod(fd, mode)  # exactly ``mode``, whatever the umask
    return fd


def _link_fd(fd: int, name: Path) -> None:
    """linkat(AT_SYMLINK_FOLLOW) of an O_TMPFILE descriptor; a dir_fd argument makes os.link
    use linkat with that flag instead of plain link(), which would not follow /proc's link."""
    dir_fd = os.open(name.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.link(f"/proc/self/fd/{fd}", name.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd,
                follow_symlinks=True)
    finally:
        os.close(dir_fd)


def safe_write(target: str | PathLike[str], write: Callable[[BinaryIO], None], *,
               where: str | PathLike[str] | None = None) -> Path:
    """Run ``write(fh)`` on a :class:`Scratch` file next to ``target`` and publish it without clobbering.

    ``fh`` is a seekable binary file (zip writers need to seek), except for a device or pipe
    target, which gets the stream itself. Returns the path actually written, which differs from
    ``target`` when that name was taken. An ``OSError`` on the way becomes an ``InputError``
    naming ``where`` (default: ``target``); the scratch file is gone by then.
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
        scratch = Scratch(directory, prefix=f".{target.name}.", suffix=".part", mode=FILE_MODE)
    except OSError as exc:
        raise InputError(directory, f"cannot create a file here ({exc.strerror or exc})") from exc
    with scratch:
        write(scratch.fh)
        scratch.sync()
        return _publish(scratch, target)


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


def _publish(scratch: Scratch, target: Path) -> Path:
    """Give the scratch file's content the first free name among :func:`_candidates`; never
    replace one."""
    for name in _candidates(target):
        try:
            scratch.link_as(name)
            return name
        except FileExistsError:
            continue
        except OSError:
            # No hard links here (some network / FAT / FUSE file systems): claim the name
            # exclusively, then rename our complete file onto the placeholder we own.
            pass
        try:
            scratch.publish_exclusive(name)
        except FileExistsError:
            continue
        return name
    raise InputError(target, f"more than {MAX_SUFFIX} files with this name already exist")
