"""label_protocol on graphs (docs/protocol-graphs.md): under the inductive protocol no test graph's label reaches
pretraining and the SVM scores the test graphs alone; a transductive run says, in its report, that the encoder saw the
test labels."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from test_graph_report import hcl
from test_graph_step import write_toy_tu

from hcl_cli.config.pretrain import PretrainConfig, label_protocol_of
from hcl_cli.graph.data import load_prepared_graphs, save_prepared_graphs
from hcl_cli.graph.modality import GRAPHS
from hcl_cli.graph.prepared import load_split_indices

TRANSDUCTIVE = "transductive: the encoder saw the test labels"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A toy TU dataset prepared (30 train, 10 test graphs), and a copy whose test graphs' labels are permuted."""
    root = tmp_path_factory.mktemp("label-protocol")
    prepared, permuted = root / "prepared", root / "permuted"
    hcl("prepare", "--dataset", "tu", "--name", "TOY", "--path", str(write_toy_tu(root / "raw")), "--out", str(prepared))
    shutil.copytree(prepared, permuted)
    dataset, card = load_prepared_graphs(permuted)
    test = load_split_indices(permuted, card)["test"]
    labels = dataset.labels.clone()
    labels[test] = labels[test].roll(1)
    assert not torch.equal(labels, dataset.labels) and labels.bincount().tolist() == dataset.labels.bincount().tolist()
    save_prepared_graphs(permuted, dataclasses.replace(dataset, labels=labels), card)
    return prepared, permuted


def pretrained(data: Path, out: Path, *options: str) -> dict[str, torch.Tensor]:
    """The state of an scl encoder of 2 epochs pretrained on ``data`` with ``options``."""
    hcl(
        "pretrain",
        "--data",
        str(data),
        "--out",
        str(out),
        "--live-dir",
        str(out / "live"),
        "--sampler",
        "scl",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        *options,
    )
    model, _ = GRAPHS.load_encoder(out / "encoder.safetensors")
    return model.state_dict()


def same(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(first[name], second[name]) for name in first)


def test_inductive_pretraining_reads_no_test_label_and_transductive_reads_them(folders: tuple[Path, Path], tmp_path: Path) -> None:
    prepared, permuted = folders
    inductive = pretrained(prepared, tmp_path / "inductive")
    assert same(inductive, pretrained(permuted, tmp_path / "inductive-permuted")), "a test graph's label reached pretraining"
    transductive = pretrained(prepared, tmp_path / "transductive", "--label-protocol", "transductive")
    assert not same(transductive, pretrained(permuted, tmp_path / "transductive-permuted", "--label-protocol", "transductive"))
    assert not same(inductive, transductive), "the transductive run also trains on the test graphs"


def report_of(prepared: Path, root: Path, *options: str) -> tuple[str, dict]:
    """An scl run on ``prepared`` read out by the SVM protocol, its report and its linear metrics."""
    models, embeddings, metrics = root / "models", root / "embeddings.safetensors", root / "metrics"
    pretrained(prepared, models, *options)
    hcl("embed", "--data", str(prepared), "--model", str(models / "encoder.safetensors"), "--out", str(embeddings))
    hcl("knn-eval", "--embeddings", str(embeddings), "--out", str(metrics / "knn.json"), "--k", "5")
    svm = ("--protocol", "svm", "--svm-folds", "3", "--svm-inner-folds", "2", "--svm-c-grid", "0.1,10")
    hcl("linear-eval", *svm, "--embeddings", str(embeddings), "--out", str(metrics / "linear.json"))
    out = root / "report.md"
    hcl(
        "report",
        *("--metrics", str(metrics), "--plots", str(models / "live"), "--embeddings", str(embeddings), "--data", str(prepared)),
        *("--model", str(models / "encoder.safetensors"), "--out", str(out), "--params-file", "", "--anchors", "2"),
    )
    return out.read_text(), json.loads((metrics / "linear.json").read_text())


def test_the_report_says_a_transductive_run_saw_the_test_labels_and_an_inductive_svm_scores_the_test_graphs(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    prepared, _ = folders
    report, linear = report_of(prepared, tmp_path / "transductive", "--label-protocol", "transductive")
    assert f"**yes, {TRANSDUCTIVE}**" in report and f"held-out fold ({TRANSDUCTIVE})" in report
    assert linear["test_size"] == 40 and linear["details"]["svm"]["label_protocol"] == "transductive"
    assert "the papers' protocol" not in report.replace("(the graph papers' protocol, HCL App. D.2", "")

    report, linear = report_of(prepared, tmp_path / "inductive")
    assert TRANSDUCTIVE not in report and "**yes**, inductive" in report and "SVM** (inductive" in report
    assert linear["test_size"] == 10 and linear["details"]["svm"]["label_protocol"] == "inductive", "the test graphs alone"
    (baseline,) = [line for line in report.splitlines() if line.startswith("| SVM (baseline) |")]
    assert baseline.split(" | ")[3] == "10", "the untrained encoder is read out as the trained one: on the test graphs"


def test_the_protocol_is_read_only_where_labels_are_and_an_encoder_from_before_it_was_transductive() -> None:
    assert label_protocol_of({"sampler": "scl"}) == "transductive", "recorded before label_protocol: it read every graph"
    assert label_protocol_of({"sampler": "hscl", "label_protocol": "inductive"}) == "inductive"
    assert label_protocol_of({"sampler": "hucl", "positives": "labels", "label_protocol": "transductive"}) == "transductive"
    assert label_protocol_of({"sampler": "ucl", "label_protocol": "transductive"}) is None
    assert PretrainConfig(sampler="ucl", label_protocol="transductive").ignored_changes() == [
        "label_protocol = 'transductive' is not read: the ucl sampler reads no label"
    ]
    assert PretrainConfig(sampler="scl", label_protocol="transductive").ignored_changes() == []
    assert GRAPHS.training_splits(None, True) == ["train"] and GRAPHS.training_splits(None, True, True) == ["train", "test"]
    assert GRAPHS.training_splits(None, False) == ["train", "test"], "a self-supervised run reads every graph, unlabelled"
