"""``hcl embed``: the contract's tensors, with the right shapes, values and sidecar."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hcl_cli.artifacts import load_artifact
from hcl_cli.config import EmbedConfig
from hcl_cli.embeddings import EMBEDDINGS_KIND, TENSOR_SPECS
from hcl_cli.errors import HclError
from hcl_cli.image.augment import build_eval_transform
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import load_encoder, save_encoder
from hcl_cli.image.networks import build_model
from hcl_cli.image.prepared import load_split
from hcl_cli.stages import embed

PROJECTION_DIM = 16


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    return prepared_digits(0.25)


@pytest.fixture(scope="module")
def encoder(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained small CNN saved as pretrain would save it (BatchNorm running statistics made non-trivial)."""
    torch.manual_seed(0)
    model = build_model("small_cnn", 1, 8, PROJECTION_DIM)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    card = load_card(digits)
    path = tmp_path_factory.mktemp("models") / "encoder.safetensors"
    save_encoder(
        path, model, {"config": {"sampler": "hucl"}, "epoch": 7, "seed": 0, "dataset": "digits", "mean": card.mean, "std": card.std}
    )
    return path


@pytest.fixture(scope="module")
def embeddings(digits: Path, encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("embeddings") / "embeddings.safetensors"
    embed.run(EmbedConfig(batch_size=100, data=str(digits), model=str(encoder), out=str(out), device="cpu"))
    return out


def test_embed_writes_the_contract_tensors(digits: Path, embeddings: Path) -> None:
    tensors, sidecar = load_artifact(embeddings, EMBEDDINGS_KIND, TENSOR_SPECS)
    card = load_card(digits)
    for split in ("train", "test"):
        _, labels = load_split(digits, split)
        assert tensors[f"{split}_backbone"].shape == (card.counts[split], 128)
        assert tensors[f"{split}_projection"].shape == (card.counts[split], PROJECTION_DIM)
        assert torch.equal(tensors[f"{split}_labels"], labels)
    assert sidecar["dataset"] == "digits" and sidecar["classes"] == card.classes
    assert sidecar["encoder"] == {"config": {"sampler": "hucl"}, "arch": "small_cnn", "epoch": 7, "inputs": {}}


def test_embed_uses_the_eval_transform_and_running_statistics(digits: Path, encoder: Path, embeddings: Path) -> None:
    """Batching does not change a row: each equals the frozen model applied to that image alone, in eval mode."""
    tensors, _ = load_artifact(embeddings, EMBEDDINGS_KIND, TENSOR_SPECS)
    model, sidecar = load_encoder(encoder)
    images, _ = load_split(digits, "test")
    with torch.no_grad():
        features, _, projections = model(build_eval_transform(sidecar.mean, sidecar.std)(images[150:151]))
    torch.testing.assert_close(tensors["test_backbone"][150:151], features)
    torch.testing.assert_close(tensors["test_projection"][150:151], projections)


def test_embed_refuses_an_encoder_trained_on_other_images(digits: Path, tmp_path: Path) -> None:
    other = tmp_path / "encoder.safetensors"
    save_encoder(
        other,
        build_model("small_cnn", 3, 16, PROJECTION_DIM),
        {"config": {}, "epoch": 1, "seed": 0, "dataset": "x", "mean": [0.5] * 3, "std": [0.2] * 3},
    )
    with pytest.raises(HclError, match=r"trained on 3x16x16 images, but .* holds 1x8x8"):
        embed.run(EmbedConfig(data=str(digits), model=str(other), out=str(tmp_path / "e.safetensors"), device="cpu"))
    assert not (tmp_path / "e.safetensors").exists()
