"""The plan of a pretraining run, built in one place before the first step (torchvision's ``references/``: build the run,
then loop): what is trained on which device (:class:`RunSpec`, checks only, before any output folder is locked), and
everything the epoch loop consumes (:class:`TrainingPlan`: data, model, objective, optimiser, schedule, checkpoint, log,
probes and where it resumes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcl_cli.artifacts import prepared_sha256
from hcl_cli.checkpoint import Checkpoint, CheckpointStore, TrainingPosition
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import UsageError, shown
from hcl_cli.logs import LOG
from hcl_cli.modality import Modality, modality_of
from hcl_cli.objectives.loss import check_labels
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.training.builders import build_training
from hcl_cli.training.init import InitialWeights, start_from
from hcl_cli.training.log import TrainingLog
from hcl_cli.training.loop import EpochTotals, TrainingRun, resume_from
from hcl_cli.training.memory import check_training_memory
from hcl_cli.training.probes import KNN_PROBE_SETTINGS, HsclProbe, KnnProbe

CHECKPOINTS_FOLDER = "checkpoints"
"""``OUT/checkpoints``: the resumable state of the last run (no DVC output: docs/cache.md)."""


@dataclass(frozen=True)
class RunSpec:
    """What a run trains, checked before any output folder is locked or written: the config resolved for the prepared
    data's modality, the card, the splits it trains on, its objective and the steps of an epoch."""

    config: PretrainConfig
    modality: Modality
    card: Any
    splits: tuple[str, ...]
    objective: str
    size: int
    steps_per_epoch: int

    def loss_options(self, epoch: int) -> SamplerOptions:
        """The epoch's sampler options (:meth:`PretrainConfig.loss_options`) with ``auto`` resolved to the modality's objective."""
        return self.config.loss_options(epoch).replaced({"objective": self.objective}, {})


def run_spec(config: PretrainConfig, context: DistributedContext) -> RunSpec:
    """The :class:`RunSpec` of ``config`` on its prepared data; a one-line usage error for a run that cannot train."""
    modality = modality_of(config.data)
    config = config.for_modality(modality.name)
    card = modality.load_card(config.data)
    config.check_modality(modality.name, f"{shown(config.data)}'s {modality.sample_noun}s")
    if context.is_main:
        for warning in config.ignored_changes(context.world_size):
            LOG.warning(f"hcl pretrain: warning: {warning}")
    splits = tuple(modality.training_splits(card, config.needs_labels, config.transductive))
    objective = training_objective(config, modality)
    check_labels(config.sampler, config.loss_options(0), labelled="unlabeled" not in splits)
    modality.check_trainable(card, config.data)
    size = sum(card.counts[split] for split in splits)
    steps = context.steps_per_epoch(size, config.batch_size, modality.keep_last_batch, noun=modality.sample_noun)
    return RunSpec(config, modality, card, splits, objective, size, steps)


def training_objective(config: PretrainConfig, modality: Modality) -> str:
    """The run's objective: ``auto`` is the modality's own (nce for images, jsd for graphs); one it does not train with
    (jsd on images, nce or bcl on graphs) is a one-line usage error."""
    objective = config.sampler_options["objective"]
    if objective == "auto":
        return modality.objectives[0]
    if objective not in modality.objectives:
        raise UsageError(
            f"--objective {objective} does not train on {modality.sample_noun}s: use {' or '.join(modality.objectives)} (or auto)"
        )
    return objective


@dataclass
class TrainingPlan:
    """Everything the epoch loop consumes, built by :func:`build_plan`."""

    spec: RunSpec
    training: TrainingRun
    """The model and its step (objective and optimiser), the resident data, the checkpoints and the run's identity."""
    prepared: dict[str, str]
    """The sha256 of the prepared files trained on: the encoder's inputs and the checkpoints' identity."""
    initial: InitialWeights | None
    log: TrainingLog | None
    knn_probe: KnnProbe | None
    hscl_probe: HsclProbe | None
    resumed: Checkpoint | None
    start: TrainingPosition
    totals: EpochTotals
    total_steps: int


