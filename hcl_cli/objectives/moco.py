"""The MoCo-v2 objective (He et al. 2020; Chen et al. 2020), as facebookresearch/moco's ``moco/builder.py``
computes it, with a sampler's reweighting over the queued negatives (HCL App. C.1).

builder.py's ``forward(im_q, im_k)``: ``q = normalize(encoder_q(im_q))`` (B, d), ``k =
normalize(encoder_k(im_k))`` (B, d, no gradient), ``l_pos = q.k`` (B, 1), ``l_neg = q @ queue``
(B, K), ``logits = [l_pos, l_neg] / T``, ``labels = 0``, loss ``CrossEntropy(logits, labels)``;
then ``_dequeue_and_enqueue(k)``. Here that is one :class:`MocoBatch`: B anchors (the queries),
1 + K candidates (column 0 the anchor's own key, its positive; columns 1..K the queue, its
negatives: exactly the K queued keys, never the batch's other keys), and the shared objective of
:mod:`hcl_cli.objectives.core` over it. Under ``ucl`` that objective is builder.py's cross-entropy
exactly: ``log(1 + K E_uniform[exp(s_neg)] exp(-s_pos)) = -log softmax(logits)[0]``. Under
``hucl`` the negatives are tilted by ``exp(beta s)`` with HCL's tau+ debiasing over the K queued
keys (N = K), as HCL App. C.1 runs hard negatives on MoCo-v2; ``debiased`` is hucl at beta 0.

Only the samplers whose negatives are a reweighting of one candidate set run here
(:data:`~hcl_cli.objectives.registry.MOCO_SAMPLERS`): the supervised samplers would need the batch's same-view keys, UnDiMix the
pseudo-labelling task of both views, and the OT coupling a column marginal over the queue alone,
none of which MoCo-v2 defines; they run with ``queue_mode: batch``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.candidates import PairMasks, uniform_on
from hcl_cli.objectives.core import LossStats, ScoreBatch, contrastive_objective
from hcl_cli.objectives.loss import full_precision
from hcl_cli.objectives.registry import Sampler, check_moco, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions


class MocoBatch(ScoreBatch):
    """B queries against their own keys and a queue of K keys: builder.py's logits, as a :class:`ScoreBatch`.

    ``cosine`` (B, 1 + K) is ``[q.k, q @ queue^T]``; column 0 is each anchor's positive (``partner``),
    columns 1..K its negatives. Candidate "images": -1 for column 0 (the anchor's own image, as are
    the anchors'), ``p`` for queue row ``p``.
    """

    def __init__(self, q: Tensor, k: Tensor, queue: Tensor, temperature: float) -> None:
        self.compute_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        self.temperature = temperature
        self.batch_size, self.queue_size = q.shape[0], queue.shape[0]
        self.z = F.normalize(q.to(self.compute_dtype), dim=1)
        self.key_z = F.normalize(k.detach().to(self.compute_dtype), dim=1)
        self.queue_z = F.normalize(queue.detach().to(self.compute_dtype), dim=1)
        self.cosine = torch.cat([(self.z * self.key_z).sum(dim=1, keepdim=True), self.z @ self.queue_z.T], dim=1)
        self.logits = self.cosine / temperature
        self.labels = self.candidate_labels = None
        device, rows, columns = q.device, self.batch_size, 1 + self.queue_size
        index = torch.arange(rows, device=device)
        negatives = (torch.arange(columns, device=device) > 0).expand(rows, columns)
        self.masks = PairMasks(
            rows=index,
            partner=torch.zeros_like(index),
            partner_pairs=index * columns,
            negatives=negatives,
            others=torch.ones_like(negatives),
        )

    @property
    def num_negatives(self) -> int:
        """M = K: the queued keys."""
        return self.queue_size

    @property
    def uniform(self) -> Tensor:
        """(B, 1 + K) 0 on the queue's columns, ``-inf`` on the positive's."""
        return uniform_on(self.masks.negatives, self.compute_dtype)

    def sq_cost(self) -> Tensor:
        """(B, 1 + K) ``||q_i - c_j||^2`` of the unit queries and candidates, detached."""
        return (2.0 - 2.0 * self.cosine.detach()).clamp(min=0.0)


def moco_sampler_loss(
    q: Tensor, k: Tensor, queue: Tensor, *, spec: Sampler, options: SamplerOptions, anchor_mask: Tensor | None = None
) -> tuple[Tensor, LossStats]:
    """The MoCo loss of queries ``q`` (B, d), their keys ``k`` (B, d) and the ``queue`` (K, d) under ``spec``'s
    reweighting, with its statistics; ``options`` checked beforehand (the training step's entry).
    ``anchor_mask`` (B,) keeps those queries' terms, divided by the number of all terms (data parallel)."""
    with full_precision(q.device):
        batch = MocoBatch(q, k, queue, options.temperature)
        negatives = spec.load()(batch, options)
        return contrastive_objective(
            batch, negatives, label_positives=False, tau_plus=options.tau_plus, objective=options.objective, anchor_mask=anchor_mask
        )


def moco_loss(q: Tensor, k: Tensor, queue: Tensor, *, sampler: str = "ucl", **options: Any) -> Tensor:
    """builder.py's loss for queries ``q``, keys ``k`` (both (B, d)) and a ``queue`` (K, d) (normalised here), under
    ``sampler`` (ucl: MoCo-v2 itself; hucl: HCL App. C.1) with its options (``temperature``, ``beta``, ``tau_plus``, ...)."""
    spec = lookup(sampler)
    resolved = SamplerOptions.resolve(spec, options)
    check_moco(sampler, spec.label_positives(resolved))
    if q.ndim != 2 or q.shape != k.shape or queue.ndim != 2 or queue.shape[1] != q.shape[1] or not queue.shape[0]:
        raise UsageError(
            f"q and k must be (B, d) and the queue (K, d) with K >= 1 (got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(queue.shape)})"
        )
    return moco_sampler_loss(q, k, queue, spec=spec, options=resolved)[0]


def random_queue(size: int, dim: int, device: torch.device) -> Tensor:
    """(K, d) builder.py's initial queue, ``normalize(randn(dim, K), dim=0)``, as rows (from the global RNG)."""
    return F.normalize(torch.randn(dim, size, device=device), dim=0).T.contiguous()
