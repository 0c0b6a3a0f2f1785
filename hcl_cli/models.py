"""Encoders f(.) and the HCL projection head g(.), and their safetensors artifact.

The model follows SimCLR as HCL uses it (Robinson et al., Sec. 5.1 and App. D.1): a backbone
``f`` whose pooled output is the representation that embed and the evaluations read, and a
two-layer projection head ``g`` whose output ``z = g(f(x))`` enters the contrastive loss.

- ``small_cnn``: four conv-BN blocks and global average pooling, for 8x8 digits.
- ``resnet18`` / ``resnet50``: torchvision's ResNets (no pretrained weights). For inputs of 64 px
  or less they get the CIFAR stem of HCL's code: a 3x3 stride-1 first convolution and no max-pool.
  The classifier ``fc`` is removed, so the backbone returns the pooled 512 / 2048 features.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.artifacts import SCHEMA_VERSION, is_finite_number, library_versions, load_artifact, save_artifact
from hcl_cli.errors import HclError, UsageError

BUILT_ARCHS = ("small_cnn", "resnet18", "resnet50")
ENCODER_KIND = "encoder"
HEAD_HIDDEN_DIM = 512
SMALL_CNN_MAX_SIZE = 16
SMALL_CNN_MIN_SIZE = 7
SMALL_CNN_FEATURE_DIM = 128
CIFAR_STEM_MAX_SIZE = 64
SIZE_FIELDS = ("in_channels", "image_size", "projection_dim")
NORMALISATION_FIELDS = ("mean", "std")
RECORDED_FIELDS = {
    "config": (dict, "a JSON object"),
    "epoch": (int, "an integer"),
    "seed": (int, "an integer"),
    "dataset": (str, "a string"),
    "world_size": (int, "an integer"),
    "run": (dict, "a JSON object"),
    "learned": (dict, "a JSON object"),
    "versions": (dict, "a JSON object"),
}
"""What pretraining records in an encoder's sidecar beside the architecture, with its JSON type; each may be absent."""
ARTIFACT_KEYS = ("schema_version", "kind", "tensors", "sha256")
"""The sidecar keys of the artifact itself, checked by :func:`~hcl_cli.artifacts.load_artifact`."""


def resolve_arch(arch: str, image_size: int) -> str:
    """Resolve ``auto``: ``small_cnn`` for images of 16 px or less, else ``resnet18``."""
    if arch == "auto":
        return "small_cnn" if image_size <= SMALL_CNN_MAX_SIZE else "resnet18"
    if arch not in BUILT_ARCHS:
        raise UsageError(f"--arch must be one of auto, {', '.join(BUILT_ARCHS)} (got {arch!r})")
    return arch


