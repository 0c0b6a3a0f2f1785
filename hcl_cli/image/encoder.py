"""The image encoder's safetensors artifact: the only writer and the checked reader, and batched encoding.

The artifact (kind :data:`ENCODER_KIND`) holds the :class:`~hcl_cli.image.networks.ContrastiveModel`'s
state_dict; its sidecar (:class:`EncoderSidecar`) the architecture that rebuilds it, the per-channel
normalisation it was trained with, and what every encoder records (:mod:`hcl_cli.artifacts.encoders`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.artifacts import library_versions, load_artifact, save_artifact
from hcl_cli.artifacts.encoders import RecordedEncoder, check_state_dict, load_recorded_weights
from hcl_cli.errors import InputError
from hcl_cli.image.card import wrong_channel_statistics
from hcl_cli.image.networks import BUILT_ARCHS, HEAD_HIDDEN_DIM, ContrastiveModel, build_model, unwrap
from hcl_cli.logs import bars_disabled

ENCODER_KIND = "encoder"
SIZE_FIELDS = ("in_channels", "image_size", "projection_dim")


@dataclass(frozen=True, kw_only=True)
class EncoderSidecar(RecordedEncoder):
    """The sidecar of an image ``encoder`` artifact: how to rebuild and feed the model (:class:`RecordedEncoder` the rest).

    ``arch``, ``in_channels``, ``image_size``, ``projection_dim``, ``feature_dim`` and the head's
    ``projection_hidden`` and ``projection_batchnorm`` (HCL's head, 512 wide with BatchNorm, where an
    older sidecar records neither) rebuild the model; ``mean`` and ``std`` are the per-channel
    normalisation it was trained with.
    """

    arch: str
    in_channels: int
    image_size: int
    projection_dim: int
    feature_dim: int
    projection_hidden: int = HEAD_HIDDEN_DIM
    projection_batchnorm: bool = True
    mean: list[float]
    std: list[float]
    kind: str = ENCODER_KIND


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
    ``mean`` and ``std`` in their ranges (:data:`~hcl_cli.image.card.CHANNEL_STATISTICS`), a recorded field of the wrong type, or a non-finite weight is a one-line
    HclError naming the file (and the field).
    """
    tensors, values = load_artifact(path, ENCODER_KIND, expected={}, device=device)
    arch = values.get("arch")
    if arch not in BUILT_ARCHS:
        raise InputError(f"{path}: sidecar names an unknown arch {arch!r} (expected one of {', '.join(BUILT_ARCHS)})")
    for name in SIZE_FIELDS:
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{path}: sidecar field {name!r} must be a positive integer (got {value!r})")
    hidden, batchnorm = values.get("projection_hidden", HEAD_HIDDEN_DIM), values.get("projection_batchnorm", True)
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1:
        raise InputError(f"{path}: sidecar field 'projection_hidden' must be a positive integer (got {hidden!r})")
    if not isinstance(batchnorm, bool):
        raise InputError(f"{path}: sidecar field 'projection_batchnorm' must be true or false (got {batchnorm!r})")
    model = build_model(arch, values["in_channels"], values["image_size"], values["projection_dim"], hidden, batchnorm)
    check_state_dict(path, model.state_dict(), tensors)
    if values.get("feature_dim", model.feature_dim) != model.feature_dim:
        raise InputError(f"{path}: sidecar field 'feature_dim' is {values['feature_dim']!r}, but {arch} has {model.feature_dim} features")
    wrong = wrong_channel_statistics(values, values["in_channels"])
    if wrong is not None:
        name, expected = wrong
        raise InputError(f"{path}: sidecar field {name!r} must be {expected} (got {values.get(name)!r})")
    recorded = load_recorded_weights(path, model, tensors, values)
    sidecar = EncoderSidecar(**model.architecture(), mean=values["mean"], std=values["std"], **recorded)
    return model.to(device).eval(), sidecar


def check_fits_dataset(model: ContrastiveModel, image_shape: list[int], model_path: str, data_path: str) -> None:
    """One-line error when the encoder was trained on images of another shape than the dataset holds."""
    trained = [model.in_channels, model.image_size, model.image_size]
    if trained != list(image_shape):
        shape = "x".join(map(str, image_shape))
        raise InputError(f"{model_path} was trained on {'x'.join(map(str, trained))} images, but {data_path} holds {shape}")


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
    for start in tqdm(range(0, len(images), batch_size), desc=description, unit="batch", disable=bars_disabled(), leave=False):
        batch = transform(images[start : start + batch_size].to(device, non_blocking=True))
        batch_features, _, batch_projections = model(batch)
        features.append(batch_features.float().cpu())
        projections.append(batch_projections.float().cpu())
    model.train(was_training)
    return torch.cat(features), torch.cat(projections)
