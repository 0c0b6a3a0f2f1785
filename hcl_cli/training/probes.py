"""Monitors of training, run between epochs on rank 0: kNN top-1 (HCL Fig. 11) and H-SCL's diagnostics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.diagnostics import hscl_diagnostics
from hcl_cli.image.networks import ContrastiveModel
from hcl_cli.knn import knn_predict
from hcl_cli.metrics import topk_accuracy
from hcl_cli.modality import Modality, Samples

KNN_PROBE_BANK = 10_000
KNN_PROBE_QUERIES = 2_000
KNN_PROBE_SETTINGS = {
    modality: {"k": k, "temperature": 0.5, "chunk_size": 1024, "bank_chunk_size": 32768} for modality, k in (("image", 200), ("graph", 20))
}
"""``hcl knn-eval``'s defaults on each modality's data, held here so that pretraining does not import (and depend on)
knn-eval's declarations; tests/test_config.py keeps them equal."""


@dataclass(frozen=True)
class KnnProbe:
    """kNN top-1 of the current backbone (HCL Fig. 11), for ``--eval-every``.

    The bank is a fixed random subset of at most 10,000 labelled train images, the queries one of
    at most 2,000 test images (never trained on); the weighted kNN of ``hcl knn-eval`` with its
    default k on the modality's data (capped at the bank size) and temperature (:data:`KNN_PROBE_SETTINGS`): on graphs
    k 20, since k 200 would reach every train graph of a small TU dataset and vote its majority class. A monitor of training, not a model
    selection: the final numbers come from ``embed`` + ``knn-eval`` on the full splits.
    """

    bank: Samples
    bank_labels: Tensor
    queries: Samples
    query_labels: Tensor
    modality: Modality
    card: Any
    """The training card: what the modality reads to embed (images: the per-channel mean and std)."""
    batch_size: int

    @classmethod
    def from_prepared(cls, folder: str, modality: Modality, card: Any, seed: int, batch_size: int) -> KnnProbe:
        generator = torch.Generator().manual_seed(seed)
        bank_samples, bank_labels = modality.load_samples(folder, ["train"])
        query_samples, query_labels = modality.load_samples(folder, ["test"])
        bank = torch.randperm(len(bank_labels), generator=generator)[:KNN_PROBE_BANK]
        queries = torch.randperm(len(query_labels), generator=generator)[:KNN_PROBE_QUERIES]
        return cls(bank_samples[bank], bank_labels[bank], query_samples[queries], query_labels[queries], modality, card, batch_size)

    def __call__(self, model: nn.Module) -> float:
        bank, _ = self.modality.embed(model, self.card, self.bank, self.batch_size, "kNN probe bank")
        queries, _ = self.modality.embed(model, self.card, self.queries, self.batch_size, "kNN probe queries")
        settings = KNN_PROBE_SETTINGS[self.modality.name]
        scores = knn_predict(
            bank,
            self.bank_labels,
            queries.to(next(model.parameters()).device),
            num_classes=self.card.num_classes,
            **(settings | {"k": min(settings["k"], len(bank))}),
        )
        return topk_accuracy(scores, self.query_labels, ks=(1,))[1]


@dataclass(frozen=True)
class HsclProbe:
    """H-SCL's diagnostics (Jiang et al., Figs. 4-5) each epoch, on one fixed batch with fixed views.

    The batch is a seeded random draw of ``batch_size`` training images. Its two views are drawn
    from torch's RNG forked and seeded with ``seed``, so they are the same every epoch and the
    training stream of random numbers is untouched. The model runs in eval mode (BatchNorm running
    statistics) and is put back in training mode.
    """

    images: Tensor
    labels: Tensor
    seed: int
    temperature: float

    @classmethod
    def from_training(cls, images: Tensor, labels: Tensor, seed: int, batch_size: int, temperature: float) -> HsclProbe:
        batch = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))[:batch_size].to(images.device)
        return cls(images[batch], labels[batch], seed, temperature)

    @torch.no_grad()
    def __call__(self, model: ContrastiveModel, augment: nn.Module, beta: float) -> dict[str, float]:
        device = self.images.device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(self.seed)
            views = torch.cat([augment(self.images), augment(self.images)])
        model.eval()
        _, _, z = model(views)
        model.train()
        z1, z2 = z.float().chunk(2)
        return hscl_diagnostics(z1, z2, self.labels, temperature=self.temperature, beta=beta)
