"""Augmentation throughput: hcl's batched SimCLR augmentation on the device against per-sample torchvision in workers.

Every side runs the SimCLR recipe HCL trains with (RandomResizedCrop scale 0.08-1, flip,
ColorJitter(0.4, 0.4, 0.4, 0.1) p=0.8, grayscale p=0.2, normalise) and makes two views of every
image of a synthetic CIFAR-sized uint8 set, the way a pretraining epoch consumes it:

- ``batched``: ``hcl_cli.image.augment.build_augmentation`` (pure torch, :mod:`hcl_cli.image.simclr_augment`) on
  uint8 batches already on the device, one call per view;
- ``batched_kornia``: the same recipe with kornia.augmentation (hcl's augmentation before issue 28),
  only where kornia is installed;
- ``per_sample_v2_tensor``: ``torchvision.transforms.v2`` on each uint8 tensor image in DataLoader workers;
- ``per_sample_v2_pil``: the same on PIL images, as HCL's official code does.

Throughput is images per second, each image counted once for its two views, over one full pass
(worker start-up included, as in every epoch without persistent workers; batched sides after one
warm-up batch), from the fastest of ``--repeats`` interleaved passes. Also recorded: the aten ops
and host syncs of one batched call (counted as ``benchmarks/step_counts.py`` counts a step) and
the seconds per batch of each part of it. Run from the repository root::

    python -m benchmarks.bench_augment --device cpu

It writes ``benchmarks/results/augment_<device>.json``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, synchronize, write_result
from hcl_cli.image import simclr_augment
from hcl_cli.image.augment import Normalize, ToUnitFloat, build_augmentation
from hcl_cli.runtime import resolve_device

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")


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
            v2.RandomResizedCrop(size, scale=simclr_augment.CROP_SCALE, ratio=simclr_augment.CROP_RATIO, antialias=True),
            v2.RandomHorizontalFlip(p=simclr_augment.FLIP_P),
            v2.RandomApply([v2.ColorJitter(*simclr_augment.JITTER)], p=simclr_augment.JITTER_P),
            v2.RandomGrayscale(p=simclr_augment.GRAYSCALE_P),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(list(mean), list(std)),
        ]
    )


def kornia_simclr(size: int) -> nn.Module | None:
    """The SimCLR recipe with kornia.augmentation on uint8 batches, as hcl ran it before issue 28; None without kornia."""
    try:
        import kornia.augmentation as K
    except ImportError:
        return None
    return nn.Sequential(
        ToUnitFloat(),
        K.RandomResizedCrop((size, size), scale=simclr_augment.CROP_SCALE, ratio=simclr_augment.CROP_RATIO, cropping_mode="resample"),
        K.RandomHorizontalFlip(p=simclr_augment.FLIP_P),
        K.ColorJitter(*simclr_augment.JITTER, p=simclr_augment.JITTER_P),
        K.RandomGrayscale(p=simclr_augment.GRAYSCALE_P),
        Normalize(CIFAR_MEAN, CIFAR_STD),
    )


def hcl_simclr(size: int) -> nn.Module:
    return build_augmentation(size, 3, CIFAR_MEAN, CIFAR_STD, blur=False, recipe="simclr")


def time_batched(augment: nn.Module, images: torch.Tensor, batch_size: int, device: torch.device) -> float:
    """Seconds for two views of every image, one call per view, the uint8 set resident on ``device``."""
    augment = augment.to(device)
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


def host_work(augment: nn.Module, images: torch.Tensor) -> dict[str, int]:
    """The aten ops (nested calls included) and host syncs of one call on ``images``, after an untimed one."""
    with torch.no_grad():
        augment(images)
        with profile(activities=[ProfilerActivity.CPU]) as profiled:
            augment(images)
    counts = {event.key: event.count for event in profiled.key_averages() if event.key.startswith("aten::")}
    return {"aten_ops": sum(counts.values()), "syncs": sum(counts.get(name, 0) for name in SYNC_OPS)}


def time_batched_parts(images: torch.Tensor, batch_size: int, device: torch.device, batches: int = 4) -> dict[str, float]:
    """Seconds per batch of each part of one hcl view, to show where the batched time goes."""
    size = images.shape[-1]
    fixed = simclr_augment.constants(size, size, 3, size, 0, device)
    normalize = Normalize(CIFAR_MEAN, CIFAR_STD).to(device)
    parts: dict[str, Callable[[torch.Tensor, simclr_augment.SimCLRParams], torch.Tensor]] = {
        "to_float": lambda batch, _: ToUnitFloat()(batch),
        "crop_and_flip": lambda batch, params: simclr_augment.resized_crop(batch, params.corner, params.box, params.flip, fixed),
        "colour_jitter": lambda batch, params: simclr_augment.colour_jitter(batch, params.factors, params.order, fixed),
        "grayscale": lambda batch, params: torch.where(params.grayscale.view(-1, 1, 1, 1), simclr_augment.grayscale(batch, fixed), batch),
        "normalize": lambda batch, _: normalize(batch),
    }
    totals = dict.fromkeys(["draw", *parts], 0.0)
    with torch.no_grad():
        for batch in images[: batches * batch_size].to(device).split(batch_size):
            synchronize(device)
            start = time.perf_counter()
            params = simclr_augment.draw(len(batch), fixed)
            synchronize(device)
            totals["draw"] += time.perf_counter() - start
            for name, part in parts.items():
                start = time.perf_counter()
                batch = part(batch, params)
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
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of the per-sample sides (0: in this process)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per method; the fastest is reported")
    args = parser.parse_args()
    device = resolve_device(args.device)
    load_before = load_average()
    torch.manual_seed(0)
    images = torch.randint(0, 256, (args.images, 3, args.image_size, args.image_size), dtype=torch.uint8)
    as_tensors = list(images)
    as_pil = [Image.fromarray(np.ascontiguousarray(image.permute(1, 2, 0).numpy())) for image in images]

    batched = {"batched": hcl_simclr(args.image_size)}
    kornia = kornia_simclr(args.image_size)
    if kornia is not None:
        batched["batched_kornia"] = kornia
    per_sample_tensor = TwoViews(as_tensors, torchvision_simclr(args.image_size))
    per_sample_pil = TwoViews(as_pil, torchvision_simclr(args.image_size))
    measures = {name: (lambda augment=augment: time_batched(augment, images, args.batch_size, device)) for name, augment in batched.items()}
    measures["per_sample_v2_tensor"] = lambda: time_workers(per_sample_tensor, args.batch_size, args.workers, device)
    measures["per_sample_v2_pil"] = lambda: time_workers(per_sample_pil, args.batch_size, args.workers, device)
    results = interleaved_figures(measures, args.images, args.repeats)
    fastest_per_sample = max(results["per_sample_v2_tensor"]["images_per_s"], results["per_sample_v2_pil"]["images_per_s"])
    first_batch = images[: args.batch_size].to(device)
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
        "load_average_1min_after": load_average(),
        "libraries": {"torchvision": torchvision.__version__}
        | ({"kornia": importlib.metadata.version("kornia")} if kornia is not None else {}),
        "results": results,
        "host_work_per_call": {name: host_work(augment, first_batch) for name, augment in batched.items()},
        "batched_seconds_per_batch_by_part": time_batched_parts(images, args.batch_size, device),
        "speedup_batched_over_best_per_sample": round(results["batched"]["images_per_s"] / fastest_per_sample, 2),
    }
    if kornia is not None:
        payload["speedup_batched_over_kornia"] = round(results["batched"]["images_per_s"] / results["batched_kornia"]["images_per_s"], 2)
    for name, result in results.items():
        print(f"{name:>22}: {result['images_per_s']:>10.1f} images/s (passes: {result['seconds']} s)")
    write_result(f"augment_{device.type}", payload, device)


if __name__ == "__main__":
    main()
