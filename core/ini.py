"""The two INI configurations (operator masks, advisor rules) read into a ``ConfigParser`` with
the same one-line errors: a file that cannot be read, is not UTF-8 or is not INI names itself
and the problem, never a traceback (:class:`~perfcmp_core.errors.InputError`)."""

from __future__ import annotations

import configparser
from pathlib import Path

from .errors import InputError


def read_ini(parser: configparser.ConfigParser, path: Path, what: str, text: str | None = None) -> None:
    """Read ``path`` (or ``text``, that file's content already in hand) into ``parser``;
    ``what`` names the configuration in the messages ("mask config", "advisor config")."""
    try:
        if text is not None:
            parser.read_string(text, source=str(path))
        else:
            with path.open(encoding="utf-8") as fh:
                parser.read_file(fh)
    except OSError as exc:
        raise InputError(path, f"cannot read {what} ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(path, f"{what} is not UTF-8 text") from None
    except configparser.Error as exc:
        raise InputError(path, f"invalid ini file ({exc.message.splitlines()[0]})") from None
