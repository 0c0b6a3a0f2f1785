"""Images, the first :class:`~hcl_cli.modality.Modality`: uint8 tensors, two augmented views, a CNN encoder.

Each method delegates to the image machinery that does the work: the prepared format and card
(:mod:`hcl_cli.image.data`, :mod:`hcl_cli.image.card`, :mod:`hcl_cli.image.prepared`), the batched augmentations (:mod:`hcl_cli.image.augment`), the encoders
(:mod:`hcl_cli.image.networks`, :mod:`hcl_cli.image.encoder`) and the SimCLR-style step (:mod:`hcl_cli.image.step`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hcl_cli.artifacts.binding import prepared_sha256
from hcl_cli.errors import UsageError
from hcl_cli.image.augment import build_eval_transform
from hcl_cli.image.card import DatasetCard, load_card
from hcl_cli.image.encoder import ENCODER_KIND, EncoderSidecar, check_fits_dataset, encode, load_encoder, save_encoder
from hcl_cli.image.networks import ContrastiveModel, build_model
from hcl_cli.image.prepared import load_split


class ImageModality:
    """Uint8 ``(N, C, H, W)`` images held on the device; a batch is ``images[index]``."""

    name = "image"
    sample_noun = "image"
    encoder_kind = ENCODER_KIND
    keep_last_batch = False
    two_views = True
    objectives = ("nce", "bcl")
    loss_note = ""
    raw_name = "raw pixels"
    raw_feature = "pixels"
    eval_inputs = "images under the run's eval transform (per-channel normalisation, no augmentation)"
    raw_description = "the raw pixels, each image flattened, scaled to [0, 1] and L2-normalised"

    def load_card(self, folder: str | Path) -> DatasetCard:
        return load_card(folder)

    def describe(self, card: DatasetCard, count: int) -> str:
        shape = "x".join(str(side) for side in card.image_shape)
        return f"{count} images of {shape}"

    def training_splits(self, card: DatasetCard | None, labelled: bool, transductive: bool = False) -> list[str]:
        """The train split, and STL-10's unlabeled split unless the run reads labels (a labelled run needs no card); never
        the test split, so ``transductive`` changes nothing on images."""
        return ["train"] + (["unlabeled"] if not labelled and card is not None and "unlabeled" in card.counts else [])

    def encoder_data(self, folder: str | Path, card: Any) -> dict[str, str]:
        """The folder's own files: an encoder embeds the data it trained on."""
        return prepared_sha256(folder)

    def load_samples(self, folder: str | Path, splits: Sequence[str], device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
        parts = [load_split(folder, split, device) for split in splits]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([images for images, _ in parts]), torch.cat([labels for _, labels in parts])

    def check_trainable(self, card: DatasetCard, folder: str) -> None:
        _, height, width = card.image_shape
        if height != width:
            raise UsageError(f"{folder} holds {height}x{width} images; pretrain needs square images (prepare with --image-size)")

    def save_encoder(self, path: str | Path, model: ContrastiveModel, card: DatasetCard, meta: dict[str, Any]) -> None:
        """The encoder artifact, recording the card's per-channel mean and std for the eval transform."""
        save_encoder(path, model, {**meta, "mean": card.mean, "std": card.std})

    def load_encoder(self, path: str | Path, device: torch.device | str = "cpu") -> tuple[ContrastiveModel, EncoderSidecar]:
        return load_encoder(path, device)

    def check_fits(self, model: ContrastiveModel, card: DatasetCard, model_path: str, data_path: str) -> None:
        check_fits_dataset(model, card.image_shape, model_path, data_path)

    def embed(
        self, model: ContrastiveModel, stats: EncoderSidecar | DatasetCard, samples: Tensor, batch_size: int, description: str
    ) -> tuple[Tensor, Tensor]:
        """Backbone features and projections under the eval transform (no augmentation; ``stats``' mean and std)."""
        return encode(model, build_eval_transform(stats.mean, stats.std), samples, batch_size, description=description)

    def untrained(self, model: ContrastiveModel, seed: int) -> ContrastiveModel:
        device = next(model.parameters()).device
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = build_model(
                model.arch, model.in_channels, model.image_size, model.projection_dim, model.projection_hidden, model.projection_batchnorm
            )
        return fresh.to(device).eval()

    def card_summary(self, card: DatasetCard) -> str:
        counts = ", ".join(f"{count:,} {split}" for split, count in card.counts.items())
        shape = " x ".join(map(str, card.image_shape))
        skipped = f"; {card.skipped:,} unreadable files were skipped" if card.skipped else ""
        return f"{counts} images, {card.num_classes} classes, images of {shape} (channels x height x width){skipped}"

    def recorded_prepare(self, card: DatasetCard) -> dict[str, Any]:
        return {"dataset": card.name}

    def raw_features(self, samples: Tensor) -> Tensor:
        """Each image's pixels, flattened, as uint8: kNN L2-normalises them (so a 1/255 scale would cancel), and a
        CIFAR-10 bank stays at 150 MB instead of 600 MB of float32."""
        return samples.flatten(1)


IMAGES = ImageModality()
