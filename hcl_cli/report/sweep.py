"""The comparison table of a sweep (``hcl compare``): one row per experiment, its accuracies with their spread, the clear
winners, as Markdown and CSV.

A row (:class:`ExperimentRow`) holds what one finished experiment ran (its dataset, linear protocol and pretrain
parameters) and measured (:class:`Accuracy`: kNN and linear top-1 with the 95% Wilson interval of a test split, or the
SVM protocol's mean over its cross-validation folds +- their standard deviation). :func:`markdown_table` shows the
parameters that vary between the rows, only where the row's sampler reads them, and bolds a value only when it beats
every other row beyond those intervals (:func:`winners`); :func:`csv_table` has every parameter at full precision.
Reading the experiments from DVC is :mod:`hcl_cli.stages.compare`'s.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS, label_protocol_of
from hcl_cli.logs import prose
from hcl_cli.objectives.registry import users_of
from hcl_cli.stats import wilson_interval

EVALUATIONS = ("knn", "linear")
"""The accuracies of an image or graph row: kNN and the linear readout (a sentence row's: its SentEval tasks)."""
HEADINGS = {"knn": "kNN top-1", "linear": "Linear top-1"}
WORKSPACE = "workspace"
TITLE = "# Sweep comparison"
"""The first line of ``OUT.md``: how hcl knows the file is its own to replace (the CSV: its header)."""


@dataclass(frozen=True)
class Accuracy:
    """A top-1 accuracy and its spread: the 95% Wilson interval of a test split of ``test_size`` samples, or, for a
    cross-validated accuracy (``folds`` > 0: the SVM protocol), the mean over the folds +- their standard deviation ``std``."""

    top1: float
    test_size: int | None = None
    std: float = 0.0
    folds: int = 0

    @property
    def interval(self) -> tuple[float, float]:
        if self.folds:
            return self.top1 - self.std, self.top1 + self.std
        return wilson_interval(self.top1, self.test_size) if self.test_size else (self.top1, self.top1)

    @property
    def spread(self) -> str:
        """The spread as a table cell shows it: ``(0.921-0.964)``, ``± 0.051 (10 folds)``, or nothing."""
        if self.folds:
            return f"± {self.std:.3f} ({self.folds} folds)"
        low, high = self.interval
        return f"({low:.3f}-{high:.3f})" if self.test_size else ""


@dataclass(frozen=True)
class ExperimentRow:
    """One finished experiment: its pretrain parameters and its two accuracies."""

    name: str
    rev: str
    baseline: str
    pretrain: dict[str, Any]
    accuracy: dict[str, Accuracy] = field(default_factory=dict)
    dataset: str = "-"
    """The prepared dataset (``prepare.name`` for a TU dataset, else ``prepare.dataset``)."""
    protocol: str = "-"
    """The linear readout's protocol as its metrics record it (``fixed``, ``paper``, ``svm``)."""
    steps: tuple[int, int] | None = None
    """The optimisation steps pretraining took and planned (from its training log), when it records them."""
    graphs: bool = False
    """Whether the dataset is graphs (a TU dataset), where ``label_protocol`` decides whether pretraining read the test labels."""

    @property
    def label_protocol(self) -> str | None:
        """How pretraining met the labels on graphs (:func:`~hcl_cli.config.pretrain.label_protocol_of`): None when it read
        none or on images, else ``inductive`` or ``transductive``."""
        return label_protocol_of(self.pretrain) if self.graphs else None

    @property
    def protocol_cell(self) -> str:
        """The Protocol cell: the readout's protocol, and on graphs how pretraining met the labels (``svm, inductive``;
        ``svm, transductive: the encoder saw the test labels``)."""
        labels = {None: "", "inductive": ", inductive", "transductive": f", {TRANSDUCTIVE_LABELS}"}[self.label_protocol]
        return f"{self.protocol}{labels}"

    @property
    def extent(self) -> str:
        """``stopped at step 120 of 300`` for a run --max-steps ended early, else ``complete``."""
        if self.steps is not None and self.steps[0] < self.steps[1]:
            return f"stopped at step {self.steps[0]} of {self.steps[1]}"
        return "complete"

    @property
    def sampler(self) -> str:
        return str(self.pretrain.get("sampler", ""))

    def shows(self, parameter: str) -> bool:
        """Whether ``parameter`` matters for this row: a training parameter, or an option its sampler reads."""
        readers = users_of(parameter)
        return not readers or self.sampler in readers


def varying_parameters(rows: list[ExperimentRow]) -> list[str]:
    """The pretrain parameters (other than the sampler) whose values differ between the rows that read them."""
    names = dict.fromkeys(name for row in rows for name in row.pretrain if name != "sampler")
    return [name for name in names if len({json.dumps(row.pretrain.get(name)) for row in rows if row.shows(name)}) > 1]


def accuracy_columns(rows: list[ExperimentRow]) -> list[str]:
    """The accuracies every row has, in the first row's order: kNN and linear, or a sentence sweep's SentEval tasks."""
    return [key for key in rows[0].accuracy if all(key in row.accuracy for row in rows)]


def winners(rows: list[ExperimentRow], key: str) -> set[int]:
    """The index of the row whose ``key`` accuracy beats every other row beyond the 95% intervals (none when it ties)."""
    if len(rows) < 2:
        return set()
    best = max(range(len(rows)), key=lambda index: rows[index].accuracy[key].top1)
    low = rows[best].accuracy[key].interval[0]
    others = (row.accuracy[key] for index, row in enumerate(rows) if index != best)
    return {best} if all(other.interval[1] < low and other.test_size for other in others) and rows[best].accuracy[key].test_size else set()


def cell(accuracy: Accuracy, bold: bool) -> str:
    """``0.9467 (0.921-0.964)`` or ``0.8723 ± 0.051 (10 folds)``, in bold when it is a clear winner."""
    text = " ".join(filter(None, [f"{accuracy.top1:.4f}", accuracy.spread]))
    return f"**{text}**" if bold else text


def markdown_table(rows: list[ExperimentRow], skipped: list[str]) -> str:
    """A Markdown table, one row per experiment; only the parameters that vary, only where the sampler reads them."""
    columns = varying_parameters(rows)
    evaluations = accuracy_columns(rows)
    best = {key: winners(rows, key) for key in evaluations}
    baselines = sorted({row.baseline for row in rows} - {WORKSPACE})
    stopped = any(row.extent != "complete" for row in rows)
    extent_column = ["Pretraining"] if stopped else []
    lines = [
        TITLE,
        "",
        prose(
            f"The workspace and the experiments of {', '.join(f'`{name}`' for name in baselines) or 'no commit'} from `dvc exp show`, "
            f"on one dataset ({rows[0].dataset}); the workspace as its `dvc.lock` records its last run. Top-1 accuracy with its "
            "spread: kNN, and a linear readout of protocol fixed or paper, on the test split with the 95% Wilson interval; the "
            "SVM protocol (svm) cross-validates over every sample: the mean over its folds ± their standard deviation, but for a "
            "graph run that read labels under the inductive protocol (`svm, inductive`) it is fitted on the train split and scored "
            f"on the test split, with the Wilson interval; `{TRANSDUCTIVE_LABELS}` marks a graph run whose pretraining read every "
            "graph with its label (docs/protocol-graphs.md). A sentence run shows each SentEval task's accuracy instead, with the "
            "Wilson interval of the items it scored (every item for the cross-validated MR, CR, SUBJ and MPQA). Only the "
            "pretrain parameters that vary are shown, and `-` where the row's sampler does not read them. A value is **bold** "
            "only when it beats every other row beyond those intervals."
        ),
        "",
        "| "
        + " | ".join(
            ["Experiment", "Dataset", "Protocol", "Sampler", *extent_column, *columns, *(HEADINGS.get(key, key) for key in evaluations)]
        )
        + " |",
        "|" + "|".join([":--"] * 4 + [":--"] * len(extent_column) + ["--:"] * (len(columns) + len(evaluations))) + "|",
    ]
    for index, row in enumerate(rows):
        values = [format_value(row.pretrain.get(name)) if row.shows(name) else "-" for name in columns]
        accuracies = [cell(row.accuracy[key], index in best[key]) for key in evaluations]
        extent = [row.extent] if stopped else []
        lines.append("| " + " | ".join([row.name, row.dataset, row.protocol_cell, row.sampler, *extent, *values, *accuracies]) + " |")
    if not any(best.values()) and len(rows) > 1:
        lines += ["", prose("No row beats all others beyond the intervals: the differences are within the noise of the evaluation.")]
    if skipped:
        lines += ["", prose("Not tabulated: " + "; ".join(skipped) + ".")]
    return "\n".join(lines) + "\n"


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def csv_table(rows: list[ExperimentRow]) -> str:
    """Every row with every pretrain parameter (empty where its sampler does not read it), accuracies at full precision."""
    parameters = list(dict.fromkeys(name for row in rows for name in row.pretrain))
    evaluations = accuracy_columns(rows)
    best = {key: winners(rows, key) for key in evaluations}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    headings = [f"{key}_{part}" for key in evaluations for part in ("top1", "low", "high", "folds", "best")]
    header = ["experiment", "rev", "baseline", "dataset", "protocol", "pretraining_labels", "steps", "planned_steps"]
    writer.writerow([*header, *parameters, *headings])
    for index, row in enumerate(rows):
        values = [row.pretrain.get(name, "") if row.shows(name) else "" for name in parameters]
        accuracies = []
        for key in evaluations:
            accuracy = row.accuracy[key]
            accuracies += [
                repr(accuracy.top1),
                *(repr(bound) for bound in accuracy.interval),
                accuracy.folds or "",
                int(index in best[key]),
            ]
        steps = list(row.steps) if row.steps is not None else ["", ""]
        labels = {None: "", "transductive": TRANSDUCTIVE_LABELS}.get(row.label_protocol, row.label_protocol)
        writer.writerow([row.name, row.rev, row.baseline, row.dataset, row.protocol, labels, *steps, *values, *accuracies])
    return buffer.getvalue()
