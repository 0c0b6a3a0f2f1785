"""Debiased and hard negatives of HCL (Robinson et al., "Contrastive learning with hard negative
samples", ICLR 2021), and the debiased special case of Chuang et al. (NeurIPS 2020).

HCL tilts the negative distribution towards the anchor, ``q_beta(x-) ~ exp(beta f(x).f(x-)) p(x-)``,
and removes same-class samples by the PU decomposition of Eq. (2), giving the objective of Eq. (4).
Its importance-sampling estimate over a batch (Sec. 3.1 and the official code, Fig. 13) is

    pos_i = exp(s_ip),  w_ij = exp(beta s_ij),  R_i = sum_j w_ij exp(s_ij) / mean_j w_ij
    Ng_i  = max((R_i - tau+ N pos_i) / (1 - tau+), N exp(-1/t)),  loss = mean_i -log(pos_i / (pos_i + Ng_i))

over the N = 2B - 2 negatives j of anchor i (N = 2B - 2 + K with a queue of K keys: the weights
and the debiasing run over the batch's keys and the queue alike, as in HCL's MoCo-v2 runs of
App. C.1). The weights are *not* detached by default: the official code backpropagates through
them (H-SCL's code detaches them: ``detach_weights``). ``R_i = N E_q[exp(s_ij)]`` with
q = w / sum(w), so the sampler only supplies ``log w = beta s`` (:func:`tilted_weights`) and
:func:`~hcl_cli.objectives.core.contrastive_objective` does the rest.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from hcl_cli.objectives.core import NegativeWeights, ScoreBatch
from hcl_cli.objectives.sampler_options import SamplerOptions

Restrict = Callable[[Tensor, float | Tensor], Tensor]
"""``restrict(matrix, scale)``: ``scale * matrix`` on a sampler's support, ``-inf`` elsewhere, as a new tensor (``scale`` a
number, or a 0-d tensor: a compiled step's scheduled beta)."""


def tilted_weights(
    batch: ScoreBatch, restrict: Restrict, options: SamplerOptions, *, anchor_valid: Tensor | None = None, debiased: bool = False
) -> NegativeWeights:
    """Weights with ``log w_ij = beta s_ij`` on the support (``restrict``), ``-inf`` elsewhere: the exponential hardening function
    ``eta(s) = exp(beta s)`` of HCL, also used by H-SCL(beta). It states its ``tilt`` (beta), so that
    :func:`~hcl_cli.objectives.core.contrastive_objective` differentiates it in one step.

    ``detach_weights`` stops the gradient through the weights, as H-SCL's code does
    (``imp = imp.detach()``): the loss keeps its value, and its gradient treats q as a constant.

    ``clip`` is HCL's trick for embeddings off the hypersphere (App. D.2-D.3, Fig. 14): the inner
    products used for the weights are scaled into [-2, 2] by ``2 s / max |s|``, the maximum taken
    over every (anchor, negative) pair of the batch (queue included), before the exponent. It changes only the
    weights; the ``exp(s_ij)`` terms of the loss keep the plain similarities. On nodes against
    graphs the scores are raw inner products and the scaling always applies (App. D.2;
    :mod:`~hcl_cli.objectives.infograph`). Its weights are not a fixed tilt of the scores (the maximum moves with them).
    """
    similarity = batch.logits.detach() if options.detach_weights else batch.logits
    if options.clip:
        largest = restrict(similarity.abs(), 1.0).amax()
        similarity = 2.0 * similarity / torch.where(largest > 0, largest, 1.0)  # no negative anywhere (one label): rows unused
    tilt = None if options.clip else options.beta
    return NegativeWeights(restrict(similarity, options.beta), anchor_valid, debiased=debiased, tilt=tilt)


def debiased(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """Chuang et al.'s debiased negatives: HCL with beta = 0 (uniform weights, tau+ correction)."""
    return NegativeWeights(batch.uniform, debiased=True, log_normaliser=batch.uniform_log_normaliser)


def hucl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """HCL's hard negatives: weights ``exp(beta s_ij)`` over all negatives, with tau+ debiasing."""
    uniform = batch.uniform
    return tilted_weights(batch, lambda matrix, scale: scaled_add(uniform, matrix, scale), options, debiased=True)


def scaled_add(base: Tensor, matrix: Tensor, scale: float | Tensor) -> Tensor:
    """``base + scale * matrix``: ``torch.add``'s ``alpha`` for a number, a product for a 0-d tensor (a compiled step's
    scheduled beta, :class:`~hcl_cli.image.step.ScheduledValues`, which ``alpha`` does not take)."""
    return torch.add(base, matrix, alpha=scale) if not isinstance(scale, Tensor) else base + matrix * scale.to(matrix.dtype)
