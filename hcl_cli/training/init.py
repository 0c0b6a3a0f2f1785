"""``hcl pretrain --init``: the weights a run starts from instead of its seeded initialisation.

Two kinds of file, told apart by the kind hcl records in a safetensors header (:func:`~hcl_cli.artifacts.header_kind`):

- an hcl encoder artifact of the run's modality (an earlier ``hcl pretrain``'s ``encoder.safetensors``): the whole
  model, backbone and projection head (on graphs the GIN and InfoGraph's heads), read by the modality's checked
  reader; its architecture must be the run's (arch, channels, image size, projection size; GIN layers and width);
- any other safetensors state dict, for images: the backbone's (torchvision's ResNet state dict, its ``fc`` left
  out, or ``hcl export --format safetensors``), loaded by :func:`~hcl_cli.image.transfer.load_backbone`; the
  projection head keeps its seeded initialisation, as a fresh head on a pretrained backbone has in SimCLR Sec. 4.2.

With a momentum queue the key encoder starts as a copy of the query encoder, as MoCo's builder starts it. The
file's sha256 is recorded in the encoder's ``inputs`` and in the checkpoints' identity (a resume from other
weights is refused). Anything else (a graph run given a plain state dict, an encoder of the other modality or of
another architecture, a missing key, a shape that differs, a ``torch.save`` pickle) is a one-line
:class:`~hcl_cli.errors.InputError` before training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from hcl_cli.artifacts import header_kind
from hcl_cli.errors import InputError, shown
from hcl_cli.image.momentum import MomentumQueue
from hcl_cli.image.networks import unwrap
from hcl_cli.image.transfer import existing_file, file_digest, load_backbone_file
from hcl_cli.modality import Modality, encoder_kinds

OPTION = "--init"


@dataclass(frozen=True)
class InitialWeights:
    """The file a run started from: its ``sha256``, and what was taken from it (``described``, for the startup line)."""

    sha256: str
    described: str


def start_from(path: str, modality: Modality, model: nn.Module, state: nn.Module) -> InitialWeights:
    """Load the weights of ``path`` into ``model`` (built for ``modality``'s data) and, when ``state`` (the step's
    checkpointed state) holds a momentum queue, into its key encoder too."""
    source = existing_file(path, OPTION)
    kind = header_kind(source)
    if kind in encoder_kinds() and kind != modality.encoder_kind:
        raise InputError(f"{OPTION} {shown(path)} is an hcl {kind!r} artifact, but the run trains on {modality.sample_noun}s")
    if kind == modality.encoder_kind:
        described = load_encoder_weights(path, modality, model)
    elif kind:
        raise InputError(f"{OPTION} {shown(path)} is an hcl {kind!r} artifact, not an encoder")
    elif modality.name != "image":
        raise InputError(
            f"{OPTION} {shown(path)} is no hcl {modality.encoder_kind} artifact: a {modality.sample_noun} run starts only from one"
        )
    else:
        described = load_backbone_file(unwrap(model), path, OPTION)
    for module in state.modules():
        if isinstance(module, MomentumQueue):
            module.key_model.load_state_dict(model.state_dict())
    return InitialWeights(file_digest(source, OPTION), described)


def load_encoder_weights(path: str, modality: Modality, model: nn.Module) -> str:
    """Copy the whole encoder artifact ``path`` into ``model``, whose architecture it must have."""
    loaded, _ = modality.load_encoder(path, "cpu")
    given, needed = loaded.architecture(), model.architecture()  # type: ignore[operator]
    differing = [f"{name} {given.get(name)} (the run's: {needed[name]})" for name in needed if given.get(name) != needed[name]]
    if differing:
        raise InputError(f"{OPTION} {shown(path)} is an encoder of another architecture: {', '.join(differing)}")
    with torch.no_grad():
        model.load_state_dict(loaded.state_dict())
    return "the whole encoder (backbone and head)"
