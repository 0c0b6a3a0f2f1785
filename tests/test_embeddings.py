"""The embeddings artifact, the knn-eval / linear-eval commands that read it, and their metrics artifact.

Covers the round trips, each inconsistent file refused with one line, and each bad input reaching the
user through ``hcl`` as one line with the right exit code, no traceback and no metrics file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hcl_cli.artifacts import save_artifact
from hcl_cli.cli import main
from hcl_cli.config import KnnConfig, LinearConfig
from hcl_cli.embeddings import EMBEDDINGS_KIND, load_embeddings, save_embeddings
from hcl_cli.errors import HclError, UsageError
from hcl_cli.metrics import EvaluationMetrics, load_metrics, save_metrics, topk_accuracy

CLASSES = ["zero", "one", "two"]
Corruption = Callable[[dict[str, torch.Tensor]], None]
META = {"dataset": "toy", "classes": CLASSES, "encoder": {"arch": "small_cnn", "epoch": 1, "config": {}}}


def toy_embeddings(train: int = 40, test: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three well-separated clusters in 16 backbone and 8 projection dimensions."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for split, count in (("train", train), ("test", test)):
        labels = torch.arange(count) % len(CLASSES)
        tensors[f"{split}_labels"] = labels
        for feature, dim in (("backbone", 16), ("projection", 8)):
            centres = torch.eye(len(CLASSES), dim) * 4
            tensors[f"{split}_{feature}"] = centres[labels] + torch.randn(count, dim, generator=generator)
    return tensors


def test_round_trip_returns_the_feature_asked_for(tmp_path: Path) -> None:
    tensors = toy_embeddings()
    save_embeddings(tmp_path / "e.safetensors", tensors, META)
    data = load_embeddings(tmp_path / "e.safetensors", "projection")
    assert data.feature == "projection" and data.classes == CLASSES and data.num_classes == 3
    assert torch.equal(data.train_x, tensors["train_projection"]) and torch.equal(data.test_y, tensors["test_labels"])


def test_save_refuses_embeddings_and_labels_of_different_lengths(tmp_path: Path) -> None:
    tensors = toy_embeddings()
    tensors["test_labels"] = tensors["test_labels"][:-1]
    with pytest.raises(HclError, match="test_backbone holds 12 embeddings but test_labels holds 11 labels"):
        save_embeddings(tmp_path / "e.safetensors", tensors, META)
    assert not (tmp_path / "e.safetensors").exists()


def _shorter_train_labels(tensors: dict[str, torch.Tensor]) -> None:
    tensors["train_labels"] = tensors["train_labels"][:-3]


def _wider_test_backbone(tensors: dict[str, torch.Tensor]) -> None:
    tensors["test_backbone"] = torch.randn(12, 17)


def _unlabelled_train(tensors: dict[str, torch.Tensor]) -> None:
    tensors["train_labels"] = torch.full_like(tensors["train_labels"], -1)


def _missing_test_labels(tensors: dict[str, torch.Tensor]) -> None:
    del tensors["test_labels"]


def _unknown_class(tensors: dict[str, torch.Tensor]) -> None:
    tensors["test_labels"][0] = 3


def _nan_embedding(tensors: dict[str, torch.Tensor]) -> None:
    tensors["train_backbone"][5, 2] = float("nan")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (_shorter_train_labels, "train_backbone holds 40 embeddings but train_labels holds 37 labels"),
        (_wider_test_backbone, "train_backbone has dimension 16 but test_backbone has 17"),
        (_unlabelled_train, "train_labels holds -1 .unlabelled images."),
        (_missing_test_labels, "missing tensor 'test_labels'"),
        (_unknown_class, "test_labels holds label 3, but the sidecar lists 3 classes"),
        (_nan_embedding, "train_backbone holds NaN or infinite values"),
    ],
)
def test_load_refuses_inconsistent_files_with_one_line(tmp_path: Path, corrupt: Corruption, message: str) -> None:
    tensors = toy_embeddings()
    corrupt(tensors)
    save_artifact(tmp_path / "e.safetensors", tensors, EMBEDDINGS_KIND, META)
    with pytest.raises(HclError, match=message) as caught:
        load_embeddings(tmp_path / "e.safetensors", "backbone")
    assert "\n" not in str(caught.value) and str(tmp_path / "e.safetensors") in str(caught.value)


def test_load_refuses_an_unknown_feature(tmp_path: Path) -> None:
    save_embeddings(tmp_path / "e.safetensors", toy_embeddings(), META)
    with pytest.raises(UsageError, match="--feature 'pixels' is unknown"):
        load_embeddings(tmp_path / "e.safetensors", "pixels")


def test_topk_accuracy_counts_the_label_among_the_k_best() -> None:
    scores = torch.tensor([[0.9, 0.1, 0.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]])
    labels = torch.tensor([0, 0, 5])
    assert topk_accuracy(scores, labels, ks=(1, 5, 6)) == pytest.approx({1: 1 / 3, 5: 1 / 3, 6: 1.0})
    assert topk_accuracy(scores[:, :3], torch.tensor([0, 0, 2]), ks=(1, 5)) == pytest.approx({1: 1 / 3, 5: 1.0})


def run_hcl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``hcl ARGS`` in-process; return its exit code and stderr."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "options", "param", "value"),
    [("knn-eval", ["--k", "10"], "k", 10), ("linear-eval", ["--optimizer", "adam", "--lr", "0.1"], "optimizer", "adam")],
)
def test_commands_write_top1_top5_and_their_params(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    options: list[str],
    param: str,
    value: object,
) -> None:
    monkeypatch.chdir(tmp_path)
    save_embeddings("e.safetensors", toy_embeddings(), META)
    code, err = run_hcl(
        [command, "--embeddings", "e.safetensors", "--out", "m.json", "--feature", "projection", "--device", "cpu", *options], capsys
    )
    assert code == 0, err
    metrics, recorded = json.loads(Path("m.json").read_text()), json.loads(Path("m.inputs.json").read_text())
    assert metrics == {"top1": 1.0, "top5": 1.0, "test_size": 12}, "the metrics file holds what was measured, nothing else"
    assert recorded["params"]["feature"] == "projection" and recorded["params"][param] == value


def test_knn_eval_records_the_test_size_through_the_metrics_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    save_embeddings("e.safetensors", toy_embeddings(test=13), META)
    code, err = run_hcl(["knn-eval", "--embeddings", "e.safetensors", "--out", "m.json", "--k", "10", "--device", "cpu"], capsys)
    assert code == 0, err
    metrics = load_metrics("m.json", "knn-eval")
    scored = {"embeddings": json.loads(Path("e.json").read_text())["sha256"]}
    assert metrics == EvaluationMetrics(1.0, 1.0, 13, KnnConfig(k=10).params(), inputs=scored)
    assert metrics.feature == "backbone"


def test_metrics_round_trip_keeps_the_measurement_apart_from_its_params_and_inputs(tmp_path: Path) -> None:
    details = {"augmentation": {"recipe": "digits", "blur": False}}
    inputs = {"embeddings": "ab" * 32}
    written = EvaluationMetrics(0.5, 0.75, 8, LinearConfig(epochs=3).params(), details, inputs)
    save_metrics(tmp_path / "linear.json", written, "linear-eval")
    assert load_metrics(tmp_path / "linear.json", "linear-eval") == written
    stored = (tmp_path / "linear.json").read_text()
    assert json.loads(stored) == {"top1": 0.5, "top5": 0.75, "test_size": 8, "details": details}, (
        "what was measured, flat, as dvc metrics and hcl compare read them; no parameter, no hash"
    )
    assert json.loads((tmp_path / "linear.inputs.json").read_text()) == {
        "metrics_sha256": hashlib.sha256(stored.encode()).hexdigest(),
        "params": LinearConfig(epochs=3).params(),
        "inputs": inputs,
    }, "the sidecar DVC does not tabulate: the metrics file it belongs to, the parameters and the inputs"


def write_metrics(path: Path, values: dict[str, object], params: dict[str, object]) -> None:
    """A metrics file and its sidecar as hcl writes them, from ``values`` and ``params`` given by hand."""
    path.write_text(json.dumps(values))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.with_name(path.stem + ".inputs.json").write_text(json.dumps({"metrics_sha256": digest, "params": params, "inputs": {}}))


def test_a_metrics_file_reads_without_the_stage_declarations(tmp_path: Path) -> None:
    """The sidecar describes the parameters: one no stage declares is a parameter, a file without details has none."""
    path = tmp_path / "knn.json"
    write_metrics(path, {"top1": 0.5, "top5": 0.75, "test_size": 8}, {"k": 3, "retired_option": None})
    assert load_metrics(path, "knn-eval") == EvaluationMetrics(0.5, 0.75, 8, {"k": 3, "retired_option": None})


def test_a_metrics_file_without_its_sidecar_or_with_another_one_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "knn.json"
    write_metrics(path, {"top1": 0.5, "top5": 0.75, "test_size": 8}, KnnConfig().params())
    path.write_text(json.dumps({"top1": 0.25, "top5": 0.75, "test_size": 8}))
    sidecar = re.escape(str(tmp_path / "knn.inputs.json"))
    with pytest.raises(
        HclError, match=f"^{sidecar} belongs to another {re.escape(str(path))} \\(its sha256 differs\\): run hcl knn-eval again$"
    ):
        load_metrics(path, "knn-eval")
    (tmp_path / "knn.inputs.json").unlink()
    with pytest.raises(HclError, match=f"^{sidecar} not found \\(what {re.escape(str(path))} was measured from and with\\)"):
        load_metrics(path, "knn-eval")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"top1": None}, r"'top1' must be a number in \[0, 1\] \(got None\)"),
        ({"top5": 1.5}, r"'top5' must be a number in \[0, 1\] \(got 1\.5\)"),
        ({"top1": 0.9, "top5": 0.8}, r"'top5' \(0\.8\) is below 'top1' \(0\.9\)"),
        ({"test_size": None}, r"'test_size' must be a positive integer \(got None\): run hcl knn-eval again"),
        ({"test_size": 0}, r"'test_size' must be a positive integer \(got 0\)"),
        ({"test_size": True}, r"'test_size' must be a positive integer \(got True\)"),
        ({"details": [1]}, r"'details' must be an object \(got list\): run hcl knn-eval again"),
    ],
)
def test_a_bad_metrics_file_is_one_line_naming_the_file_and_the_field(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    values = {"top1": 0.5, "top5": 0.75, "test_size": 8} | changes
    path = tmp_path / "knn.json"
    write_metrics(path, {key: value for key, value in values.items() if value is not None}, KnnConfig().params())
    with pytest.raises(HclError, match=f"^{re.escape(str(path))}: {message}") as raised:
        load_metrics(path, "knn-eval")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"augmentation": {"blur": True}}, r"parameter 'augmentation' must be a string, number, boolean or null \(got \{'blur': True\}\)"),
        ({"k": float("nan")}, r"parameter 'k' must be a string, number, boolean or null \(got nan\): run hcl knn-eval again"),
    ],
)
def test_a_bad_parameter_in_the_sidecar_is_one_line_naming_the_sidecar_and_the_field(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    path = tmp_path / "knn.json"
    write_metrics(path, {"top1": 0.5, "top5": 0.75, "test_size": 8}, KnnConfig().params() | changes)
    with pytest.raises(HclError, match=f"^{re.escape(str(tmp_path / 'knn.inputs.json'))}: {message}") as raised:
        load_metrics(path, "knn-eval")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("command", "corrupt", "extra", "exit_code", "message"),
    [
        ("knn-eval", _shorter_train_labels, [], 2, "train_labels holds 37 labels"),
        ("linear-eval", _shorter_train_labels, [], 2, "train_labels holds 37 labels"),
        ("knn-eval", None, ["--feature", "pixels"], 2, "--feature must be one of backbone, projection"),
        ("linear-eval", None, ["--feature", "pixels"], 2, "--feature must be one of backbone, projection"),
        ("knn-eval", _unlabelled_train, [], 2, "kNN and linear evaluation need labelled train embeddings"),
        ("linear-eval", _unlabelled_train, [], 2, "kNN and linear evaluation need labelled train embeddings"),
        ("knn-eval", None, ["--k", "41"], 2, "--k 41 is larger than the bank of 40 train embeddings"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_and_no_metrics(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    corrupt: Corruption | None,
    extra: list[str],
    exit_code: int,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    tensors = toy_embeddings()
    if corrupt is not None:
        corrupt(tensors)
    save_artifact("e.safetensors", tensors, EMBEDDINGS_KIND, META)
    code, err = run_hcl([command, "--embeddings", "e.safetensors", "--out", "m.json", "--device", "cpu", *extra], capsys)
    assert code == exit_code
    assert err.startswith(f"hcl {command}: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not Path("m.json").exists()
