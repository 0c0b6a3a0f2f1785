"""``hcl prepare``: decode a dataset once into uint8 tensors, labels and a dataset card.

The output folder holds ``train.safetensors``, ``test.safetensors`` (and ``unlabeled.safetensors``
for STL-10), each of kind ``dataset-split``, and ``card.json``. The whole folder is built in a
hidden sibling and renamed into place at the end, so a failure or a kill never leaves a partial
folder where ``pretrain`` would read it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import torch

from hcl_cli.artifacts import SCHEMA_VERSION, library_versions, save_artifact, write_json
from hcl_cli.config import PrepareConfig
from hcl_cli.datasets import CARD_FILE, SPLIT_KIND, SourceDataset, load_source
from hcl_cli.errors import HclError, UsageError

STATISTICS_CHUNK = 4096


def run(config: PrepareConfig) -> None:
    """Decode ``config.dataset`` and write the prepared folder ``config.out``."""
    out = Path(config.out)
    _check_replaceable(out)
    dataset = load_source(config)
    card = dataset_card(config, dataset)
    versions = library_versions()
    with _staging_folder(out) as staging:
        for split, (images, labels) in dataset.splits.items():
            meta = {"dataset": card["name"], "split": split, "versions": versions}
            save_artifact(staging / f"{split}.safetensors", {"images": images, "labels": labels}, kind=SPLIT_KIND, meta=meta)
        write_json(staging / CARD_FILE, card)
    counts = ", ".join(f"{split} {count}" for split, count in card["counts"].items())
    shape = "x".join(str(size) for size in card["image_shape"])
    print(f"hcl prepare: wrote {out}: {card['name']}, {counts} images of {shape}, {card['num_classes']} classes")


def dataset_card(config: PrepareConfig, dataset: SourceDataset) -> dict[str, object]:
    """The card that describes the prepared folder; mean and std are those of the train split."""
    train_images = dataset.splits["train"][0]
    mean, std = channel_mean_std(train_images)
    return {
        "schema_version": SCHEMA_VERSION,
        "name": config.dataset,
        "classes": dataset.classes,
        "num_classes": len(dataset.classes),
        "counts": {split: len(images) for split, (images, _) in dataset.splits.items()},
        "image_shape": list(train_images.shape[1:]),
        "mean": mean,
        "std": std,
        "source": dataset.source,
        "seed": config.seed,
        "skipped": dataset.skipped,
    }


def channel_mean_std(images: torch.Tensor) -> tuple[list[float], list[float]]:
    """Per-channel mean and (population) standard deviation of uint8 (N, C, H, W) images, in 0..1."""
    total = torch.zeros(images.shape[1], dtype=torch.float64)
    total_squares = torch.zeros_like(total)
    for start in range(0, len(images), STATISTICS_CHUNK):
        block = images[start : start + STATISTICS_CHUNK].to(torch.float64) / 255.0
        total += block.sum(dim=(0, 2, 3))
        total_squares += block.square().sum(dim=(0, 2, 3))
    count = images.shape[0] * images.shape[2] * images.shape[3]
    mean = total / count
    std = (total_squares / count - mean.square()).clamp_min(0.0).sqrt()
    return mean.tolist(), std.tolist()


def _check_replaceable(out: Path) -> None:
    """Refuse, before any work, to replace anything but an empty folder or an earlier prepare output."""
    if out.name in ("", ".."):
        raise UsageError(f"--out {out} must name the prepared dataset folder itself, not . or ..")
    if out.is_file():
        raise HclError(f"--out {out} is a file: give a folder for the prepared dataset")
    if out.is_dir() and any(out.iterdir()) and not (out / CARD_FILE).is_file():
        raise HclError(f"--out {out} is a folder that hcl prepare did not write (no {CARD_FILE}): give a new or empty folder")


@contextlib.contextmanager
def _staging_folder(out: Path) -> Iterator[Path]:
    """Yield a hidden sibling of ``out`` to fill; on success it replaces ``out``, on failure it is removed."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex[:12]}")
        staging.mkdir()
    except OSError as exc:
        raise HclError(f"cannot write {out}: {exc.strerror or exc}") from exc
    try:
        yield staging
        _replace_folder(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _replace_folder(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an existing ``out`` is moved aside first, and put back if that rename fails."""
    retired = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:12]}")
    try:
        if out.exists():
            os.rename(out, retired)
        try:
            os.rename(staging, out)
        except OSError:
            if retired.exists():
                os.rename(retired, out)
            raise
    except OSError as exc:
        raise HclError(f"cannot replace {out}: {exc.strerror or exc}") from exc
    shutil.rmtree(retired, ignore_errors=True)
