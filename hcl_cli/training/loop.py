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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.checkpoint import Checkpoint, CheckpointMismatch, CheckpointStore, TrainingPosition
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext, derived_seed
from hcl_cli.errors import HclError
from hcl_cli.interrupts import uninterrupted
from hcl_cli.modality import Samples, Step, StepResult
from hcl_cli.training.log import History
from hcl_cli.training.signals import StopRequest, TrainingInterrupted

WARMUP_STEPS = 3
"""Steps of a process left out of its time estimate: the first ones allocate memory, pick kernels and fill caches."""
ETA_STEPS = 5
"""Steady-state steps (after the warm-up) timed before the whole run's ETA is first printed."""
PROGRESS_SECONDS = 30.0
"""Seconds between the plain progress lines printed when stderr is not a terminal (``dvc repro``, a log file)."""
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
    """The whole run's time estimate, from steady-state steps only, and the progress shown while it runs.

    The rate is the wall time per step since the end of the warm-up (:data:`WARMUP_STEPS`), so
    it includes what happens between steps (checkpoints, probes) once it has happened, and it is
    updated at every step. The ETA is printed once :data:`ETA_STEPS` steady steps are timed, and
    shown in the progress bar; when stderr is not a terminal (no bar), a plain line every
    :data:`PROGRESS_SECONDS` says where the run is and how long it has to go.
    """

    total_steps: int
    epochs: int
    steps_per_epoch: int
    device: torch.device
    plain: bool
    """Print plain progress lines (stderr is not a terminal, so there is no progress bar)."""
    timer: Callable[[], float] = time.perf_counter
    steps_seen: int = 0
    warm: tuple[int, float] | None = None
    """(steps done, time) at the end of the warm-up."""
    reported: bool = False
    last_line: float | None = None

    def seconds_per_step(self, steps_done: int, now: float) -> float | None:
        """The steady-state wall time per step; None until :data:`ETA_STEPS` steps after the warm-up."""
        if self.warm is None or steps_done - self.warm[0] < ETA_STEPS:
            return None
        return (now - self.warm[1]) / (steps_done - self.warm[0])

    def step_done(self, steps_done: int, loss: float) -> str | None:
        """Call after every step with the run's steps done (resumed ones included) and its loss; returns the ETA text, if known."""
        now = self.timer()
        if self.last_line is None:
            self.last_line = now
        self.steps_seen += 1
        if self.steps_seen == WARMUP_STEPS:
            self.warm = (steps_done, now)
        per_step = self.seconds_per_step(steps_done, now)
        remaining = None if per_step is None else per_step * (self.total_steps - steps_done)
        if remaining is not None and not self.reported:
            self.reported = True
            print(f"hcl pretrain: {per_step:.3g} s per step: about {format_duration(remaining)} to go", file=sys.stderr)
            if self.device.type == "cpu" and remaining > CPU_HOUR_HINT:
                print(
                    "hcl pretrain: hint: over an hour on a CPU; for a quick run try --arch small_cnn, fewer --epochs or --max-steps, or run on a GPU",
                    file=sys.stderr,
                )
        if self.plain and now - self.last_line >= PROGRESS_SECONDS:
            self.last_line = now
            epoch = (steps_done - 1) // self.steps_per_epoch + 1
            eta = (
                f", {per_step:.3g} s per step, about {format_duration(remaining)} to go" if remaining is not None else ", timing the steps"
            )
            print(
                f"hcl pretrain: step {steps_done} of {self.total_steps} ({100 * steps_done / self.total_steps:.0f}%), "
                f"epoch {epoch} of {self.epochs}, loss {loss:.4f}{eta}",
                file=sys.stderr,
                flush=True,
            )
        return None if remaining is None else format_duration(remaining)


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
    model: nn.Module
    step: Step
    samples: Samples
    """The training samples on the device (a uint8 image tensor, or graphs): ``samples[index]`` is a batch."""
    labels: Tensor
    store: CheckpointStore
    identity: dict[str, Any]
    context: DistributedContext
    steps_per_epoch: int
    history: History = field(default_factory=list)
    """The log's rows of the epochs done (the last one partial when ``max_steps`` ended it)."""
    keep_last_batch: bool = False
    """Keep each epoch's last partial batch (the modality's :attr:`~hcl_cli.modality.Modality.keep_last_batch`)."""

    def save(self, position: TrainingPosition, totals: EpochTotals) -> Path:
        """A checkpoint at ``position``, with the epoch's running sums and the log's history.

        Rank 0 writes it (the model, with a queue its key encoder and queue, and the optimizer
        states are the same on every rank); the other ranks only return its path.
        """
        if not self.context.is_main:
            return self.store.folder / f"{position.name}.safetensors"
        loop_state = {"epoch_totals": asdict(totals), "history": self.history}
        with uninterrupted():  # a second Ctrl-C waits for the checkpoint, its sidecar and latest.json: all or none
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
    order = epoch_order(len(training.samples), config.seed, epoch).to(training.samples.device)
    batches = context.shard_batches(order, config.batch_size, training.keep_last_batch)
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
        result = training.step(training.samples[batch], training.labels[batch], loss_options)
        if not result.finite:
            what = "loss" if not math.isfinite(result.loss) else "gradient"
            raise HclError(
                f"non-finite {what} at epoch {epoch + 1}, step {index + 1} (try a lower --lr or a higher --temperature); "
                f"last good checkpoint: {training.store.latest() or 'none yet'}; no encoder was written"
            )
        totals.add(result)
        stop.at_once = None
        global_step = epoch * steps + index + 1
        left = clock.step_done(global_step, result.loss)
        progress.set_postfix({"loss": f"{result.loss:.4f}", **({"run left": left} if left else {})}, refresh=False)
        checkpoint_due = config.checkpoint_every > 0 and global_step % config.checkpoint_every == 0 and index + 1 < last
        stop_requested = context.any_rank(stop.requested)
        if checkpoint_due or stop_requested:
            position = TrainingPosition(epoch, index + 1)
            path = training.save(position, totals)
            if stop_requested:
                raise interrupted(stop, position, path, config.epochs, training.steps_per_epoch)
    return max(first_step, last)


