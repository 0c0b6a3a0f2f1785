"""``hcl pretrain``: contrastive pretraining of an encoder under a chosen negative sampler.

Reads straight down like torchvision's ``references/classification/train.py``: :func:`run`
joins the torchrun ranks (or is one process) and :func:`pretrain` loads the data, builds the
model and its step (:mod:`hcl_cli.image.step`), resumes, and walks the epochs
(:mod:`hcl_cli.training.loop`), logging each one (:mod:`hcl_cli.training.log`) after its
checkpoint. The encoder is written only at the end.

Speed: the whole uint8 training set lives on the training device; each epoch is a seeded
permutation whose batches are index slices of it (the tail that does not fill a batch is
dropped), augmented there, batched (no per-sample Python).

Data parallel (:mod:`hcl_cli.distributed`): under ``torchrun --nproc-per-node K`` every rank
holds the data, takes its block of ``batch_size`` images of each global batch of K x
``batch_size``, augments it on its own device, and scores its own anchors against the negatives
of all ranks; DDP averages the gradients, so a step equals one process's step on the global
batch (up to BatchNorm statistics, which stay per rank). Only rank 0 writes checkpoints, the
encoder and the log.

Negatives (:mod:`hcl_cli.image.momentum`): with ``queue_size`` 0 each anchor contrasts with
the other views of its batch; with ``queue_size`` K a momentum key encoder's keys of the batch and
a queue of the last K keys are the candidates of every sampler, and the key encoder and the queue
are part of the checkpoint (the encoder artifact is the trained query encoder alone).

Logged per epoch: ``loss`` (the mean over the epoch's steps); with ``eval_every`` N, ``knn_top1``
every N epochs (:class:`~hcl_cli.training.probes.KnnProbe`); for the supervised samplers
``same_label_pairs`` and ``anchors_left_out`` per batch, and H-SCL's diagnostics on one fixed
batch (:class:`~hcl_cli.training.probes.HsclProbe`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from hcl_cli.artifacts import (
    check_outputs_apart,
    check_replaceable,
    log_sha256,
    prepared_sha256,
    recorded_output,
    sha256_of,
    tensor_output,
    write_output,
)
from hcl_cli.checkpoint import Checkpoint, CheckpointStore, TrainingPosition
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext, distributed_context
from hcl_cli.errors import UsageError, shown
from hcl_cli.locking import locked_folder
from hcl_cli.logs import LOG
from hcl_cli.modality import Modality, encoder_kinds, modality_of
from hcl_cli.objectives.loss import check_labels
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.provenance import describe_extent, now, occasion_path, occasion_record, run_record
from hcl_cli.runtime import set_cpu_threads
from hcl_cli.training.builders import build_training
from hcl_cli.training.init import start_from
from hcl_cli.training.log import TrainingLog
from hcl_cli.training.loop import EpochTotals, RunClock, TrainingRun, first_step_stop, interrupted, resume_from, train_one_epoch
from hcl_cli.training.memory import check_training_memory
from hcl_cli.training.probes import HsclProbe, KnnProbe
from hcl_cli.training.signals import stop_on_signals

ENCODER_FILE = "encoder.safetensors"
CHECKPOINTS_FOLDER = "checkpoints"
OCCASION_OUTPUT = recorded_output("run record")
"""``OUT/encoder.run.json``: when, where and at which commit the encoder was trained (no DVC output holds these)."""


def run(config: PretrainConfig) -> None:
    """Pretrain an encoder on ``config.data`` and write ``config.out/encoder.safetensors``, in one
    process or, under torchrun, in one process per device."""
    with distributed_context(config.device) as context:
        set_cpu_threads(parse_threads(config.threads), context.device, CUDA_THREADS)
        pretrain(config, context)


def pretrain(config: PretrainConfig, context: DistributedContext) -> None:
    """The training of :func:`run`, as rank ``context.rank`` of ``context.world_size``."""
    started = now()
    check_outputs_apart({"--data": config.data, "--init": config.init}, {"--out": config.out, "--live-dir": config.live_dir})
    check_replaceable("--out", Path(config.out) / ENCODER_FILE, tensor_output("encoder artifact", encoder_kinds()))
    check_replaceable("--out", occasion_path(Path(config.out) / ENCODER_FILE), OCCASION_OUTPUT)
    CheckpointStore(Path(config.out) / CHECKPOINTS_FOLDER).check_replaceable("--out")
    TrainingLog(config.live_dir).check_replaceable("--live-dir")
    modality = modality_of(config.data)
    config = config.for_modality(modality.name)
    card = modality.load_card(config.data)
    config.check_modality(modality.name, f"{shown(config.data)}'s {modality.sample_noun}s")
    if context.is_main:
        for warning in config.ignored_changes(context.world_size):
            LOG.warning(f"hcl pretrain: warning: {warning}")
    labelled = config.needs_labels
    splits = modality.training_splits(card, labelled, config.transductive)
    objective = training_objective(config, modality)
    check_labels(config.sampler, config.loss_options(0), labelled="unlabeled" not in splits)
    modality.check_trainable(card, config.data)
    size = sum(card.counts[split] for split in splits)
    steps_per_epoch = context.steps_per_epoch(size, config.batch_size, modality.keep_last_batch, noun=modality.sample_noun)

    def loss_options(epoch: int) -> SamplerOptions:
        """The epoch's sampler options (:meth:`PretrainConfig.loss_options`) with ``auto`` resolved to the modality's objective."""
        return config.loss_options(epoch).replaced({"objective": objective}, {})

    with contextlib.ExitStack() as held:
        if context.is_main:
            held.enter_context(locked_folder(config.out, "pretrain"))
            held.enter_context(locked_folder(config.live_dir, "pretrain"))
        device = context.device
        prepared = prepared_sha256(config.data)  # what the encoder is trained on: its sidecar's inputs, the checkpoints' identity
        samples, labels = modality.load_samples(config.data, splits, device)
        context.seed_everything(config.seed)
        model, step = build_training(modality, config, card, context)
        initial = start_from(config.init, modality, model, step.state) if config.init else None
        started_from = {"init": initial.sha256} if initial is not None else {}
        if context.world_size == 1 and not config.compile:
            check_training_memory(step, samples, labels, loss_options(0), config.batch_size, device)
        store = CheckpointStore(Path(config.out) / CHECKPOINTS_FOLDER)
        # Like epochs, max_steps only says when to stop: a resume may change it.
        identity = {
            **config.params(),
            "dataset": card.name,
            "world_size": context.world_size,
            "max_steps": None,
            "prepared": prepared,
            **started_from,
        }
        training = TrainingRun(
            config, model, step, samples, labels, store, identity, context, steps_per_epoch, keep_last_batch=modality.keep_last_batch
        )
        log = TrainingLog(config.live_dir) if context.is_main else None

        start, totals = TrainingPosition(0, 0), EpochTotals()
        checkpoint = resume_from(training) if config.resume else None
        if checkpoint is not None:
            start, totals = checkpoint.position, EpochTotals(**checkpoint.loop_state["epoch_totals"])
            training.history = [row for row in checkpoint.loop_state["history"] if row["epoch"] < start.epoch]
            context.reseed_after_resume(config.seed, start.epoch, start.step)
        elif context.is_main:
            if not config.resume and (replaced := store.unfinished(identity)):
                LOG.info(f"hcl pretrain: note: starting over without --resume: {replaced}")
            store.clear()
        if log is not None:
            log.write(training.history, (start.epoch * steps_per_epoch + start.step, steps_per_epoch * config.epochs))
        knn_probe = (
            KnnProbe.from_prepared(config.data, modality, card, config.seed, config.batch_size)
            if config.eval_every and context.is_main
            else None
        )
        hscl_probe = (
            HsclProbe.from_training(samples, labels, config.seed, config.batch_size, config.sampler_options["temperature"])
            if config.spec.supervised and modality.two_views and context.is_main
            else None
        )
        total_steps = min(steps_per_epoch * config.epochs, config.max_steps or steps_per_epoch * config.epochs)
        if context.is_main:
            if initial is not None:
                LOG.info(f"hcl pretrain: starting from {shown(config.init)}: {initial.described}")
            LOG.info(
                startup_line(
                    config, modality.describe(card, size), card.name, model.arch, steps_per_epoch, total_steps, context, checkpoint
                )
            )

        clock = RunClock(total_steps, config.epochs, steps_per_epoch, device, plain=context.is_main and not sys.stderr.isatty())
        with stop_on_signals() as stop:
            stop.at_once = first_step_stop(checkpoint) if context.world_size == 1 else None
            for epoch in range(start.epoch, config.epochs):
                if epoch * steps_per_epoch >= total_steps:
                    break
                options = loss_options(epoch)
                done = train_one_epoch(training, epoch, start.step if epoch == start.epoch else 0, options, totals, stop, clock)
                metrics = {"epoch": epoch, **totals.means(labelled)}
                if knn_probe is not None and (epoch + 1) % config.eval_every == 0:
                    metrics["knn_top1"] = knn_probe(model)
                if hscl_probe is not None:
                    metrics |= hscl_probe(model, step.augment, beta=options.get("beta", 0.0))
                training.history.append(metrics)
                position = TrainingPosition(epoch + 1, 0) if done == steps_per_epoch else TrainingPosition(epoch, done)
                path = training.save(position, totals if position.step else EpochTotals())
                if log is not None:
                    log.write(training.history, (position.epoch * steps_per_epoch + position.step, steps_per_epoch * config.epochs))
                totals = EpochTotals()
                if context.any_rank(stop.requested):
                    raise interrupted(stop, position, path, config.epochs, steps_per_epoch)

        if context.is_main:
            out = Path(config.out) / ENCODER_FILE
            meta = {
                "config": config.params(),
                "epoch": config.epochs,
                "seed": config.seed,
                "dataset": card.name,
                "world_size": context.world_size,
                "run": run_record(device, steps=total_steps, planned_steps=steps_per_epoch * config.epochs),
                "learned": {name: tensor.detach().cpu().tolist() for name, tensor in step.learned.items()},
                "inputs": {"prepared": prepared, "training_log": log_sha256(config.live_dir), **started_from},
            }
            modality.save_encoder(out, model, card, meta)
            occasion = {"encoder_sha256": sha256_of(out), **occasion_record(started)}
            write_output(occasion_path(out), json.dumps(occasion, indent=2) + "\n", OCCASION_OUTPUT)
            extent = describe_extent(meta["run"], config.epochs)
            LOG.info(f"hcl pretrain: wrote {shown(out)} ({model.arch}, {config.sampler}, {extent}, {total_steps} steps)")


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


def startup_line(
    config: PretrainConfig,
    data: str,
    dataset: str,
    arch: str,
    steps_per_epoch: int,
    total_steps: int,
    context: DistributedContext,
    resumed: Checkpoint | None,
) -> str:
    """What is about to run: sampler (and queue), device, architecture, data, steps; and where it resumes."""
    queue = f" over a queue of {config.queue_size} keys (momentum {config.momentum})" if config.queue_size else ""
    ranks = f" x {context.world_size} processes" if context.world_size > 1 else ""
    limit = (
        f", stopping at --max-steps {config.max_steps}" if config.max_steps and config.max_steps < steps_per_epoch * config.epochs else ""
    )
    resume = f"; resuming from {resumed.path} ({resumed.position.describe()})" if resumed is not None else ""
    return (
        f"hcl pretrain: {config.sampler}{queue} on {context.device.type}{ranks}, {arch}, {dataset} ({data}), "
        f"{config.epochs} epochs of {steps_per_epoch} steps of {config.batch_size}{limit}: {total_steps} steps{resume}"
    )
