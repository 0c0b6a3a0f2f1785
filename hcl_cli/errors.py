"""Errors that reach the user as one line and an exit code, never a traceback."""

from __future__ import annotations


class HclError(Exception):
    """A runtime failure the user can act on (missing file, corrupt artifact, NaN loss). Exit code 1."""

    exit_code = 1


class UsageError(HclError):
    """An invalid option or parameter value. Exit code 2, as for any command-line usage error."""

    exit_code = 2


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (or its type when empty), for one-line errors."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
