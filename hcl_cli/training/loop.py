"""The epoch loop of ``hcl pretrain``: data order, steps, checkpoints, the stop on a signal, and the resume policy.

Reliability: a checkpoint (:mod:`hcl_cli.checkpoint`) at the end of every epoch and every
``checkpoint_every`` steps; ``--resume`` continues from the newest one, and on the CPU a resumed
run ends bitwise equal to an uninterrupted one. The data order of epoch ``e`` is a permutation
seeded by ``(seed, e)``, and augmentation draws from torch's global RNG, whose state the
checkpoint restores. A step makes no host sync (:class:`~hcl_cli.modality.StepResult`): the loop
reads the steps' results every :func:`read_interval` steps, at a checkpoint and at the end of the
epoch, all at once (:func:`read_results`), and adds them to the epoch's totals, the progress bar
and the time estimate there. SIGINT / SIGTERM stop at the next read with a checkpoint. A step
whose loss or gradient is not finite skips its update on the device; the next read stops the run,
naming that step and the last good checkpoint (every checkpoint is saved after a read).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.checkpoint import Checkpoint, CheckpointMismatch, CheckpointStore, TrainingPosition
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext, derived_seed
from hcl_cli.errors import HclError, InputError
from hcl_cli.history import History
from hcl_cli.interrupts import uninterrupted
from hcl_cli.logs import LOG, bars_disabled
from hcl_cli.modality import Samples, Step, StepResult, StepValues
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.optimizer import set_scheduled_rate
from hcl_cli.progress import format_duration
from hcl_cli.training.signals import StopRequest, TrainingInterrupted

RECENT_STEPS = 20
"""Steps whose median time per step is the run's rate: enough to outvote a slow one (the first, a checkpoint, a probe)."""
CORRECTION_STEPS = 10
"""Steps timed before the estimate from the first step is corrected from the median rate and printed again."""
PROGRESS_SECONDS = 30.0
"""Seconds between the plain progress lines printed when stderr is not a terminal (``dvc repro``, a log file)."""
CPU_HINTS = ((86400.0, "over a day"), (3600.0, "over an hour"))
"""The durations of a CPU run that get a hint toward a quicker run, longest first."""
READ_EVERY = 20
"""Steps between two reads of the steps' results on an accelerator. A read waits for the device to finish the steps
before it, and the device then idles while the host launches the next step; on a CPU, where every op has finished
when it returns, the loop reads after every step."""


def read_interval(device: torch.device) -> int:
    """How many steps the loop runs between two reads of their results on ``device`` (:data:`READ_EVERY`; 1 on a CPU)."""
    return 1 if device.type == "cpu" else READ_EVERY


def read_results(results: Sequence[StepResult]) -> list[StepValues]:
    """The values of steps' results on the host, read at once (one host sync for all of them)."""
    return [StepValues(*row) for row in torch.stack([result.values for result in results]).tolist()]


