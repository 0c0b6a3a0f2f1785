"""The prepared folder's card (``card.json``): :class:`DatasetCard`, written by :func:`save_card` alone
and read back, every field checked, by :func:`load_card`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcl_cli.artifacts import SCHEMA_VERSION, is_finite_number, is_integer, read_json, write_json
from hcl_cli.errors import HclError, InputError

SPLITS = ("train", "test", "unlabeled")
CARD_FILE = "card.json"
CHANNEL_STATISTICS = {"mean": (0.0, 1.0), "std": (1e-8, 1.0)}
"""The ranges of the per-channel statistics of images in 0..1 that a card or an encoder records: a mean in [0, 1]; a
standard deviation at most 1 (0.5 in fact) and at least 1e-8 (a channel one grey level apart in one pixel of 51
million has 5e-7, while dividing by 1e-320, which float32 reads as 0, would make every normalised image non-finite)."""


@dataclass(frozen=True)
class DatasetCard:
    """What ``hcl prepare`` records about a prepared folder (its ``card.json``).

    ``counts`` holds the number of images per split, ``image_shape`` is ``[C, H, W]``, ``mean`` and
    ``std`` are the per-channel statistics of the train split in 0..1, ``source`` says where the
    images came from, ``seed`` is the seed of the split, and ``skipped`` counts unreadable files.
    A card written before ``source``, ``seed`` or ``skipped`` were recorded reads them as None, None and 0.
    """

    name: str
    classes: list[str]
    num_classes: int
    counts: dict[str, int]
    image_shape: list[int]
    mean: list[float]
    std: list[float]
    source: str | None = None
    seed: int | None = None
    skipped: int = 0
    schema_version: int = SCHEMA_VERSION


def save_card(folder: str | Path, card: DatasetCard) -> None:
    """Write ``card`` as the ``card.json`` of ``folder`` (atomic); the only writer of dataset cards."""
    write_json(
        Path(folder) / CARD_FILE,
        {
            "schema_version": card.schema_version,
            "name": card.name,
            "classes": card.classes,
            "num_classes": card.num_classes,
            "counts": card.counts,
            "image_shape": card.image_shape,
            "mean": card.mean,
            "std": card.std,
            "source": card.source,
            "seed": card.seed,
            "skipped": card.skipped,
        },
    )


def load_card(folder: str | Path) -> DatasetCard:
    """The dataset card of a prepared folder, checked for every field the stages rely on.

    A missing folder or card, another schema version, or a missing or invalid field is a one-line
    :class:`HclError` naming the file (and the field).
    """
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise InputError(f"{folder} is not a prepared dataset folder (no {CARD_FILE}): run hcl prepare first")
    values = read_json(path, what="dataset card")
    if not is_integer(values.get("schema_version")) or values.get("schema_version") != SCHEMA_VERSION:
        version = values.get("schema_version")
        raise InputError(f"{path}: schema version {version!r} is not supported (this hcl reads {SCHEMA_VERSION}): run hcl prepare again")

    def invalid(field: str, expected: str) -> HclError:
        return InputError(
            f"{path} is not a valid dataset card: {field!r} must be {expected} (got {values.get(field)!r}): run hcl prepare again"
        )

    name, classes, counts, shape = values.get("name"), values.get("classes"), values.get("counts"), values.get("image_shape")
    if not isinstance(name, str):
        raise invalid("name", "a string")
    if (
        not isinstance(classes, list)
        or len(classes) < 2
        or not all(isinstance(c, str) for c in classes)
        or len(set(classes)) != len(classes)
    ):
        raise invalid("classes", "a list of at least 2 distinct class names")
    if not is_integer(values.get("num_classes")) or values.get("num_classes") != len(classes):
        raise invalid("num_classes", f"the number of classes ({len(classes)})")
    if (
        not isinstance(counts, dict)
        or not {"train", "test"} <= counts.keys() <= set(SPLITS)
        or not all(_is_positive_int(count) for count in counts.values())
    ):
        raise invalid("counts", "a positive image count per split, for train, test and optionally unlabeled")
    if not isinstance(shape, list) or len(shape) != 3 or not all(_is_positive_int(size) for size in shape):
        raise invalid("image_shape", "[channels, height, width] of positive integers")
    wrong = wrong_channel_statistics(values, shape[0])
    if wrong is not None:
        raise invalid(*wrong)
    source, seed, skipped = values.get("source"), values.get("seed"), values.get("skipped", 0)
    if source is not None and not isinstance(source, str):
        raise invalid("source", "a string")
    if seed is not None and not _is_int(seed):
        raise invalid("seed", "an integer")
    if not _is_int(skipped) or skipped < 0:
        raise invalid("skipped", "a count of files")
    return DatasetCard(
        name=name,
        classes=classes,
        num_classes=len(classes),
        counts=counts,
        image_shape=shape,
        mean=values["mean"],
        std=values["std"],
        source=source,
        seed=seed,
        skipped=skipped,
        schema_version=SCHEMA_VERSION,
    )


def wrong_channel_statistics(values: dict[str, Any], channels: int) -> tuple[str, str] | None:
    """The first of ``values``' ``mean`` and ``std`` that is not ``channels`` numbers in its :data:`CHANNEL_STATISTICS`
    range, with what it must be; None when both are right."""
    for key, (low, high) in CHANNEL_STATISTICS.items():
        numbers = values.get(key)
        if not isinstance(numbers, list) or len(numbers) != channels or not all(is_finite_number(v) and low <= v <= high for v in numbers):
            return key, f"a list of {channels} numbers in [{low:g}, {high:g}], one per channel"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_int(value: Any) -> bool:
    return _is_int(value) and value > 0
