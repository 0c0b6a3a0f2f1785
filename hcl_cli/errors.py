"""Errors that reach the user as one line and an exit code, never a traceback."""

from __future__ import annotations

import os


class HclError(Exception):
    """A runtime failure the user can act on (missing file, corrupt artifact, NaN loss). Exit code 1."""

    exit_code = 1


class UsageError(HclError):
    """An invalid option or parameter value, or an output in the way. Exit code 2, as for any command-line usage error."""

    exit_code = 2


class InputError(UsageError):
    """An input the user gave (a file or folder) that hcl cannot use: missing, unreadable, malformed, corrupt, or of another
    run than the inputs beside it. Exit code 2: the user fixes it (docs/errors.md)."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (or its type when empty), for one-line errors."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def shown(value: object) -> str:
    """``value`` (a path, a name) as a message shows it: control characters escaped as in Python (``\\n``, ``\\x1b``),
    so that a file name with a newline in it cannot forge a line of hcl's output."""
    text = os.fsdecode(value) if isinstance(value, (os.PathLike, bytes)) else str(value)
    return text if text.isprintable() else "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
