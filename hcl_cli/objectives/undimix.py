"""Uncertainty-, diversity- and similarity-weighted negatives of UnDiMix (Tabassum et al., "UnDiMix:
hard negative sampling strategies for contrastive representation learning"), Algorithm 1.

Each negative j of anchor i gets an importance score from three parts:

(a) similarity ``s_ij`` (P1, anchor vicinity);
(b) uncertainty ``u_ij = g_i.g_j`` (P2, decision-boundary vicinity), the gradient similarity of
    Eq. (3): ``g_j`` is the gradient, with respect to the weight W of the projection head's last
    linear layer, of the cross-entropy of the pseudo-labelling task of Eq. (2) and Fig. 4: find the
    row's partner among the B rows of the *other* view, with logits the cosines (Eq. (2) has no
    temperature) and label the argmax (the most confident prediction);
(c) diversity ``r_ij`` (P3), Eq. (4): the mean of ``1 - cos(z_j, z_j')`` over the anchor's other
    negatives j' (``j' != i, partner(i), j``).

Closed form of (b), as BADGE gradient embeddings (Ash et al. 2020): with ``z_j = W h_j + b``, the
logit residual ``p_j - e_{y_j}`` gives ``dl_j/dz^_j = sum_k (p_jk - e_{y_j,k}) z^_k`` over the
candidates k (held fixed, as BADGE holds the class weights), the normalisation gives
``delta_j = (I - z^_j z^_j^T) dl_j/dz^_j / ||z_j||``, and ``g_j = delta_j h_j^T`` (the outer
product with the layer input). Hence ``g_i.g_j = (delta_i.delta_j)(h_i.h_j)``: two (2B x 2B)
matrix products, no per-sample backward and no (2B, P*H) gradient matrix. The layer's weight is
not needed; its bias is left out of the gradient, as in BADGE.

Normalisation (the paper leaves it open; our reading): each part is min-max normalised to [0, 1]
over the anchor's N = 2B - 2 negatives (a part that is constant over them contributes 0); the
parts are combined linearly with ``undimix_weights`` (similarity, uncertainty, diversity; the
paper's fixed-weights variant, default equal), Eq. (5); the combination is scaled to mean 1 over
the anchor's negatives, detached, and multiplies the ``exp(s_ij)`` terms of the NT-Xent
denominator: ``-log(pos / (pos + sum_j w_ij exp(s_ij)))``. No tau+ debiasing. A negative scoring
0 in every weighted part gets weight 0; an anchor all of whose scores are 0 falls back to
uniform weights (SimCLR).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, PairBatch
from hcl_cli.objectives.options import SamplerOptions


def pseudo_label_gradients(batch: PairBatch) -> Tensor:
    """(2B, P) ``delta_j = dl_j / dz_j``: the pseudo-labelling cross-entropy's gradient at each raw projection."""
    size = batch.batch_size
    unit, cosine = batch.z.detach(), batch.cosine.detach()
    logits = torch.cat([cosine[:size, size:], cosine[size:, :size]])
    residual = torch.softmax(logits, dim=1) - F.one_hot(logits.argmax(dim=1), size).to(logits.dtype)
    unit_gradient = torch.cat([residual[:size] @ unit[size:], residual[size:] @ unit[:size]])
    tangent = unit_gradient - (unit_gradient * unit).sum(dim=1, keepdim=True) * unit
    return tangent / batch.raw.detach().norm(dim=1, keepdim=True)


def uncertainty_scores(batch: PairBatch, hidden: Tensor) -> Tensor:
    """(2B, 2B) ``u_ij = g_i.g_j = (delta_i.delta_j)(h_i.h_j)``, Eq. (3) in closed form."""
    delta = pseudo_label_gradients(batch)
    return (delta @ delta.T) * (hidden @ hidden.T)


def diversity_scores(batch: PairBatch) -> Tensor:
    """(2B, 2B) ``r_ij``, Eq. (4): mean ``1 - cos(z_j, z_j')`` over anchor i's negatives j' other than j."""
    cosine = batch.cosine.detach()
    others = (cosine.sum(dim=0) - cosine.diagonal())[None, :] - cosine - cosine.index_select(0, batch.masks.partner)
    return 1.0 - others / (batch.num_negatives - 1)


def min_max_over_negatives(scores: Tensor, negatives: Tensor) -> Tensor:
    """Scale each row of ``scores`` to [0, 1] over the row's negatives; a constant row becomes 0."""
    low = scores.masked_fill(~negatives, math.inf).amin(dim=1, keepdim=True)
    high = scores.masked_fill(~negatives, -math.inf).amax(dim=1, keepdim=True)
    span = high - low
    return torch.where(span > 0, (scores - low) / span, 0.0)


def head_hidden(batch: PairBatch, options: SamplerOptions) -> Tensor:
    """(2B, H) the last head layer's inputs ``[h1; h2]`` in the batch's compute dtype."""
    if options.head_inputs is None:
        raise UsageError("the undimix sampler needs head_inputs=(h1, h2), the inputs of the projection head's last linear layer")
    first, second = options.head_inputs
    return torch.cat([first, second]).detach().to(batch.compute_dtype)


@torch.no_grad()
def undimix(batch: PairBatch, options: SamplerOptions) -> NegativeWeights:
    """Importance weights ``w_ij`` (mean 1 over each anchor's negatives) from similarity, uncertainty and diversity."""
    negatives = batch.masks.negatives
    similarity_weight, uncertainty_weight, diversity_weight = options.undimix_weights
    score = torch.zeros_like(batch.cosine)
    if similarity_weight > 0:
        score += similarity_weight * min_max_over_negatives(batch.cosine.detach(), negatives)
    if uncertainty_weight > 0:
        score += uncertainty_weight * min_max_over_negatives(uncertainty_scores(batch, head_hidden(batch, options)), negatives)
    if diversity_weight > 0:
        score += diversity_weight * min_max_over_negatives(diversity_scores(batch), negatives)
    score = score.masked_fill(~negatives, 0.0)
    mean = score.sum(dim=1, keepdim=True) / batch.num_negatives
    weights = torch.where(mean > 0, score / mean, negatives.to(score.dtype))
    return NegativeWeights(weights.log())
