"""One epoch of HCL's official image code (joshr17/HCL, ``image/``), unmodified, on CIFAR-10 rebuilt in its pickled layout.

The official code is not part of this repository: point ``--code`` at a copy of its ``image/`` folder (``main.py``,
``model.py``, ``utils.py``; the GPU check reads ``.carry/hcl-image``, which the session that carries it fills). This
harness does what ``main.py``'s ``__main__`` block does (``CIFAR10Pair``, a DataLoader of 12 workers, ``Model(128)``
in ``DataParallel``, Adam lr 1e-3 and weight decay 1e-6), sets the module globals its ``train()`` reads (``batch_size``,
``epoch``, ``epochs``, ``temperature``), and times ``train()`` for one epoch after a few untimed batches (workers,
cuDNN's choice of kernels). With ``--hcl-throughput``, the ResNet-50 rows (``r50-*``) of benchmarks/device_check.py's
throughput file of the same run give hcl's speed over the official code's. torchvision's md5 check of the CIFAR files is skipped, because :func:`write_cifar_pickles`
rebuilds them from a prepared folder; nothing else of the code is touched.

    python -m benchmarks.official_hcl_image --code .carry/hcl-image --prepared PREPARED --cifar CIFAR_ROOT
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import synchronize, write_result
from hcl_cli.image.card import load_card
from hcl_cli.image.prepared import load_split

CIFAR_FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = 5
OFFICIAL_FILES = ("main.py", "model.py", "utils.py")


def write_cifar_pickles(prepared: Path, root: Path) -> Path:
    """``root/cifar-10-batches-py`` as torchvision's ``CIFAR10`` reads it (``data_batch_1..5``, ``test_batch``,
    ``batches.meta``), holding the images and labels of the prepared folder, whose images are the archive's pixels in
    its class and file order; returns the folder. Rows are CIFAR's: the 3,072 bytes of the red, green and blue planes."""
    folder = root / CIFAR_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    card = load_card(prepared)
    for split in ("train", "test"):
        images, labels = load_split(prepared, split)
        rows, targets = images.reshape(len(images), -1).numpy(), labels.tolist()
        parts = TRAIN_BATCHES if split == "train" else 1
        for part in range(parts):
            block = slice(part * len(targets) // parts, (part + 1) * len(targets) // parts)
            name = f"data_batch_{part + 1}" if split == "train" else "test_batch"
            with open(folder / name, "wb") as handle:
                pickle.dump({"data": rows[block], "labels": targets[block]}, handle)
    with open(folder / "batches.meta", "wb") as handle:
        pickle.dump({"label_names": card.classes}, handle)
    return folder


def missing_files(code: Path) -> list[str]:
    """The files of the official ``image/`` folder that ``code`` lacks."""
    return [name for name in OFFICIAL_FILES if not (code / name).is_file()]


def official_epoch(code: Path, cifar_root: Path, batch_size: int, workers: int, warmup: int, estimator: str) -> dict[str, Any]:
    """Seconds of one epoch of the official ``train()`` after ``warmup`` untimed batches, with what it ran on."""
    import torchvision
    import torchvision.datasets.cifar
    from torch import nn, optim
    from torch.utils.data import DataLoader

    sys.path.insert(0, str(code))
    torchvision.datasets.CIFAR10._check_integrity = lambda self: True  # type: ignore[method-assign]
    torchvision.datasets.cifar.check_integrity = lambda *args, **kwargs: True  # type: ignore[assignment]
    import main as official  # type: ignore[import-not-found]
    import utils  # type: ignore[import-not-found]
    from model import Model  # type: ignore[import-not-found]

    official.batch_size, official.epoch, official.epochs, official.temperature = batch_size, 1, 1, 0.5
    train_data = utils.CIFAR10Pair(root=str(cifar_root), train=True, transform=utils.train_transform)
    loader = DataLoader(train_data, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=True, drop_last=True)
    torch.manual_seed(0)
    model = nn.DataParallel(Model(128).to(official.device))
    optimizer = optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    device = torch.device(official.device)
    official.train(model, itertools.islice(loader, warmup), optimizer, 0.5, estimator, 0.1, 1.0)
    synchronize(device)
    start = time.perf_counter()
    loss = official.train(model, loader, optimizer, 0.5, estimator, 0.1, 1.0)
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "what": "HCL's official image/main.py train(), one epoch (ResNet-50, its model, loss and DataLoader, fp32)",
        "estimator": estimator,
        "batch_size": batch_size,
        "workers": workers,
        "train_images": len(train_data),
        "steps": len(loader),
        "epoch_seconds": round(seconds, 3),
        "images_per_second": round(len(loader) * batch_size / seconds, 1),
        "loss": loss,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
        "device_used": str(device),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="a copy of joshr17/HCL's image/ folder")
    parser.add_argument("--prepared", type=Path, required=True, help="a prepared CIFAR-10 (hcl prepare --dataset imagefolder)")
    parser.add_argument("--cifar", type=Path, required=True, help="where the pickled CIFAR-10 goes (made once, then reused)")
    parser.add_argument("--batch-size", type=int, default=256, help="main.py's default")
    parser.add_argument("--workers", type=int, default=12, help="DataLoader workers (main.py's 12)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed batches first")
    parser.add_argument("--estimator", default="hard", choices=("hard", "easy"), help="hard: HCL's loss (beta 1, tau+ 0.1); easy: SimCLR's")
    parser.add_argument("--name", default="official_hcl_image", help="results/NAME_<device>.json")
    parser.add_argument("--hcl-throughput", type=Path, help="the throughput file of the same run, for hcl's ResNet-50 epochs")
    args = parser.parse_args()
    missing = missing_files(args.code)
    if missing:
        raise SystemExit(f"{args.code} lacks {', '.join(missing)}: copy joshr17/HCL's image/ folder there (it is not in this repository)")
    if not (args.cifar / CIFAR_FOLDER / "batches.meta").is_file():
        write_cifar_pickles(args.prepared, args.cifar)
    result = official_epoch(args.code, args.cifar, args.batch_size, args.workers, args.warmup, args.estimator)
    print(f"official HCL image code: {result['epoch_seconds']} s per epoch of {result['steps']} steps")
    if args.hcl_throughput is not None and args.hcl_throughput.is_file():
        rows = json.loads(args.hcl_throughput.read_text())["rows"]
        result["hcl_over_official"] = {
            row["name"]: round(result["epoch_seconds"] / row["epoch_seconds"], 3) for row in rows if row["name"].startswith("r50-")
        }
    device = torch.device(result["device_used"])
    write_result(f"{args.name}_{device.type}", {**result, "code": str(args.code)}, device)


if __name__ == "__main__":
    main()
