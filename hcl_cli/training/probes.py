"""Monitors of training, run between epochs on rank 0: kNN top-1 (HCL Fig. 11) and H-SCL's diagnostics."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hcl_cli.augment import build_eval_transform
from hcl_cli.config import KnnConfig
from hcl_cli.datasets import DatasetCard, load_split
from hcl_cli.diagnostics import hscl_diagnostics
from hcl_cli.embeddings import topk_accuracy
from hcl_cli.knn import knn_predict
from hcl_cli.models import ContrastiveModel, encode

KNN_PROBE_BANK = 10_000
KNN_PROBE_QUERIES = 2_000


@dataclass(frozen=True)
class KnnProbe:
    """kNN top-1 of the current backbone (HCL Fig. 11), for ``--eval-every``.

    The bank is a fixed random subset of at most 10,000 labelled train images, the queries one of
    at most 2,000 test images (never trained on); the weighted kNN of ``hcl knn-eval`` with its
    default k (capped at the bank size) and temperature. A monitor of training, not a model
    selection: the final numbers come from ``embed`` + ``knn-eval`` on the full splits.
    """

    bank_images: Tensor
    bank_labels: Tensor
    query_images: Tensor
    query_labels: Tensor
    transform: nn.Module
    num_classes: int
    batch_size: int
    knn: KnnConfig

    @classmethod
    def from_prepared(cls, folder: str, card: DatasetCard, seed: int, batch_size: int) -> KnnProbe:
        generator = torch.Generator().manual_seed(seed)
        bank_images, bank_labels = load_split(folder, "train")
        query_images, query_labels = load_split(folder, "test")
        bank = torch.randperm(len(bank_labels), generator=generator)[:KNN_PROBE_BANK]
        queries = torch.randperm(len(query_labels), generator=generator)[:KNN_PROBE_QUERIES]
        transform = build_eval_transform(card.mean, card.std)
        return cls(
            bank_images[bank],
            bank_labels[bank],
            query_images[queries],
            query_labels[queries],
            transform,
            card.num_classes,
            batch_size,
            KnnConfig(),
        )

    def __call__(self, model: ContrastiveModel) -> float:
        bank, _ = encode(model, self.transform, self.bank_images, self.batch_size, description="kNN probe bank")
        queries, _ = encode(model, self.transform, self.query_images, self.batch_size, description="kNN probe queries")
        scores = knn_predict(
            bank,
            self.bank_labels,
            queries.to(next(model.parameters()).device),
            k=min(self.knn.k, len(bank)),
            temperature=self.knn.temperature,
            num_classes=self.num_classes,
            chunk_size=self.knn.chunk_size,
            bank_chunk_size=self.knn.bank_chunk_size,
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