@dataclass
class EpochTotals:
    """Running sums over the epoch's steps; saved in mid-epoch checkpoints so a resumed epoch logs the same means."""

    steps: int = 0
    loss: float = 0.0
    same_label_pairs: float = 0.0
    anchors_left_out: float = 0.0

    def add(self, result: StepValues) -> None:
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
    """The whole run's time estimate, from its first step on, and the progress shown while it runs.

    The first estimate comes after the process's first step: that step's time times the steps left,
    printed on stdout (as the start-up line; stderr keeps warnings and the one-line error) with a note that it is refined (a first step also allocates memory and picks kernels, so
    it overestimates). From then on the rate is the median time per step over the last
    :data:`RECENT_STEPS` steps, which the warm-up and an occasional slow step (a checkpoint, a
    probe) do not move; after :data:`CORRECTION_STEPS` steps that estimate is printed once. The loop
    reads its steps' results in groups (every step on a CPU; :func:`read_interval`): each step of a
    group counts the group's mean time. The estimate is shown in the progress bar; when stderr is
    not a terminal (no bar), a plain line every :data:`PROGRESS_SECONDS` says where the run is and
    how long it has to go.
    """

    total_steps: int
    epochs: int
    steps_per_epoch: int
    device: torch.device
    plain: bool
    """Print plain progress lines (stderr is not a terminal, so there is no progress bar)."""
    timer: Callable[[], float] = time.perf_counter
    reported: bool = False
    """No more estimate lines to print: the corrected one was printed, or none is wanted (a benchmark's loop)."""
    hinted: bool = False
    compiling: bool = False
    """The first read's steps include ``--compile``'s compilation, no step's time: the first estimate waits a read."""
    timed: int = 0
    """Steps this process has timed."""
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    """Seconds of each of the last steps."""
    last: float = field(init=False)
    """When the last timed steps ended (at first: when the clock was made, before the first step)."""
    last_line: float = field(init=False)

    def __post_init__(self) -> None:
        self.last = self.last_line = self.timer()

    def step_done(self, steps_done: int, loss: float, steps: int = 1) -> str:
        """Call when the results of ``steps`` more steps are read, with the run's steps done (resumed ones included) and
        the last one's loss; returns the estimate of the time left."""
        now = self.timer()
        if self.compiling:
            self.compiling, self.last = False, now
            return "after the next step"
        self.recent.extend([(now - self.last) / steps] * min(steps, RECENT_STEPS))
        self.last, first = now, self.timed == 0
        self.timed += steps
        per_step = statistics.median(self.recent)
        remaining = per_step * (self.total_steps - steps_done)
        if not self.reported and (first or self.timed >= CORRECTION_STEPS):
            if self.timed >= CORRECTION_STEPS:
                self.reported = True
                basis = f"(the median of the last {len(self.recent)} steps)"
            else:
                basis = f"at the first step's pace (a first step is slower: refined after {CORRECTION_STEPS} steps)"
            LOG.info(f"hcl pretrain: {per_step:.3g} s per step: about {format_duration(remaining)} to go {basis}")
            self.hint(remaining)
        if self.plain and now - self.last_line >= PROGRESS_SECONDS:
            self.last_line = now
            epoch = (steps_done - 1) // self.steps_per_epoch + 1
            LOG.info(
                f"hcl pretrain: step {steps_done} of {self.total_steps} ({100 * steps_done / self.total_steps:.0f}%), "
                f"epoch {epoch} of {self.epochs}, loss {loss:.4f}, {per_step:.3g} s per step, about {format_duration(remaining)} to go"
            )
        return format_duration(remaining)

    def hint(self, remaining: float) -> None:
        """Once, when a CPU run would take over an hour (or a day): what makes a quicker run."""
        over = next((text for seconds, text in CPU_HINTS if remaining > seconds), None)
        if self.device.type == "cpu" and over is not None and not self.hinted:
            self.hinted = True
            LOG.info(
                f"hcl pretrain: hint: {over} on a CPU; for a quick run try --arch small_cnn, fewer --epochs or --max-steps, or run on a GPU"
            )


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
    read_every: int | None = None
    """Steps between two reads of the steps' results; None: :func:`read_interval` of the training device."""

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
    loss_options: SamplerOptions,
    totals: EpochTotals,
    stop: StopRequest,
    clock: RunClock,
) -> int:
    """Steps ``first_step..`` of ``epoch``, adding to ``totals``; returns the steps of the epoch done.

    Sets each step's learning rate before it under a warm-up or a schedule. Stops early, after the step that reaches ``max_steps`` in total. Reads the steps' results
    every ``read_every`` steps (the run's global step a multiple of it), before every checkpoint
    and after the epoch's last step (:func:`add_results`). Saves a checkpoint every
    ``checkpoint_every`` steps. Raises a one-line HclError at the read after a non-finite loss or
    gradient (that step skipped its update), and :class:`~hcl_cli.training.signals.TrainingInterrupted`
    after saving a checkpoint when a signal came.
    """
    config, context = training.config, training.context
    batches = context.shard_batches(epoch_order_on(training.samples, config.seed, epoch), config.batch_size, training.keep_last_batch)
    steps = len(batches)
    last = steps if not config.max_steps else min(steps, config.max_steps - epoch * steps)
    progress = tqdm(
        range(first_step, last),
        initial=first_step,
        total=steps,
        desc=f"epoch {epoch + 1}/{config.epochs}",
        unit="step",
        disable=bars_disabled() if context.is_main else True,
        leave=False,
    )
    read_every = training.read_every or read_interval(context.device)
    pending: list[StepResult] = []
    for index in progress:
        batch = batches[index]
        if config.scheduled:  # from the step's place in the run alone: a resumed run sets the same rate
            set_scheduled_rate(training.step.optimizer, config, epoch * steps + index, steps)
        pending.append(training.step(training.samples[batch], training.labels[batch], loss_options))
        global_step = epoch * steps + index + 1
        checkpoint_due = config.checkpoint_every > 0 and global_step % config.checkpoint_every == 0 and index + 1 < last
        if not (checkpoint_due or global_step % read_every == 0 or index + 1 == last or clock.timed == 0):
            continue  # the process's first step is read at once: the first estimate of the run's time comes from it
        loss = add_results(training, pending, epoch, index + 1 - len(pending), totals)
        stop.at_once = None  # the first step ends when its result is read (at once): a signal then waits for a checkpoint
        left = clock.step_done(global_step, loss, len(pending))
        pending.clear()
        progress.set_postfix({"loss": f"{loss:.4f}", "run left": left}, refresh=False)
        stop_requested = context.any_rank(stop.requested)
        if checkpoint_due or stop_requested:
            position = TrainingPosition(epoch, index + 1)
            path = training.save(position, totals)
            if stop_requested:
                raise interrupted(stop, position, path, config.epochs, training.steps_per_epoch)
    return max(first_step, last)


def add_results(training: TrainingRun, results: Sequence[StepResult], epoch: int, first: int, totals: EpochTotals) -> float:
    """Read ``results``, those of steps ``first + 1 ..`` of ``epoch``, at once; add each to ``totals`` in order, or raise the
    one-line HclError of the first non-finite one. Returns the last loss."""
    loss = math.nan
    for index, values in enumerate(read_results(results), start=first):
        if not values.finite:
            what = "loss" if not math.isfinite(values.loss) else "gradient"
            raise HclError(
                f"non-finite {what} at epoch {epoch + 1}, step {index + 1} (try a lower --lr or a higher --temperature); "
                f"last good checkpoint: {training.store.latest() or 'none yet'}; no encoder was written"
            )
        totals.add(values)
        loss = values.loss
    return loss


def epoch_order_on(samples: Samples, seed: int, epoch: int) -> Tensor:
    """:func:`epoch_order` where ``samples[index]`` takes its index: ``samples.index_device`` where they name one (graphs
    batch on the host), else their device, so that no step copies its batch's indices back (a host sync on a GPU)."""
    return epoch_order(len(samples), seed, epoch).to(getattr(samples, "index_device", samples.device))


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
            LOG.info(f"hcl pretrain: {mismatch.reason}: starting over (--restart-on-change)")
        return None
    if checkpoint is not None and not isinstance(checkpoint.loop_state.get("history"), list):
        raise InputError(
            f"{checkpoint.path}: the sidecar records no training 'history' (made by an older hcl): run without --resume to start over"
        )
    return checkpoint
