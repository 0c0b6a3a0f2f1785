"""A clean stop on a stop signal (SIGINT, SIGTERM, SIGHUP: :data:`~hcl_cli.interrupts.STOP_SIGNALS`), alike in every stage.

Every way a command can end under a stop signal prints exactly one ``error:`` line and exits
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP; or the code of the
error line already written), with no traceback: the first signal outside training raises
:class:`Interrupted`, whose way up runs every clean-up (temporary files, staging folders, locks);
a second one, or one after the command is over, ends the process at once. Training finishes its
step, saves a checkpoint and exits the same way (:func:`stop_on_signals`). Every handler here
waits for the end of a file being written (:func:`~hcl_cli.interrupts.uninterrupted`), so no
signal leaves half a file, or half of a set of files, behind; and :func:`exit_with` writes the
last line with signals held, after which a signal exits silently with that line's code. A SIGHUP
that the process was started ignoring (``nohup``) stays ignored.
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
from hcl_cli.interrupts import STOP_SIGNALS, deferrable, uninterrupted


class TrainingInterrupted(HclError):
    """A stop signal stopped training after a checkpoint was saved; exit code 128 + the signal number.

    Its line is its own message: torch's FX interpreter, running the compiled step when the signal came, adds its graph
    to the exception's ``args`` (``While executing %input_11 ...``)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        return self.message


class StopRequest:
    """Set by a stop signal while :func:`stop_on_signals` is active; training polls it at step boundaries."""

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
    """Turn the stop signals into a :class:`StopRequest` for the duration of the block.

    The first signal only records itself (training stops at the next step boundary and saves a
    checkpoint), unless :attr:`StopRequest.at_once` says to stop at once; the handlers are then put
    back, so a second stop signal acts at once. Outside the main thread, where Python cannot install
    handlers, signals keep their defaults.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    signals = handled_signals()
    previous = {signum: signal.getsignal(signum) for signum in signals}

    @deferrable
    def record(signum: int, frame: FrameType | None) -> None:
        request.signum = signum
        for number, handler in previous.items():
            signal.signal(number, handler)
        if request.at_once is not None:
            _raised_at_once.append(TrainingInterrupted(f"stopped by {request.signal_name} {request.at_once}", signum))
            raise _raised_at_once[-1]
        _write_stderr(f"hcl: {request.signal_name}: stopping after this step with a checkpoint (again to stop at once)\n")

    for signum in signals:
        signal.signal(signum, record)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is record:  # no signal came: one that did has put the handlers back already, and
                signal.signal(signum, handler)  # a handler installed since (exit at once) must stay


_ignored_at_start: frozenset[int] | None = None
"""The stop signals this process was started ignoring, noted before hcl installs its first handler."""


def handled_signals() -> tuple[int, ...]:
    """The stop signals hcl handles: all of :data:`~hcl_cli.interrupts.STOP_SIGNALS`, but a SIGHUP that the process was
    started ignoring (``nohup``) stays ignored."""
    global _ignored_at_start
    if _ignored_at_start is None:
        _ignored_at_start = frozenset({signal.SIGHUP} if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else ())
    return tuple(signum for signum in STOP_SIGNALS if signum not in _ignored_at_start)


def interrupted_message(signum: int) -> str:
    """How a command stopped by ``signum`` outside training ends its line: ``interrupted`` for a Ctrl-C, else which signal."""
    return "interrupted" if signum == signal.SIGINT else f"interrupted by {signal.Signals(signum).name}"


class Interrupted(BaseException):
    """A stop signal outside training; exit code 128 + its number. Not a KeyboardInterrupt, which click would turn into an
    Abort after printing a blank line; a BaseException, so that no ``except Exception`` swallows it and every ``finally``
    still runs."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(interrupted_message(signum))
        self.signum = signum
        self.exit_code = 128 + signum


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
    """From now on a stop signal ends the process at once: one line on stderr, exit 128 + the signal, no traceback.

    For when nothing is left to clean up (a second Ctrl-C; the command over, the process reporting
    how it ended and exiting, whose exit handlers would otherwise print a KeyboardInterrupt traceback).
    """

    @deferrable
    def handler(signum: int, frame: FrameType | None) -> None:
        _write_stderr(f"{prog}: error: {interrupted_message(signum)}\n")
        _exit_now(128 + signum)

    if _main_thread():
        for signum in handled_signals():
            signal.signal(signum, handler)


def exit_with(prog: str, message: str, code: int) -> NoReturn:
    """Write the command's one error line (``PROG: error: MESSAGE``) and exit with ``code``.

    Signals wait while the line is written; from then on a stop signal ends the process at
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

            for signum in handled_signals():
                signal.signal(signum, silent)
    sys.exit(code)


def _ignore_signals_at_shutdown() -> None:
    """The last exit handler: the interpreter is about to put the default signal actions back and tear its modules
    down, where a stop signal would kill the process by the signal itself (no line, status -N); it exits with its code instead."""
    if _main_thread():
        for signum in handled_signals():
            signal.signal(signum, signal.SIG_IGN)


_shutdown_guarded = False


_raised_at_once: list[TrainingInterrupted] = []
"""The stop a signal raised at once during the command (:attr:`StopRequest.at_once`), whatever became of it."""


def _interruption(error: BaseException) -> Interrupted | TrainingInterrupted | None:
    """The stop that ended the block where ``error`` came up: one in its chain (causes, contexts, and a library's
    ``inner_exception``: torch.compile's ``InductorError`` keeps the stop that came while Inductor compiled), else the one a
    signal raised at once and a library swallowed before failing on its own (dynamo, tracing the first step when the signal
    came, fails with ``SpeculationLogDivergence``; an error of hcl's own says what it says); None when no stop came."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (Interrupted, TrainingInterrupted)):
            return cause
        seen.add(id(cause))
        cause = getattr(cause, "inner_exception", None) or cause.__cause__ or cause.__context__
    return _raised_at_once[-1] if _raised_at_once and not isinstance(error, HclError) else None


@contextlib.contextmanager
def interrupt_policy(prog: str) -> Iterator[None]:
    """A stop signal during the block raises :class:`Interrupted` once (clean-ups run, the caller prints one line and
    exits 128 + the signal); a second one, and any after the block (the caller reports how the command ended and the
    process exits), exit at once with one line. The caller writes its last line with :func:`exit_with`. After the exit
    handlers that ran before it (registered after this block began: torch's, multiprocessing's), the stop signals are
    ignored, so the interpreter's last teardown cannot turn the exit code into death by signal. An error that a clean-up
    raised on the way up from a stop signal, or that a library raised over one (:func:`_interruption`), is the stop, not an
    internal error.

    Training's :func:`stop_on_signals` takes the stop signals over while it runs and puts this policy back.
    Outside the main thread signals keep their handlers.
    """
    if not _main_thread():
        yield
        return
    global _shutdown_guarded
    _raised_at_once.clear()
    if not _shutdown_guarded:
        atexit.register(_ignore_signals_at_shutdown)  # the first registered runs last
        _shutdown_guarded = True

    @deferrable
    def first(signum: int, frame: FrameType | None) -> None:
        exit_at_once(prog)
        raise Interrupted(signum)

    for signum in handled_signals():
        signal.signal(signum, first)
    try:
        yield
    except Exception as error:
        stop = _interruption(error)
        if stop is not None and stop is not error:  # e.g. a half-imported module that a clean-up then used: the signal ended the run
            raise stop from error
        raise
    finally:
        exit_at_once(prog)  # the command is over, however it ended: what is left is reporting it and exiting
