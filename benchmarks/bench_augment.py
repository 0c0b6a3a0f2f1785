"""Augmentation throughput: batched on the device (kornia) against per-sample torchvision in DataLoader workers.

Both sides run the SimCLR recipe HCL trains with (RandomResizedCrop scale 0.08-1, flip,
ColorJitter(0.4, 0.4, 0.4, 0.1) p=0.8, grayscale p=0.2, normalise) and make two views of every
image of a synthetic CIFAR-sized uint8 set, the way a pretraining epoch consumes it:

- ``batched_kornia``: ``hcl_cli.augment.build_augmentation`` on uint8 batches already on the device;
- ``per_sample_v2_tensor``: ``torchvision.transforms.v2`` on each uint8 tensor image in workers;
- ``per_sample_v2_pil``: the same on PIL images, as HCL's official code does.

Throughput is images per second, each image counted once for its two views, over one full pass
(worker start-up included, as in every epoch without persistent workers; batched side after one
warm-up batch), from the fastest of ``--repeats`` interleaved passes. Run from the repository root::

    python -m benchmarks.bench_augment --device cpu

It writes ``benchmarks/results/augment_<device>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import kornia
import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import synchronize, write_result
from hcl_cli.augment import SIMCLR_CROP_SCALE, SIMCLR_GRAYSCALE_P, SIMCLR_JITTER, SIMCLR_JITTER_P, build_augmentation
from hcl_cli.runtime import resolve_device

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class TwoViews(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each item: two independently augmented views of one image (HCL's ``CIFAR10Pair``)."""

    def __init__(self, images: list[torch.Tensor] | list[Image.Image], transform: Callable[[object], torch.Tensor]) -> None:
        self.images = images
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        return self.transform(image), self.transform(image)


def torchvision_simclr(size: int, mean: Sequence[float] = CIFAR_MEAN, std: Sequence[float] = CIFAR_STD) -> v2.Compose:
    """The SimCLR recipe with torchvision.transforms.v2, per image (PIL or uint8 tensor in, float out)."""
    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(size, scale=SIMCLR_CROP_SCALE, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.RandomApply([v2.ColorJitter(*SIMCLR_JITTER)], p=SIMCLR_JITTER_P),
            v2.RandomGrayscale(p=SIMCLR_GRAYSCALE_P),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(list(mean), list(std)),
        ]
    )


def time_batched(images: torch.Tensor, batch_size: int, device: torch.device) -> float:
    """Seconds for two kornia views of every image, the uint8 set resident on ``device``."""
    augment = build_augmentation(images.shape[-1], images.shape[1], CIFAR_MEAN, CIFAR_STD, blur=False, recipe="simclr").to(device)
    resident = images.to(device)
    with torch.no_grad():
        augment(resident[:batch_size])
        synchronize(device)
        start = time.perf_counter()
        for batch in resident.split(batch_size):
            augment(batch)
            augment(batch)
        synchronize(device)
    return time.perf_counter() - start


def time_batched_ops(images: torch.Tensor, batch_size: int, device: torch.device, batches: int = 4) -> dict[str, float]:
    """Seconds per batch of each kornia op (one view), to show where the batched time goes."""
    augment = build_augmentation(images.shape[-1], images.shape[1], CIFAR_MEAN, CIFAR_STD, blur=False, recipe="simclr").to(device)
    to_float, random_ops, normalize = augment
    ops = {"to_float": to_float, **{type(op).__name__: op for op in random_ops}, "normalize": normalize}
    totals = dict.fromkeys(ops, 0.0)
    with torch.no_grad():
        for batch in images[: batches * batch_size].to(device).split(batch_size):
            for name, op in ops.items():
                synchronize(device)
                start = time.perf_counter()
                batch = op(batch)
                synchronize(device)
                totals[name] += time.perf_counter() - start
    return {name: round(total / batches, 4) for name, total in totals.items()}


def time_workers(dataset: TwoViews, batch_size: int, workers: int, device: torch.device) -> float:
    """Seconds for one shuffled pass of a worker DataLoader, batches moved to ``device``."""
    loader = DataLoader(
        dataset, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=device.type == "cuda", drop_last=False
    )
    start = time.perf_counter()
    for first, second in loader:
        first.to(device, non_blocking=True)
        second.to(device, non_blocking=True)
    synchronize(device)
    return time.perf_counter() - start


def interleaved_figures(measures: dict[str, Callable[[], float]], count: int, repeats: int) -> dict[str, dict[str, float | list[float]]]:
    """Run every measure once per round, ``repeats`` rounds, so a change in the load of a shared
    machine hits all alike; report every pass's seconds and the images per second of the fastest
    pass (as ``timeit`` does: slower passes measure the machine's other users, not the method)."""
    seconds: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(repeats):
        for name, measure in measures.items():
            seconds[name].append(measure())
    return {
        name: {"seconds": [round(s, 3) for s in passes], "images_per_s": round(count / min(passes), 1)} for name, passes in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--images", type=int, default=10_000, help="synthetic uint8 images")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of the per-sample side")
    parser.add_argument("--repeats", type=int, default=3, help="passes per method; the fastest is reported")
    args = parser.parse_args()
    device = resolve_device(args.device)
    load_before = round(os.getloadavg()[0], 2)
    torch.manual_seed(0)
    images = torch.randint(0, 256, (args.images, 3, args.image_size, args.image_size), dtype=torch.uint8)
    as_tensors = list(images)
    as_pil = [Image.fromarray(np.ascontiguousarray(image.permute(1, 2, 0).numpy())) for image in images]

    per_sample_tensor = TwoViews(as_tensors, torchvision_simclr(args.image_size))
    per_sample_pil = TwoViews(as_pil, torchvision_simclr(args.image_size))
    measures = {
        "batched_kornia": lambda: time_batched(images, args.batch_size, device),
        "per_sample_v2_tensor": lambda: time_workers(per_sample_tensor, args.batch_size, args.workers, device),
        "per_sample_v2_pil": lambda: time_workers(per_sample_pil, args.batch_size, args.workers, device),
    }
    results = interleaved_figures(measures, args.images, args.repeats)
    fastest_per_sample = max(results["per_sample_v2_tensor"]["images_per_s"], results["per_sample_v2_pil"]["images_per_s"])
    payload = {
        "benchmark": "simclr augmentation, two views per image",
        "settings": {
            "images": args.images,
            "image_size": args.image_size,
            "batch_size": args.batch_size,
            "workers": args.workers,
            "threads": torch.get_num_threads(),
        },
        "load_average_1min_before": load_before,
        "libraries": {"torchvision": torchvision.__version__, "kornia": kornia.__version__},
        "results": results,
        "batched_seconds_per_batch_by_op": time_batched_ops(images, args.batch_size, device),
        "speedup_batched_over_best_per_sample": round(results["batched_kornia"]["images_per_s"] / fastest_per_sample, 2),
    }
    for name, result in results.items():
        print(f"{name:>22}: {result['images_per_s']:>10.1f} images/s (passes: {result['seconds']} s)")
    write_result(f"augment_{device.type}", payload, device)


if __name__ == "__main__":
    main()
