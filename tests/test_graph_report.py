"""The report of a graph run says graphs, not images: its captions, the similarity figure's pairs (every distinct pair of
a small test split, not 100,000 pairs resampled from it), and an SVM row for the untrained encoder when the run's
readout is the papers' SVM protocol."""

from __future__ import annotations

import re

import pytest
from test_graph_step import write_toy_tu

from hcl_cli.cli import main


def hcl(*args: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code in (0, None), args


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A hand run on a toy TU dataset of 40 graphs (10 test graphs), read out with the SVM protocol, and its report."""
    root = tmp_path_factory.mktemp("graph-report")
    prepared, models, embeddings, metrics = root / "prepared", root / "models", root / "embeddings.safetensors", root / "metrics"
    hcl("prepare", "--dataset", "tu", "--name", "TOY", "--path", str(write_toy_tu(root / "raw")), "--out", str(prepared))
    live = str(root / "dvclive" / "pretrain")
    hcl(
        "pretrain",
        "--data",
        str(prepared),
        "--out",
        str(models),
        "--live-dir",
        live,
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--eval-every",
        "1",
    )
    hcl("embed", "--data", str(prepared), "--model", str(models / "encoder.safetensors"), "--out", str(embeddings))
    hcl("knn-eval", "--embeddings", str(embeddings), "--out", str(metrics / "knn.json"), "--k", "5")
    svm = ("--protocol", "svm", "--svm-folds", "3", "--svm-inner-folds", "2", "--svm-c-grid", "0.1,10")
    hcl("linear-eval", *svm, "--embeddings", str(embeddings), "--out", str(metrics / "linear.json"))
    out = root / "reports" / "report.md"
    hcl(
        "report",
        *("--metrics", str(metrics), "--plots", str(root / "dvclive"), "--embeddings", str(embeddings), "--data", str(prepared)),
        *("--model", str(models / "encoder.safetensors"), "--out", str(out), "--params-file", "", "--anchors", "2"),
    )
    return out.read_text()


def test_the_untrained_encoder_gets_an_svm_row_read_out_as_the_trained_one(report: str) -> None:
    (row,) = [line for line in report.splitlines() if line.startswith("| SVM (baseline) |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "untrained gin (seed 0)" and cells[3] == "40", "every graph, train and test together"
    assert "(std over 1 x 3 folds)" in cells[5], "the fold spread, not a Wilson interval"
    assert "also read out by the SVM protocol below" in report


def test_the_captions_say_graphs_and_the_similarity_figure_uses_every_distinct_pair(report: str) -> None:
    assert "test images" not in report and "held-out labelled test graphs" in report
    assert "every distinct pair of the 10 test graphs" in report
    counts = re.search(r"every distinct pair of the 10 test graphs, (\d+) with the same label and (\d+) with different labels", report)
    assert counts is not None and int(counts[1]) + int(counts[2]) == 10 * 9 // 2


def test_two_classes_get_no_top5_and_a_run_that_misses_a_baseline_says_so(report: str) -> None:
    """Issue 39 item 6: on a 2-class dataset top-5 is 1 by construction, so it is not shown; a trained encoder that does
    not beat a baseline beyond the spread gets a sentence naming each one it misses (two epochs on 40 toy graphs)."""
    assert "| Top-5 |" not in report and "top-5 is not shown: with 2 classes it is 1 by construction" in report
    table = [line for line in report.splitlines() if line.startswith("| SVM")]
    assert all(line.count("|") == 8 for line in table), "seven cells: no top-5 ones"
    trained, untrained = (float(line.split("|")[5]) for line in table)
    if trained - untrained < 0.2:  # within the fold spread or below
        assert "**The trained encoder does not beat every baseline**" in report
        assert f"SVM top-1 {trained:.4f} is " in report and f"untrained gin (seed 0)'s {untrained:.4f}" in report


def test_the_verdict_names_only_the_baselines_the_encoder_misses() -> None:
    from hcl_cli.metrics import EvaluationMetrics
    from hcl_cli.report.markdown import MetricRow, baseline_verdict

    def row(evaluation: str, encoder: str, top1: float) -> MetricRow:
        return MetricRow(evaluation, encoder, EvaluationMetrics(top1=top1, top5=1.0, test_size=1000, params={"feature": "backbone"}), "")

    beaten = [row("kNN", "trained", 0.90), row("kNN (baseline)", "untrained gin (seed 0)", 0.60)]
    assert baseline_verdict(beaten) == ""
    missed = [*beaten, row("kNN (baseline)", "none: summed node features", 0.91)]
    assert baseline_verdict(missed).endswith("kNN top-1 0.9000 is below none: summed node features's 0.9100.")
    close = [row("kNN", "trained", 0.90), row("kNN (baseline)", "untrained gin (seed 0)", 0.895)]
    assert "is within the spread of untrained gin (seed 0)'s 0.8950" in baseline_verdict(close)
