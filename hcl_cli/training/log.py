"""The per-epoch training log, rebuilt whole from the run's history at every epoch.

The history (one row of metrics per finished epoch) lives in the checkpoint, the single source of
truth for what a run has done. After each end-of-epoch checkpoint the log is rewritten from it,
every file atomically, in dvclive's layout, which ``dvc plots``, ``dvc exp show`` and
``hcl report`` read: ``FOLDER/metrics.json`` (the last row but :data:`CURVES_ONLY`, and its ``step``) and one
``FOLDER/plots/metrics/NAME.tsv`` per metric (``step<TAB>NAME``, the 0-based epoch). A process
killed at any moment leaves each file whole, and ``--resume`` rewrites the log from the
checkpoint: one row per epoch, never a duplicate or a lost one. (dvclive itself truncates and
rewrites ``metrics.json`` in place and appends to the TSV files, so a kill there corrupts the
log or duplicates a row; that is why hcl writes the files itself.) Before training, ``pretrain``
refuses a folder whose ``metrics.json`` or curve files hcl has no record of writing (:meth:`TrainingLog.check_replaceable`).
Every metric name is checked before it becomes a file name (:func:`~hcl_cli.history.check_metric_name`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hcl_cli.artifacts import LOG_CURVES, LOG_SUMMARY, Output, check_replaceable, recorded_output, write_output
from hcl_cli.history import METRIC_NAME, History, check_metric_name
from hcl_cli.interrupts import uninterrupted

METRICS_FILE = LOG_SUMMARY
EXTENT_KEYS = ("steps", "planned_steps")
"""The keys of ``metrics.json`` that are not metrics: how many steps the run took and planned."""
CURVES_ONLY = ("knn_top1",)
"""Metrics logged as curves but left out of ``metrics.json``: the kNN probe watches a subset every few epochs (HCL
Fig. 11), and the run's kNN top-1 is ``knn-eval``'s on the full splits, so ``dvc metrics show`` and ``dvc exp show`` list that one."""
PLOTS_FOLDER = LOG_CURVES


def _record_folder(path: Path) -> Path:
    """The folder whose record lists the log's files: ``FOLDER/plots``, which DVC caches with the curves (``metrics.json``
    beside it is listed as ``../metrics.json``), so a log DVC restores comes back with its record."""
    return path.parent.parent if path.suffix == ".tsv" else path.parent / PLOTS_FOLDER.parent


_RECORDED_SUMMARY = recorded_output("training log", _record_folder)
SUMMARY_OUTPUT = Output(
    _RECORDED_SUMMARY.what,
    lambda path: None if path.stat().st_size == 0 else _RECORDED_SUMMARY.foreign(path),
    record_in=_record_folder,
)
"""The log's ``metrics.json`` as an output (:func:`~hcl_cli.artifacts.check_replaceable`): the one its folder's record lists,
or an empty file (a kill while an older hcl wrote it in place: nothing to lose, and a resume rebuilds the log)."""
CURVE_OUTPUT = recorded_output("training curve", _record_folder)
"""A curve of the log (``plots/metrics/NAME.tsv``) as an output."""


class TrainingLog:
    """The training log in ``folder``; :meth:`write` replaces it with the rows of a history."""

    def __init__(self, folder: str | Path, option: str = "--live-dir") -> None:
        self.folder = Path(folder)
        self.option = option

    def write(self, history: History, steps: tuple[int, int] | None = None) -> None:
        """Write ``history`` as the whole log, and remove the curves of metrics it no longer has (an empty history, of a run
        that has finished no epoch yet: the whole log).

        ``steps`` (the optimisation steps taken so far and planned) go into ``metrics.json`` as
        ``steps`` and ``planned_steps``, for ``hcl compare`` to tell a run --max-steps stopped."""
        with uninterrupted():  # a Ctrl-C waits: the curves and metrics.json stay one history
            self._write(history, steps)

    def _write(self, history: History, steps: tuple[int, int] | None) -> None:
        if not history:  # a run that has finished no epoch yet logs nothing: no metrics.json of {} beside "nothing was saved"
            for stale in self.logged_names():
                (self.folder / PLOTS_FOLDER / f"{stale}.tsv").unlink(missing_ok=True)
            (self.folder / METRICS_FILE).unlink(missing_ok=True)
            return
        names = [
            check_metric_name(name, str(self.folder)) for name in dict.fromkeys(name for row in history for name in row if name != "epoch")
        ]
        for name in names:
            rows = [f"{row['epoch']}\t{row[name]!r}" for row in history if name in row]
            write_output(self.folder / PLOTS_FOLDER / f"{name}.tsv", "\n".join([f"step\t{name}", *rows]) + "\n", CURVE_OUTPUT, self.option)
        for stale in set(self.logged_names()) - set(names):
            (self.folder / PLOTS_FOLDER / f"{stale}.tsv").unlink(missing_ok=True)
        last = {name: value for name, value in history[-1].items() if name not in ("epoch", *CURVES_ONLY)} if history else {}
        summary = {**last, "step": history[-1]["epoch"]} if history else {}
        if history and steps is not None:
            summary |= dict(zip(EXTENT_KEYS, steps))
        write_output(self.folder / METRICS_FILE, json.dumps(summary, indent=4) + "\n", SUMMARY_OUTPUT, self.option)

    def check_replaceable(self, option: str) -> None:
        """Refuse, before training, a folder holding a file that :meth:`write` would replace or delete but that is not a
        training log's own (a user's ``plots/metrics/loss.tsv``, an evaluation's metrics as ``metrics.json``): the one
        ownership rule (:func:`~hcl_cli.artifacts.check_replaceable`). Every curve file a metric could be named is checked."""
        check_replaceable(option, self.folder / METRICS_FILE, SUMMARY_OUTPUT)
        curves = self.folder / PLOTS_FOLDER
        for name in sorted(os.listdir(curves)) if curves.is_dir() and not curves.is_symlink() else []:
            stem, suffix = os.path.splitext(name)
            if suffix == ".tsv" and METRIC_NAME.fullmatch(stem):
                check_replaceable(option, curves / name, CURVE_OUTPUT)

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
