"""The report of a sentence encoder: SentEval's tasks beside the two baselines that say whether training helped.

``hcl linear-eval --protocol senteval`` writes one metrics file per task; a metrics folder holding files named
``senteval-TASK.json`` (:data:`SENTENCE_METRICS`) is a sentence run's, and ``hcl report`` then writes this table: each
task's accuracy (MRPC's with its F1) of the trained ``[f(s); g(s)]``, of the untrained encoder and of the mean untrained
word embeddings (the baselines linear-eval read out on the same folds), in SentEval's task order (HCL Table 2).
"""

from __future__ import annotations

from pathlib import Path

from hcl_cli.metrics import EvaluationMetrics, evaluation_metrics, load_metrics
from hcl_cli.report.escaping import inline

SENTENCE_METRICS = "senteval-{task}.json"
"""The name of a task's metrics file in a sentence run's metrics folder."""
TASK_ORDER = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")
BASELINES = ("untrained encoder", "mean word embeddings")


def sentence_metrics(folder: Path) -> dict[str, EvaluationMetrics]:
    """The tasks' metrics in ``folder`` by task, in SentEval's order (empty: not a sentence run's folder)."""
    paths = {task: folder / SENTENCE_METRICS.format(task=task) for task in TASK_ORDER}
    return {task: load_metrics(path, "linear-eval", evaluation_metrics) for task, path in paths.items() if path.is_file()}


def score(accuracy: float | None, f1: float | None) -> str:
    """A cell: the accuracy in percent, with F1 where the task has one."""
    if accuracy is None:
        return "not read"
    return f"{100 * accuracy:.1f}" + (f" (F1 {100 * f1:.1f})" if f1 is not None else "")


def sentence_report(title: str, tasks: dict[str, EvaluationMetrics], encoder: str | None) -> str:
    """The report's markdown: a title, what was read out, and the table of the module docstring."""
    lines = [
        f"# {inline(title)}",
        "",
        f"SentEval's readout (logistic regression, L2 by inner cross-validation) of {inline(encoder or 'the encoder')} on "
        f"{len(tasks)} task(s): accuracy in percent, the cross-validated tasks (MR, CR, SUBJ, MPQA) over every item, TREC "
        "and MRPC on their test split.",
        "",
        f"| Task | trained | {' | '.join(BASELINES)} |",
        "|---|---|" + "---|" * len(BASELINES),
    ]
    for task, metrics in tasks.items():
        details = metrics.details.get("senteval", {})
        baselines = details.get("baselines", {})
        cells = [score(baselines[name]["accuracy"], baselines[name]["f1"]) if name in baselines else "not read" for name in BASELINES]
        lines.append(f"| {task} | {score(metrics.top1, details.get('f1'))} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"
