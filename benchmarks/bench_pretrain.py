"""Pretraining throughput: images per second and epoch time of the real training loop.

Runs :func:`hcl_cli.training.loop.train_one_epoch` with the step that
:func:`hcl_cli.image.step.build_training` makes (data order, index slicing of the
device-resident uint8 set, two batched augmented views, forward, loss, backward, Adam) on a
prepared folder, after one untimed warm-up step (for ``--compile``, the compilation). An image counts once, although it
gives two views. No checkpoint is written and no probe runs, so the figures are the training loop
alone. Writes ``benchmarks/results/pretrain_<arch>_<device>.json``.

    python -m benchmarks.bench_pretrain --dataset data/prepared --arch small_cnn --batch-size 256 --device cpu
    python -m benchmarks.bench_pretrain --dataset /tmp/cifar10 --arch resnet18 --batch-size 512 --device cuda --compile

``--synthetic N`` first prepares, in a temporary folder, an image folder of N random 32x32 RGB
images in 10 classes (through ``hcl prepare --dataset imagefolder``) and benchmarks on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, prepared, timed_epochs, training_run, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import distributed_context
from hcl_cli.image.card import load_card
from hcl_cli.runtime import resolve_device

SYNTHETIC_CLASSES = 10
SYNTHETIC_SIZE = 32


def write_synthetic_image_folder(root: Path, count: int, seed: int = 0, side: int = SYNTHETIC_SIZE) -> None:
    """``root/{train,test}/<class>/<n>.png``: ``count`` random ``side`` x ``side`` RGB train images and a tenth of that for test."""
    generator = np.random.default_rng(seed)
    for split, size in (("train", count), ("test", max(SYNTHETIC_CLASSES, count // 10))):
        for index in range(size):
            folder = root / split / f"class{index % SYNTHETIC_CLASSES}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = generator.integers(0, 256, (side, side, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{index}.png")


def benchmark(config: PretrainConfig) -> tuple[dict[str, object], dict[str, object]]:
    """Time ``config.epochs`` epochs of the training loop after one warm-up step: (the setting, the timings)."""
    with distributed_context(config.device) as context, tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        epoch_seconds = timed_epochs(training, config.epochs, warmup=1)
    card, steps_per_epoch = load_card(config.data), training.steps_per_epoch
    median = statistics.median(epoch_seconds)
    setting = {
        "arch": training.model.arch,
        "dataset": card.name,
        "image_shape": card.image_shape,
        "train_images": len(training.samples),
        "batch_size": config.batch_size,
        "steps_per_epoch": steps_per_epoch,
        "sampler": config.sampler,
        "compile": config.compile,
    }
    timings = {
        "threads": torch.get_num_threads(),
        "load_average_1min": load_average(),
        "epoch_seconds": [round(s, 3) for s in epoch_seconds],
        "median_epoch_seconds": round(median, 3),
        "images_per_second": round(steps_per_epoch * config.batch_size / median, 1),
    }
    return setting, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="data/prepared", help="Prepared dataset folder (from hcl prepare).")
    parser.add_argument("--synthetic", type=int, default=0, help="Instead, prepare N random 32x32 RGB images in a temporary folder.")
    parser.add_argument("--arch", default="auto", help="small_cnn, resnet18, resnet50 or auto.")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda.")
    parser.add_argument("--epochs", type=int, default=3, help="Timed epochs (the median is reported).")
    parser.add_argument("--sampler", default="hucl")
    parser.add_argument("--compile", action="store_true", help="torch.compile the encoder.")
    parser.add_argument(
        "--threads",
        default=str(torch.get_num_threads()),
        help="Comma-separated CPU thread counts to time, one run each (default: torch's).",
    )
    args = parser.parse_args()

    device = resolve_device(args.device)
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.dataset)
        if args.synthetic:
            write_synthetic_image_folder(Path(scratch) / "images", args.synthetic)
            folder = Path(scratch) / "prepared"
            prepared(folder, dataset="imagefolder", path=str(Path(scratch) / "images"))
        config = PretrainConfig(
            data=str(folder),
            arch=args.arch,
            batch_size=args.batch_size,
            device=args.device,
            sampler=args.sampler,
            compile=args.compile,
            epochs=args.epochs,
        )
        for threads in (int(count) for count in args.threads.split(",")):
            torch.set_num_threads(threads)
            setting, timings = benchmark(config)
            print(
                f"{setting['arch']} on {device}, {threads} thread(s): {timings['images_per_second']} images/s, {timings['median_epoch_seconds']} s per epoch of {setting['steps_per_epoch']} steps"
            )
            runs.append(timings)
    if args.synthetic:
        setting["dataset"] = f"synthetic imagefolder, {args.synthetic} random 32x32 RGB images"
    write_result(f"pretrain_{setting['arch']}_{device.type}", {**setting, "runs": runs}, device)


if __name__ == "__main__":
    main()
