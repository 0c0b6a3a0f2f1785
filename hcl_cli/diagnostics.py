"""The papers' diagnostics of a representation, beyond accuracy.

- :func:`hscl_diagnostics`: on one batch, the share of anchors meeting H-SCL Assumption 1 and the
  four losses UCL, SCL, H-UCL and H-SCL side by side (Jiang et al., H-SCL, Sec. V-B, Figs. 4-5).
- :func:`label_pair_similarities`: cosine similarities of same-label and different-label pairs
  (Robinson et al., HCL, Fig. 5), drawn at random; :func:`distinct_label_pairs`: of every distinct pair.
- :func:`hardest_negatives`: the negatives a sampler weights highest for a few anchors (HCL Fig. 12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives import contrastive_loss, negative_weights

ASSUMPTION1_KEY = "assumption1_fraction"
LOSS_SAMPLERS = ("ucl", "scl", "hucl", "hscl")
"""The four settings of H-SCL Fig. 5, in its legend's terms UCL, SCL, H-UCL and H-SCL."""


def loss_key(sampler: str) -> str:
    """The name under which :func:`hscl_diagnostics` reports ``sampler``'s loss (``loss_hscl``)."""
    return f"loss_{sampler}"


@torch.no_grad()
def assumption1_fraction(z1: Tensor, z2: Tensor, labels: Tensor, *, temperature: float, beta: float) -> float:
    """Share of the batch's 2B anchors that meet H-SCL Assumption 1 (Jiang et al., Sec. IV).

    With ``s = z.z' / t`` on unit vectors and the exponential hardening function
    ``eta(s) = exp(beta s)`` of H-SCL(beta), anchor ``x`` meets the assumption when

        E_{x- ~ q_Hcol}[exp(s)] >= E_{x- ~ q_H-SCL}[exp(s)].

    ``q_H-SCL`` is the ``hscl`` sampler's negative distribution; ``q_Hcol`` (hard samples of the
    anchor's own label) is the ``hucl`` one (tau+ = 0) restricted to the anchor's label and
    renormalised, as Proposition 2 splits ``alpha_H-UCL = alpha_H-SCL + alpha_Hcol``. Both come
    from :func:`~hcl_cli.objectives.negative_weights`, over the 2B - 2 samples other than the
    anchor and its partner view. An anchor with no same-label or no different-label candidate has
    no ``q_Hcol`` or ``q_H-SCL`` and is not counted; with none left the share is NaN.
    """
    z1, z2 = z1.double(), z2.double()
    hard = negative_weights(z1, z2, labels, sampler="hucl", temperature=temperature, beta=beta)
    hard_true_negatives = negative_weights(z1, z2, labels, sampler="hscl", temperature=temperature, beta=beta)
    embeddings = F.normalize(torch.cat([z1, z2]), dim=1)
    exp_similarity = torch.exp(embeddings @ embeddings.T / temperature)
    both_views = torch.cat([labels, labels]).to(embeddings.device)
    collisions = hard * (both_views[:, None] == both_views[None, :])
    collision_mass = collisions.sum(dim=1)
    defined = (collision_mass > 0) & (hard_true_negatives.sum(dim=1) > 0)
    if not defined.any():
        return math.nan
    expected_collision = (collisions * exp_similarity).sum(dim=1) / collision_mass
    expected_true_negative = (hard_true_negatives * exp_similarity).sum(dim=1)
    meets = expected_collision >= expected_true_negative
    return (meets & defined).sum().item() / defined.sum().item()


@torch.no_grad()
def hscl_diagnostics(z1: Tensor, z2: Tensor, labels: Tensor, *, temperature: float, beta: float) -> dict[str, float]:
    """H-SCL's per-batch diagnostics (Jiang et al., Sec. V-B): the share of anchors meeting
    Assumption 1 (Fig. 4) and the losses UCL, SCL, H-UCL and H-SCL of the same batch (Fig. 5).

    The losses come from :func:`hcl_cli.objectives.contrastive_loss`, all four on the same
    positives: every other sample of the anchor's label, partner included. Lemma 1 compares losses
    of one positive distribution ("we use both augmentation and label information to generate the
    positive samples for H-UCL and H-SCL", Sec. V-B), so UCL and H-UCL are taken with
    ``positives="labels"``; with the partner alone they would score easier positives than SCL and
    H-SCL and could show H-UCL below H-SCL on a batch where Assumption 1 holds. H-UCL is taken
    without debiasing (``tau_plus = 0``), the setting of Lemma 1; the negatives stay each
    sampler's own. Then every anchor meeting Assumption 1 has an H-UCL term at least its H-SCL
    term. Keys: ``assumption1_fraction`` and ``loss_ucl``, ``loss_scl``, ``loss_hucl``, ``loss_hscl``.
    """
    diagnostics = {ASSUMPTION1_KEY: assumption1_fraction(z1, z2, labels, temperature=temperature, beta=beta)}
    for sampler in LOSS_SAMPLERS:
        loss = contrastive_loss(z1, z2, labels, sampler=sampler, temperature=temperature, beta=beta, tau_plus=0.0, positives="labels")
        diagnostics[loss_key(sampler)] = loss.item()
    return diagnostics


