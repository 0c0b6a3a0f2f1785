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
"""

from __future__ import annotations

import json
from pathlib import Path

from hcl_cli.artifacts import write_text

METRICS_FILE = "metrics.json"
PLOTS_FOLDER = Path("plots") / "metrics"

History = list[dict[str, float]]
"""One dict of metrics per epoch, each with its 0-based ``epoch``."""


class TrainingLog:
    """The training log in ``folder``; :meth:`write` replaces it with the rows of a history."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def write(self, history: History) -> None:
        """Write ``history`` as the whole log, and remove the curves of metrics it no longer has."""
        names = list(dict.fromkeys(name for row in history for name in row if name != "epoch"))
        for name in names:
            rows = [f"{row['epoch']}\t{row[name]!r}" for row in history if name in row]
            write_text(self.folder / PLOTS_FOLDER / f"{name}.tsv", "\n".join([f"step\t{name}", *rows]) + "\n")
        for stale in set(self.logged_names()) - set(names):
            (self.folder / PLOTS_FOLDER / f"{stale}.tsv").unlink(missing_ok=True)
        last = {name: value for name, value in history[-1].items() if name != "epoch"} if history else {}
        summary = {**last, "step": history[-1]["epoch"]} if history else {}
        write_text(self.folder / METRICS_FILE, json.dumps(summary, indent=4) + "\n")

    def logged_names(self) -> list[str]:
        """The metrics the log now holds, by its ``metrics.json`` (nothing when it is missing or unreadable)."""
        try:
            summary = json.loads((self.folder / METRICS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [name for name in summary if name != "step" and Path(name).name == name] if isinstance(summary, dict) else []
