"""A clean stop on SIGINT / SIGTERM: training finishes its step, saves a checkpoint and exits 128 + the signal."""

from __future__ import annotations

import contextlib
import signal
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
    checkpoint); the handlers are then put back, so a second Ctrl-C or SIGTERM acts at once.
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

    for signum in signals:
        signal.signal(signum, record)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
