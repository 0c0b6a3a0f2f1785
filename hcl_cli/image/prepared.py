"""The prepared folder's split files: ``SPLIT.safetensors`` of uint8 images and int64 labels, read
back by :func:`load_split` checked against the card, so no stage after ``prepare`` decodes an image."""

from __future__ import annotations

from pathlib import Path

import torch

from hcl_cli.artifacts import TensorSpec, load_artifact
from hcl_cli.errors import InputError
from hcl_cli.image.card import load_card

SPLIT_KIND = "dataset-split"
SPLIT_TENSORS = {"images": TensorSpec(torch.uint8, 4), "labels": TensorSpec(torch.int64, 1)}


def load_split(folder: str | Path, split: str, device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """One prepared split as ``(images uint8 (N, C, H, W), labels int64 (N,))``, checked against the card: its count,
    its image shape, and its labels (the class numbers 0 to ``num_classes - 1``; -1 for every image of ``unlabeled``)."""
    card = load_card(folder)
    path = Path(folder) / f"{split}.safetensors"
    if split not in card.counts:
        raise InputError(f"{folder} has no {split} split (it has {', '.join(card.counts)}): run hcl prepare first")
    if not path.is_file():
        raise InputError(f"{path} not found: run hcl prepare first")
    tensors, _ = load_artifact(path, SPLIT_KIND, SPLIT_TENSORS, device=device)
    images, labels = tensors["images"], tensors["labels"]
    if len(images) != len(labels) or len(images) != card.counts[split]:
        raise InputError(
            f"{path}: {len(images)} images and {len(labels)} labels, but the card counts {card.counts[split]}: run hcl prepare again"
        )
    if list(images.shape[1:]) != card.image_shape:
        raise InputError(f"{path}: images are {list(images.shape[1:])}, but the card says {card.image_shape}: run hcl prepare again")
    lowest, highest = (-1, -1) if split == "unlabeled" else (0, card.num_classes - 1)
    if len(labels) and (int(labels.min()) < lowest or int(labels.max()) > highest):
        expected = "-1 (unlabelled)" if split == "unlabeled" else f"0 to {highest}, the card's {card.num_classes} classes"
        raise InputError(
            f"{path}: labels run from {int(labels.min())} to {int(labels.max())}, but they must be {expected}: run hcl prepare again"
        )
    return images, labels
