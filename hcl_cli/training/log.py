"""The per-epoch training log, rebuilt whole from the run's history at every epoch.

The history (one row of metrics per finished epoch) lives in the checkpoint, the single source of
truth for what a run has done. After each end-of-epoch checkpoint the log is rewritten from it,
every file atomically, in dvclive's layout, which ``dvc plots``, ``dvc exp show`` and
``hcl report`` read: ``FOLDER/metrics.json`` (the last row and its ``step``) and one
``FOLDER/plots/metrics/NAME.tsv`` per metric (``step<TAB>NAME``, the 0-based epoch). A process
killed at any moment leaves each file whole, and ``--resume`` rewrites the log from the
checkpoint: one row per epoch, never a duplicate or a lost one. (dvclive itself truncates and
rewrites ``metrics.json`` in place and appends to the TSV files, so a kill there corrupts the
log or duplicates a row; that is why hcl writes the files itself.)

A metric's name becomes a file name, and a resumed run's names come from its checkpoint, an
artifact anyone may have edited: every name is checked (:func:`check_metric_name`) against the
shape of the names hcl writes (``loss``, ``knn_top1``: a lower-case letter, then lower-case letters,
digits, underscores and hyphens), so no name read back can reach outside ``FOLDER/plots/metrics``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from hcl_cli.artifacts import write_text
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.interrupts import uninterrupted

METRICS_FILE = "metrics.json"
EXTENT_KEYS = ("steps", "planned_steps")
"""The keys of ``metrics.json`` that are not metrics: how many steps the run took and planned."""
PLOTS_FOLDER = Path("plots") / "metrics"

METRIC_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
"""The shape of every metric name hcl logs, and so of every ``plots/metrics/NAME.tsv``."""

History = list[dict[str, float]]
"""One dict of metrics per epoch, each with its 0-based ``epoch``."""


def check_metric_name(name: object, source: str) -> str:
    """``name`` when it is a metric name hcl writes, else a one-line HclError naming ``source``."""
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise HclError(f"{source}: {name!r} is not a metric name hcl writes (lower-case letters, digits, _ and -)")
    return name


def read_history(recorded: Any, source: str) -> History:
    """A history read from an artifact (``source`` names it and the field), checked row by row.

    Each row is an object with a non-negative integer ``epoch`` (increasing from row to row) and
    finite numbers under metric names (:func:`check_metric_name`); anything else is a one-line
    HclError.
    """
    if not isinstance(recorded, list):
        raise HclError(f"{source} must be a list of per-epoch rows (got {type(recorded).__name__})")
    history: History = []
    for index, row in enumerate(recorded):
        where = f"{source}[{index}]"
        if not isinstance(row, dict):
            raise HclError(f"{where} must be an object of metrics (got {row!r})")
        epoch = row.get("epoch")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0 or (history and epoch <= history[-1]["epoch"]):
            raise HclError(f"{where}.epoch must be a non-negative integer above the previous row's (got {epoch!r})")
        for name, value in row.items():
            if name == "epoch":
                continue
            check_metric_name(name, where)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise HclError(f"{where}.{name} must be a finite number (got {value!r})")
        history.append(dict(row))
    return history


class TrainingLog:
    """The training log in ``folder``; :meth:`write` replaces it with the rows of a history."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def write(self, history: History, steps: tuple[int, int] | None = None) -> None:
        """Write ``history`` as the whole log, and remove the curves of metrics it no longer has.

        ``steps`` (the optimisation steps taken so far and planned) go into ``metrics.json`` as
        ``steps`` and ``planned_steps``, for ``hcl compare`` to tell a run --max-steps stopped."""
        with uninterrupted():  # a Ctrl-C waits: the curves and metrics.json stay one history
            self._write(history, steps)

    def _write(self, history: History, steps: tuple[int, int] | None) -> None:
        names = [
            check_metric_name(name, str(self.folder)) for name in dict.fromkeys(name for row in history for name in row if name != "epoch")
        ]
        for name in names:
            rows = [f"{row['epoch']}\t{row[name]!r}" for row in history if name in row]
            write_text(self.folder / PLOTS_FOLDER / f"{name}.tsv", "\n".join([f"step\t{name}", *rows]) + "\n")
        for stale in set(self.logged_names()) - set(names):
            (self.folder / PLOTS_FOLDER / f"{stale}.tsv").unlink(missing_ok=True)
        last = {name: value for name, value in history[-1].items() if name != "epoch"} if history else {}
        summary = {**last, "step": history[-1]["epoch"]} if history else {}
        if history and steps is not None:
            summary |= dict(zip(EXTENT_KEYS, steps))
        write_text(self.folder / METRICS_FILE, json.dumps(summary, indent=4) + "\n")

    def check_replaceable(self, option: str) -> None:
        """Refuse, before training, a folder whose ``metrics.json`` is not a training log (a user's file, an evaluation's metrics).

        A training log's ``metrics.json`` is an object of finite numbers under metric names,
        ``step`` and :data:`EXTENT_KEYS` (empty before the first epoch); anything else would be
        lost to the first :meth:`write`.
        """
        path = self.folder / METRICS_FILE
        if not path.exists() and not path.is_symlink():
            return
        if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
            return  # empty (a kill while an older hcl wrote it in place): nothing to lose, and a resume rebuilds the log
        try:
            summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, UnicodeDecodeError, ValueError):
            summary = None
        if not isinstance(summary, dict) or not all(
            (name in ("step", *EXTENT_KEYS) or METRIC_NAME.fullmatch(name))
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            for name, value in summary.items()
        ):
            raise UsageError(
                f"{option} {shown(self.folder)} holds a {METRICS_FILE} that is not a training log hcl wrote: choose another {option}"
            )

    def logged_names(self) -> list[str]:
        """The metrics the log now holds, by its ``metrics.json`` (nothing when it is missing or unreadable)."""
        if not (self.folder / METRICS_FILE).is_file():
            return []
        try:
            summary = json.loads((self.folder / METRICS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return (
            [name for name in summary if name not in ("step", *EXTENT_KEYS) and METRIC_NAME.fullmatch(name)]
            if isinstance(summary, dict)
            else []
        )