@torch.no_grad()
def label_pair_similarities(embeddings: Tensor, labels: Tensor, *, pairs: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Cosine similarities of ``pairs`` random same-label pairs and ``pairs`` different-label pairs.

    The first image of a pair is drawn uniformly (among images whose class has another member, for
    same-label pairs), the second uniformly among the other images of the same label, or among the
    images of a different label. Drawing a fixed number of pairs bounds the cost on any test set.
    Returns two 1-D CPU tensors; the same-label one is empty when every class has a single image.
    """
    unit = F.normalize(embeddings.float(), dim=1)
    generator = torch.Generator().manual_seed(seed)
    order = torch.argsort(labels, stable=True)
    _, inverse, counts = torch.unique(labels[order], return_inverse=True, return_counts=True)
    size = counts[inverse]
    start = (torch.cumsum(counts, 0) - counts)[inverse]
    rank = torch.arange(len(order)) - start

    def cosine(first: Tensor, second: Tensor) -> Tensor:
        return (unit[order[first]] * unit[order[second]]).sum(dim=1).cpu()

    shared = torch.nonzero(size > 1).squeeze(1)
    same = torch.empty(0)
    if len(shared):
        first = shared[torch.randint(len(shared), (pairs,), generator=generator)]
        offset = 1 + (torch.rand(pairs, generator=generator) * (size[first] - 1)).long()
        same = cosine(first, start[first] + (rank[first] + offset) % size[first])
    first = torch.randint(len(order), (pairs,), generator=generator)
    outside = (torch.rand(pairs, generator=generator) * (len(order) - size[first])).long()
    second = torch.where(outside < start[first], outside, outside + size[first])
    return same, cosine(first, second)


def distinct_label_pairs(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Cosine similarities of every distinct pair of ``embeddings`` (each unordered pair once, no sample with itself),
    split into the same-label and the different-label ones: two 1-D CPU tensors (n (n - 1) / 2 values in all)."""
    unit = F.normalize(embeddings.float(), dim=1)
    first, second = torch.triu_indices(len(labels), len(labels), offset=1, device=unit.device)
    cosines = (unit[first] * unit[second]).sum(dim=1).cpu()
    same = (labels.to(unit.device)[first] == labels.to(unit.device)[second]).cpu()
    return cosines[same], cosines[~same]


@dataclass(frozen=True)
class HardNegatives:
    """One anchor's highest-weighted negatives: batch positions and probabilities, highest first."""

    anchor: int
    indices: list[int]
    weights: list[float]


def pick_anchors(labels: Tensor, count: int) -> list[int]:
    """Positions of up to ``count`` anchors of distinct labels: the first sample of each label, by label."""
    anchors = [int(torch.nonzero(labels == label)[0]) for label in torch.unique(labels)]
    return anchors[:count]


@torch.no_grad()
def hardest_negatives(
    z: Tensor, labels: Tensor, anchors: list[int], *, count: int, sampler: str, **sampler_options: Any
) -> list[HardNegatives]:
    """The ``count`` negatives that ``sampler`` weights highest for each anchor of one batch (HCL Fig. 12).

    ``z`` (B, P) are the batch's projections without augmentation, given as both views, so that the
    weights are :func:`hcl_cli.objectives.negative_weights` of the batch the sampler would see. A
    sample's weight is the probability of either of its two views, and only samples of positive
    weight are listed.
    """
    size = len(z)
    weights = negative_weights(z, z, labels, sampler=sampler, **sampler_options)[:size]
    per_sample = (weights[:, :size] + weights[:, size:]).double().cpu()
    rows = []
    for anchor in anchors:
        top = per_sample[anchor].topk(min(count, size))
        kept = top.values > 0
        rows.append(HardNegatives(anchor, top.indices[kept].tolist(), top.values[kept].tolist()))
    return rows
