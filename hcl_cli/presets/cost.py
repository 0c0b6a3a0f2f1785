"""What an image preset's run would cost on this machine, before it starts: its time and its peak memory.

Both come from what ``hcl pretrain`` runs, built as it builds it
(:func:`hcl_cli.training.builders.build_training`: the preset's model, optimizer, sampler and
queue on the device ``--device`` picks, with its ``--threads``) over random images of the
dataset's shape (:data:`~hcl_cli.presets.base.TRAINING_IMAGES`):

- memory: pretrain's own estimate (:func:`hcl_cli.training.memory.estimate_step_memory`: three
  small measured steps, extrapolated to the batch), plus what is resident (the training set as
  uint8 and the model's state);
- time: the wall time of those measured steps (the largest, of 16 images), then of real steps
  at doubling batch sizes while :data:`TIMING_SECONDS` last, up to the preset's batch; the largest
  one timed is scaled linearly to the batch (on a CPU a ResNet-50 stops at 16 images; a GPU
  reaches the batch itself), times the run's steps. Small batches use a CPU less well than large
  ones, so on a CPU the figure leans high.

Graph presets are not estimated: a GIN's cost depends on the graphs, which ``hcl preset`` does not
read; ``hcl pretrain`` estimates its time after its first step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import distributed_context
from hcl_cli.image.card import DatasetCard
from hcl_cli.image.modality import IMAGES
from hcl_cli.modality import Step
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.presets.base import TRAINING_IMAGES, Preset
from hcl_cli.progress import format_duration
from hcl_cli.runtime import GIB, available_bytes, set_cpu_threads
from hcl_cli.training.builders import build_training
from hcl_cli.training.memory import PROBE_SIZES, MemoryEstimate, estimate_step_memory

TIMING_SECONDS = 2.0
"""How long the timed steps may take together beyond the memory estimate's (the next, twice as large, is not started past it)."""
DAY = 86400.0


@dataclass(frozen=True)
class RunCost:
    """A run's estimated cost on ``device``: its steps and their time, and its memory at the peak."""

    device: torch.device
    threads: int
    steps: int
    batch_size: int
    timed_batch: int
    timed_seconds: float
    """The wall time of one step of ``timed_batch`` images."""
    memory: MemoryEstimate | None
    """None where it cannot be measured (a loss that takes gradients itself, as pretrain's check says)."""
    resident: int
    """Bytes held before the first step: the training set (uint8) and the model's state."""
    available: int | None

    @property
    def seconds(self) -> float:
        return self.timed_seconds * self.batch_size / self.timed_batch * self.steps

    def describe(self) -> str:
        """The lines ``hcl preset NAME`` prints."""
        where = f"{self.device.type}, {self.threads} CPU thread{'s' if self.threads > 1 else ''}"
        scaled = "" if self.timed_batch == self.batch_size else f", scaled to {self.batch_size}"
        per_step = self.seconds / self.steps
        step_time = f"{per_step:.3g} s" if per_step < 90 else format_duration(per_step)
        lines = [
            f"cost on this machine ({where}): about {format_duration(self.seconds)}: {self.steps:,} steps of {step_time} "
            f"(a step of {self.timed_batch} images timed{scaled})"
        ]
        if self.seconds > DAY:
            hint = "a GPU" if self.device.type == "cpu" else "more GPUs (torchrun)"
            lines.append(f"  over a day: {hint}, fewer epochs or --max-steps make it shorter")
        if self.memory is None:
            lines.append("memory: not estimated (the loss takes gradients itself, where saved-tensor hooks cannot measure it)")
            return "\n".join(lines) + "\n"
        peak = self.resident + self.memory.total(self.batch_size)
        free = f"; the {self.device.type} has {self.available / GIB:.1f} GiB free" if self.available is not None else ""
        lines.append(
            f"memory: about {peak / GIB:.1f} GiB at its peak (the training set and the model {self.resident / GIB:.1f} GiB, "
            f"gradients and Adam {self.memory.optimizer / GIB:.1f} GiB, a step on {self.batch_size} images "
            f"{self.memory.step_bytes(self.batch_size) / GIB:.1f} GiB){free}"
        )
        if self.available is not None and peak - self.resident > self.available:
            fits = self.memory.largest_batch(self.available)
            instead = f"--batch-size {fits} fits" if fits else "no batch fits"
            lines.append(f"  more than is free: hcl pretrain would refuse it ({instead}, or a machine with more memory)")
        return "\n".join(lines) + "\n"


def estimate_cost(preset: Preset) -> RunCost | None:
    """The cost of ``preset``'s pretraining on this machine (module docstring); None for a graph preset."""
    if preset.dataset not in TRAINING_IMAGES:
        return None
    side, classes, counts = TRAINING_IMAGES[preset.dataset]
    config = PretrainConfig(**preset.groups()["pretrain"]).for_modality(IMAGES.name)
    card = DatasetCard(preset.dataset, [str(label) for label in range(classes)], classes, counts, [3, side, side], [0.5] * 3, [0.25] * 3)
    size = sum(counts[split] for split in IMAGES.training_splits(card, config.needs_labels))
    options = config.loss_options(0)
    if config.sampler_options["objective"] == "auto":  # as pretrain resolves it: the modality's own objective
        options = options.replaced({"objective": IMAGES.objectives[0]}, {})
    with distributed_context(config.device) as context:
        device = context.device
        threads = set_cpu_threads(parse_threads(config.threads), device, CUDA_THREADS)
        steps = context.steps_per_epoch(size, config.batch_size) * config.epochs
        _, step = build_training(IMAGES, config, card, context)

        def batch(images: int) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.randint(0, 256, (images, 3, side, side), dtype=torch.uint8, device=device), torch.randint(
                0, classes, (images,), device=device
            )

        timings: list[tuple[int, float]] = []
        try:
            memory: MemoryEstimate | None = estimate_step_memory(step, *batch(max(PROBE_SIZES)), options, device, timings)
        except RuntimeError as error:  # a loss that takes gradients itself (UnDiMix's literal): pretrain skips its check too
            if "saved tensor hooks" not in str(error):
                raise
            memory, timings = None, []
        timed_batch, timed_seconds = time_steps(step, batch, options, config.batch_size, device, timings[-1] if timings else None)
        state = sum(tensor.numel() * tensor.element_size() for tensor in step.state.state_dict().values())
    return RunCost(
        device,
        threads,
        steps,
        config.batch_size,
        timed_batch,
        timed_seconds,
        memory,
        size * 3 * side * side + state,
        available_bytes(device),
    )


def time_steps(
    step: Step,
    batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    options: SamplerOptions,
    batch_size: int,
    device: torch.device,
    timed: tuple[int, float] | None,
) -> tuple[int, float]:
    """From ``timed`` (a batch size and its step's seconds; None: a step of the memory estimate's largest batch is timed
    first), time steps of twice as many images while :data:`TIMING_SECONDS` last, up to ``batch_size``; returns the
    largest batch size timed and its step's seconds."""
    if timed is None:
        first = min(max(PROBE_SIZES), batch_size)
        timed = (first, time_step(step, batch, options, first, device))
    (images, seconds), spent = timed, 0.0
    while images < batch_size and spent + 2 * seconds <= TIMING_SECONDS:
        images = min(2 * images, batch_size)
        seconds = time_step(step, batch, options, images, device)
        spent += seconds
    return images, seconds


def time_step(
    step: Step, batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]], options: SamplerOptions, images: int, device: torch.device
) -> float:
    """The wall seconds of one step on ``images`` random images."""
    samples, labels = batch(images)
    start = time.perf_counter()
    step(samples, labels, options)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
