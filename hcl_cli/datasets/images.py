"""Image dataset sources for ``hcl prepare``, each decoded once.

Each loader decodes its source into uint8 ``(N, C, H, W)`` images and int64 labels per split (-1
for unlabelled images), with the class names: scikit-learn's bundled 8x8 digits; CIFAR-10,
CIFAR-100 and STL-10 through torchvision's dataset classes (which read CIFAR's python batches and
check every file's checksum); and a user's own ``train/`` + ``test/`` tree of class folders.
"""

from __future__ import annotations

import contextlib
import math
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from hcl_cli.artifacts import first_line
from hcl_cli.errors import HclError, UsageError

if TYPE_CHECKING:  # a type only: the stages that read prepared data do not depend on prepare's options
    from hcl_cli.config.prepare import PrepareConfig

DOWNLOAD_SOCKET_TIMEOUT_S = 30.0
MAX_SKIP_WARNINGS = 10

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class SourceDataset:
    """A decoded dataset: ``(images, labels)`` per split, the class names, and where it came from."""

    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]
    classes: list[str]
    source: str
    skipped: int = 0


def load_source(config: PrepareConfig) -> SourceDataset:
    """Decode the dataset that ``config`` names, resized to ``config.image_size`` when it is > 0."""
    if config.dataset == "digits":
        return load_digits(config.test_fraction, config.seed, config.image_size)
    if config.dataset == "imagefolder":
        return load_image_folder(Path(config.path), config.image_size)
    return load_torchvision(config.dataset, Path(config.path), config.image_size)


