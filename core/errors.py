"""Errors the user can act on.

Every problem caused by the user's input (a path, a file's content, an option) is raised as
:class:`InputError`. The CLI turns it into one line on stderr and exit code 2; anything else is
an internal error (exit code 1). Keeping the two apart is what lets us promise "no traceback for
bad input" without hiding our own bugs.
"""

from __future__ import annotations

from os import PathLike


class InputError(Exception):
    """Bad input: a one-line, user-facing message that names the file and the problem."""

    def __init__(self, path: str | PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.problem if self.path is None else f"{self.path}: {self.problem}"
        # One line, always: profile text may carry newlines.
        return " ".join(text.split("\n"))


class UsageError(InputError):
    """A bad option or option combination (no file involved)."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


class Cancelled(Exception):
    """Raised inside long work when the user asked to stop (TUI Esc / q)."""
