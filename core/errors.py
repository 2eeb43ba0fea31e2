"""Errors the user can act on.

Every problem caused by the user's input (a path, a file's content, an option) is raised as
:class:`InputError`. The CLI turns it into one line on stderr and exit code 2; anything else is
an internal error (exit code 1). Keeping the two apart is what lets us promise "no traceback for
bad input" without hiding our own bugs.
"""

from __future__ import annotations

import re
from os import PathLike

#: C0/C1 control characters (line breaks are already joined with spaces by then).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


class InputError(Exception):
    """Bad input: a one-line, user-facing message that names the file and the problem."""

    def __init__(self, path: str | PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.problem if self.path is None else f"{self.path}: {self.problem}"
        # One line, always: profile text and file names may carry line breaks, and terminal
        # control characters (ESC sequences) in a planted file name must not reach the terminal.
        return _CONTROL.sub(_escape, " ".join(text.splitlines()))

    def __reduce__(self) -> tuple[object, ...]:
        # Profiles load in worker processes; the default pickling re-calls ``__init__`` with the
        # formatted message only, which fails and surfaces as BrokenProcessPool instead of the
        # one-line error.
        return _rebuild, (type(self), self.path, self.problem)


def both_bad(base: InputError, comp: InputError) -> InputError:
    """One error naming both bad inputs of a pair (one line: the base's problem, then the
    comparison's): fixing the first and running again must not be how the second is found."""
    return InputError(None, f"{base.message}; and {comp.message}")


class UsageError(InputError):
    """A bad option or option combination (no file involved)."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


def _rebuild(cls: type[InputError], path: str | None, problem: str) -> InputError:
    """Unpickle an :class:`InputError` (or subclass) without calling the subclass ``__init__``."""
    err = cls.__new__(cls)
    InputError.__init__(err, path, problem)
    return err


class Cancelled(Exception):
    """Raised inside long work when the user asked to stop (TUI Esc / q)."""
