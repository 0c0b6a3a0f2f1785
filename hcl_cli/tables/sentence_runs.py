"""One run of a sentence table's row: what ``hcl pretrain`` trains on the corpus for the row's values and seed, read out on
every SentEval task as ``hcl embed`` and ``hcl linear-eval --protocol senteval`` read it.

The corpus and each task are prepared once by ``hcl prepare``'s stage code (``--dataset text``, then ``--dataset senteval
--task T --corpus``: the corpus's vocabulary; :mod:`hcl_cli.stages.table_sentences`). The training is the product's (:func:`hcl_cli.tables.runs.train_encoder` on
the sentences: ``hcl pretrain``'s seeding, model, step and epoch loop, without its checkpoints and log). Each task's
sentences are embedded as ``[f(s); g(s)]`` (the modality's ``embed``) and read out by SentEval's protocol
(:func:`~hcl_cli.text.tasks.task_features`, :func:`~hcl_cli.text.readout.task_readout`, seeded by SentEval's 1111). The
baselines (:data:`~hcl_cli.tables.sentence_rows.BASELINES`) read out the same way: the untrained encoder of the seed (the
initialisation every row of that seed starts from) and the mean untrained word embeddings
(:meth:`~hcl_cli.text.modality.TextModality.raw_features`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.provenance import run_identity
from hcl_cli.tables.runs import CPU, Prepared, train_encoder
from hcl_cli.tables.sentence_rows import BASELINES
from hcl_cli.text.modality import TEXT, TextSamples
from hcl_cli.text.prepared import TextCard
from hcl_cli.text.readout import task_readout
from hcl_cli.text.tasks import task_features
from hcl_cli.training.plan import run_spec

Features = Callable[[TextSamples], torch.Tensor]
"""A sentence representation: the samples' features (n, d) on the CPU."""


@dataclass
class SentenceData:
    """The prepared corpus, loaded once, and each task's prepared folder with its card and its train and test sentences."""

    corpus: Prepared
    tasks: dict[str, tuple[Path, TextCard, tuple[tuple[TextSamples, torch.Tensor], ...]]]
    counts: dict[str, int]
    """The corpus's sentences, documents, tokens and vocabulary size, as a results file records them."""


def readouts(features: Features, data: SentenceData, recipe: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every task's accuracy (and MRPC's F1) of ``features`` by SentEval's protocol at the recipe's folds."""
    scores = {}
    for task, (folder, card, splits) in data.tasks.items():
        train, test = ((features(samples), labels) for samples, labels in splits)
        result = task_readout(task, *task_features(card, folder, train, test), seed=recipe["readout_seed"], folds=recipe["folds"])
        scores[task] = {"accuracy": result.accuracy, **({"f1": result.f1} if result.f1 is not None else {})}
    return scores


def run_sentences(row: str, values: dict[str, Any], seed: int, data: SentenceData, recipe: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Train row ``row`` (a baseline: none) at ``seed`` on the corpus and read it out on every task: the scores, the
    seconds, the steps and the provenance."""
    training = {key: value for key, value in recipe.items() if key not in ("folds", "readout_seed")}
    config = PretrainConfig(**training, **values, seed=seed, data=str(data.corpus.folder), device="cpu")
    spec = run_spec(config, DistributedContext(rank=0, world_size=1, local_rank=0, device=CPU))
    start = time.perf_counter()
    if row == "word-embeddings":
        features: Features = TEXT.raw_features
    else:
        model = train_encoder(spec.config, data.corpus, scratch, train=row != "untrained", modality=TEXT)
        features = lambda samples: TEXT.embed(model, None, samples, spec.config.batch_size, "embed")[0]  # noqa: E731
    trained = time.perf_counter()
    scores = readouts(features, data, recipe)
    identity = run_identity()
    cost = {"pretrain_seconds": trained - start, "steps": spec.steps_per_epoch * spec.config.epochs} if row not in BASELINES else {}
    return {
        "row": row,
        "seed": seed,
        "scores": scores,
        **cost,
        "readout_seconds": time.perf_counter() - trained,
        "commit": (identity["commit"] or "unknown")[:7],
        "threads": torch.get_num_threads(),
        "load": round(os.getloadavg()[0], 2),
        "provenance": identity,
    }
