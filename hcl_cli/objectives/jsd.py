"""InfoGraph's Jensen-Shannon local-global loss with a sampler's negatives: the ``paper`` reading of HCL's graph objective.

The Jensen-Shannon estimator of InfoGraph (Nowozin et al. 2016; HCL's graph code, the official
``local_global_loss_`` (losses.py lines 6-33) with ``measure="JSD"``, gan_losses.py lines 33-34 and
74-75: ``elif measure == 'JSD':``), on a :class:`~hcl_cli.objectives.node_graph.NodeGraphBatch`, with the sampler's q weighting
each node's negatives:

    E_pos = mean over positive pairs (i, p) of  log 2 - sp(-s_ip)
    E_neg = mean over nodes i of                sum_j q(j|i) sp(s_ij) - log 2        (sp = softplus)
    loss  = E_neg - E_pos

(``sp(-s) + s = sp(s)``). With uniform q over the G - 1 other graphs this is InfoGraph exactly.

``graph_weights="paper"`` (every sampler): HCL App. B writes InfoGraph's loss as alignment plus
uniformity, ``L_unif = E_{(u, G') ~ p x q} sp(T(h_u, H(G')))``, and tilts its negative
distribution, ``q_beta(G') ~ exp(beta T(h_u, H(G'))) p(G')``; App. D.2: "for a batch we clip all the
inner products to live in the interval [-2, 2] while computing the reweighting" (Fig. 14: scaled
by ``2 s / max |s|`` over the batch's negative pairs). App. B has no tau+: the debiasing is carried
over from the image objective, Eq. (2)-(4), ``E_{q^-}[g] = (E_{q_beta}[g] - tau+ E_{q_beta^+}[g]) /
(1 - tau+)``, with the node's positives as the sample of ``q_beta^+`` (an extrapolation, so that
debiased and hucl mean on graphs what they mean on images; ``tau_plus`` 0 gives App. B exactly).
It gives for debiased, hucl and ot:

    w_ij = exp(beta * 2 s_ij / max_{negative pairs} |s|),   q(j|i) = w_ij / sum_j w_ij
    N_i  = max((sum_j q(j|i) sp(s_ij) - tau+ mean_p sp(s_ip)) / (1 - tau+), 0)
    E_neg = mean_i N_i - log 2

the floor 0 being the infimum of ``sp``, as HCL's clamp (Eq. 4, Fig. 13) keeps its estimate at
its theoretical minimum. The scores are always scaled for the weights on graphs (the ``clip``
option is not read: App. D.2 says it is needed there); only the weights see them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives.core import LossStats, NegativeWeights, ScoreBatch

LOG_2 = math.log(2.0)


def jsd_objective(batch: ScoreBatch, negatives: NegativeWeights, *, label_positives: bool, tau_plus: float) -> tuple[Tensor, LossStats]:
    """The q-weighted Jensen-Shannon loss of the module docstring, and its :class:`LossStats`.

    Anchors without negatives (``negatives.anchor_valid``) are left out of both means.
    """
    q = torch.softmax(negatives.log_weights, dim=1)
    negative_softplus = (q * F.softplus(batch.logits)).sum(dim=1)
    anchors, pairs, positive = batch.positive_pairs(label_positives)
    positive_logits = batch.logits.reshape(-1).index_select(0, pairs)
    if negatives.debiased:
        weights = torch.ones_like(positive_logits) if positive is None else positive.to(positive_logits.dtype)
        positive_softplus = torch.zeros_like(negative_softplus).index_add_(0, anchors, F.softplus(positive_logits) * weights)
        positives_per_anchor = torch.zeros_like(negative_softplus).index_add_(0, anchors, weights)
        corrected = negative_softplus - tau_plus * positive_softplus / positives_per_anchor
        negative_softplus = (corrected / (1.0 - tau_plus)).clamp(min=0.0)
    valid = torch.ones_like(batch.masks.rows, dtype=torch.bool) if negatives.anchor_valid is None else negatives.anchor_valid
    valid_pairs = valid.index_select(0, anchors)
    if positive is not None:
        valid_pairs = valid_pairs & positive
    terms, valid_anchors = valid_pairs.sum(), valid.sum()
    expected_negative = ((negative_softplus - LOG_2) * valid).sum() / valid_anchors.clamp(min=1)
    expected_positive = ((LOG_2 - F.softplus(-positive_logits)) * valid_pairs).sum() / terms.clamp(min=1)
    return expected_negative - expected_positive, LossStats(terms=terms, anchors_without_negatives=(~valid).sum())
