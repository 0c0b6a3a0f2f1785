"""The sentence tables of docs/sentences.md (HCL Table 2, UnDiMix Table 4) and their verdicts, from a results file's runs;
and the sentence report's table of tasks beside the baselines. ``hcl table --sentences`` itself: tests/test_table_sentences.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hcl_cli.metrics import EvaluationMetrics
from hcl_cli.report.sentences import sentence_report
from hcl_cli.tables.sentence_rows import Recipe, papers, sentence_rows
from hcl_cli.tables.sentences import BEGIN, END, difference, hcl_verdict, replace_generated, sentences_markdown, undimix_verdict
from hcl_cli.text.senteval import TASKS

PAPERS = {
    "HCL Table 2 (BookCorpus)": {"columns": [*TASKS, "MRPC F1"], "rows": {"qt": [76.8, 81.3, 86.6, 93.4, 89.8, 73.6, 81.8]}},
    "UnDiMix Table 4 (BookCorpus)": {
        "columns": ["SICK", *TASKS[1:], "MRPC F1"],
        "rows": {"undimix": [74.7, 78.0, 86.8, 78.7, 82.8, 70.7, 80.9]},
    },
}


def run(row: str, seed: int, accuracy: float) -> dict[str, Any]:
    scores = {task: {"accuracy": accuracy} for task in TASKS}
    scores["MRPC"]["f1"] = accuracy + 0.1
    return {"row": row, "seed": seed, "scores": scores, "commit": "abc1234", "threads": 1}


def runs(hard: float, undimix: float) -> list[dict[str, Any]]:
    """Two seeds of every row: QT at 0.60 and 0.62, the others ``hard`` / ``undimix`` above QT by seed."""
    rows = []
    for seed, qt in ((0, 0.60), (1, 0.62)):
        rows += [run("qt", seed, qt), run("debiased", seed, qt), run("hard-beta1", seed, qt + hard), run("hard-beta2", seed, qt + hard)]
        rows += [run("undimix", seed, qt + undimix)]
    return [*rows, run("untrained", 0, 0.5), run("word-embeddings", 0, 0.55)]


def test_the_paired_difference_is_per_seed() -> None:
    delta = difference(runs(0.01, 0.02), "hard-beta1", "MR")
    assert delta is not None and delta["mean"] == pytest.approx(1.0) and delta["n"] == 2


@pytest.mark.parametrize(
    ("hard", "verdict"),
    [(0.01, "holds here: a hard row is at or above QT, paired over the seeds both have, on 6 of the 6"), (-0.01, "does not hold")],
)
def test_hcls_claim_is_judged_task_by_task(hard: float, verdict: str) -> None:
    assert hcl_verdict(runs(hard, 0.0), TASKS).startswith(verdict)
    assert hcl_verdict(runs(hard, 0.0), TASKS[:2]).startswith("not judged on 2 tasks (it is over six); here: a hard row")


def test_undimixs_claim_needs_it_above_both_baselines_on_its_tasks() -> None:
    assert undimix_verdict(runs(0.01, 0.02), TASKS).startswith(
        "holds here: UnDiMix is above both QT and HCL, paired over the seeds they share, on 5 of its 5 tasks"
    )
    assert undimix_verdict(runs(0.03, 0.02), TASKS).startswith(
        "does not hold here: UnDiMix is above both QT and HCL, paired over the seeds they share, on 0"
    )


def test_the_page_shows_every_row_the_papers_number_and_replaces_only_its_generated_part() -> None:
    result = {
        "runs": runs(0.01, 0.02),
        "papers": PAPERS,
        "tasks": list(TASKS),
        "recipe": Recipe(epochs=1, folds=5).values(),
        "rows": sentence_rows(["sentences"]),
        "repeats": 2,
        "corpus": {"sentences": 900, "documents": 2, "tokens": 9000, "vocab_size": 5},
        "load_average": 1.5,
    }
    markdown = sentences_markdown(result)
    assert "| QT (ucl: beta 0, tau+ 0) | 2 | 61.0 [" in markdown and "paper 76.8" in markdown and "F1 " in markdown
    assert "| mean untrained word embeddings | 1 | 55.0 |" in markdown and "vs QT +1.0" in markdown
    assert "Adam lr 0.003, 1 pass (2 steps)" in markdown and "5 folds (SentEval's prototyping setting; 10 by default)" in markdown
    page = f"# Sentences\n\nintro\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    assert replace_generated(page, markdown) == f"# Sentences\n\nintro\n\n{BEGIN}\n\n{markdown}\n{END}\n\nafter\n"
    assert replace_generated("# Sentences\n", markdown) is None


def test_the_report_puts_each_task_beside_its_baselines() -> None:
    details = {
        "senteval": {
            "f1": 0.8,
            "baselines": {"untrained encoder": {"accuracy": 0.6, "f1": 0.7}, "mean word embeddings": {"accuracy": 0.65, "f1": 0.75}},
        }
    }
    metrics = EvaluationMetrics(top1=0.7, top5=1.0, test_size=10, params={}, details=details, inputs={})
    report = sentence_report("title", {"MRPC": metrics}, "runs/qt/encoder.safetensors")
    assert "| MRPC | 70.0 (F1 80.0) | 60.0 (F1 70.0) | 65.0 (F1 75.0) |" in report


def test_the_page_is_generated_from_the_committed_results_file() -> None:
    root = Path(__file__).resolve().parents[1]
    result = json.loads((root / "benchmarks" / "results" / "reproduce_sentences.json").read_text())
    page = (root / "docs" / "sentences.md").read_text()
    assert replace_generated(page, sentences_markdown(result)) == page, "run hcl table --page docs/sentences.md (docs/tables.md)"
    assert result["papers"] == papers() and result["complete"]
