"""A run's history: one row of metrics per finished epoch, as the checkpoint records it and the training log writes it.

A metric's name becomes a file name (the log's ``plots/metrics/NAME.tsv``), and a resumed run's
names come from its checkpoint, an artifact anyone may have edited: every name is checked
(:func:`check_metric_name`) against the shape of the names hcl writes (``loss``, ``knn_top1``: a
lower-case letter, then lower-case letters, digits, underscores and hyphens), so no name read back
can reach outside the log's folder.
"""

from __future__ import annotations

import math
import re
from typing import Any

from hcl_cli.errors import InputError

METRIC_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
"""The shape of every metric name hcl logs, and so of every ``plots/metrics/NAME.tsv``."""

History = list[dict[str, float]]
"""One dict of metrics per epoch, each with its 0-based ``epoch``."""


def check_metric_name(name: object, source: str) -> str:
    """``name`` when it is a metric name hcl writes, else a one-line HclError naming ``source``."""
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise InputError(f"{source}: {name!r} is not a metric name hcl writes (lower-case letters, digits, _ and -)")
    return name


def read_history(recorded: Any, source: str) -> History:
    """A history read from an artifact (``source`` names it and the field), checked row by row.

    Each row is an object with a non-negative integer ``epoch`` (increasing from row to row) and
    finite numbers under metric names (:func:`check_metric_name`); anything else is a one-line
    HclError.
    """
    if not isinstance(recorded, list):
        raise InputError(f"{source} must be a list of per-epoch rows (got {type(recorded).__name__})")
    history: History = []
    for index, row in enumerate(recorded):
        where = f"{source}[{index}]"
        if not isinstance(row, dict):
            raise InputError(f"{where} must be an object of metrics (got {row!r})")
        epoch = row.get("epoch")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0 or (history and epoch <= history[-1]["epoch"]):
            raise InputError(f"{where}.epoch must be a non-negative integer above the previous row's (got {epoch!r})")
        for name, value in row.items():
            if name == "epoch":
                continue
            check_metric_name(name, where)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise InputError(f"{where}.{name} must be a finite number (got {value!r})")
        history.append(dict(row))
    return history
