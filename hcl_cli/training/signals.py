"""A clean stop on SIGINT / SIGTERM: training finishes its step, saves a checkpoint and exits 128 + the signal."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from hcl_cli.errors import HclError


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

    def record(signum: int, frame: FrameType | None) -> None:
        request.signum = signum
        for number, handler in previous.items():
            signal.signal(number, handler)
        if request.at_once is not None:
            raise TrainingInterrupted(f"stopped by {request.signal_name} {request.at_once}", signum)
        print(
            f"hcl: {request.signal_name}: stopping after this step with a checkpoint (again to stop at once)", file=sys.stderr, flush=True
        )

    for signum in signals:
        signal.signal(signum, record)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


INTERRUPTED_EXIT = 130
"""The exit code of a process stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""


class Interrupted(BaseException):
    """Ctrl-C outside training. Not a KeyboardInterrupt, which click would turn into an Abort after printing a blank line;
    a BaseException, so that no ``except Exception`` swallows it and every ``finally`` still runs."""


def exit_at_once(prog: str) -> None:
    """From now on SIGINT ends the process at once: one line on stderr, exit 130, no traceback.

    For when nothing is left to clean up (a second Ctrl-C; the interpreter shutting down, whose
    exit handlers would otherwise print a KeyboardInterrupt traceback).
    """
    line = f"{prog}: error: interrupted\n".encode(errors="backslashreplace")

    def handler(signum: int, frame: FrameType | None) -> None:
        os.write(2, line)
        os._exit(INTERRUPTED_EXIT)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


@contextlib.contextmanager
def interrupt_policy(prog: str) -> Iterator[None]:
    """Ctrl-C during the block raises :class:`Interrupted` once (clean-ups run, the caller prints one line and exits 130);
    a second Ctrl-C, and any Ctrl-C after the block (the caller reports how the command ended and the process exits),
    exit at once with one line. (Late in the interpreter's shutdown Python restores the default action, so a Ctrl-C
    there ends the process by the signal itself: no output, and the shell reports 130 all the same.)

    Training's :func:`stop_on_signals` takes SIGINT over while it runs and puts this policy back.
    Outside the main thread signals keep their handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(signum: int, frame: FrameType | None) -> None:
        exit_at_once(prog)
        raise Interrupted

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        exit_at_once(prog)  # the command is over, however it ended: what is left is reporting it and exiting
