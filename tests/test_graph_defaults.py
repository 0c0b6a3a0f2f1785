"""Graphs get their own defaults where the papers' graph setup differs (HCL App. D.2: 200 epochs, batch 128; kNN k 20),
declared once on the options (``Option.modality_defaults``) and taken only for values given neither on the command
line nor in the params file; a batch larger than the graphs is a usage error, as for images."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_graph_step import write_toy_tu

from hcl_cli.cli import main
from hcl_cli.config import KnnConfig, PretrainConfig


def hcl(*args: str) -> int:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return exited.value.code or 0


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("defaults")
    assert (
        hcl("prepare", "--dataset", "tu", "--name", "TOY", "--path", str(write_toy_tu(root / "raw")), "--out", str(root / "prepared")) == 0
    )
    return root / "prepared"


def test_a_value_not_given_takes_the_graph_default_and_a_given_one_stays() -> None:
    assert (PretrainConfig().epochs, PretrainConfig().batch_size, KnnConfig().k) == (60, 256, 200), "images keep theirs"
    graph = PretrainConfig().for_modality("graph")
    assert (graph.epochs, graph.batch_size, KnnConfig().for_modality("graph").k) == (200, 128, 20)
    assert PretrainConfig(epochs=60, sampler="ucl").for_modality("graph").epochs == 60, "a value given, even the image default, stays"
    from_file = PretrainConfig.from_sources({"batch_size": 256}, {"batch_size": "params.yaml: pretrain.batch_size"})
    assert (from_file.for_modality("graph").batch_size, from_file.for_modality("graph").epochs) == (256, 200)
    assert PretrainConfig().for_modality("image") == PretrainConfig()


def test_every_modality_default_passes_its_options_checks() -> None:
    for config_cls in (KnnConfig, PretrainConfig):
        for option in config_cls.declared_options():
            for modality, value in option.modality_defaults:
                assert option.check(value) == value and option.modality in (None, modality), option.name


def test_a_batch_larger_than_the_graphs_is_a_usage_error(prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = hcl("pretrain", "--data", str(prepared), "--out", str(tmp_path / "models"), "--live-dir", str(tmp_path / "live"))
    error = capsys.readouterr().err
    assert code == 2 and "--batch-size 128 is larger than the 40 training graphs" in error and error.count("\n") == 1
    assert not (tmp_path / "models" / "encoder.safetensors").exists()


def test_a_hand_run_on_graphs_trains_and_reads_out_with_the_graph_defaults(
    prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models, embeddings, knn = tmp_path / "models", tmp_path / "embeddings.safetensors", tmp_path / "knn.json"
    args = ("--data", str(prepared), "--out", str(models), "--live-dir", str(tmp_path / "live"), "--batch-size", "16", "--max-steps", "1")
    assert hcl("pretrain", *args) == 0
    err = capsys.readouterr().err
    assert "200 epochs of 3 steps of 16" in err
    assert err.count("a negative loss is learning, not an error") == 1, "a graph run says once why its loss goes below 0 (issue 54)"
    assert json.loads((models / "encoder.json").read_text())["config"]["epochs"] == 200
    assert hcl("embed", "--data", str(prepared), "--model", str(models / "encoder.safetensors"), "--out", str(embeddings)) == 0
    assert hcl("knn-eval", "--embeddings", str(embeddings), "--out", str(knn)) == 0
    assert json.loads(knn.with_name("knn.inputs.json").read_text())["params"]["k"] == 20, "k 200 would be larger than the 30 train graphs"
