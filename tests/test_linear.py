"""Linear readout: standardisation, determinism, and parity with scikit-learn's LogisticRegression on digits.

The scikit-learn baseline sees the same raw pixels with the same preprocessing as linear-eval
(StandardScaler fitted on the train split), at its defaults (C = 1, L-BFGS).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from hcl_cli.cli import main
from hcl_cli.embeddings import save_embeddings, topk_accuracy
from hcl_cli.linear import linear_readout, standardise

Digits = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@pytest.fixture(scope="module")
def digits() -> Digits:
    """scikit-learn's 8x8 digits as 64 raw pixel values, split 75/25 stratified."""
    pixels, labels = load_digits(return_X_y=True)
    train_x, test_x, train_y, test_y = train_test_split(pixels, labels, test_size=0.25, stratify=labels, random_state=0)
    return torch.tensor(train_x, dtype=torch.float32), torch.tensor(train_y), torch.tensor(test_x, dtype=torch.float32), torch.tensor(test_y)


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


def test_a_diverging_readout_is_a_one_line_error_without_metrics(digits_pixels_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_linear_eval(["--embeddings", digits_pixels_file, "--optimizer", "adam", "--lr", "1e30", "--epochs", "20"]) == 1
    assert capsys.readouterr().err == "hcl linear-eval: error: linear readout diverged to non-finite scores (adam, lr 1e+30); lower --lr or raise --weight-decay\n"
    assert not Path("linear.json").exists()