def epoch_order(size: int, seed: int, epoch: int) -> Tensor:
    """The data order of ``epoch``: a permutation of ``size`` drawn from a generator seeded by ``(seed, epoch)``.

    A pure function of its arguments, so a resumed run walks every epoch in the same order.
    """
    return torch.randperm(size, generator=torch.Generator().manual_seed(derived_seed(seed, epoch)))


def describe_position(position: TrainingPosition, epochs: int, steps_per_epoch: int) -> str:
    """Where a run stands, in the numbers its training log uses too: epochs from 1, and the log's step (the epoch from 0).

    ``after epoch 3 of 10, log step 2`` at an epoch boundary, else ``in epoch 4 of 10 (log step 3), at step 12 of 40``.
    """
    if position.step == 0:
        return f"after epoch {position.epoch} of {epochs}, log step {position.epoch - 1}"
    return f"in epoch {position.epoch + 1} of {epochs} (log step {position.epoch}), at step {position.step} of {steps_per_epoch}"


def interrupted(stop: StopRequest, position: TrainingPosition, checkpoint: Path, epochs: int, steps_per_epoch: int) -> TrainingInterrupted:
    """The error that ends a run stopped by a signal, saying where it stopped, where its checkpoint is and how to go on."""
    where = describe_position(position, epochs, steps_per_epoch)
    return TrainingInterrupted(
        f"stopped by {stop.signal_name} ({where}); checkpoint saved to {checkpoint}; {how_to_continue()}", stop.signum or 0
    )


def first_step_stop(resumed: Checkpoint | None) -> str:
    """What a signal during a process's first step says: it stops at once, since there is nothing new to save."""
    since = f"its checkpoint {resumed.path} is kept" if resumed is not None else "nothing was saved"
    return f"during the first step, at once ({since}); {how_to_continue() if resumed is not None else 'run again to start over'}"


def how_to_continue() -> str:
    return ("run dvc repro again" if training_under_dvc() else "rerun with --resume") + " to continue"


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
