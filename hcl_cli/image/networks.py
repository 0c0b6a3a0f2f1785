"""The image encoders f(.) and the HCL projection head g(.).

The model follows SimCLR as HCL uses it (Robinson et al., Sec. 5.1 and App. D.1): a backbone
``f`` whose pooled output is the representation that embed and the evaluations read, and a
two-layer projection head ``g`` whose output ``z = g(f(x))`` enters the contrastive loss.

- ``small_cnn``: four conv-BN blocks and global average pooling, for 8x8 digits.
- ``resnet18`` / ``resnet50``: torchvision's ResNets (no pretrained weights). For inputs of 64 px
  or less they get the CIFAR stem of HCL's code: a 3x3 stride-1 first convolution and no max-pool.
  The classifier ``fc`` is removed, so the backbone returns the pooled 512 / 2048 features.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.errors import UsageError

BUILT_ARCHS = ("small_cnn", "resnet18", "resnet50")
HEAD_HIDDEN_DIM = 512
SMALL_CNN_MAX_SIZE = 16
SMALL_CNN_MIN_SIZE = 7
SMALL_CNN_FEATURE_DIM = 128
CIFAR_STEM_MAX_SIZE = 64


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
    imported here, where a ResNet is built, so that a stage that never builds one does not pay for its
    import (benchmarks/results/stage_imports.json).
    """
    resnet = torchvision_resnet(arch, in_channels, image_size)
    feature_dim = resnet.fc.in_features
    resnet.fc = nn.Identity()
    return resnet, feature_dim


def torchvision_resnet(arch: str, in_channels: int, image_size: int, num_classes: int = 1000) -> nn.Module:
    """torchvision's ``arch`` (no pretrained weights) with hcl's stem for ``in_channels`` x ``image_size`` images and a
    classifier ``fc`` of ``num_classes``: the CIFAR stem for 64 px or less, else ``conv1`` over ``in_channels``. Less its
    ``fc``, hcl's backbone; with it, the model a backbone exported by ``hcl export`` loads into (``strict=False``)."""
    import torchvision

    resnet = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
    if image_size <= CIFAR_STEM_MAX_SIZE:
        resnet.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        resnet.maxpool = nn.Identity()
    elif in_channels != 3:
        resnet.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return resnet


class ProjectionHead(nn.Module):
    """The projection head g: HCL's, Linear(feature_dim, 512, bias=False), BN, ReLU, Linear(512, projection_dim); without
    ``batchnorm``, MoCo-v2's ``--mlp`` head (moco/builder.py), Linear(feature_dim, hidden), ReLU, Linear(hidden, projection_dim).

    :meth:`forward_with_hidden` also returns the input of the last linear layer, the hidden
    representation that UnDiMix scores negatives with.
    """

    def __init__(self, feature_dim: int, projection_dim: int, hidden_dim: int = HEAD_HIDDEN_DIM, batchnorm: bool = True) -> None:
        super().__init__()
        normalised = [nn.BatchNorm1d(hidden_dim)] if batchnorm else []
        self.hidden_layers = nn.Sequential(nn.Linear(feature_dim, hidden_dim, bias=not batchnorm), *normalised, nn.ReLU(inplace=True))
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
    the contrastive loss compares, and ``hidden`` the input of the head's last linear layer
    (``projection_hidden`` wide; 0: as wide as the features).
    """

    def __init__(
        self,
        arch: str,
        in_channels: int,
        image_size: int,
        projection_dim: int,
        projection_hidden: int = HEAD_HIDDEN_DIM,
        projection_batchnorm: bool = True,
    ) -> None:
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
        self.projection_hidden = projection_hidden or self.feature_dim
        self.projection_batchnorm = projection_batchnorm
        self.head = ProjectionHead(self.feature_dim, projection_dim, self.projection_hidden, projection_batchnorm)

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
            "projection_hidden": self.projection_hidden,
            "projection_batchnorm": self.projection_batchnorm,
        }


def build_model(
    arch: str,
    in_channels: int,
    image_size: int,
    projection_dim: int,
    projection_hidden: int = HEAD_HIDDEN_DIM,
    projection_batchnorm: bool = True,
) -> ContrastiveModel:
    """Build an untrained encoder with its projection head (``projection_hidden`` 0: as wide as the features); ``arch``
    must already be resolved."""
    if arch not in BUILT_ARCHS:
        raise UsageError(f"--arch must be one of {', '.join(BUILT_ARCHS)} (got {arch!r}; resolve 'auto' with resolve_arch)")
    if arch == "small_cnn" and image_size < SMALL_CNN_MIN_SIZE:
        raise UsageError(f"--arch small_cnn needs images of at least {SMALL_CNN_MIN_SIZE} px (got {image_size} px)")
    return ContrastiveModel(arch, in_channels, image_size, projection_dim, projection_hidden, projection_batchnorm)


def unwrap(model: nn.Module) -> ContrastiveModel:
    """The ContrastiveModel behind a ``torch.compile`` wrapper (or the model itself)."""
    inner = getattr(model, "_orig_mod", model)
    if not isinstance(inner, ContrastiveModel):
        raise TypeError(f"expected a ContrastiveModel, got {type(inner).__name__}")
    return inner
