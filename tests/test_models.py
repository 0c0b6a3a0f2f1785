"""Encoders, the HCL projection head, and the encoder artifact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from hcl_cli.errors import HclError, UsageError
from hcl_cli.image.encoder import load_encoder, save_encoder
from hcl_cli.image.networks import ContrastiveModel, ProjectionHead, build_model, resolve_arch

META = {"mean": [0.3], "std": [0.4], "config": {"sampler": "hucl", "beta": 1.0}, "epoch": 3, "seed": 7, "dataset": "digits"}


@pytest.mark.parametrize(
    ("arch", "size", "expected"),
    [
        ("auto", 8, "small_cnn"),
        ("auto", 16, "small_cnn"),
        ("auto", 32, "resnet18"),
        ("resnet50", 8, "resnet50"),
        ("small_cnn", 96, "small_cnn"),
    ],
)
def test_resolve_arch(arch: str, size: int, expected: str) -> None:
    assert resolve_arch(arch, size) == expected


def test_unknown_arch_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--arch"):
        resolve_arch("vgg", 32)
    with pytest.raises(UsageError, match="--arch"):
        build_model("auto", 3, 32, 128)
    with pytest.raises(UsageError, match="at least 7 px"):
        build_model("small_cnn", 1, 6, 128)


@pytest.mark.parametrize(
    ("arch", "channels", "size", "feature_dim"),
    [("small_cnn", 1, 8, 128), ("resnet18", 3, 32, 512), ("resnet50", 3, 32, 2048), ("resnet18", 1, 96, 512)],
)
def test_forward_shapes(arch: str, channels: int, size: int, feature_dim: int) -> None:
    model = build_model(arch, channels, size, projection_dim=16)
    features, hidden, z = model(torch.randn(2, channels, size, size))
    assert model.feature_dim == feature_dim
    assert features.shape == (2, feature_dim)
    assert hidden.shape == (2, 512)
    assert z.shape == (2, 16)
    assert all(t.dtype == torch.float32 for t in (features, hidden, z))


def test_small_cnn_features_are_signed() -> None:
    # The last block has no ReLU, so cosine similarities between features use the whole sphere.
    features = build_model("small_cnn", 1, 8, 16).backbone(torch.randn(16, 1, 8, 8))
    assert (features < 0).any() and (features > 0).any()


def test_cifar_stem_for_small_images_and_imagenet_stem_above_64px() -> None:
    cifar = build_model("resnet18", 3, 64, 128).backbone
    assert cifar.conv1.kernel_size == (3, 3) and cifar.conv1.stride == (1, 1)
    assert isinstance(cifar.maxpool, nn.Identity)
    assert isinstance(cifar.fc, nn.Identity)
    imagenet = build_model("resnet18", 3, 96, 128).backbone
    assert imagenet.conv1.kernel_size == (7, 7) and imagenet.conv1.stride == (2, 2)
    assert isinstance(imagenet.maxpool, nn.MaxPool2d)
    # A 32 px image keeps its 32x32 resolution through the CIFAR stem (no stride, no pooling).
    assert cifar.layer1(cifar.relu(cifar.bn1(cifar.conv1(torch.randn(1, 3, 32, 32))))).shape[-1] == 32


def test_projection_head_is_hcls() -> None:
    head = ProjectionHead(feature_dim=128, projection_dim=32)
    first, norm, relu = head.hidden_layers
    assert isinstance(first, nn.Linear) and first.in_features == 128 and first.out_features == 512 and first.bias is None
    assert isinstance(norm, nn.BatchNorm1d) and norm.num_features == 512
    assert isinstance(relu, nn.ReLU)
    assert head.output_layer.in_features == 512 and head.output_layer.out_features == 32 and head.output_layer.bias is not None


def test_a_moco_v2_head_is_as_wide_as_the_features_without_batchnorm_and_saved_so_it_loads_back(tmp_path: Path) -> None:
    """moco/builder.py's ``--mlp``: Linear(dim_mlp, dim_mlp) with bias, ReLU, then the fc (``--projection-hidden 0
    --projection-batchnorm false``); the sidecar records the head, and a sidecar of an older hcl, which records none,
    rebuilds HCL's head."""
    model = build_model("small_cnn", 1, 8, 16, projection_hidden=0, projection_batchnorm=False)
    first, relu = model.head.hidden_layers
    assert (first.in_features, first.out_features, first.bias is not None, isinstance(relu, nn.ReLU)) == (128, 128, True, True)
    path = tmp_path / "encoder.safetensors"
    save_encoder(path, model, META)
    loaded, sidecar = load_encoder(path, "cpu")
    assert (sidecar.projection_hidden, sidecar.projection_batchnorm) == (128, False)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True))
    (tmp_path / "older").mkdir()
    older = write_encoder(tmp_path / "older")
    sidecar_file = older.with_suffix(".json")
    recorded = json.loads(sidecar_file.read_text())
    sidecar_file.write_text(
        json.dumps({key: value for key, value in recorded.items() if not key.startswith("projection_") or key == "projection_dim"})
    )
    assert (load_encoder(older)[1].projection_hidden, load_encoder(older)[1].projection_batchnorm) == (512, True)


