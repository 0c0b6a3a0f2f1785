"""``hcl pretrain``: contrastive pretraining of an encoder under a chosen negative sampler.

Reads straight down like torchvision's ``references/classification/train.py``: :func:`run`
joins the torchrun ranks (or is one process); :func:`pretrain` checks its outputs, builds the plan
in one place (:mod:`hcl_cli.training.plan`: device, data, model and step, objective, optimiser,
schedule, checkpoint, log, probes, where it resumes), then walks the epochs
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
import datetime
import json
import sys
from pathlib import Path

from hcl_cli.artifacts import (
    check_outputs_apart,
    check_replaceable,
    log_sha256,
    recorded_output,
    sha256_of,
    tensor_output,
    write_output,
)
from hcl_cli.checkpoint import CheckpointStore, TrainingPosition
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext, distributed_context
from hcl_cli.errors import shown
from hcl_cli.locking import locked_folder
from hcl_cli.logs import LOG
from hcl_cli.modality import encoder_kinds
from hcl_cli.provenance import describe_extent, now, occasion_path, occasion_record, run_record
from hcl_cli.runtime import set_cpu_threads
from hcl_cli.training.log import TrainingLog
from hcl_cli.training.loop import EpochTotals, RunClock, first_step_stop, interrupted, train_one_epoch
from hcl_cli.training.plan import CHECKPOINTS_FOLDER, TrainingPlan, build_plan, run_spec, started_from, startup_line
from hcl_cli.training.signals import stop_on_signals

ENCODER_FILE = "encoder.safetensors"
OCCASION_OUTPUT = recorded_output("run record")
"""``OUT/encoder.run.json``: when, where and at which commit the encoder was trained (no DVC output holds these)."""


def run(config: PretrainConfig) -> None:
    """Pretrain an encoder on ``config.data`` and write ``config.out/encoder.safetensors``, in one
    process or, under torchrun, in one process per device."""
    with distributed_context(config.device) as context:
        set_cpu_threads(parse_threads(config.threads), context.device, CUDA_THREADS)
        pretrain(config, context)


def pretrain(config: PretrainConfig, context: DistributedContext) -> None:
    """The training of :func:`run`, as rank ``context.rank`` of ``context.world_size``: check, plan, loop, write."""
    started = now()
    check_outputs_apart({"--data": config.data, "--init": config.init}, {"--out": config.out, "--live-dir": config.live_dir})
    encoder = Path(config.out) / ENCODER_FILE
    check_replaceable("--out", encoder, tensor_output("encoder artifact", encoder_kinds()))
    check_replaceable("--out", occasion_path(encoder), OCCASION_OUTPUT)
    CheckpointStore(Path(config.out) / CHECKPOINTS_FOLDER).check_replaceable("--out")
    TrainingLog(config.live_dir).check_replaceable("--live-dir")
    spec = run_spec(config, context)
    config = spec.config
    with contextlib.ExitStack() as held:
        if context.is_main:
            held.enter_context(locked_folder(config.out, "pretrain"))
            held.enter_context(locked_folder(config.live_dir, "pretrain"))
        plan = build_plan(spec, context)
        if context.is_main:
            if plan.initial is not None and plan.resumed is None:  # a resumed run's weights are its checkpoint's
                LOG.info(f"hcl pretrain: starting from {shown(config.init)}: {plan.initial.described}")
            if spec.modality.loss_note:
                LOG.info(f"hcl pretrain: note: {spec.modality.loss_note}")
            LOG.info(startup_line(plan, context))
        train(plan, context)
        if context.is_main:
            write_encoder(plan, encoder, started, context)


def train(plan: TrainingPlan, context: DistributedContext) -> None:
    """The epoch loop: each epoch's steps, probes and checkpoint, then the log rewritten from the history; a signal stops
    the run after its checkpoint (:func:`~hcl_cli.training.loop.interrupted`)."""
    spec, training, log = plan.spec, plan.training, plan.log
    config, steps_per_epoch = spec.config, spec.steps_per_epoch
    planned = steps_per_epoch * config.epochs
    start, totals = plan.start, plan.totals
    if log is not None:
        log.write(training.history, (start.epoch * steps_per_epoch + start.step, planned))
    plain = context.is_main and not sys.stderr.isatty()
    clock = RunClock(plan.total_steps, config.epochs, steps_per_epoch, context.device, plain=plain, compiling=config.compile)
    with stop_on_signals() as stop:
        stop.at_once = first_step_stop(plan.resumed) if context.world_size == 1 else None
        for epoch in range(start.epoch, config.epochs):
            if epoch * steps_per_epoch >= plan.total_steps:
                break
            options = spec.loss_options(epoch)
            done = train_one_epoch(training, epoch, start.step if epoch == start.epoch else 0, options, totals, stop, clock)
            metrics = {"epoch": epoch, **totals.means(config.needs_labels)}
            if plan.knn_probe is not None and (epoch + 1) % config.eval_every == 0:
                metrics["knn_top1"] = plan.knn_probe(training.model)
            if plan.hscl_probe is not None:
                metrics |= plan.hscl_probe(training.model, training.step.augment, beta=options.get("beta", 0.0))
            training.history.append(metrics)
            position = TrainingPosition(epoch + 1, 0) if done == steps_per_epoch else TrainingPosition(epoch, done)
            path = training.save(position, totals if position.step else EpochTotals())
            if log is not None:
                log.write(training.history, (position.epoch * steps_per_epoch + position.step, planned))
            totals = EpochTotals()
            if context.any_rank(stop.requested):
                raise interrupted(stop, position, path, config.epochs, steps_per_epoch)


def write_encoder(plan: TrainingPlan, out: Path, started: datetime.datetime, context: DistributedContext) -> None:
    """The encoder artifact (what the run did, a function of its inputs), then, apart, when and where it ran."""
    spec, training = plan.spec, plan.training
    config = spec.config
    meta = {
        "config": config.params(),
        "epoch": config.epochs,
        "seed": config.seed,
        "dataset": spec.card.name,
        "world_size": context.world_size,
        "run": run_record(context.device, steps=plan.total_steps, planned_steps=spec.steps_per_epoch * config.epochs),
        "learned": {name: tensor.detach().cpu().tolist() for name, tensor in training.step.learned.items()},
        "inputs": {"prepared": plan.prepared, "training_log": log_sha256(config.live_dir), **started_from(plan.initial)},
    }
    spec.modality.save_encoder(out, training.model, spec.card, meta)
    occasion = {"encoder_sha256": sha256_of(out), **occasion_record(started)}
    write_output(occasion_path(out), json.dumps(occasion, indent=2) + "\n", OCCASION_OUTPUT)
    extent = describe_extent(meta["run"], config.epochs)
    LOG.info(f"hcl pretrain: wrote {shown(out)} ({training.model.arch}, {config.sampler}, {extent}, {plan.total_steps} steps)")
