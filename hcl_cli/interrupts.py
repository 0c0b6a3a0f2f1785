"""Blocks that a signal does not cut in two: hcl's signal handlers hold a stop signal (:data:`STOP_SIGNALS`: Ctrl-C,
SIGTERM, SIGHUP) that comes while a file, or a set of files written together, is being written, and act on it when
the block ends.

Torch-free and free of hcl's other modules, so the command line installs its handlers before it
imports anything heavy; :mod:`~hcl_cli.training.signals` makes the handlers, :mod:`~hcl_cli.artifacts`
and the stages mark the blocks.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

SignalHandler = Callable[[int, Any], None]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals every stage treats alike, as a request to stop: Ctrl-C, ``kill``'s default, and a closed terminal."""

_depth = 0
"""How many :func:`uninterrupted` blocks the main thread is in."""
_held: list[int] = []
"""The signals that came during the outermost :func:`uninterrupted` block, to handle when it ends."""


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A block that hcl's signal handlers (those made by :func:`deferrable`) do not cut in two.

    A signal that comes during the block is held and handled when the outermost block ends, so a
    file, or a set of files written together, is written whole or not at all. Only the main thread,
    where Python runs signal handlers, counts; the blocks nest.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _held:
            held = list(_held)
            _held.clear()
            for signum in held:
                signal.raise_signal(signum)  # handled now, by whichever handler is in place


def deferrable(handler: SignalHandler) -> SignalHandler:
    """``handler`` as a signal handler that waits for the end of an :func:`uninterrupted` block."""

    def handle(signum: int, frame: Any) -> None:
        if _depth:
            _held.append(signum)
            return
        handler(signum, frame)

    return handle
