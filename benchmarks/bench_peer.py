"""Pretraining throughput of hcl against a peer, lightly's NT-Xent with a torchvision DataLoader, in one run.

Both sides train the same model (``hcl_cli.image.networks.build_model``: ResNet-18 with the CIFAR stem and
HCL's projection head, built from the same seed) on the same CIFAR-10 train images at the same
batch size and precision (bf16 autocast on CUDA, float32 on the CPU), with Adam at hcl's lr and
weight decay:

- ``hcl``: the product's loop, :func:`hcl_cli.training.loop.train_one_epoch` with the step
  :func:`hcl_cli.image.step.build_training` makes (uint8 set resident on the device, batched
  augmentation there, both views in one forward, the ``--sampler`` loss; ucl is SimCLR's
  NT-Xent), stopped after ``--steps`` steps through ``max_steps``;
- ``peer``: the SimCLR recipe as lightly's examples run it: a ``torch.utils.data.DataLoader``
  (``--workers`` processes, shuffled, pinned memory on CUDA) over the images as PIL images, each
  augmented twice per sample with torchvision.transforms.v2 (the recipe of
  :func:`benchmarks.bench_augment.torchvision_simclr`), one forward per view (no channels_last,
  no compile), and ``lightly.loss.NTXentLoss`` at hcl's temperature.

Each side first takes ``--warmup`` untimed steps (the peer's include starting its workers), then
``--steps`` timed ones; ``--rounds`` alternate the two and the fastest round counts. Images per
second count an image once for its two views. The data: the CIFAR-10 JPEG archive (``train/`` and
``test/`` class folders), its first ``--limit`` train images (balanced over the classes; 0: all),
extracted and prepared with ``hcl prepare --dataset imagefolder`` into ``--work`` (reused when
there, a temporary folder by default). Needs ``pip install lightly``. Run from the repository root::

    python -m benchmarks.bench_peer --device cuda --batch-size 512 --steps 50
    python -m benchmarks.bench_peer --device cpu --batch-size 64 --limit 640 --steps 3 --warmup 1

It writes ``benchmarks/results/peer_<device>.json`` (on the CPU a smoke figure, not a throughput claim).
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightly
import numpy as np
import torch
import torchvision
from lightly.loss import NTXentLoss
from PIL import Image
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_augment import TwoViews, torchvision_simclr
from benchmarks.check_cifar10_prepare import ARCHIVE
from benchmarks.common import cpu_count, load_average, prepared, synchronize, timed_epochs, training_run, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext, distributed_context
from hcl_cli.image.card import DatasetCard
from hcl_cli.image.networks import build_model
from hcl_cli.image.prepared import load_split

SEED = 0
CLASSES = 10


def extract(archive: Path, root: Path, limit: int) -> None:
    """Extract ``train/`` and ``test/`` of ``archive`` into ``root``: with ``limit``, ``limit / 10`` train
    and a fifth as many test images per class (the archive's first ones), else everything."""
    per_class = {"train": -(-limit // CLASSES), "test": max(1, -(-limit // (5 * CLASSES)))}
    taken: dict[str, int] = {}

    def wanted(members: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        for member in members:
            parts = Path(member.name).parts
            if not member.isfile() or len(parts) != 3 or parts[0] not in per_class:
                continue
            folder = "/".join(parts[:2])
            if not limit or taken.get(folder, 0) < per_class[parts[0]]:
                taken[folder] = taken.get(folder, 0) + 1
                yield member

    with tarfile.open(archive) as opened:
        opened.extractall(root, members=wanted(opened), filter="data")


def hcl_throughput(config: PretrainConfig, context: DistributedContext, warmup: int) -> float:
    """Seconds of ``config.max_steps`` steps of the product's epoch loop, after ``warmup`` untimed steps."""
    with tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        return sum(timed_epochs(training, -(-config.max_steps // training.steps_per_epoch), warmup))


def endless(loader: DataLoader) -> Iterator[Any]:
    while True:
        yield from loader


def peer_throughput(loader: DataLoader, card: DatasetCard, config: PretrainConfig, device: torch.device, warmup: int, steps: int) -> float:
    """Seconds of ``steps`` lightly-style SimCLR steps fed by ``loader``, after ``warmup`` untimed ones."""
    torch.manual_seed(SEED)
    model = build_model("resnet18", card.image_shape[0], card.image_shape[-1], config.projection_dim).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    criterion = NTXentLoss(temperature=config.sampler_options["temperature"])
    batches = endless(loader)
    for index in range(warmup + steps):
        if index == warmup:
            synchronize(device)
            start = time.perf_counter()
        first, second = (view.to(device, non_blocking=True) for view in next(batches))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z0, z1 = model(first)[2], model(second)[2]
        loss = criterion(z0.float(), z1.float())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=50, help="timed steps per side and round")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per side first")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two sides; the fastest round of each counts")
    parser.add_argument("--limit", type=int, default=0, help="use only this many train images (0: all 50,000)")
    parser.add_argument("--workers", type=int, default=cpu_count(), help="the peer's DataLoader workers (default: one per CPU)")
    parser.add_argument("--sampler", default="ucl", help="hcl's sampler (ucl: the same NT-Xent objective as the peer)")
    parser.add_argument("--compile", action="store_true", help="torch.compile hcl's encoder")
    parser.add_argument("--archive", type=Path, default=ARCHIVE, help="CIFAR-10 JPEG archive with train/ and test/ class folders")
    parser.add_argument(
        "--work", type=Path, help="folder for the extracted and prepared images, reused when there (default: a temporary one)"
    )
    args = parser.parse_args()
    load_before = load_average()

    with tempfile.TemporaryDirectory() as scratch, distributed_context(args.device) as context:
        device = context.device
        work = (args.work or Path(scratch)) / f"cifar10_{args.limit or 'all'}"
        if not (work / "prepared").is_dir():
            extract(args.archive, work / "images", args.limit)
        card = prepared(work / "prepared", dataset="imagefolder", path=str(work / "images"))
        config = PretrainConfig(
            data=str(work / "prepared"),
            arch="resnet18",
            sampler=args.sampler,
            batch_size=args.batch_size,
            device=args.device,
            max_steps=args.steps,
            compile=args.compile,
            seed=SEED,
        )
        images = load_split(config.data, "train")[0].permute(0, 2, 3, 1).numpy()
        pil_images = [Image.fromarray(np.ascontiguousarray(image)) for image in images]
        loader = DataLoader(
            TwoViews(pil_images, torchvision_simclr(card.image_shape[-1], card.mean, card.std)),
            batch_size=args.batch_size, shuffle=True, drop_last=True, num_workers=args.workers,
            pin_memory=device.type == "cuda", persistent_workers=args.workers > 0,
        )  # fmt: skip
        seconds: dict[str, list[float]] = {"hcl": [], "peer": []}
        for _ in range(args.rounds):
            seconds["hcl"].append(hcl_throughput(config, context, args.warmup))
            seconds["peer"].append(peer_throughput(loader, card, config, device, args.warmup, args.steps))

    rates = {side: round(args.steps * args.batch_size / min(times), 1) for side, times in seconds.items()}
    ratio = rates["hcl"] / rates["peer"]
    print(f"hcl {rates['hcl']} images/s, peer {rates['peer']} images/s: hcl / peer {ratio:.2f}")
    write_result(
        f"peer_{device.type}",
        {
            "note": "CPU smoke run with tiny settings: checks the benchmark runs, not a throughput claim"
            if device.type == "cpu"
            else "throughput comparison",
            "model": "resnet18 (CIFAR stem) + projection head, hcl_cli.image.networks.build_model",
            "precision": "bf16 autocast" if device.type == "cuda" else "float32",
            "settings": {
                "train_images": len(images),
                "image_shape": card.image_shape,
                "batch_size": args.batch_size,
                "steps": args.steps,
                "warmup": args.warmup,
                "rounds": args.rounds,
                "hcl_sampler": args.sampler,
                "hcl_compile": args.compile,
                "peer_workers": args.workers,
                "threads": torch.get_num_threads(),
            },  # fmt: skip
            "libraries": {"lightly": lightly.__version__, "torchvision": torchvision.__version__},
            "load_average_1min": {"before": load_before, "after": load_average()},
            "seconds": {side: [round(s, 3) for s in times] for side, times in seconds.items()},
            "images_per_second": rates,
            "hcl_over_peer": round(ratio, 3),
        },
        device,
    )


if __name__ == "__main__":
    main()