def build_plan(spec: RunSpec, context: DistributedContext) -> TrainingPlan:
    """Load the data onto the device, seed, build the model and its step, start from ``--init``, check the memory, and
    resume the run's checkpoint (``--resume``) or clear the folder for a fresh one; the caller holds the output folders."""
    config, modality, device = spec.config, spec.modality, context.device
    prepared = prepared_sha256(config.data)
    samples, labels = modality.load_samples(config.data, list(spec.splits), device)
    context.seed_everything(config.seed)
    model, step = build_training(modality, config, spec.card, context)
    initial = start_from(config.init, modality, model, step.state) if config.init else None
    if context.world_size == 1 and not config.compile:
        check_training_memory(step, samples, labels, spec.loss_options(0), config.batch_size, device)
    store = CheckpointStore(Path(config.out) / CHECKPOINTS_FOLDER)
    identity = {  # like epochs, max_steps only says when to stop: a resume may change it
        **config.params(),
        "dataset": spec.card.name,
        "world_size": context.world_size,
        "max_steps": None,
        "prepared": prepared,
        **started_from(initial),
    }
    training = TrainingRun(
        config, model, step, samples, labels, store, identity, context, spec.steps_per_epoch, keep_last_batch=modality.keep_last_batch
    )
    start, totals = TrainingPosition(0, 0), EpochTotals()
    resumed = resume_from(training) if config.resume else None
    if resumed is not None:
        start, totals = resumed.position, EpochTotals(**resumed.loop_state["epoch_totals"])
        training.history = [row for row in resumed.loop_state["history"] if row["epoch"] < start.epoch]
        context.reseed_after_resume(config.seed, start.epoch, start.step)
    elif context.is_main:
        if not config.resume and (replaced := store.unfinished(identity)):
            LOG.info(f"hcl pretrain: note: starting over without --resume: {replaced}")
        store.clear()
    main = context.is_main
    knn_probe = (
        KnnProbe.from_prepared(config.data, modality, spec.card, config.seed, config.batch_size)
        if config.eval_every and main and modality.name in KNN_PROBE_SETTINGS
        else None
    )
    hscl_probe = (
        HsclProbe.from_training(samples, labels, config.seed, config.batch_size, config.sampler_options["temperature"])
        if config.spec.supervised and modality.two_views and main
        else None
    )
    planned = spec.steps_per_epoch * config.epochs
    total_steps = min(planned, config.max_steps or planned)
    log = TrainingLog(config.live_dir) if main else None
    return TrainingPlan(spec, training, prepared, initial, log, knn_probe, hscl_probe, resumed, start, totals, total_steps)


def started_from(initial: InitialWeights | None) -> dict[str, str]:
    """The ``--init`` weights' sha256, as the run's identity and the encoder's inputs record it (nothing without ``--init``)."""
    return {"init": initial.sha256} if initial is not None else {}


def startup_line(plan: TrainingPlan, context: DistributedContext) -> str:
    """What is about to run: sampler (and queue), device, architecture, data, steps; and where it resumes."""
    spec, config = plan.spec, plan.spec.config
    steps_per_epoch = spec.steps_per_epoch
    queue = f" over a queue of {config.queue_size} keys (momentum {config.momentum})" if config.queue_size else ""
    ranks = f" x {context.world_size} processes" if context.world_size > 1 else ""
    limit = (
        f", stopping at --max-steps {config.max_steps}" if config.max_steps and config.max_steps < steps_per_epoch * config.epochs else ""
    )
    started = f", a run started from --init {shown(config.init)}" if config.init else ""
    resume = f"; resuming from {plan.resumed.path} ({plan.resumed.position.describe()}{started})" if plan.resumed is not None else ""
    data = spec.modality.describe(spec.card, spec.size)
    return (
        f"hcl pretrain: {config.sampler}{queue} on {context.device.type}{ranks}, {plan.training.model.arch}, {spec.card.name} ({data}), "
        f"{config.epochs} epochs of {steps_per_epoch} steps of {config.batch_size}{limit}: {plan.total_steps} steps{resume}"
    )
