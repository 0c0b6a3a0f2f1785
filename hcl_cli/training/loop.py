"""The epoch loop of ``hcl pretrain``: data order, steps, checkpoints, the stop on a signal, and the resume policy.

Reliability: a checkpoint (:mod:`hcl_cli.checkpoint`) at the end of every epoch and every
``checkpoint_every`` steps; ``--resume`` continues from the newest one, and on the CPU a resumed
run ends bitwise equal to an uninterrupted one. The data order of epoch ``e`` is a permutation
seeded by ``(seed, e)``, and augmentation draws from torch's global RNG, whose state the
checkpoint restores. SIGINT / SIGTERM stop at the next step boundary with a checkpoint; a
non-finite loss or gradient stops before the update, naming the last good checkpoint.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from hcl_cli.checkpoint import Checkpoint, CheckpointMismatch, CheckpointStore, TrainingPosition
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext, derived_seed
from hcl_cli.errors import HclError
from hcl_cli.models import ContrastiveModel
from hcl_cli.training.log import History
from hcl_cli.training.signals import StopRequest, TrainingInterrupted
from hcl_cli.training.step import StepResult, TrainingStep

ETA_STEPS = 5
"""Steps timed (after the first, which warms up) before the whole run's ETA is printed."""
CPU_HOUR_HINT = 3600.0


@dataclass
class EpochTotals:
    """Running sums over the epoch's steps; saved in mid-epoch checkpoints so a resumed epoch logs the same means."""

    steps: int = 0
    loss: float = 0.0
    same_label_pairs: float = 0.0
    anchors_left_out: float = 0.0

    def add(self, result: StepResult) -> None:
        self.steps += 1
        self.loss += result.loss
        self.same_label_pairs += result.same_label_pairs
        self.anchors_left_out += result.anchors_left_out

    def means(self, supervised: bool) -> dict[str, float]:
        """Per-step means to log: the loss, and for the supervised samplers the batch's positives and left-out anchors."""
        means = {"loss": self.loss / self.steps}
        if supervised:
            means |= {"same_label_pairs": self.same_label_pairs / self.steps, "anchors_left_out": self.anchors_left_out / self.steps}
        return means


@dataclass
class RunClock:
    """Times the first steps of a run and prints, once, the whole run's estimated duration."""

    total_steps: int
    device: torch.device
    started: float | None = None
    timed_from: int = 0
    reported: bool = field(default=False)

    def step_done(self, steps_done: int) -> None:
        """Call after every step with the run's steps done so far (resumed ones included)."""
        if self.reported:
            return
        if self.started is None:
            self.started, self.timed_from = time.perf_counter(), steps_done
            return
        if steps_done - self.timed_from >= ETA_STEPS:
            per_step = (time.perf_counter() - self.started) / (steps_done - self.timed_from)
            remaining = per_step * (self.total_steps - steps_done)
            print(f"hcl pretrain: {per_step:.3g} s per step: about {format_duration(remaining)} to go", file=sys.stderr)
            if self.device.type == "cpu" and remaining > CPU_HOUR_HINT:
                print(
                    "hcl pretrain: hint: over an hour on a CPU; for a quick run try --arch small_cnn, fewer --epochs or --max-steps, or run on a GPU",
                    file=sys.stderr,
                )
            self.reported = True


def format_duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass
class TrainingRun:
    """What the epoch loop works on: the config, the model and its step, the resident data, the checkpoints, the ranks."""

    config: PretrainConfig
    model: ContrastiveModel
    step: TrainingStep
    images: Tensor
    labels: Tensor
    store: CheckpointStore
    identity: dict[str, Any]
    context: DistributedContext
    steps_per_epoch: int
    history: History = field(default_factory=list)
    """The log's rows of the epochs done (the last one partial when ``max_steps`` ended it)."""

    def save(self, position: TrainingPosition, totals: EpochTotals) -> Path:
        """A checkpoint at ``position``, with the epoch's running sums and the log's history.

        Rank 0 writes it (the model, with a queue its key encoder and queue, and the optimizer
        states are the same on every rank); the other ranks only return its path.
        """
        if not self.context.is_main:
            return self.store.folder / f"{position.name}.safetensors"
        loop_state = {"epoch_totals": asdict(totals), "history": self.history}
        return self.store.save(self.step.state, self.step.optimizer, position, loop_state, self.identity)


