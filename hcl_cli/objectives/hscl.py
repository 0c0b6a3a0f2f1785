"""Label-aware negatives of H-SCL (Jiang et al., "Supervised contrastive learning with hard
negative samples"): SCL, H-SCL(beta) and H-SCL(tau).

Negatives of anchor i are the batch samples (with a queue, the queued keys too) with a
*different* label (Sec. III-B), tilted by a hardening function eta (Definition 1):
``eta_exp(s) = exp(beta s)`` for H-SCL(beta) (beta = 0 is SCL) and ``eta_thresh = 1(cos >= l)``
for H-SCL(tau). Positives are every other sample with the anchor's label, partner included. The
loss is Eq. (3), the large-negative-sample InfoNCE,

    E_i = sum_j eta_ij exp(s_ij) / sum_j eta_ij,   loss = mean over positive pairs (i, p) of log(1 + M exp(-s_ip) E_i)

with M = 2B - 2 (the paper's "batch size minus 2" for its B two-view pairs; 2B - 2 + K with a
queue of K keys, whose same-label keys are positives too). H-SCL's code detaches the weights
``eta_ij`` (``imp.detach()``); here that is ``detach_weights``, off by default as in HCL, so the
default gradient also flows through them. No tau+ debiasing: the labels already remove the false
negatives. An anchor whose candidates hold no different-label sample has no negative
distribution; it is left out of the mean and counted in
:class:`~hcl_cli.objectives.core.LossStats` ``anchors_without_negatives``.

On nodes against graphs (InfoGraph, H-SCL Sec. V-C), a node's label is its graph's: its negatives
are the batch's graphs of other labels, and its positives every graph of its label, its own
included (:mod:`~hcl_cli.objectives.infograph`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, ScoreBatch, label_runs, uniform_on
from hcl_cli.objectives.hcl import tilted_log_weights
from hcl_cli.objectives.sampler_options import SamplerOptions


def different_label_support(batch: ScoreBatch) -> tuple[Tensor, Tensor, Tensor]:
    """The (anchor, candidate) pairs of different labels, which anchors have any, and the log of each anchor's number of them.

    Every anchor's label is among the candidates' (its own key or row; a node's own graph), so an anchor has no
    different-label candidate exactly when all candidates share one label: validity is one flag
    for the batch. Such a batch gets the unsupervised negatives (every image its own class) as
    placeholder rows (every graph its own class for nodes): finite, and ignored by the objective.
    """
    labels, candidates = batch.labelled, batch.candidate_labels
    has_negatives = (candidates != candidates[0]).any()
    classes = torch.where(has_negatives, labels, batch.masks.anchor_images)
    candidate_classes = torch.where(has_negatives, candidates, batch.masks.candidate_images)
    sizes = len(candidate_classes) - label_runs(classes, candidate_classes)[2]
    return classes[:, None] != candidate_classes[None, :], has_negatives.expand(len(labels)), sizes.to(batch.compute_dtype).log()


def hscl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """H-SCL(beta): different-label negatives weighted by ``exp(beta s_ij)`` (``clip`` and ``detach_weights`` as in HCL)."""
    support, anchor_valid, _ = different_label_support(batch)
    return NegativeWeights(tilted_log_weights(batch, uniform_on(support, batch.compute_dtype), options), anchor_valid)


def scl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """SCL: different-label negatives, uniformly weighted (H-SCL(beta) with beta = 0)."""
    support, anchor_valid, log_sizes = different_label_support(batch)
    return NegativeWeights(uniform_on(support, batch.compute_dtype), anchor_valid, log_normaliser=log_sizes)


def hscl_threshold(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """H-SCL(tau): uniform over the different-label samples whose cosine with the anchor is >= l.

    The paper's threshold ``tau = exp(l / t)`` on ``exp(s_ij)`` is ``cos_ij >= l``; ``l`` is passed
    as ``threshold`` and follows Eq. (4) over training (:func:`~hcl_cli.objectives.threshold_at`).
    Fallback (our choice; the paper does not say): an anchor none of whose different-label samples
    reaches the threshold uses all of them, i.e. SCL for that anchor, rather than being dropped.
    """
    if options.threshold is None:
        raise UsageError("the hscl-threshold sampler needs the current cosine threshold (threshold=...)")
    support, anchor_valid, _ = different_label_support(batch)
    hard = support & (batch.cosine >= options.threshold)
    support = hard.where(hard.any(dim=1, keepdim=True), support)
    return NegativeWeights(uniform_on(support, batch.compute_dtype), anchor_valid)
