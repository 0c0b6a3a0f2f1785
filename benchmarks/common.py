"""What every benchmark result records (the machine, the device, torch, the date and the command), and shared helpers.

Every script runs from the repository root either way: ``python -m benchmarks.NAME`` or
``python benchmarks/NAME.py`` (each script puts the repository root on ``sys.path`` first).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

from hcl_cli.checkpoint import CheckpointStore
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.datasets import CARD_FILE, DatasetCard, load_card, load_split
from hcl_cli.distributed import DistributedContext
from hcl_cli.stages import prepare
from hcl_cli.training.loop import EpochTotals, RunClock, TrainingRun, train_one_epoch
from hcl_cli.training.signals import StopRequest
from hcl_cli.training.step import build_training

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def environment(device: str | torch.device = "cpu") -> dict[str, Any]:
    """Machine, device name, library versions, date and the command line of this run."""
    device = torch.device(device)
    processor = platform.processor() or platform.machine()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else processor
    return {
        "machine": {"node": platform.node(), "processor": processor, "cpus": cpu_count(), "system": platform.platform()},
        "device": {"type": device.type, "name": name},
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
    }


def write_result(name: str, payload: dict[str, Any], device: str | torch.device = "cpu") -> Path:
    """Write ``results/NAME.json`` with the environment first, then the payload; return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**environment(device), **payload}, indent=2) + "\n")
    print(f"wrote {path}")
    return path


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA runs asynchronously), so a timer reads the real time."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_average() -> float:
    """The 1-minute load average: how busy the (possibly shared) machine was."""
    return round(os.getloadavg()[0], 2)


def prepared(out: str | Path, **options: Any) -> DatasetCard:
    """The card of the prepared dataset ``out``, running ``hcl prepare`` (``PrepareConfig(**options)``) first unless it is there."""
    if not (Path(out) / CARD_FILE).is_file():
        prepare.run(PrepareConfig(out=str(out), **options))
    return load_card(out)


def training_run(config: PretrainConfig, context: DistributedContext, checkpoints: str | Path) -> TrainingRun:
    """What ``hcl pretrain`` trains for ``config``: its train split resident on the device, the
    seeded model and step of ``build_training``; checkpoints (if any) go to ``checkpoints``."""
    images, labels = load_split(config.data, "train", context.device)
    context.seed_everything(config.seed)
    model, step = build_training(config, load_card(config.data), context)
    steps_per_epoch = context.steps_per_epoch(len(images), config.batch_size)
    return TrainingRun(config, model, step, images, labels, CheckpointStore(checkpoints), {}, context, steps_per_epoch)


def timed_epochs(training: TrainingRun, epochs: int, warmup: int) -> list[float]:
    """Seconds of each of ``epochs`` epochs of the product's loop (``train_one_epoch``; ``max_steps``
    may end the last early), after ``warmup`` untimed steps (for ``compile``, the compilation)."""
    config, device = training.config, training.context.device
    batch = slice(0, config.batch_size)
    for _ in range(warmup):
        training.step(training.images[batch], training.labels[batch], config.loss_options(0))
    clock = RunClock(training.steps_per_epoch * epochs, device, reported=True)
    seconds = []
    for epoch in range(epochs):
        synchronize(device)
        start = time.perf_counter()
        train_one_epoch(training, epoch, 0, config.loss_options(epoch), EpochTotals(), StopRequest(), clock)
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def cpu_count() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
