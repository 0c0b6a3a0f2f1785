"""Image dataset sources for ``hcl prepare``, each decoded once.

Each loader decodes its source into uint8 ``(N, C, H, W)`` images and int64 labels per split (-1
for unlabelled images), with the class names: scikit-learn's bundled 8x8 digits; CIFAR-10,
CIFAR-100 and STL-10 through torchvision's dataset classes (which read CIFAR's python batches and
check every file's checksum); and a user's own ``train/`` + ``test/`` tree of class folders.
"""

from __future__ import annotations

import contextlib
import io
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from PIL import Image

from hcl_cli.artifacts import first_line
from hcl_cli.errors import HclError, InputError, UsageError
from hcl_cli.image.archive import IMAGE_SPLITS, read_image_archive
from hcl_cli.image.depth import as_rgb
from hcl_cli.logs import LOG
from hcl_cli.progress import progress
from hcl_cli.runtime import GIB, SKIP_VARIABLE, available_bytes, memory_check_skipped
from hcl_cli.splits import check_split_sizes

if TYPE_CHECKING:  # a type only: the stages that read prepared data do not depend on prepare's options
    from hcl_cli.config.prepare import PrepareConfig

DOWNLOAD_SOCKET_TIMEOUT_S = 30.0
MAX_SKIP_WARNINGS = 10
PREPARE_HEADROOM = 2**29
"""What ``prepare`` holds beside the decoded images at its peak (the channel statistics' blocks, buffers): 0.5 GiB."""

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
    check_split_sizes(len(labels), len(digits.target_names), test_fraction, "image")
    train_index, test_index = train_test_split(np.arange(len(labels)), test_size=test_fraction, random_state=seed, stratify=labels)
    splits = {}
    for split, index in (("train", np.sort(train_index)), ("test", np.sort(test_index))):
        splits[split] = _as_tensors(_resize_all(images[index], image_size, split), labels[index])
    classes = [str(name) for name in digits.target_names]
    source = f"sklearn.datasets.load_digits, stratified split with test_fraction={test_fraction}"
    return SourceDataset(splits, classes, source)


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
    missing = [path for path in (root, *root.parents) if not path.exists()]  # what a failed download must not leave behind
    try:
        with _socket_timeout(DOWNLOAD_SOCKET_TIMEOUT_S):
            datasets = {
                split: dataset_class(str(root), download=not present, **arguments) for split, arguments in layout.split_arguments.items()
            }
    except (RuntimeError, OSError, ValueError) as exc:
        reason = first_line(exc)
        for path in missing:  # deepest first; one holding anything (a partial download) is kept
            with contextlib.suppress(OSError):
                path.rmdir()
        if present:
            raise InputError(
                f"{name} files in {folder} failed torchvision's checks ({reason}): "
                f"replace them with the files of the original {dataset_class.filename}"
            ) from exc
        raise InputError(
            f"{name} not found in {root}: put {dataset_class.filename} (or its extracted {dataset_class.base_folder}/) there, "
            f"or run with network access (download failed: {reason})"
        ) from exc
    classes = getattr(datasets["train"], "classes", None)
    if not classes:
        raise InputError(f"{name}: {folder} has no class names ({', '.join(layout.extra_files)} is missing)")
    splits = {}
    for split, dataset in datasets.items():
        images = np.asarray(dataset.data, dtype=np.uint8)
        if layout.channels_last:
            images = images.transpose(0, 3, 1, 2)
        labels = np.asarray(getattr(dataset, layout.labels_attribute), dtype=np.int64)
        splits[split] = _as_tensors(_resize_all(images, image_size, split), labels)
    return SourceDataset(splits, list(classes), f"torchvision.datasets.{layout.class_name} from {root}")


