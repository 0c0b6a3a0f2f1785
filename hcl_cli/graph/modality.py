"""Graphs, the second :class:`~hcl_cli.modality.Modality`: TU datasets, InfoGraph's GIN, nodes against graphs.

What each method does, and the decisions behind it:

- **The prepared folder** (:mod:`hcl_cli.graph.prepared`): the graphs, a seeded stratified
  train/test split (kNN and ``linear-eval --protocol fixed`` read it; ``--protocol svm``
  cross-validates over all graphs, as the papers) and the card counting the graphs per split.
- **Training splits**: a self-supervised run reads every graph, train and test, as InfoGraph's code
  does (deepinfomax.py trains on the whole ``TUDataset``; no label is read). A run that reads labels
  (``scl``, ``hscl``, ``hscl-threshold``, ``positives: labels``) follows ``label_protocol``
  (docs/protocol-graphs.md): ``inductive`` (the default) reads the train split alone, so the test
  graphs, labels and all, never reach pretraining and ``linear-eval --protocol svm`` fits on the
  train split and scores the test split; ``transductive`` reads every graph with its label, so
  the encoder saw the test labels, which the report, ``hcl compare`` and the README say. H-SCL
  Sec. V-C does not say which labels its pretraining read.
- **Batches**: a graph epoch keeps its last partial batch (:attr:`GraphModality.keep_last_batch`),
  as the official ``DataLoader(batch_size=128)`` does (MUTAG's 188 graphs are 2 steps), except a
  tail of fewer than 2 graphs (a node's negatives are the other graphs of its batch), which is
  dropped. The order is a seeded permutation per epoch; the official code shuffles the dataset
  once, before training (deepinfomax.py line 118, ``TUDataset(path, name=DS).shuffle()``), and
  its loader keeps that order every epoch.
  Graph training runs in one process and without a momentum queue (:func:`~hcl_cli.graph.step.check_graph_training`).
- **Samples** (:class:`GraphSamples`): the graphs resident on the device; ``samples[index]`` is a
  :class:`~hcl_cli.graph.batch.GraphBatch` gathered by :class:`~hcl_cli.graph.batch.GraphBatcher`.
- **Encoder**: :class:`~hcl_cli.graph.encoder.GinModel`, stored as a ``graph encoder`` artifact
  (:mod:`hcl_cli.graph.encoder`); ``embed`` writes the 96-d graph embedding as the backbone and
  the global head's output as the projection.
- **Raw features**: each graph's sum of node features (the bag of its node labels, or of its
  degrees), the input-space baseline that kNN L2-normalises.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hcl_cli.artifacts.binding import prepared_sha256
from hcl_cli.errors import InputError, UsageError
from hcl_cli.graph.batch import GraphBatch, GraphBatcher
from hcl_cli.graph.card import CARD_FILE, GraphCard, load_graph_card
from hcl_cli.graph.data import load_prepared_graphs
from hcl_cli.graph.encoder import GRAPH_ENCODER_KIND, GinModel, GraphEncoderSidecar, load_graph_encoder, save_graph_encoder
from hcl_cli.graph.gin import global_add_pool
from hcl_cli.graph.prepared import SPLITS, load_split_indices
from hcl_cli.logs import bars_disabled

JSD_LOSS_NOTE = (
    "the loss is InfoGraph's Jensen-Shannon objective (hcl_cli/objectives/jsd.py), E sp(s_neg) + E sp(-s_pos) - 2 log 2: "
    "0 where the scores tell a node's own graph from the others no better than chance, below 0 as they learn to, down to "
    "-2 log 2 = -1.386; a negative loss is learning, not an error"
)
"""What a person watching a graph run's loss should know (:attr:`GRAPHS.loss_note <hcl_cli.modality.Modality.loss_note>`)."""
MIN_BATCH_GRAPHS = 2
"""The fewest graphs a training batch holds: each node's negatives are the other graphs of its batch."""


class GraphSamples:
    """Graphs resident on a device (:class:`~hcl_cli.modality.Samples`): ``len()``, ``.device``, and
    ``samples[index]``, the :class:`~hcl_cli.graph.batch.GraphBatch` of the graphs at positions ``index``, an index on the
    host (:attr:`index_device`: the batcher sizes a batch from its graphs' counts there, so the epoch's order stays there
    and nothing is copied back from the device)."""

    index_device = torch.device("cpu")

    def __init__(self, batcher: GraphBatcher, indices: Tensor) -> None:
        self.batcher = batcher
        self.indices = indices.cpu()
        """(n,) the dataset index of each sample, in order."""

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def device(self) -> torch.device:
        return self.batcher.device

    def __getitem__(self, index: Tensor) -> GraphBatch:
        return self.batcher.batch(self.indices[torch.as_tensor(index)])


