"""The progress of a long loop: a tqdm bar on a terminal, else a plain line every :data:`PLAIN_SECONDS`.

Under ``dvc repro`` or with stderr sent to a file there is no terminal to draw a bar on, so a line
such as ``hcl linear-eval: SVM folds: 40 of 100 (40%), about 12 s to go`` says where the loop is.
``hcl pretrain`` prints its own lines (:class:`~hcl_cli.training.loop.RunClock`: the loss and the
run's estimate); prepare's decoding and the SVM protocol's folds go through :func:`progress`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

from hcl_cli.logs import LOG, bars_disabled

PLAIN_SECONDS = 10.0
"""Seconds between two plain progress lines."""

Item = TypeVar("Item")


def progress(items: Iterable[Item], total: int, what: str, unit: str, prog: str) -> Iterator[Item]:
    """Yield ``items`` (``total`` of them), showing ``what`` advance by ``unit`` on stderr: a bar on a terminal, else a
    line beginning ``prog:`` every :data:`PLAIN_SECONDS` while any is left."""
    if bars_disabled():
        yield from items
        return
    if sys.stderr.isatty():
        yield from tqdm(items, total=total, desc=what, unit=unit, leave=False)
        return
    started = shown = time.perf_counter()
    for done, item in enumerate(items, start=1):
        yield item
        now = time.perf_counter()
        if now - shown >= PLAIN_SECONDS and done < total:
            shown = now
            left = format_duration((now - started) / done * (total - done))
            LOG.info(f"{prog}: {what}: {done} of {total} {unit}s ({100 * done / total:.0f}%), about {left} to go")


def format_duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``20.3 days``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
