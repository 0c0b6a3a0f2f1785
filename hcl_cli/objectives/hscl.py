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

import math
from collections.abc import Callable

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.candidates import uniform_on
from hcl_cli.objectives.core import NegativeWeights, ScoreBatch
from hcl_cli.objectives.hcl import tilted_weights
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.runtime import constant


def different_label_support(batch: ScoreBatch) -> tuple[Callable[[Tensor], Tensor], Tensor, Tensor]:
    """The support of the different-label candidates, as ``exclude`` (an (n, m) matrix, returned with ``-inf`` off
    the support), which anchors have any, and the log of each anchor's number of them.

    ``exclude`` writes ``-inf`` at the batch's same-label pairs (self included; the mask of the
    positives, :attr:`~hcl_cli.objectives.core.ScoreBatch.same_label`, found once per batch). Every anchor's label is among
    the candidates' (its own key or row; a node's own graph), so an anchor has no different-label
    candidate exactly when all candidates share one label: validity is one flag for the batch.
    Such a batch keeps every candidate (0 is written instead of ``-inf``): finite placeholder rows,
    ignored by the objective. Candidates that do not exist (:attr:`~hcl_cli.objectives.core.ScoreBatch.column_valid`)
    are always ``-inf``.
    """
    labels, candidates, valid = batch.labelled, batch.candidate_labels, batch.column_valid
    different = candidates != candidates[0]
    has_negatives = (different if valid is None else different & valid).any()
    same = batch.same_label
    fill = torch.where(has_negatives, -math.inf, 0.0).to(batch.compute_dtype)
    sizes = (len(candidates) if valid is None else valid.sum()) - torch.where(has_negatives, same.sum(dim=1), 0)

    def exclude(matrix: Tensor) -> Tensor:
        kept = torch.where(same, fill, matrix)  # not masked_fill: its tensor value is read on the host
        return kept if valid is None else torch.where(valid, kept, constant(-math.inf, kept.dtype, kept.device))

    return exclude, has_negatives.expand(len(labels)), sizes.to(batch.compute_dtype).log()


def hscl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """H-SCL(beta): different-label negatives weighted by ``exp(beta s_ij)`` (``clip`` and ``detach_weights`` as in HCL)."""
    exclude, anchor_valid, _ = different_label_support(batch)
    return tilted_weights(batch, lambda matrix, scale: exclude(matrix * scale), options, anchor_valid=anchor_valid)


def scl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """SCL: different-label negatives, uniformly weighted (H-SCL(beta) with beta = 0)."""
    exclude, anchor_valid, log_sizes = different_label_support(batch)
    return NegativeWeights(exclude(torch.zeros_like(batch.logits)), anchor_valid, log_normaliser=log_sizes)


def hscl_threshold(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """H-SCL(tau): uniform over the different-label samples whose cosine with the anchor is >= l.

    The paper's threshold ``tau = exp(l / t)`` on ``exp(s_ij)`` is ``cos_ij >= l``; ``l`` is passed
    as ``threshold`` and follows Eq. (4) over training (:func:`~hcl_cli.objectives.threshold_at`).
    Fallback (our choice; the paper does not say): an anchor none of whose different-label samples
    reaches the threshold uses all of them, i.e. SCL for that anchor, rather than being dropped
    (its threshold is lowered below every cosine).
    """
    if options.threshold is None:
        raise UsageError("the hscl-threshold sampler needs the current cosine threshold (threshold=...)")
    exclude, anchor_valid, _ = different_label_support(batch)
    cosine = exclude(batch.cosine.detach().clone())
    reached = cosine.amax(dim=1, keepdim=True) >= options.threshold
    threshold = options.threshold  # a number, or a compiled step's 0-d tensor (a number made into one on the host would be copied)
    threshold = threshold.to(cosine.dtype) if isinstance(threshold, Tensor) else cosine.new_full((), threshold)
    support = cosine >= torch.where(reached, threshold, torch.finfo(cosine.dtype).min)
    sizes = support.sum(dim=1, dtype=torch.int32)
    return NegativeWeights(uniform_on(support, batch.compute_dtype), anchor_valid, log_normaliser=sizes.to(batch.compute_dtype).log())