def load_image_folder(root: Path, image_size: int = 0) -> SourceDataset:
    """A tree ``root/{train,test}/<class>/<image>``, or a tar archive of one (:mod:`hcl_cli.image.archive`), decoded with
    PIL as RGB, optionally resized.

    Classes are the sorted folder names of ``train/``, and ``test/`` must have the same ones; each
    class's images are taken in the order of their sorted paths, so an archive gives what its
    extracted folder gives. Files that PIL cannot read are skipped with a warning and counted;
    dot-files are ignored. Without ``image_size`` every image must have the same size.
    """
    if root.is_file():
        tree = read_image_archive(root)
        classes = _classes(tree.where, tree.class_names)
        files = {
            split: [
                (f"{tree.where(split)}{name}/{inside}", data, label)
                for label, name in enumerate(classes)
                for inside, data in sorted(tree.files[split][name], key=lambda item: item[0])
            ]
            for split in IMAGE_SPLITS
        }
        return _decode_splits(str(root), tree.where, classes, files, image_size, f"image archive {root}")
    if not root.is_dir():
        raise InputError(
            f"imagefolder path {root} not found: it must be a folder holding train/ and test/, each with one folder per class, "
            "or a .tar.gz of one"
        )
    classes = _classes(lambda split: str(root / split), lambda split: _class_folders(root / split))
    folder_files = {
        split: [(str(path), path, label) for label, name in enumerate(classes) for path in _image_candidates(root / split / name)]
        for split in IMAGE_SPLITS
    }
    return _decode_splits(str(root), lambda split: str(root / split), classes, folder_files, image_size, f"image folder {root}")


ImageFile = tuple[str, Path | bytes, int]
"""An image to decode: how messages name it, its file (or its bytes, from an archive), its class."""


def _classes(where: Callable[[str], str], listed: Callable[[str], list[str]]) -> list[str]:
    """The class folders of train/ (``listed("train")``), at least 2, and test/'s the same; ``where(split)`` names a split folder."""
    classes = listed("train")
    if len(classes) == 1:
        raise InputError(f"{where('train')} holds one class folder ({classes[0]}): a dataset needs at least 2 classes")
    test_classes = listed("test")
    if test_classes != classes:
        missing, extra = sorted(set(classes) - set(test_classes)), sorted(set(test_classes) - set(classes))
        raise InputError(
            f"{where('test')} must have the class folders of train/ (missing: {', '.join(missing) or '-'}; extra: {', '.join(extra) or '-'})"
        )
    return classes


def _decode_splits(
    root: str, where: Callable[[str], str], classes: list[str], files: dict[str, list[ImageFile]], image_size: int, source: str
) -> SourceDataset:
    """Decode each split's ``files`` (:func:`load_image_folder`'s rules) into the dataset."""
    decoded: dict[str, list[tuple[str, np.ndarray, int]]] = {}
    unreadable: list[str] = []
    for split, items in files.items():
        if image_size:
            check_decoded_memory(len(items), 3, image_size, split, copies=2)  # the decoded images, then their stack
        results = _parallel_map(lambda item: _decode_image(item[1], item[0], image_size), items, f"decode {split}")
        decoded[split] = []
        for (name, _, label), result in zip(items, results):
            if isinstance(result, str):
                unreadable.append(result)
            else:
                decoded[split].append((name, result, label))
        found = {label for _, _, label in decoded[split]}
        empty = [name for label, name in enumerate(classes) if label not in found]
        if empty:
            raise InputError(f"{where(split)} has no readable image in class folder(s): {', '.join(empty)}")

    first_name, first_image, _ = decoded["train"][0]
    for name, image, _ in decoded["train"] + decoded["test"]:
        if image.shape != first_image.shape:
            raise UsageError(
                f"images in {root} differ in size ({first_name}: {_size_text(first_image)}, {name}: {_size_text(image)}): "
                "pass --image-size to resize them to one size"
            )
    _warn_skipped(unreadable)
    splits = {
        split: _as_tensors(np.stack([image for _, image, _ in items]), np.array([label for _, _, label in items]))
        for split, items in decoded.items()
    }
    return SourceDataset(splits, classes, source, skipped=len(unreadable))


