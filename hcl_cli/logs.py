"""hcl's messages: one logger, ``hcl``, for every stage's status, progress and warning lines, on standard error.

Each message carries its own ``hcl STAGE:`` prefix (``hcl prepare: wrote data/prepared: ...``), as before there was a
logger, so the lines read the same whoever runs the stage: the command line, or a program that calls a stage's ``run``
(the logger writes INFO and above from import on). The command line sets the level once (:func:`set_level`, from
``-q``/``--quiet``: errors only, and ``-v``/``--verbose``: debug lines too); tqdm's bars follow it (:func:`bars_disabled`).
Results stay on standard output (``hcl compare``'s table, ``hcl table``'s Markdown, ``hcl params``), and an error is
one line of :func:`hcl_cli.errors.exit_with` at every level.
"""

from __future__ import annotations

import logging
import sys
import textwrap

LOG = logging.getLogger("hcl")
"""The logger of every hcl message."""


class _Stderr(logging.Handler):
    """Writes each record to the ``sys.stderr`` of the moment (not the one of import: a test's capture, a redirect)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            self.handleError(record)


def _install() -> None:
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOG.handlers[:] = [handler]
    LOG.propagate = False
    LOG.setLevel(logging.INFO)


def set_level(quiet: bool, verbose: bool) -> None:
    """The command line's level: errors only with ``quiet``, debug lines with ``verbose``, else status lines (INFO)."""
    LOG.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)


def bars_disabled() -> bool | None:
    """tqdm's ``disable``: True when the level hides status lines (``-q``), else None (a bar only on a terminal)."""
    return True if not LOG.isEnabledFor(logging.INFO) else None


_install()


PROSE_WIDTH = 80
"""The width of a paragraph hcl prints for a person to read (``hcl preset``'s footer, ``hcl compare``'s introduction)."""


def prose(text: str) -> str:
    """``text``, one paragraph, wrapped at :data:`PROSE_WIDTH` columns without splitting a word or a flag at its hyphens."""
    return textwrap.fill(" ".join(text.split()), PROSE_WIDTH, break_on_hyphens=False, break_long_words=False)
