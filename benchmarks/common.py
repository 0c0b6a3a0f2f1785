"""What every benchmark result records (the machine, the device, torch, the date and the command), and shared helpers.

Every script runs from the repository root either way: ``python -m benchmarks.NAME`` or
``python benchmarks/NAME.py`` (each script puts the repository root on ``sys.path`` first). Results go to
``benchmarks/results/``, or to the folder ``HCL_BENCHMARK_RESULTS`` names (the tests' and the device check's smoke runs).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from hcl_cli.checkpoint import CheckpointStore
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.image.card import CARD_FILE, DatasetCard, load_card
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import TrainingStep, build_training
from hcl_cli.provenance import changed_files, cpu_model, git_head
from hcl_cli.provenance import portable as provenance_portable
from hcl_cli.stages import prepare
from hcl_cli.training.loop import EpochTotals, RunClock, TrainingRun, train_one_epoch
from hcl_cli.training.signals import StopRequest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("HCL_BENCHMARK_RESULTS") or ROOT / "benchmarks" / "results")


def environment(device: str | torch.device = "cpu") -> dict[str, Any]:
    """Machine, device name, library versions, date and the command line of this run."""
    device = torch.device(device)
    processor = platform.processor() or platform.machine()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model() or processor
    return {
        "machine": {
            "node": platform.node(),
            "processor": processor,
            "cpu_model": cpu_model(),
            "cpus": cpu_count(),
            "system": platform.platform(),
        },
        "device": device.type,
        "device_name": name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        **commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(portable(a)) for a in [Path(sys.executable).name, *sys.argv]),
    }


def commit() -> dict[str, Any]:
    """The commit the run's code came from and whether tracked files differ from it (:mod:`hcl_cli.provenance`); where
    ``HCL_COMMIT`` is set, that commit, unverified: a copy of the tree sent to a GPU machine carries a ``.git`` of its own
    that need not be the sender's."""
    head = git_head()
    if os.environ.get("HCL_COMMIT") or head is None:
        return {"commit": os.environ.get("HCL_COMMIT"), "dirty": None}
    changed = [path for path in changed_files() or [] if not path.startswith("benchmarks/results/")]  # what runs write
    return {"commit": head, "dirty": bool(changed)}


def portable(argument: str) -> str:
    """:func:`hcl_cli.provenance.portable` under the repository root."""
    return provenance_portable(argument, ROOT)


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
    batch = torch.arange(config.batch_size, device=training.samples.device)
    for _ in range(warmup):
        training.step(training.samples[batch], training.labels[batch], config.loss_options(0))
    clock = RunClock(training.steps_per_epoch * epochs, epochs, training.steps_per_epoch, device, plain=False, reported=True)
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


def timed_step(step: TrainingStep, images: torch.Tensor, labels: torch.Tensor, config: PretrainConfig) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one call of the product's training step."""
    device = images.device
    synchronize(device)
    start, start_cpu = time.perf_counter(), time.process_time()
    step(images, labels, config.loss_options(0))
    synchronize(device)
    return time.perf_counter() - start, time.process_time() - start_cpu


def median_ratio(times: list[float], baseline: list[float]) -> float:
    """Median over repetitions of a step's time over the baseline step of the same repetition."""
    return statistics.median(t / b for t, b in zip(times, baseline))


def interleaved_step_times(
    steps: dict[Any, TrainingStep],
    configs: dict[Any, PretrainConfig],
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int,
    warmup: int,
    repeats: int,
    seed: int,
) -> tuple[dict[Any, list[float]], dict[Any, list[float]]]:
    """Wall and CPU seconds of every step on the same random batches, their order rotated each repetition
    so that no step always runs first (after ``warmup`` untimed repetitions)."""
    names = list(steps)
    wall: dict[Any, list[float]] = {name: [] for name in names}
    cpu: dict[Any, list[float]] = {name: [] for name in names}
    batches = torch.Generator().manual_seed(seed)
    for repeat in tqdm(range(-warmup, repeats), desc="repetitions", disable=None):
        batch = torch.randperm(len(images), generator=batches)[:batch_size].to(images.device)
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            wall_seconds, cpu_seconds = timed_step(steps[name], images[batch], labels[batch], configs[name])
            if repeat >= 0:
                wall[name].append(wall_seconds)
                cpu[name].append(cpu_seconds)
    return wall, cpu
