"""How a command ends on the console: one ``error:`` line and its exit code for whatever it raised, and what it prints.

Exit codes follow docs/errors.md: 2 for a usage error or a bad input file, 1 for a failure during the work, 128 + N for a
stop signal N (:func:`~hcl_cli.training.signals.interrupt_policy`: a stop that a library wrapped or swallowed included).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from hcl_cli.errors import HclError
from hcl_cli.training.signals import Interrupted, exit_with, interrupt_policy

# Typer vendors click in recent releases; find its exception base either way (torch 2.11 GPU images ship an older Typer).
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

STREAM_ERRORS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EFBIG, errno.EIO, errno.EDQUOT})
"""The errors of a write to standard output that is full or closed (an error naming no file)."""


def answered(prog: str, run: Callable[[], Any], debug: bool) -> None:
    """Run ``run`` (the command) and exit: with its code, or with one error line for what it raised (``--debug``: and its
    traceback)."""
    try:
        os.getcwd()  # before any stage imports torch, which dies on a deleted working directory with no line of hcl's
    except OSError as exc:
        fail(prog, f"the working directory cannot be read ({exc.strerror}; deleted?): cd to a folder that exists and run again", 2, debug)
    try:
        with interrupt_policy(prog):
            code = run()
    except typer.Abort:
        fail(prog, "aborted", 130, debug)
    except _CLICK_EXCEPTION as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            sys.exit(0)
        fail(prog, exc.format_message().replace("\n", " "), exc.exit_code, debug)  # type: ignore[attr-defined]
    except (HclError, Interrupted) as exc:
        fail(prog, str(exc).replace("\n", " "), exc.exit_code, debug)
    except KeyboardInterrupt:
        fail(prog, "interrupted", 130, debug)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        fail_unexpected(prog, exc, debug)
    try:
        write_stdout("")  # what a stage printed and is still buffered
    except HclError as exc:
        fail(prog, str(exc), exc.exit_code, debug)
    sys.exit(code if isinstance(code, int) else 0)


def fail_unexpected(prog: str, exc: Exception, debug: bool) -> NoReturn:
    """The line of an exception no layer of hcl raised: a full or closed standard output, memory that ran out, or an
    internal error."""
    if isinstance(exc, OSError) and exc.filename is None and exc.errno in STREAM_ERRORS:  # printing, e.g. --help, to a full disk
        _drop_stdout()
        fail(prog, f"cannot write to standard output: {exc.strerror}", 1, debug)
    if not isinstance(exc, OSError) and _out_of_memory(exc):
        fail(prog, f"out of memory: {_first_line(exc)} (the input or the options ask for more than this machine has)", 1, debug)
    fail(prog, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("\n", " "), 1, debug)


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output now; a write error (``hcl params > /dev/full``, a closed pipe) is
    an :class:`HclError`, and what could not be written is dropped so that exiting does not fail on it again."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        _drop_stdout()
        raise HclError(f"cannot write to standard output: {exc.strerror or exc}") from None


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed (Python's MemoryError, torch's out-of-memory on any device): a failure of
    the run's size, exit 1, not an internal error."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(exc)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _drop_stdout() -> None:
    """Send standard output to the null device, so that what it could not write is not tried again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def fail(prog: str, message: str, code: int, debug: bool) -> NoReturn:
    """Exit with ``code`` after the command's one error line (``--debug``: the traceback before it)."""
    if debug:
        traceback.print_exc()
    exit_with(prog, message, code)