def train_one_epoch(
    training: TrainingRun,
    epoch: int,
    first_step: int,
    loss_options: dict[str, Any],
    totals: EpochTotals,
    stop: StopRequest,
    clock: RunClock,
) -> int:
    """Steps ``first_step..`` of ``epoch``, adding to ``totals``; returns the steps of the epoch done.

    Stops early, after the step that reaches ``max_steps`` in total. Saves a checkpoint every
    ``checkpoint_every`` steps. Raises a one-line HclError on a non-finite loss or gradient
    (before the update), and :class:`~hcl_cli.training.signals.TrainingInterrupted` after saving a
    checkpoint when a signal came.
    """
    config, context = training.config, training.context
    order = epoch_order(len(training.images), config.seed, epoch).to(training.images.device)
    batches = context.shard_batches(order, config.batch_size)
    steps = len(batches)
    last = steps if not config.max_steps else min(steps, config.max_steps - epoch * steps)
    progress = tqdm(
        range(first_step, last),
        initial=first_step,
        total=steps,
        desc=f"epoch {epoch + 1}/{config.epochs}",
        unit="step",
        disable=None if context.is_main else True,
        leave=False,
    )
    for index in progress:
        batch = batches[index]
        result = training.step(training.images[batch], training.labels[batch], loss_options)
        if not result.finite:
            what = "loss" if not math.isfinite(result.loss) else "gradient"
            raise HclError(
                f"non-finite {what} at epoch {epoch + 1}, step {index + 1} (try a lower --lr or a higher --temperature); "
                f"last good checkpoint: {training.store.latest() or 'none yet'}; no encoder was written"
            )
        totals.add(result)
        progress.set_postfix(loss=f"{result.loss:.4f}", refresh=False)
        global_step = epoch * steps + index + 1
        clock.step_done(global_step)
        checkpoint_due = config.checkpoint_every > 0 and global_step % config.checkpoint_every == 0 and index + 1 < last
        stop_requested = context.any_rank(stop.requested)
        if checkpoint_due or stop_requested:
            position = TrainingPosition(epoch, index + 1)
            path = training.save(position, totals)
            if stop_requested:
                raise interrupted(stop, position, path)
    return max(first_step, last)


def epoch_order(size: int, seed: int, epoch: int) -> Tensor:
    """The data order of ``epoch``: a permutation of ``size`` drawn from a generator seeded by ``(seed, epoch)``.

    A pure function of its arguments, so a resumed run walks every epoch in the same order.
    """
    return torch.randperm(size, generator=torch.Generator().manual_seed(derived_seed(seed, epoch)))


def interrupted(stop: StopRequest, position: TrainingPosition, checkpoint: Path) -> TrainingInterrupted:
    """The error that ends a run stopped by a signal, saying where its checkpoint is and how to go on."""
    how = "run dvc repro again" if training_under_dvc() else "rerun with --resume"
    return TrainingInterrupted(
        f"stopped by {stop.signal_name} ({position.describe()}); checkpoint saved to {checkpoint}; {how} to continue", stop.signum or 0
    )


def training_under_dvc() -> bool:
    """Whether DVC runs this process (``dvc repro`` and ``dvc exp run`` set ``DVC_STAGE``)."""
    return "DVC_STAGE" in os.environ


def resume_from(training: TrainingRun) -> Checkpoint | None:
    """Restore the newest checkpoint into ``training``; None when there is none to resume.

    A checkpoint of another run is an error, or with ``--restart-on-change`` (what dvc.yaml
    passes: a changed parameter is a new experiment) a note, and training starts over. Under
    ``--restart-on-change`` a finished run starts over too: DVC reruns a finished stage only
    when its code changed or ``--force`` asked for it, and then means a new run.
    """
    config = training.config
    try:
        checkpoint = training.store.load(
            training.step.state,
            training.step.optimizer,
            training.identity,
            config.epochs,
            finished_run=not config.restart_on_change,
            steps_per_epoch=training.steps_per_epoch,
            epoch_total_fields=[total.name for total in fields(EpochTotals)],
        )
    except CheckpointMismatch as mismatch:
        if not config.restart_on_change:
            raise
        if training.context.is_main:
            print(f"hcl pretrain: {mismatch.reason}: starting over (--restart-on-change)")
        return None
    if checkpoint is not None and not isinstance(checkpoint.loop_state.get("history"), list):
        raise HclError(
            f"{checkpoint.path}: the sidecar records no training 'history' (made by an older hcl): run without --resume to start over"
        )
    return checkpoint
