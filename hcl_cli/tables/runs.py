"""One run of a table's row: what ``hcl pretrain`` trains for the row's values and seed, read out with the papers' SVM.

A run is the product's training, step for step what ``hcl pretrain`` does for the same config
(:func:`train_encoder`: the modality's samples and model, ``context.seed_everything(seed)``, the
epoch loop's ``train_one_epoch`` with the epoch's sampler options), then the modality's ``embed``
of every graph and the SVM protocol (:func:`hcl_cli.graph.svm.svm_protocol`, seeded by the run's
seed, so that the methods of one seed share their initial encoder and their folds), without the
stage's per-epoch checkpoints and log files. With ``train=False`` it reads out the untrained
encoder of that seed, the initialisation every method of the seed starts from.

Under the ``inductive`` protocol (docs/protocol-graphs.md) run ``seed`` pretrains every method, ucl and the untrained
encoder's readout included, without the graphs of fold ``seed % 10`` of one seeded 10-fold split
(:func:`~hcl_cli.graph.svm.inductive_fold`), fits the SVM on the other graphs' embeddings and scores that fold, so that
no held-out label reaches pretraining and ten seeds score every graph once; under ``transductive`` every graph is
pretrained on and the SVM cross-validates over all of them (an scl or hscl encoder then saw the test labels).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hcl_cli.checkpoint import CheckpointStore
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.graph.modality import GRAPHS, GraphSamples
from hcl_cli.graph.prepared import SPLITS
from hcl_cli.graph.svm import PAPER_FOLDS, heldout_svm, inductive_fold, svm_protocol
from hcl_cli.modality import Modality
from hcl_cli.provenance import run_identity
from hcl_cli.tables.digests import tensors_sha256, weights_sha256
from hcl_cli.training.builders import build_training
from hcl_cli.training.loop import EpochTotals, RunClock, TrainingRun, train_one_epoch
from hcl_cli.training.signals import StopRequest

CPU = torch.device("cpu")


@dataclass
class Prepared:
    """A prepared TU dataset, loaded once: every graph (the splits concatenated, as pretrain reads them) and the labels."""

    folder: Path
    card: Any
    samples: Any
    labels: torch.Tensor


def load_prepared(folder: Path) -> Prepared:
    """Load the prepared graph folder ``folder`` once: every graph (the splits concatenated) and the labels."""
    card = GRAPHS.load_card(folder)
    samples, labels = GRAPHS.load_samples(folder, SPLITS, "cpu")
    return Prepared(folder, card, samples, labels)


def train_encoder(
    config: PretrainConfig,
    data: Prepared,
    scratch: Path,
    *,
    train: bool = True,
    epoch_seconds: list[float] | None = None,
    modality: Modality = GRAPHS,
    device: torch.device = CPU,
    after_epoch: Callable[[int, torch.nn.Module], None] | None = None,
) -> torch.nn.Module:
    """What ``hcl pretrain`` trains for ``config`` (its seeding, model, step and epoch loop) on ``modality``'s samples
    (on ``device``, where ``data`` lies), without its checkpoints and log; with ``train=False`` the untrained encoder of ``config.seed``.
    Each epoch's seconds are appended to ``epoch_seconds`` when given, and ``after_epoch(epoch, model)`` is called after
    each epoch (an image table's kNN probe: HCL Fig. 11)."""
    context = DistributedContext(rank=0, world_size=1, local_rank=0, device=device)
    context.seed_everything(config.seed)
    model, step = build_training(modality, config, data.card, context)
    if not train:
        return model
    steps = context.steps_per_epoch(len(data.samples), config.batch_size, modality.keep_last_batch, noun=modality.sample_noun)
    training = TrainingRun(
        config,
        model,
        step,
        data.samples,
        data.labels,
        CheckpointStore(scratch),
        {},
        context,
        steps,
        keep_last_batch=modality.keep_last_batch,
    )
    clock = RunClock(steps * config.epochs, config.epochs, steps, context.device, plain=False, reported=True)
    for epoch in range(config.epochs):
        start = time.perf_counter()
        train_one_epoch(training, epoch, 0, config.loss_options(epoch), EpochTotals(), StopRequest(), clock)
        if epoch_seconds is not None:
            epoch_seconds.append(time.perf_counter() - start)
        if after_epoch is not None:
            after_epoch(epoch, model)
    return model


def evaluate(model: torch.nn.Module, data: Prepared, seed: int, batch_size: int, held_out: np.ndarray | None = None) -> dict[str, Any]:
    """The SVM protocol (seeded by ``seed``) on the frozen graph embeddings of every graph; with ``held_out`` (the
    inductive protocol) the SVM fitted on the other graphs' embeddings and scored on the held-out ones."""
    embeddings, _ = GRAPHS.embed(model, None, data.samples, batch_size, "embed")
    x, y = embeddings.numpy(), data.labels.numpy()
    digest = {"embeddings_sha256": tensors_sha256([("embeddings", embeddings)])}
    if held_out is None:
        result = svm_protocol(x, y, seed=seed)
        return {"accuracy": 100 * result.mean, "fold_std": 100 * result.std, "chosen_c": result.chosen_c[0], **digest}
    training = np.setdiff1d(np.arange(len(y)), held_out)
    fold = heldout_svm(x[training], y[training], x[held_out], y[held_out])
    return {"accuracy": 100 * fold.accuracy, "fold": seed % PAPER_FOLDS, "held_out": len(held_out), "chosen_c": [fold.c], **digest}


def training_part(data: Prepared, seed: int, held_out: np.ndarray | None = None) -> tuple[Prepared, np.ndarray]:
    """The inductive protocol's run ``seed``: the graphs it pretrains on (those outside its held-out fold, with their
    labels) and the held-out graphs' positions in ``data`` (:func:`~hcl_cli.graph.svm.inductive_fold`, or ``held_out``)."""
    if held_out is None:
        held_out = inductive_fold(data.labels.numpy(), seed)[1]
    kept = torch.from_numpy(np.setdiff1d(np.arange(len(data.labels)), held_out))
    samples = GraphSamples(data.samples.batcher, data.samples.indices[kept])
    return Prepared(data.folder, data.card, samples, data.labels[kept]), held_out


def run_one(
    values: dict[str, Any], seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool = True, protocol: str = "inductive"
) -> dict[str, Any]:
    """Train (unless ``train`` is False: the untrained encoder) and read out one (method, seed) under ``protocol``; its
    provenance holds what makes it re-derivable bit for bit: the sha256 of the weights read out and of their embeddings
    (:mod:`~hcl_cli.tables.digests`) beside the commit, versions, CPU and float kernels."""
    config = PretrainConfig(**{**values, **({"epochs": epochs} if epochs else {})}, seed=seed, data=str(data.folder), device="cpu")
    training, held_out = training_part(data, seed) if protocol == "inductive" else (data, None)
    start = time.perf_counter()
    model = train_encoder(config, training, scratch, train=train)
    trained = time.perf_counter()
    figures = evaluate(model, data, seed, config.batch_size, held_out)
    done = time.perf_counter()
    seconds = {"train_seconds": round(trained - start, 3), "eval_seconds": round(done - trained, 3)}
    digests = {"weights_sha256": weights_sha256(model), "embeddings_sha256": figures.pop("embeddings_sha256")}
    return {**figures, **seconds, "load": round(os.getloadavg()[0], 2), "provenance": {**run_identity(), **digests}}
