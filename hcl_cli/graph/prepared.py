"""The prepared graph folder: the graphs, their stratified train/test split, and the card that counts them.

``hcl prepare --dataset tu`` (:func:`write_prepared_graphs`) writes ``graphs.safetensors`` (every
graph, :mod:`hcl_cli.graph.data`), ``split.safetensors`` (kind :data:`SPLIT_KIND`: the sorted
dataset indices of the ``train`` and ``test`` graphs, a split stratified by class and seeded by
prepare's ``seed``, of ``test_fraction`` of the graphs, drawn as the digits' split is) and
``card.json``, whose ``counts`` give the graphs per split and ``seed`` the split's seed. The
papers have no fixed split (their SVM cross-validates over all graphs): the split serves kNN and
``linear-eval --protocol fixed``, while ``--protocol svm`` reads train and test together, except for an encoder
that read the train labels under the inductive protocol, which pretrained on the train split alone and whose SVM is
fitted on it and scores the test split (docs/protocol-graphs.md). Kept
apart from :mod:`hcl_cli.graph.modality` so that ``prepare`` does not depend on the encoder or the loss.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from hcl_cli.artifacts.tensors import TensorSpec, load_artifact, save_artifact
from hcl_cli.errors import InputError, UsageError
from hcl_cli.graph.card import CARD_FILE, GraphCard
from hcl_cli.graph.data import GRAPHS_FILE, GraphDataset, save_prepared_graphs
from hcl_cli.splits import check_split_sizes

SPLIT_FILE = "split.safetensors"
SPLIT_KIND = "graph split"
SPLITS = ("train", "test")
FOLDER_FILES = (GRAPHS_FILE, "graphs.json", SPLIT_FILE, "split.json", CARD_FILE)
"""Every file of a prepared graph folder (prepare's manifest lists them)."""


def stratified_split(labels: Tensor, test_fraction: float, seed: int) -> dict[str, Tensor]:
    """The sorted graph indices of each split: ``test_fraction`` of every class held out, seeded (scikit-learn's
    ``train_test_split(..., stratify=labels)``, as the digits' split). A split that cannot hold every class is a
    one-line :class:`UsageError`."""
    from sklearn.model_selection import train_test_split

    values = labels.numpy()
    classes, counts = np.unique(values, return_counts=True)
    check_split_sizes(len(values), len(classes), test_fraction, "graph")
    if counts.min() < 2:
        raise UsageError(f"class {int(classes[counts.argmin()])} has one graph: a stratified train/test split needs at least 2 per class")
    train, test = train_test_split(np.arange(len(values)), test_size=test_fraction, random_state=seed, stratify=values)
    return {"train": torch.from_numpy(np.sort(train)), "test": torch.from_numpy(np.sort(test))}


def write_prepared_graphs(folder: str | Path, dataset: GraphDataset, card: GraphCard, test_fraction: float, seed: int) -> GraphCard:
    """Write the prepared folder of the module docstring into ``folder`` (each file atomically); returns its card."""
    split = stratified_split(dataset.labels, test_fraction, seed)
    card = dataclasses.replace(card, counts={name: len(split[name]) for name in SPLITS}, seed=seed)
    save_artifact(Path(folder) / SPLIT_FILE, split, SPLIT_KIND, meta={"dataset": card.name, "test_fraction": test_fraction, "seed": seed})
    save_prepared_graphs(folder, dataset, card)
    return card


def load_split_indices(folder: str | Path, card: GraphCard) -> dict[str, Tensor]:
    """The stored split, checked against the card: disjoint sorted indices covering every graph once."""
    path = Path(folder) / SPLIT_FILE
    tensors, sidecar = load_artifact(path, SPLIT_KIND, {name: TensorSpec(torch.int64, 1) for name in SPLITS})
    if sidecar.get("seed") != card.seed:
        raise InputError(f"{path} was split with seed {sidecar.get('seed')!r}, but the card records {card.seed!r}: run hcl prepare again")
    every = torch.cat([tensors[name] for name in SPLITS]).sort().values
    if not torch.equal(every, torch.arange(card.num_graphs)) or any(bool((tensors[name].diff() <= 0).any()) for name in SPLITS):
        raise InputError(f"{path}: the train and test indices do not cover the {card.num_graphs} graphs once each: run hcl prepare again")
    if {name: len(tensors[name]) for name in SPLITS} != card.counts:
        raise InputError(
            f"{path} does not hold the split counts {card.counts} that {Path(folder) / CARD_FILE} records: run hcl prepare again"
        )
    return {name: tensors[name] for name in SPLITS}
