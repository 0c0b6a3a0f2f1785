"""Graphs through the six stages: the real ``dvc repro`` on a tiny TU dataset, and the SVM protocol's stage.

A params.yaml for the tu dataset runs prepare, pretrain, embed, linear-eval (protocol svm),
knn-eval and report; switching the sampler reruns everything after prepare, and prepare stays
cached. The data is a synthetic TU-format dataset written by the test (no ../shared).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import copy_pipeline
from test_graph_step import write_toy_tu
from test_pipeline import ROOT, repro, run, set_params

from hcl_cli.cli import main

GRAPH_PARAMS = {
    "prepare": {"dataset": "tu", "name": "TOY", "path": "raw"},
    "pretrain": {"epochs": 1, "batch_size": 16, "sampler": "hucl"},
    "linear": {"protocol": "svm", "svm_folds": 3, "svm_inner_folds": 2, "svm_c_grid": "0.1,10"},
    "knn": {"k": 5},
    "report": {"anchors": 2},
}
STAGES = {"prepare", "pretrain", "embed", "linear-eval", "knn-eval", "report"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graph-pipeline")
    copy_pipeline(path)
    shutil.copy(ROOT / "params.yaml", path / "params.yaml")
    write_toy_tu(path / "raw")
    run(["git", "init", "-q"], path)
    run(["dvc", "init", "-q"], path)
    run(["dvc", "config", "core.analytics", "false"], path)
    set_params(path, GRAPH_PARAMS)
    return path


def test_dvc_repro_runs_every_stage_on_graphs(repo: Path) -> None:
    assert repro(repo) == STAGES
    card = json.loads((repo / "data" / "prepared" / "card.json").read_text())
    assert (card["modality"], card["name"], card["counts"]) == ("graph", "TOY", {"train": 30, "test": 10})
    linear = json.loads((repo / "metrics" / "linear.json").read_text())
    protocol = json.loads((repo / "metrics" / "linear.inputs.json").read_text())["params"]["protocol"]
    assert protocol == "svm" and linear["test_size"] == 40, "the SVM cross-validates over every graph"
    folds = linear["details"]["svm"]["fold_accuracies"][0]  # what the SVM protocol measured, beside top1
    assert len(folds) == 3 and linear["top1"] == pytest.approx(sum(folds) / 3)
    sidecar = json.loads((repo / "models" / "encoder.json").read_text())
    assert (sidecar["kind"], sidecar["arch"], sidecar["layers"], sidecar["hidden"]) == ("graph encoder", "gin", 3, 32)
    report = (repo / "reports" / "report.md").read_text()
    assert "`TOY`" in report and "gin (3 layers of 32, 96-d graph embedding)" in report
    assert "| SVM | trained |" in report and "none: summed node features" in report


def test_the_svm_metrics_are_deterministic_for_a_seed(repo: Path, tmp_path: Path) -> None:
    """On the self-supervised (hucl) run's embeddings, before the sampler switch below: the SVM cross-validates every graph."""
    embeddings = str(repo / "data" / "embeddings.safetensors")
    results = []
    for seed, name in ((0, "a"), (0, "b"), (1, "c")):
        out = tmp_path / f"{name}.json"
        args = ["linear-eval", "--protocol", "svm", "--svm-folds", "3", "--svm-inner-folds", "2", "--svm-repeats", "2"]
        with pytest.raises(SystemExit) as exit_code:
            main([*args, "--seed", str(seed), "--embeddings", embeddings, "--out", str(out)])
        assert exit_code.value.code in (0, None)
        results.append(json.loads(out.read_text()))
    assert results[0] == results[1]
    svm = [result["details"]["svm"] for result in results]
    assert svm[0]["fold_accuracies"] != svm[2]["fold_accuracies"], "another seed draws other folds"
    assert len(svm[0]["repeat_means"]) == 2


def test_switching_the_sampler_reruns_all_but_prepare(repo: Path) -> None:
    set_params(repo, {"pretrain": {"sampler": "scl"}})
    assert repro(repo) == STAGES - {"prepare"}
    report = (repo / "reports" / "report.md").read_text()
    assert "**yes**, inductive: `scl` reads the labels of the train split" in report, "the default protocol reads no test label"


def test_the_papers_protocol_and_an_image_objective_are_refused_on_graphs(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, model = str(repo / "data" / "prepared"), str(repo / "models" / "encoder.safetensors")
    for args, message in (
        (["linear-eval", "--protocol", "paper", "--optimizer", "adam", "--data", data, "--model", model], "--protocol paper reads"),
        (["pretrain", "--data", data, "--objective", "nce", "--out", "unused"], "--objective nce does not train on graphs"),
    ):
        with pytest.raises(SystemExit) as exit_code:
            main(args)
        error = capsys.readouterr().err
        assert exit_code.value.code == 2 and message in error and error.count("\n") == 1
