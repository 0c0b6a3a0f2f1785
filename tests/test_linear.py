"""Linear readout: standardisation, determinism, and parity with scikit-learn's LogisticRegression on digits;
the papers' protocol (Adam on augmented views through the frozen encoder): deterministic for a seed, and
trained on augmented views.

The scikit-learn baseline sees the same raw pixels with the same preprocessing as linear-eval
(StandardScaler fitted on the train split), at its defaults (C = 1, L-BFGS).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from hcl_cli import linear
from hcl_cli.cli import main
from hcl_cli.embeddings import save_embeddings
from hcl_cli.image.augment import build_augmentation, build_eval_transform
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import save_encoder
from hcl_cli.image.networks import ContrastiveModel, build_model
from hcl_cli.image.prepared import load_split
from hcl_cli.linear import augmented_readout, linear_readout, standardise
from hcl_cli.metrics import load_metrics, topk_accuracy

Digits = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@pytest.fixture(scope="module")
def digits() -> Digits:
    """scikit-learn's 8x8 digits as 64 raw pixel values, split 75/25 stratified."""
    pixels, labels = load_digits(return_X_y=True)
    train_x, test_x, train_y, test_y = train_test_split(pixels, labels, test_size=0.25, stratify=labels, random_state=0)
    return (
        torch.tensor(train_x, dtype=torch.float32),
        torch.tensor(train_y),
        torch.tensor(test_x, dtype=torch.float32),
        torch.tensor(test_y),
    )


def test_standardise_uses_train_statistics_and_leaves_constant_features_finite() -> None:
    train = torch.tensor([[1.0, 5.0], [3.0, 5.0]])
    train_std, test_std = standardise(train, torch.tensor([[5.0, 6.0]]))
    assert torch.equal(train_std, torch.tensor([[-1.0, 0.0], [1.0, 0.0]]))
    assert torch.equal(test_std, torch.tensor([[3.0, 1.0]]))


@pytest.mark.parametrize(("optimizer", "lr"), [("lbfgs", 1.0), ("adam", 0.05)])
def test_readout_of_digits_embeddings_is_deterministic(digits: Digits, optimizer: str, lr: float) -> None:
    train_x, train_y, test_x, test_y = digits
    projection = torch.randn(64, 32, generator=torch.Generator().manual_seed(1)) / 8
    train_embeddings, test_embeddings = torch.tanh(train_x / 16 @ projection), torch.tanh(test_x / 16 @ projection)
    options = {"optimizer": optimizer, "epochs": 30, "lr": lr, "weight_decay": 1e-3, "seed": 0}
    first = linear_readout(train_embeddings, train_y, test_embeddings, 10, **options)
    torch.manual_seed(123)  # the readout must not depend on the global RNG state
    second = linear_readout(train_embeddings, train_y, test_embeddings, 10, **options)
    assert torch.equal(first, second)
    assert topk_accuracy(first, test_y)[1] > 0.85