class SmallCNN(nn.Module):
    """Conv-BN blocks for 8x8 digits, then global average pooling.

    Two 3x3 conv-BN-ReLU blocks at full resolution, a 3x3 stride-2 one (8x8 -> 4x4), and a 4x4
    conv-BN without padding that sees the whole 4x4 map (-> 1x1 at 8 px), so the features keep
    where the strokes are, which pooling a 4x4 map would average away. The last block has no
    ReLU: signed features spread over the whole sphere, whereas non-negative ones crowd into one
    orthant with cosines in [0, 1], which blunts the exp(cos / T) votes of the weighted kNN
    (on digits at k = 200 this lifts kNN top-1 from about 0.89 to 0.93 with hucl). About 0.3 M
    parameters with the head, so it pretrains on the digits in well under a minute on a CPU.
    Needs images of at least 7 px.
    """

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(in_channels, 32, kernel_size=3, stride=1, padding=1),
            nn.ReLU(inplace=True),
            conv_bn(32, 32, kernel_size=3, stride=1, padding=1),
            nn.ReLU(inplace=True),
            conv_bn(32, 64, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            conv_bn(64, SMALL_CNN_FEATURE_DIM, kernel_size=4, stride=1, padding=0),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = SMALL_CNN_FEATURE_DIM

    def forward(self, x: Tensor) -> Tensor:
        return torch.flatten(self.pool(self.features(x)), 1)


def conv_bn(in_channels: int, out_channels: int, *, kernel_size: int, stride: int, padding: int) -> nn.Sequential:
    """Convolution without bias (the batch norm that follows has one), then batch norm."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False), nn.BatchNorm2d(out_channels)
    )


def build_resnet(arch: str, in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    """A torchvision ResNet without its classifier; CIFAR stem for inputs of 64 px or less.

    Returns the backbone and its feature size (512 for resnet18, 2048 for resnet50). torchvision is
    imported here, where a ResNet is built: importing it costs a stage that never builds one about
    1.5 s (benchmarks/results/stage_imports.json).
    """
    import torchvision

    resnet = getattr(torchvision.models, arch)(weights=None)
    if image_size <= CIFAR_STEM_MAX_SIZE:
        resnet.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        resnet.maxpool = nn.Identity()
    elif in_channels != 3:
        resnet.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    feature_dim = resnet.fc.in_features
    resnet.fc = nn.Identity()
    return resnet, feature_dim


class ProjectionHead(nn.Module):
    """HCL's projection head g: Linear(feature_dim, 512, bias=False), BN, ReLU, Linear(512, projection_dim).

    :meth:`forward_with_hidden` also returns the input of the last linear layer, the 512-d hidden
    representation that UnDiMix scores negatives with.
    """

    def __init__(self, feature_dim: int, projection_dim: int, hidden_dim: int = HEAD_HIDDEN_DIM) -> None:
        super().__init__()
        self.hidden_layers = nn.Sequential(
            nn.Linear(feature_dim, hidden_dim, bias=False), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True)
        )
        self.output_layer = nn.Linear(hidden_dim, projection_dim)

    def forward_with_hidden(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``(hidden, z)``: the last linear layer's input and the projection."""
        hidden = self.hidden_layers(features)
        return hidden, self.output_layer(hidden)

    def forward(self, features: Tensor) -> Tensor:
        return self.forward_with_hidden(features)[1]


class ContrastiveModel(nn.Module):
    """Backbone f and projection head g; ``forward(x) -> (features, hidden, z)``.

    ``features = f(x)`` is the representation used downstream, ``z = g(features)`` the embedding
    the contrastive loss compares, and ``hidden`` the input of the head's last linear layer.
    """

    def __init__(self, arch: str, in_channels: int, image_size: int, projection_dim: int) -> None:
        super().__init__()
        self.arch = arch
        self.in_channels = in_channels
        self.image_size = image_size
        self.projection_dim = projection_dim
        if arch == "small_cnn":
            self.backbone: nn.Module = SmallCNN(in_channels)
            self.feature_dim: int = self.backbone.feature_dim
        else:
            self.backbone, self.feature_dim = build_resnet(arch, in_channels, image_size)
        self.head = ProjectionHead(self.feature_dim, projection_dim)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        features = self.backbone(x)
        hidden, z = self.head.forward_with_hidden(features)
        return features, hidden, z

    def architecture(self) -> dict[str, Any]:
        """What :func:`build_model` needs to rebuild this model, plus its feature size."""
        return {
            "arch": self.arch,
            "in_channels": self.in_channels,
            "image_size": self.image_size,
            "projection_dim": self.projection_dim,
            "feature_dim": self.feature_dim,
        }


def build_model(arch: str, in_channels: int, image_size: int, projection_dim: int) -> ContrastiveModel:
    """Build an untrained encoder with its projection head; ``arch`` must already be resolved."""
    if arch not in BUILT_ARCHS:
        raise UsageError(f"--arch must be one of {', '.join(BUILT_ARCHS)} (got {arch!r}; resolve 'auto' with resolve_arch)")
    if arch == "small_cnn" and image_size < SMALL_CNN_MIN_SIZE:
        raise UsageError(f"--arch small_cnn needs images of at least {SMALL_CNN_MIN_SIZE} px (got {image_size} px)")
    return ContrastiveModel(arch, in_channels, image_size, projection_dim)


def unwrap(model: nn.Module) -> ContrastiveModel:
    """The ContrastiveModel behind a ``torch.compile`` wrapper (or the model itself)."""
    inner = getattr(model, "_orig_mod", model)
    if not isinstance(inner, ContrastiveModel):
        raise TypeError(f"expected a ContrastiveModel, got {type(inner).__name__}")
    return inner


@dataclass(frozen=True, kw_only=True)
class RecordedEncoder:
    """What every encoder's sidecar holds beside its architecture: how it was trained, and the artifact's own keys.

    The recorded fields (:data:`RECORDED_FIELDS`): the ``config`` (the pretrain parameters), the
    ``epoch`` count, the ``seed``, the ``dataset`` name, the ``world_size`` (processes), the ``run``
    record (when, where, which commit), the ``learned`` loss tensors, and the library ``versions``;
    a sidecar that lacks one reads it as None (``world_size`` as 1, ``learned`` and ``versions`` as
    empty). ``schema_version``, ``kind``, ``tensors`` and ``sha256`` are the artifact's own keys, as
    :func:`~hcl_cli.artifacts.save_artifact` wrote and :func:`~hcl_cli.artifacts.load_artifact` checked them.
    """

    config: dict[str, Any] | None = None
    epoch: int | None = None
    seed: int | None = None
    dataset: str | None = None
    world_size: int = 1
    run: dict[str, Any] | None = None
    learned: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    kind: str = ENCODER_KIND
    tensors: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""


@dataclass(frozen=True, kw_only=True)
class EncoderSidecar(RecordedEncoder):
    """The sidecar of an image ``encoder`` artifact: how to rebuild and feed the model (:class:`RecordedEncoder` the rest).

    ``arch``, ``in_channels``, ``image_size``, ``projection_dim`` and ``feature_dim`` rebuild the
    model; ``mean`` and ``std`` are the per-channel normalisation it was trained with.
    """

    arch: str
    in_channels: int
    image_size: int
    projection_dim: int
    feature_dim: int
    mean: list[float]
    std: list[float]


def save_encoder(path: str | os.PathLike[str], model: nn.Module, meta: Mapping[str, Any]) -> None:
    """Write the model's state_dict as an ``encoder`` artifact (atomic) with its sidecar: the only writer of encoders.

    The sidecar holds ``meta`` (the caller's fields of :class:`EncoderSidecar`: ``mean``, ``std``,
    ``config``, ``epoch``, ``seed``, ``dataset``, ``world_size``, ``run``, ``learned``), the model's
    own architecture fields (``arch``, ``in_channels``, ``image_size``, ``projection_dim``,
    ``feature_dim``), which take precedence, and the library ``versions``. ``meta`` is written as
    given, unchecked: :func:`load_encoder` checks what it reads. A ``torch.compile``-d model is
    saved under its original parameter names.
    """
    encoder = unwrap(model)
    save_artifact(path, encoder.state_dict(), ENCODER_KIND, {**meta, **encoder.architecture(), "versions": library_versions()})


def load_encoder(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[ContrastiveModel, EncoderSidecar]:
    """Rebuild the model the sidecar names, load its weights, and return it in eval mode with the sidecar.

    Any mismatch between the stored tensors and that architecture, a sidecar without a per-channel
    ``mean`` and ``std``, a recorded field of the wrong type, or a non-finite weight is a one-line
    HclError naming the file (and the field).
    """
    tensors, values = load_artifact(path, ENCODER_KIND, expected={}, device=device)
    arch = values.get("arch")
    if arch not in BUILT_ARCHS:
        raise HclError(f"{path}: sidecar names an unknown arch {arch!r} (expected one of {', '.join(BUILT_ARCHS)})")
    for name in SIZE_FIELDS:
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise HclError(f"{path}: sidecar field {name!r} must be a positive integer (got {value!r})")
    model = build_model(arch, values["in_channels"], values["image_size"], values["projection_dim"])
    check_state_dict(path, model.state_dict(), tensors)
    if values.get("feature_dim", model.feature_dim) != model.feature_dim:
        raise HclError(f"{path}: sidecar field 'feature_dim' is {values['feature_dim']!r}, but {arch} has {model.feature_dim} features")
    for name in NORMALISATION_FIELDS:
        normalisation = values.get(name)
        if (
            not isinstance(normalisation, list)
            or len(normalisation) != values["in_channels"]
            or not all(is_finite_number(value) for value in normalisation)
        ):
            raise HclError(
                f"{path}: sidecar field {name!r} must be a list of {values['in_channels']} numbers, one per channel (got {normalisation!r})"
            )
    if not all(value > 0 for value in values["std"]):
        raise HclError(f"{path}: sidecar field 'std' must hold positive numbers (got {values['std']!r})")
    recorded = load_recorded_weights(path, model, tensors, values)
    sidecar = EncoderSidecar(**model.architecture(), mean=values["mean"], std=values["std"], **recorded)
    return model.to(device).eval(), sidecar


def load_recorded_weights(
    path: str | os.PathLike[str], model: nn.Module, tensors: dict[str, Tensor], values: Mapping[str, Any]
) -> dict[str, Any]:
    """Load checked ``tensors`` into ``model`` after checking the sidecar's :data:`RECORDED_FIELDS` and the weights' finiteness.

    Returns the :class:`RecordedEncoder` fields: the recorded fields the sidecar has and the
    artifact's own keys. A field of the wrong JSON type or a NaN or infinite weight is a one-line
    HclError naming the file. Every encoder reader (images, graphs) ends here.
    """
    recorded = {name: values[name] for name in RECORDED_FIELDS if values.get(name) is not None}
    for name, value in recorded.items():
        kind, expected = RECORDED_FIELDS[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise HclError(f"{path}: sidecar field {name!r} must be {expected} (got {value!r})")
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not tensor.isfinite().all():
            raise HclError(f"{path}: tensor {name!r} holds NaN or infinite weights")
    model.load_state_dict(tensors)
    return {**recorded, **{key: values[key] for key in ARTIFACT_KEYS}}


def check_state_dict(path: str | os.PathLike[str], expected: dict[str, Tensor], found: dict[str, Tensor]) -> None:
    """Raise a one-line HclError unless ``found`` has exactly the keys, shapes and dtypes of ``expected``."""
    missing = sorted(expected.keys() - found.keys())
    unexpected = sorted(found.keys() - expected.keys())
    if missing or unexpected:
        raise HclError(
            f"{path}: weights do not match the architecture its sidecar names ({len(missing)} missing, e.g. {missing[:2]}; {len(unexpected)} unexpected, e.g. {unexpected[:2]})"
        )
    for name, reference in expected.items():
        tensor = found[name]
        if tensor.shape != reference.shape or tensor.dtype != reference.dtype:
            raise HclError(
                f"{path}: tensor {name!r} is {str(tensor.dtype).removeprefix('torch.')} {list(tensor.shape)}, "
                f"the architecture needs {str(reference.dtype).removeprefix('torch.')} {list(reference.shape)}"
            )


def check_fits_dataset(model: ContrastiveModel, image_shape: list[int], model_path: str, data_path: str) -> None:
    """One-line error when the encoder was trained on images of another shape than the dataset holds."""
    trained = [model.in_channels, model.image_size, model.image_size]
    if trained != list(image_shape):
        shape = "x".join(map(str, image_shape))
        raise HclError(f"{model_path} was trained on {'x'.join(map(str, trained))} images, but {data_path} holds {shape}")


@torch.no_grad()
def encode(
    model: ContrastiveModel, transform: nn.Module, images: Tensor, batch_size: int, description: str = "embed"
) -> tuple[Tensor, Tensor]:
    """Backbone features and projections (float32, on the CPU) of uint8 ``images``, in batches.

    The model is run in eval mode (BatchNorm uses its running statistics) on its own device; its
    previous mode is restored afterwards, so training code can call this between epochs.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    features, projections = [], []
    for start in tqdm(range(0, len(images), batch_size), desc=description, unit="batch", disable=None, leave=False):
        batch = transform(images[start : start + batch_size].to(device, non_blocking=True))
        batch_features, _, batch_projections = model(batch)
        features.append(batch_features.float().cpu())
        projections.append(batch_projections.float().cpu())
    model.train(was_training)
    return torch.cat(features), torch.cat(projections)