def test_hidden_is_the_input_of_the_last_linear_layer() -> None:
    model = build_model("small_cnn", 1, 8, 32)
    seen: list[torch.Tensor] = []
    model.head.output_layer.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    features, hidden, z = model(torch.randn(4, 1, 8, 8))
    assert torch.equal(seen[0], hidden)
    assert torch.equal(model.head(features), z)


def test_channels_last_and_bfloat16_autocast() -> None:
    model = build_model("resnet18", 3, 16, 8).to(memory_format=torch.channels_last)
    images = torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features, hidden, z = model(images)
    assert z.dtype == torch.bfloat16 and z.shape == (2, 8)
    assert torch.isfinite(features).all() and torch.isfinite(hidden).all() and torch.isfinite(z).all()


def trained_like(model: ContrastiveModel) -> ContrastiveModel:
    """Give every parameter and BN statistic non-default values, so a round trip is a real check."""
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(2):
        model(torch.randn(8, model.in_channels, model.image_size, model.image_size, generator=generator))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def test_save_load_round_trip(tmp_path: Path) -> None:
    model = trained_like(build_model("small_cnn", 1, 8, 16)).to(memory_format=torch.channels_last)
    path = tmp_path / "encoder.safetensors"
    save_encoder(path, model, META)
    loaded, sidecar = load_encoder(path, "cpu")
    assert not loaded.training
    assert sidecar.kind == "encoder"
    assert {key: getattr(sidecar, key) for key in META} == META
    assert (sidecar.arch, sidecar.in_channels, sidecar.image_size, sidecar.projection_dim, sidecar.feature_dim) == (
        "small_cnn",
        1,
        8,
        16,
        128,
    )
    assert "torch" in sidecar.versions
    original, restored = model.state_dict(), loaded.state_dict()
    assert original.keys() == restored.keys()
    assert all(torch.equal(original[key], restored[key]) for key in original)
    images = torch.randn(3, 1, 8, 8).to(memory_format=torch.channels_last)
    loaded = loaded.to(memory_format=torch.channels_last)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(model(images), loaded(images), strict=True))


def write_encoder(tmp_path: Path) -> Path:
    path = tmp_path / "encoder.safetensors"
    save_encoder(path, build_model("small_cnn", 1, 8, 16), META)
    return path


def edit_sidecar(path: Path, **changes: object) -> None:
    sidecar_file = path.with_suffix(".json")
    sidecar = json.loads(sidecar_file.read_text())
    sidecar.update(changes)
    sidecar_file.write_text(json.dumps(sidecar))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arch": "resnet18"}, "do not match the architecture"),
        ({"projection_dim": 32}, "the architecture needs"),
        ({"in_channels": 3}, "the architecture needs"),
        ({"arch": "vgg11"}, "unknown arch"),
        ({"image_size": "8"}, "positive integer"),
        ({"projection_hidden": 0}, "'projection_hidden' must be a positive integer"),
        ({"projection_batchnorm": "yes"}, "'projection_batchnorm' must be true or false"),
        ({"projection_batchnorm": False}, "do not match the architecture"),
        ({"kind": "embeddings"}, "expected an encoder artifact"),
    ],
)
def test_load_rejects_a_sidecar_that_does_not_match_the_weights(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    path = write_encoder(tmp_path)
    edit_sidecar(path, **changes)
    with pytest.raises(HclError, match=message) as caught:
        load_encoder(path)
    assert "\n" not in str(caught.value)


def test_load_rejects_a_truncated_file(tmp_path: Path) -> None:
    path = write_encoder(tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(HclError, match="not a readable safetensors file") as caught:
        load_encoder(path)
    assert "\n" not in str(caught.value)


def test_load_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HclError, match="encoder not found"):
        load_encoder(tmp_path / "nope.safetensors")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mean": None}, r"sidecar field 'mean' must be a list of 1 numbers in \[0, 1\], one per channel .got None."),
        ({"std": [0.4, 0.4]}, "sidecar field 'std' must be a list of 1 numbers"),
        ({"mean": ["0.3"]}, "sidecar field 'mean' must be a list of 1 numbers"),
        ({"std": [0.0]}, r"sidecar field 'std' must be a list of 1 numbers in \[1e-08, 1\]"),
    ],
)
def test_load_names_the_file_and_a_bad_normalisation_field(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    path = tmp_path / "encoder.safetensors"
    meta = {key: value for key, value in {**META, **changes}.items() if value is not None}
    save_encoder(path, build_model("small_cnn", 1, 8, 16), meta)
    with pytest.raises(HclError, match=f"^{path}: {message}") as caught:
        load_encoder(path)
    assert "\n" not in str(caught.value)


def test_load_refuses_nan_weights(tmp_path: Path) -> None:
    model = build_model("small_cnn", 1, 8, 16)
    with torch.no_grad():
        model.head.output_layer.bias[3] = float("nan")
    path = tmp_path / "encoder.safetensors"
    save_encoder(path, model, META)
    with pytest.raises(HclError, match=f"^{path}: tensor 'head.output_layer.bias' holds NaN or infinite weights$"):
        load_encoder(path)


def test_load_refuses_a_flipped_bit_in_the_weights(tmp_path: Path) -> None:
    path = write_encoder(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(HclError, match=f"^{path}: the tensor file does not match the 'sha256' its sidecar"):
        load_encoder(path)