@pytest.fixture
def digits_pixels_file(digits: Digits, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The digits' raw pixels written as an embeddings file (both features), in a fresh working folder."""
    train_x, train_y, test_x, test_y = digits
    monkeypatch.chdir(tmp_path)
    tensors = {"train_labels": train_y, "test_labels": test_y}
    for feature in ("backbone", "projection"):
        tensors |= {f"train_{feature}": train_x.clone(), f"test_{feature}": test_x.clone()}
    save_embeddings("pixels.safetensors", tensors, {"dataset": "digits", "classes": [str(d) for d in range(10)], "encoder": None})
    return "pixels.safetensors"


def run_linear_eval(options: list[str]) -> int:
    """``hcl linear-eval OPTIONS`` in-process; its exit code."""
    with pytest.raises(SystemExit) as exited:
        main(["linear-eval", "--out", "linear.json", "--device", "cpu", *options])
    return exited.value.code


def test_linear_eval_at_default_params_on_raw_digits_pixels_reaches_scikit_learn(digits: Digits, digits_pixels_file: str) -> None:
    train_x, train_y, test_x, test_y = (t.numpy() for t in digits)
    assert run_linear_eval(["--embeddings", digits_pixels_file]) == 0
    top1 = json.loads(Path("linear.json").read_text())["top1"]
    baseline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(train_x, train_y).score(test_x, test_y)
    assert top1 >= baseline - 0.01


def test_a_diverging_readout_is_a_one_line_error_without_metrics(
    digits_pixels_file: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fit = linear.fit_linear_classifier

    def diverged(*args: object, **kwargs: object) -> torch.nn.Linear:
        classifier = fit(*args, **kwargs)
        with torch.no_grad():
            classifier.weight.fill_(float("inf"))
        return classifier

    monkeypatch.setattr(linear, "fit_linear_classifier", diverged)
    assert run_linear_eval(["--embeddings", digits_pixels_file, "--optimizer", "adam", "--lr", "100", "--epochs", "2"]) == 1
    assert (
        capsys.readouterr().err
        == "hcl linear-eval: error: linear readout diverged to non-finite scores (adam, lr 100.0); lower --lr or raise --weight-decay\n"
    )
    assert not Path("linear.json").exists()


# --- The papers' protocol: Adam on augmented views through the frozen encoder ---------------------------


@pytest.fixture(scope="module")
def small_encoder() -> ContrastiveModel:
    """An untrained small CNN for 8x8 digits, in eval mode: its features are fixed but not trivial."""
    torch.manual_seed(0)
    return build_model("small_cnn", 1, 8, 16).eval()


def paper_readout(
    model: ContrastiveModel, augment: torch.nn.Module, transform: torch.nn.Module, prepared: Path, **options: int
) -> torch.Tensor:
    """Test scores of the papers' protocol on prepared digits, three short epochs."""
    images, labels = load_split(prepared, "train")
    test_images, _ = load_split(prepared, "test")
    return augmented_readout(
        lambda views: model(views)[0],
        augment,
        transform,
        (images, labels),
        test_images,
        10,
        feature_dim=model.feature_dim,
        epochs=3,
        batch_size=256,
        lr=1e-2,
        weight_decay=1e-6,
        **{"seed": 0, **options},
    )


def test_paper_protocol_is_deterministic_for_a_seed_and_trains_on_augmented_views(
    small_encoder: ContrastiveModel, prepared_digits: Callable[[float], Path], one_thread: None
) -> None:
    prepared = prepared_digits(0.25)
    card = load_card(prepared)
    augment = build_augmentation(8, 1, card.mean, card.std, blur=False, recipe="digits")
    transform = build_eval_transform(card.mean, card.std)
    first = paper_readout(small_encoder, augment, transform, prepared)
    torch.manual_seed(123)  # the readout must not depend on the global RNG state
    assert torch.equal(first, paper_readout(small_encoder, augment, transform, prepared))
    assert torch.equal(
        paper_readout(small_encoder, augment, transform, prepared, augment_seed=1),
        paper_readout(small_encoder, augment, transform, prepared, augment_seed=1),
    )
    assert not torch.equal(
        paper_readout(small_encoder, augment, transform, prepared, augment_seed=1),
        paper_readout(small_encoder, augment, transform, prepared, augment_seed=2),
    )
    # Without augmentation the augmentation seed changes nothing: the difference above is the views'.
    assert torch.equal(
        paper_readout(small_encoder, transform, transform, prepared, augment_seed=1),
        paper_readout(small_encoder, transform, transform, prepared, augment_seed=2),
    )
    assert not torch.equal(first, paper_readout(small_encoder, transform, transform, prepared))
    assert not torch.equal(first, paper_readout(small_encoder, augment, transform, prepared, seed=1))


def test_linear_eval_paper_protocol_reads_the_encoder_and_the_data(
    small_encoder: ContrastiveModel,
    prepared_digits: Callable[[float], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    prepared = prepared_digits(0.25)
    card = load_card(prepared)
    save_encoder(tmp_path / "encoder.safetensors", small_encoder, {"mean": card.mean, "std": card.std, "config": {"blur": True}})
    monkeypatch.chdir(tmp_path)
    paper = ["--protocol", "paper", "--optimizer", "adam", "--lr", "0.01", "--epochs", "2", "--batch-size", "256"]
    inputs = ["--model", "encoder.safetensors", "--data", str(prepared), "--embeddings", "absent.safetensors"]
    results = []
    for _ in range(2):
        assert run_linear_eval([*paper, *inputs]) == 0
        results.append(json.loads(Path("linear.json").read_text()))
    assert results[0] == results[1]
    metrics = load_metrics("linear.json", "linear-eval")
    assert (metrics.params["protocol"], metrics.params["batch_size"], metrics.details) == (
        "paper",
        256,
        {"augmentation": {"recipe": "digits", "blur": False}},
    )
    assert metrics.test_size == card.counts["test"]


def test_paper_protocol_needs_adam(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_linear_eval(["--protocol", "paper"]) == 2
    assert (
        capsys.readouterr().err
        == "hcl linear-eval: error: linear protocol paper trains by minibatch Adam: set optimizer adam (--optimizer adam)\n"
    )