def load_digits(test_fraction: float, seed: int, image_size: int = 0) -> SourceDataset:
    """scikit-learn's bundled 8x8 digits (values 0..16 scaled to 0..255), with a stratified split."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    digits = sklearn_digits()
    images = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    labels = digits.target.astype(np.int64)
    check_split_sizes(len(labels), len(digits.target_names), test_fraction)
    train_index, test_index = train_test_split(np.arange(len(labels)), test_size=test_fraction, random_state=seed, stratify=labels)
    splits = {}
    for split, index in (("train", np.sort(train_index)), ("test", np.sort(test_index))):
        splits[split] = _as_tensors(_resize_all(images[index], image_size, split), labels[index])
    classes = [str(name) for name in digits.target_names]
    source = f"sklearn.datasets.load_digits, stratified split with test_fraction={test_fraction}"
    return SourceDataset(splits, classes, source)


def check_split_sizes(count: int, num_classes: int, test_fraction: float) -> None:
    """A stratified split needs each split to hold at least one image per class; a UsageError names the counts."""
    test = math.ceil(test_fraction * count)  # as scikit-learn's train_test_split rounds
    train = count - test
    if min(train, test) < num_classes:
        lowest, highest = math.ceil(num_classes / count * 1e4) / 1e4, math.floor((1 - num_classes / count) * 1e4) / 1e4
        raise UsageError(
            f"--test-fraction {test_fraction} leaves {train} train and {test} test images of {count}, but each split needs "
            f"at least one image per class ({num_classes} classes): use a value between {lowest:.4f} and {highest:.4f}"
        )


@dataclass(frozen=True)
class _TorchvisionLayout:
    """How one torchvision dataset class is built per split and what its arrays look like."""

    class_name: str
    split_arguments: dict[str, dict[str, Any]]
    extra_files: tuple[str, ...]
    channels_last: bool
    labels_attribute: str


_TORCHVISION_LAYOUTS = {
    "cifar10": _TorchvisionLayout("CIFAR10", {"train": {"train": True}, "test": {"train": False}}, ("batches.meta",), True, "targets"),
    "cifar100": _TorchvisionLayout("CIFAR100", {"train": {"train": True}, "test": {"train": False}}, ("meta",), True, "targets"),
    "stl10": _TorchvisionLayout(
        "STL10",
        {"train": {"split": "train"}, "test": {"split": "test"}, "unlabeled": {"split": "unlabeled"}},
        ("class_names.txt",),
        False,
        "labels",
    ),
}


def load_torchvision(name: str, root: Path, image_size: int = 0) -> SourceDataset:
    """CIFAR-10, CIFAR-100 or STL-10 through torchvision's dataset class, from ``root``.

    When the extracted files are all in ``root``, they are read (torchvision checks their MD5);
    otherwise torchvision extracts the original archive from ``root`` or downloads it. A failed
    download (offline) becomes one line naming the files to put in ``root``.
    """
    import torchvision.datasets

    layout = _TORCHVISION_LAYOUTS[name]
    dataset_class = getattr(torchvision.datasets, layout.class_name)
    folder = root / dataset_class.base_folder
    expected = [file for file, _ in dataset_class.train_list + dataset_class.test_list] + list(layout.extra_files)
    present = all((folder / file).is_file() for file in expected)
    try:
        with _socket_timeout(DOWNLOAD_SOCKET_TIMEOUT_S):
            datasets = {
                split: dataset_class(str(root), download=not present, **arguments) for split, arguments in layout.split_arguments.items()
            }
    except (RuntimeError, OSError, ValueError) as exc:
        reason = first_line(exc)
        if present:
            raise HclError(
                f"{name} files in {folder} failed torchvision's checks ({reason}): "
                f"replace them with the files of the original {dataset_class.filename}"
            ) from exc
        raise HclError(
            f"{name} not found in {root}: put {dataset_class.filename} (or its extracted {dataset_class.base_folder}/) there, "
            f"or run with network access (download failed: {reason})"
        ) from exc
    classes = getattr(datasets["train"], "classes", None)
    if not classes:
        raise HclError(f"{name}: {folder} has no class names ({', '.join(layout.extra_files)} is missing)")
    splits = {}
    for split, dataset in datasets.items():
        images = np.asarray(dataset.data, dtype=np.uint8)
        if layout.channels_last:
            images = images.transpose(0, 3, 1, 2)
        labels = np.asarray(getattr(dataset, layout.labels_attribute), dtype=np.int64)
        splits[split] = _as_tensors(_resize_all(images, image_size, split), labels)
    return SourceDataset(splits, list(classes), f"torchvision.datasets.{layout.class_name} from {root}")


def load_image_folder(root: Path, image_size: int = 0) -> SourceDataset:
    """A tree ``root/{train,test}/<class>/<image>`` decoded with PIL as RGB, optionally resized.

    Classes are the sorted folder names of ``train/``, and ``test/`` must have the same ones.
    Files that PIL cannot read are skipped with a warning and counted; dot-files are ignored.
    Without ``image_size`` every image must have the same size.
    """
    if not root.is_dir():
        raise HclError(f"imagefolder path {root} not found: it must hold train/ and test/, each with one folder per class")
    classes = _class_folders(root / "train")
    if len(classes) == 1:
        raise HclError(f"{root / 'train'} holds one class folder ({classes[0]}): a dataset needs at least 2 classes")
    test_classes = _class_folders(root / "test")
    if test_classes != classes:
        missing, extra = sorted(set(classes) - set(test_classes)), sorted(set(test_classes) - set(classes))
        raise HclError(
            f"{root / 'test'} must have the class folders of train/ (missing: {', '.join(missing) or '-'}; extra: {', '.join(extra) or '-'})"
        )

    decoded: dict[str, list[tuple[Path, np.ndarray, int]]] = {}
    unreadable: list[str] = []
    for split in ("train", "test"):
        files = [(path, label) for label, name in enumerate(classes) for path in _image_candidates(root / split / name)]
        results = _parallel_map(lambda item: _decode_image(item[0], image_size), files, f"decode {split}")
        decoded[split] = []
        for (path, label), result in zip(files, results):
            if isinstance(result, str):
                unreadable.append(result)
            else:
                decoded[split].append((path, result, label))
        found = {label for _, _, label in decoded[split]}
        empty = [name for label, name in enumerate(classes) if label not in found]
        if empty:
            raise HclError(f"{root / split} has no readable image in class folder(s): {', '.join(empty)}")

    first_path, first_image, _ = decoded["train"][0]
    for path, image, _ in decoded["train"] + decoded["test"]:
        if image.shape != first_image.shape:
            raise UsageError(
                f"images in {root} differ in size ({first_path}: {_size_text(first_image)}, {path}: {_size_text(image)}): "
                "pass --image-size to resize them to one size"
            )
    _warn_skipped(unreadable)
    splits = {
        split: _as_tensors(np.stack([image for _, image, _ in items]), np.array([label for _, _, label in items]))
        for split, items in decoded.items()
    }
    return SourceDataset(splits, classes, f"image folder {root}", skipped=len(unreadable))


def _class_folders(split_folder: Path) -> list[str]:
    if not split_folder.is_dir():
        raise HclError(f"{split_folder} not found: imagefolder needs train/ and test/ folders, each holding one folder per class")
    classes = sorted(entry.name for entry in split_folder.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    if not classes:
        raise HclError(f"{split_folder} holds no class folders: put each class's images in a folder of its own")
    return classes


def _image_candidates(class_folder: Path) -> list[Path]:
    """Every file under ``class_folder`` (nested folders too), except dot-files."""
    return sorted(
        path
        for path in class_folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(class_folder).parts)
    )


def _decode_image(path: Path, image_size: int) -> np.ndarray | str:
    """The image at ``path`` as uint8 (3, H, W), or why PIL could not read it."""
    try:
        with Image.open(path) as image:
            return _pil_to_chw(image.convert("RGB"), image_size)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return f"{path}: {first_line(exc)}"


def _pil_to_chw(image: Image.Image, image_size: int) -> np.ndarray:
    """A PIL image as uint8 (C, H, W), resized bilinearly (antialiased by PIL) when ``image_size`` > 0."""
    if image_size and image.size != (image_size, image_size):
        image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    array = np.asarray(image, dtype=np.uint8)
    return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)


def _resize_all(images: np.ndarray, image_size: int, split: str) -> np.ndarray:
    """Resize uint8 (N, C, H, W) images to ``image_size`` square with PIL, as the image folder loader does."""
    if not image_size or images.shape[-2:] == (image_size, image_size):
        return images

    def resize(image: np.ndarray) -> np.ndarray:
        pixels = image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0)
        return _pil_to_chw(Image.fromarray(np.ascontiguousarray(pixels)), image_size)

    return np.stack(_parallel_map(resize, list(images), f"resize {split}"))


def _parallel_map(function: Callable[[Item], Result], items: Sequence[Item], description: str) -> list[Result]:
    """``function`` over ``items`` on a thread pool (PIL releases the GIL while it decodes), in order."""
    with ThreadPoolExecutor() as pool:
        return list(tqdm(pool.map(function, items), total=len(items), desc=description, unit="img", disable=None))


def _as_tensors(images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels.astype(np.int64))


def _warn_skipped(unreadable: list[str]) -> None:
    for reason in unreadable[:MAX_SKIP_WARNINGS]:
        print(f"hcl prepare: warning: skipped {reason}", file=sys.stderr)
    if unreadable:
        more = f" ({len(unreadable) - MAX_SKIP_WARNINGS} not listed)" if len(unreadable) > MAX_SKIP_WARNINGS else ""
        print(
            f"hcl prepare: warning: skipped {len(unreadable)} unreadable file(s){more}; card.json counts them as 'skipped'", file=sys.stderr
        )


def _size_text(image: np.ndarray) -> str:
    return f"{image.shape[2]}x{image.shape[1]}"


@contextlib.contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    """Bound every socket operation, so an unreachable download server fails instead of hanging."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)