class GraphModality:
    """Graphs of a TU dataset; a batch is a :class:`~hcl_cli.graph.batch.GraphBatch` (module docstring)."""

    name = "graph"
    sample_noun = "graph"
    encoder_kind = GRAPH_ENCODER_KIND
    keep_last_batch = True
    two_views = False
    objectives = ("jsd",)
    loss_note = JSD_LOSS_NOTE
    raw_name = "summed node features"
    raw_feature = "node features"
    eval_inputs = "graphs"
    raw_description = "each graph's summed node features (the counts of its node labels, or degrees), L2-normalised"

    def load_card(self, folder: str | Path) -> GraphCard:
        card = load_graph_card(folder)
        if card.counts is None:
            raise InputError(f"{Path(folder) / CARD_FILE} records no train/test split: run hcl prepare --dataset tu again")
        return card

    def describe(self, card: GraphCard, count: int) -> str:
        return f"{count} graphs of {card.avg_nodes:.1f} nodes on average"

    def check_trainable(self, card: GraphCard, folder: str) -> None:
        if card.num_graphs < MIN_BATCH_GRAPHS:
            raise UsageError(f"{folder} holds {card.num_graphs} graph: InfoGraph needs batches of at least {MIN_BATCH_GRAPHS}")

    def training_splits(self, card: GraphCard | None, labelled: bool, transductive: bool = False) -> list[str]:
        """Every graph, train and test, as InfoGraph's code trains, unless the run reads labels under the inductive
        protocol: then the train split alone (module docstring)."""
        return list(SPLITS) if transductive or not labelled else ["train"]

    def encoder_data(self, folder: str | Path, card: Any) -> dict[str, str]:
        """The folder's own files: an encoder embeds the data it trained on."""
        return prepared_sha256(folder)

    def load_samples(self, folder: str | Path, splits: Sequence[str], device: torch.device | str = "cpu") -> tuple[GraphSamples, Tensor]:
        dataset, card = load_prepared_graphs(folder)
        if card.counts is None:
            raise InputError(f"{Path(folder) / CARD_FILE} records no train/test split: run hcl prepare --dataset tu again")
        split = load_split_indices(folder, card)
        indices = torch.cat([split[name] for name in splits])
        batcher = GraphBatcher(dataset, device)
        return GraphSamples(batcher, indices), dataset.labels[indices]  # on the host, with the order that indexes them

    def save_encoder(self, path: str | Path, model: GinModel, card: GraphCard, meta: dict[str, Any]) -> None:
        save_graph_encoder(path, model, meta)

    def load_encoder(self, path: str | Path, device: torch.device | str = "cpu") -> tuple[GinModel, GraphEncoderSidecar]:
        return load_graph_encoder(path, device)

    def check_fits(self, model: GinModel, card: GraphCard, model_path: str, data_path: str) -> None:
        if model.in_dim != card.feature_dim:
            raise InputError(
                f"{model_path} was trained on graphs of {model.in_dim} node features, but {data_path} has {card.feature_dim} ({card.features})"
            )

    @torch.no_grad()
    def embed(
        self, model: GinModel, stats: Any, samples: GraphSamples | GraphBatch, batch_size: int, description: str
    ) -> tuple[Tensor, Tensor]:
        """Graph embeddings (backbone) and global head outputs (projection), float32 on the CPU, of every graph in
        order, ``batch_size`` graphs per forward pass, in eval mode (BatchNorm's running statistics; the previous
        mode is restored). A :class:`GraphBatch` (a probe's fixed subset) is embedded in one pass."""
        from tqdm import tqdm

        was_training = model.training
        model.eval()
        if isinstance(samples, GraphBatch):
            parts = [samples]
        else:
            starts = range(0, len(samples), batch_size)
            parts = (samples[torch.arange(start, min(start + batch_size, len(samples)))] for start in starts)
            parts = tqdm(parts, total=len(starts), desc=description, unit="batch", disable=bars_disabled(), leave=False)
        backbone, projection = [], []
        for batch in parts:
            graphs, heads = model.embed(batch.x, batch.edges, batch.batch, batch.num_graphs)
            backbone.append(graphs.float().cpu())
            projection.append(heads.float().cpu())
        model.train(was_training)
        return torch.cat(backbone), torch.cat(projection)

    def untrained(self, model: GinModel, seed: int) -> GinModel:
        device = next(model.parameters()).device
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = GinModel(model.in_dim, model.encoder.hidden, model.encoder.layers)
        return fresh.to(device).eval()

    def card_summary(self, card: GraphCard) -> str:
        counts = ", ".join(f"{count:,} {split}" for split, count in (card.counts or {}).items())
        return (
            f"{counts} graphs (a stratified split, seed {card.seed}), {card.num_classes} classes, {card.avg_nodes:.1f} nodes and "
            f"{card.avg_edges:.1f} edges per graph on average, {card.feature_dim} node features ({card.features})"
        )

    def recorded_prepare(self, card: GraphCard) -> dict[str, Any]:
        return {"dataset": "tu", "name": card.name}

    def raw_features(self, samples: GraphSamples) -> Tensor:
        """Each graph's sum of node features: the count of each node label (or degree) in it, float32 on the CPU."""
        batch = samples[torch.arange(len(samples))]
        return global_add_pool(batch.x, batch.batch, batch.num_graphs).float().cpu()


GRAPHS = GraphModality()
