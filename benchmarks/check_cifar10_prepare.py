"""``hcl prepare`` on the real CIFAR-10 JPEG archive, checked and timed.

Run from the repository root: ``python -m benchmarks.check_cifar10_prepare``. It extracts
``../shared/datasets/cifar10-jpeg.tar.gz`` (train/ and test/ class folders of JPEGs) to a temporary
folder, runs ``hcl prepare --dataset imagefolder`` on it, and checks the counts (50,000 / 10,000),
the ten classes, the labels, the card's mean and std, and the pixels of a random sample of images
against a PIL decode of the same files. Writes ``benchmarks/results/prepare_cifar10.json``.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result
from hcl_cli.image.card import load_card
from hcl_cli.image.prepared import load_split

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "cifar10-jpeg.tar.gz"
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
EXPECTED_COUNTS = {"train": 50_000, "test": 10_000}


def expected_files(split_folder: Path, classes: list[str]) -> list[tuple[Path, int]]:
    """The files of a split in the order prepare documents: sorted classes, then sorted paths."""
    return [(path, label) for label, name in enumerate(classes) for path in sorted((split_folder / name).rglob("*")) if path.is_file()]


def pil_decode(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB")).transpose(2, 0, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE, help="CIFAR-10 JPEG archive with train/ and test/ class folders.")
    parser.add_argument("--sample", type=int, default=1000, help="Images per split whose pixels are compared with a PIL decode.")
    parser.add_argument(
        "--expected-counts",
        type=int,
        nargs=2,
        default=[EXPECTED_COUNTS["train"], EXPECTED_COUNTS["test"]],
        metavar=("TRAIN", "TEST"),
        help="Images the archive holds per split (CIFAR-10's by default; a smaller archive of its layout for a smoke run).",
    )
    args = parser.parse_args()
    expected_counts = dict(zip(EXPECTED_COUNTS, args.expected_counts))

    with tempfile.TemporaryDirectory(prefix="hcl-cifar10-") as workspace:
        root, out = Path(workspace) / "cifar10", Path(workspace) / "prepared"
        start = time.perf_counter()
        with tarfile.open(args.archive) as archive:
            archive.extractall(root, filter="data")
        extract_seconds = time.perf_counter() - start

        command = ["hcl", "prepare", "--dataset", "imagefolder", "--path", str(root), "--out", str(out)]
        start = time.perf_counter()
        subprocess.run(command, check=True)
        prepare_seconds = time.perf_counter() - start

        card = load_card(out)
        rng = np.random.default_rng(0)
        checks = {
            "classes": card.classes == CIFAR10_CLASSES and card.num_classes == 10,
            "counts": card.counts == expected_counts,
            "image_shape": card.image_shape == [3, 32, 32],
            "skipped": card.skipped == 0,
        }
        for split in ("train", "test"):
            images, labels = load_split(out, split)
            files = expected_files(root / split, card.classes)
            checks[f"{split}_labels"] = labels.tolist() == [label for _, label in files]
            sample = rng.choice(len(files), size=min(args.sample, len(files)), replace=False)
            checks[f"{split}_pixels_of_{len(sample)}_images"] = all(
                np.array_equal(images[i].numpy(), pil_decode(files[i][0])) for i in sample
            )
            if split == "train":
                pixels = images.to(torch.float64) / 255.0
                checks["train_mean_std"] = bool(
                    np.allclose(card.mean, pixels.mean(dim=(0, 2, 3)).tolist(), atol=1e-6)
                    and np.allclose(card.std, pixels.std(dim=(0, 2, 3), unbiased=False).tolist(), atol=1e-6)
                )

    passed = all(checks.values())
    write_result(
        "prepare_cifar10",
        {
            "prepare_command": shlex.join(command),
            "archive": str(args.archive),
            "counts": card.counts,
            "classes": card.classes,
            "mean": card.mean,
            "std": card.std,
            "extract_seconds": round(extract_seconds, 2),
            "prepare_wall_seconds": round(prepare_seconds, 2),
            "images_per_second": round(sum(card.counts.values()) / prepare_seconds),
            "checks": checks,
            "passed": passed,
        },
    )
    if not passed:
        sys.exit(f"checks failed: {', '.join(name for name, ok in checks.items() if not ok)}")


if __name__ == "__main__":
    main()