def _class_folders(split_folder: Path) -> list[str]:
    if not split_folder.is_dir():
        raise InputError(f"{split_folder} not found: imagefolder needs train/ and test/ folders, each holding one folder per class")
    classes = sorted(entry.name for entry in split_folder.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    if not classes:
        raise InputError(f"{split_folder} holds no class folders: put each class's images in a folder of its own")
    return classes


def _image_candidates(class_folder: Path) -> list[Path]:
    """Every file under ``class_folder`` (nested folders too), except dot-files."""
    return sorted(
        path
        for path in class_folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(class_folder).parts)
    )


def _decode_image(source: Path | bytes, name: str, image_size: int) -> np.ndarray | str:
    """The image in ``source`` (a file, or its bytes) as uint8 (3, H, W), or why PIL could not read ``name``."""
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            return _pil_to_chw(as_rgb(image, name), image_size)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return f"{name}: {first_line(exc)}"


def _pil_to_chw(image: Image.Image, image_size: int) -> np.ndarray:
    """A PIL image as uint8 (C, H, W), resized bilinearly (antialiased by PIL) when ``image_size`` > 0."""
    if image_size and image.size != (image_size, image_size):
        image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    array = np.asarray(image, dtype=np.uint8)
    return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)


def _resize_all(images: np.ndarray, image_size: int, split: str) -> np.ndarray:
    """Resize uint8 (N, C, H, W) images to ``image_size`` square with PIL, as the image folder loader does, into one
    array allocated once (after :func:`check_decoded_memory`)."""
    if not image_size or images.shape[-2:] == (image_size, image_size):
        return images
    count, channels = images.shape[:2]
    check_decoded_memory(count, channels, image_size, split)
    resized = np.empty((count, channels, image_size, image_size), dtype=np.uint8)

    def resize(index: int) -> None:
        image = images[index]
        pixels = image[0] if channels == 1 else image.transpose(1, 2, 0)
        resized[index] = _pil_to_chw(Image.fromarray(np.ascontiguousarray(pixels)), image_size)

    _parallel_map(resize, range(count), f"resize {split}")
    return resized


def check_decoded_memory(count: int, channels: int, image_size: int, split: str, copies: int = 1) -> None:
    """Before decoding ``count`` images of ``split`` at ``image_size`` px square (held ``copies`` times at the peak): a
    one-line :class:`HclError` when they will not fit in the memory free now, naming a size that would, as pretrain's
    memory check does (:mod:`hcl_cli.training.memory`); ``HCL_SKIP_MEMORY_CHECK=1`` skips it."""
    available = None if memory_check_skipped() else available_bytes(torch.device("cpu"))
    if available is None:
        return

    def needed(size: int) -> int:
        return copies * count * channels * size * size + PREPARE_HEADROOM

    if needed(image_size) <= available:
        return
    fits = next((size for size in (2**power for power in range(12, 2, -1)) if size < image_size and needed(size) <= available), None)
    hint = f"try --image-size {fits} (about {needed(fits) / GIB:.1f} GiB)" if fits else "prepare it on a machine with more memory"
    raise HclError(
        f"decoding the {count} {split} images at {image_size} px would need about {needed(image_size) / GIB:.1f} GiB, but the "
        f"machine has {available / GIB:.1f} GiB free: {hint}; {SKIP_VARIABLE}=1 skips this check"
    )


def _parallel_map(function: Callable[[Item], Result], items: Sequence[Item], description: str) -> list[Result]:
    """``function`` over ``items`` on a thread pool (PIL releases the GIL while it decodes), in order, its progress shown."""
    with ThreadPoolExecutor() as pool:
        return list(progress(pool.map(function, items), len(items), description, "image", "hcl prepare"))


def _as_tensors(images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels.astype(np.int64))


def _warn_skipped(unreadable: list[str]) -> None:
    for reason in unreadable[:MAX_SKIP_WARNINGS]:
        LOG.warning(f"hcl prepare: warning: skipped {reason}")
    if unreadable:
        more = f" ({len(unreadable) - MAX_SKIP_WARNINGS} not listed)" if len(unreadable) > MAX_SKIP_WARNINGS else ""
        LOG.warning(f"hcl prepare: warning: skipped {len(unreadable)} unreadable file(s){more}; card.json counts them as 'skipped'")


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
