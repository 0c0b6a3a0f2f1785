"""A clean stop on SIGINT / SIGTERM: training finishes its step, saves a checkpoint and exits 128 + the signal.

Every way a command can end under Ctrl-C prints exactly one ``error:`` line and exits 130 (or the
code of the error line already written), with no traceback: the first Ctrl-C outside training
raises :class:`Interrupted`; a second one, or one after the command is over, ends the process at
once. Every handler here waits for the end of a file being written
(:func:`~hcl_cli.interrupts.uninterrupted`), so no signal leaves half a file, or half of a set
of files, behind; and :func:`exit_with` writes the last line with signals held, after which a
signal exits silently with that line's code.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

from hcl_cli.errors import HclError
from hcl_cli.interrupts import deferrable, uninterrupted


class TrainingInterrupted(HclError):
    """SIGINT or SIGTERM stopped training after a checkpoint was saved; exit code 128 + the signal number."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class StopRequest:
    """Set by SIGINT / SIGTERM while :func:`stop_on_signals` is active; training polls it at step boundaries."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.at_once: str | None = None
        """While set (before a process's first step ends: nothing new to save yet), a signal raises
        :class:`TrainingInterrupted` at once, with this text after ``stopped by SIGNAL``."""

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Turn SIGINT and SIGTERM into a :class:`StopRequest` for the duration of the block.

    The first signal only records itself (training stops at the next step boundary and saves a
    checkpoint), unless :attr:`StopRequest.at_once` says to stop at once; the handlers are then put back, so a second Ctrl-C or SIGTERM acts at once.
    Outside the main thread, where Python cannot install handlers, signals keep their defaults.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    @deferrable
    def record(signum: int, frame: FrameType | None) -> None:
        request.signum = signum
        for number, handler in previous.items():
            signal.signal(number, handler)
        if request.at_once is not None:
            raise TrainingInterrupted(f"stopped by {request.signal_name} {request.at_once}", signum)
        _write_stderr(f"hcl: {request.signal_name}: stopping after this step with a checkpoint (again to stop at once)\n")

    for signum in signals:
        signal.signal(signum, record)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is record:  # no signal came: one that did has put the handlers back already, and
                signal.signal(signum, handler)  # a handler installed since (exit at once) must stay


INTERRUPTED_EXIT = 130
"""The exit code of a process stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""


class Interrupted(BaseException):
    """Ctrl-C outside training. Not a KeyboardInterrupt, which click would turn into an Abort after printing a blank line;
    a BaseException, so that no ``except Exception`` swallows it and every ``finally`` still runs."""


def _write_stderr(text: str) -> None:
    """Write ``text`` to stderr's file descriptor: safe in a signal handler, even one that runs while the main
    thread is in the middle of a ``print`` to ``sys.stderr``."""
    data = text.encode(errors="backslashreplace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass


def _exit_now(code: int) -> NoReturn:
    """End the process with ``code`` from a signal handler: what standard output holds is written first, nothing else runs."""
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - a closed or full stdout, or a flush the handler cut into: exit all the same
        pass
    os._exit(code)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def exit_at_once(prog: str) -> None:
    """From now on SIGINT ends the process at once: one line on stderr, exit 130, no traceback.

    For when nothing is left to clean up (a second Ctrl-C; the command over, the process reporting
    how it ended and exiting, whose exit handlers would otherwise print a KeyboardInterrupt traceback).
    """
    line = f"{prog}: error: interrupted\n"

    @deferrable
    def handler(signum: int, frame: FrameType | None) -> None:
        _write_stderr(line)
        _exit_now(INTERRUPTED_EXIT)

    if _main_thread():
        signal.signal(signal.SIGINT, handler)


def exit_with(prog: str, message: str, code: int) -> NoReturn:
    """Write the command's one error line (``PROG: error: MESSAGE``) and exit with ``code``.

    Signals wait while the line is written; from then on SIGINT or SIGTERM ends the process at
    once, silently, with the same code: the line has said how the command ended (a second Ctrl-C
    while a run stopped by the first one exits prints nothing more).
    """
    with uninterrupted():  # our handlers wait, so none can cut into this write to sys.stderr
        try:
            sys.stderr.write(f"{prog}: error: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or full stderr: the exit code still says it
            pass
        if _main_thread():

            @deferrable
            def silent(signum: int, frame: FrameType | None) -> None:
                _exit_now(code)

            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, silent)
    sys.exit(code)


def _ignore_signals_at_shutdown() -> None:
    """The last exit handler: the interpreter is about to put the default signal actions back and tear its modules
    down, where a Ctrl-C would kill the process by the signal itself (no line, status -2); it exits with its code instead."""
    if _main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)


_shutdown_guarded = False


@contextlib.contextmanager
def interrupt_policy(prog: str) -> Iterator[None]:
    """Ctrl-C during the block raises :class:`Interrupted` once (clean-ups run, the caller prints one line and exits 130);
    a second Ctrl-C, and any Ctrl-C after the block (the caller reports how the command ended and the process exits),
    exit at once with one line. The caller writes its last line with :func:`exit_with`. After the exit handlers that
    ran before it (registered after this block began: torch's, multiprocessing's), SIGINT and SIGTERM are ignored, so
    the interpreter's last teardown cannot turn the exit code into death by signal.

    Training's :func:`stop_on_signals` takes SIGINT over while it runs and puts this policy back.
    Outside the main thread signals keep their handlers.
    """
    if not _main_thread():
        yield
        return
    global _shutdown_guarded
    if not _shutdown_guarded:
        atexit.register(_ignore_signals_at_shutdown)  # the first registered runs last
        _shutdown_guarded = True

    @deferrable
    def first(signum: int, frame: FrameType | None) -> None:
        exit_at_once(prog)
        raise Interrupted

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        exit_at_once(prog)  # the command is over, however it ended: what is left is reporting it and exiting
