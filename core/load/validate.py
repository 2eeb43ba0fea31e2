"""Checks made before a file is read: size caps and ownership (both skipped by ``--force``).

Profiles come from other people's machines; reading a 40 GB JSON by accident takes the host down,
and a file planted by another user is a classic way to feed a tool crafted input. The caps are the
reference tool's documented ones (csv 5 GB, json 10 GB, db 8 GB).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..options import CSV_CAP, DB_CAP, JSON_CAP

_CAPS = {".csv": CSV_CAP, ".json": JSON_CAP, ".gz": JSON_CAP, ".db": DB_CAP}


def _human(n: int) -> str:
    return f"{n / 1024**3:.1f} GB" if n >= 1024**3 else f"{n / 1024**2:.1f} MB"


def check_file(path: Path, force: bool, cap: int | None = None) -> os.stat_result:
    """Fail with a clear :class:`InputError` if ``path`` is unreadable, too big or not ours."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    if not path.is_file():
        raise InputError(path, "is not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(path, "permission denied")
    if force:
        return st
    limit = cap if cap is not None else _CAPS.get(path.suffix.lower())
    if limit is not None and st.st_size > limit:
        size, most = _human(st.st_size), _human(limit)
        if size == most:  # "10.0 GB, over the 10.0 GB limit" says nothing: give the bytes
            size, most = f"{st.st_size:,} bytes", f"{limit:,}-byte"
        raise InputError(
            path,
            f"is {size}, over the {most} limit for {path.suffix} files; "
            "pass --force to read it anyway",
        )
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        raise InputError(
            path,
            f"is owned by uid {st.st_uid}, not by you (uid {uid}); "
            "check where it came from, then pass --force to read it anyway",
        )
    return st
