"""Uncertainty-, diversity- and similarity-weighted negatives of UnDiMix (Tabassum et al., "UnDiMix:
hard negative sampling strategies for contrastive representation learning"), Algorithm 1.

Each negative j of anchor i gets an importance score from three parts:

(a) similarity ``s_ij`` (P1, anchor vicinity);
(b) uncertainty ``u_ij = g_i.g_j`` (P2, decision-boundary vicinity), the gradient similarity of
    Eq. (3): ``g_j`` is the gradient, with respect to the parameters of the projection head's last
    linear layer ``z = W h + b``, of the cross-entropy of the pseudo-labelling task of Eq. (2) and
    Fig. 4: find the row's partner among the B rows of the *other* view, with logits the cosines
    (Eq. (2) has no temperature) and label the argmax (the most confident prediction);
(c) diversity ``r_ij`` (P3), Eq. (4): the mean of ``1 - cos(z_j, z_j')`` over the images j' other
    than the anchor's and the negative's own, ``j' not in {i, j}``; each such image counts with
    both of its views, so in the 2B rows j' runs over the 2B - 4 rows other than i, partner(i), j
    and partner(j). The negative's own other view, its most similar row by construction, is left
    out as Eq. (4) leaves out j itself.

Uncertainty, ``undimix_uncertainty``:

- ``"badge"`` (default), in closed form: BADGE's gradient embeddings (Ash et al. 2020), which
  the paper cites for its uncertainty: the gradient with respect to the weight W only, the other
  embeddings (the candidates of the pseudo-labelling task) held fixed, as BADGE holds the class
  weights. The logit residual ``p_j - e_{y_j}`` gives ``dl_j/dz^_j = sum_k (p_jk - e_{y_j,k}) z^_k``
  over the candidates k, the normalisation gives ``delta_j = (I - z^_j z^_j^T) dl_j/dz^_j /
  ||z_j||``, and ``g_j = delta_j h_j^T`` (the outer product with the layer input). Hence
  ``g_i.g_j = (delta_i.delta_j)(h_i.h_j)``: two (2B x 2B) matrix products, no per-sample backward,
  no (2B, P*H) gradient matrix, and the layer itself is not needed.
- ``"autograd"``, Eq. (3) literally: ``g_j = d l_j / d theta_last`` by autograd
  (``torch.func.jacrev`` over the 2B losses), theta_last being *every* parameter of the last
  layer (W and b), and the gradient flowing through every embedding that ``l_j`` depends on, the
  candidates included, each recomputed as ``W h + b`` from ``head_inputs`` and the layer given as
  ``head_layer``. It costs a (2B, P*H) Jacobian and a (2B x P*H) Gram product.

Combination (the paper leaves normalisation open; our reading): each part is min-max normalised to
[0, 1] over the anchor's N = 2B - 2 negatives (a part that is constant over them contributes 0);
the parts are combined linearly, Eq. (5), with weights lambda = ``undimix_weights`` (similarity,
uncertainty, diversity; the paper's "fixed weights" variant of Table 3, default equal), or, with
``undimix_learned``, with learned weights: the paper's "attention weights ... learned during
training", one weight per part for the whole model (the paper models "the weight of each
component as a learned hyper-parameter"), read here as ``lambda = softmax(a)`` over the parts of
positive ``undimix_weights``, with logits ``a`` (``undimix_attention``, see
:func:`initial_attention`) trained with the encoder by the gradient of this loss; the scores
themselves stay detached. The combination is scaled to mean 1 over the anchor's negatives and
multiplies the ``exp(s_ij)`` terms of the NT-Xent denominator: ``-log(pos / (pos + sum_j w_ij
exp(s_ij)))``. No tau+ debiasing. A negative scoring 0 in every weighted part gets weight 0; an
anchor all of whose scores are 0 falls back to uniform weights (SimCLR).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, PairBatch, uniform_log_weights
from hcl_cli.objectives.options import SamplerOptions
from hcl_cli.objectives.registry import undimix_weight_values


def cross_view_logits(unit: Tensor, size: int) -> Tensor:
    """(2B, B) the pseudo-labelling logits of Eq. (2): each row's cosines with the B rows of the other view."""
    return torch.cat([unit[:size] @ unit[size:].T, unit[size:] @ unit[:size].T])


def pseudo_label_gradients(batch: PairBatch) -> Tensor:
    """(2B, P) ``delta_j = dl_j / dz_j``: the pseudo-labelling cross-entropy's gradient at each raw projection."""
    size = batch.batch_size
    unit = batch.z.detach()
    logits = cross_view_logits(unit, size)
    residual = torch.softmax(logits, dim=1) - F.one_hot(logits.argmax(dim=1), size).to(logits.dtype)
    unit_gradient = torch.cat([residual[:size] @ unit[size:], residual[size:] @ unit[:size]])
    tangent = unit_gradient - (unit_gradient * unit).sum(dim=1, keepdim=True) * unit
    return tangent / batch.raw.detach().norm(dim=1, keepdim=True)


def last_layer_gradients(batch: PairBatch, hidden: Tensor, layer: torch.nn.Module) -> Tensor:
    """(2B, P*H [+ P]) ``g_j``, Eq. (3) by autograd: the gradient of each row's pseudo-labelling
    cross-entropy with respect to the last layer's weight (and bias), through every embedding."""
    size = batch.batch_size
    params = tuple(p.detach().to(batch.compute_dtype) for p in (layer.weight, layer.bias) if p is not None)

    def embeddings(*params: Tensor) -> Tensor:
        return F.normalize(F.linear(hidden, *params), dim=1)

    with torch.no_grad():
        pseudo_labels = cross_view_logits(embeddings(*params), size).argmax(dim=1)

    def losses(*params: Tensor) -> Tensor:
        return F.cross_entropy(cross_view_logits(embeddings(*params), size), pseudo_labels, reduction="none")

    jacobians = torch.func.jacrev(losses, argnums=tuple(range(len(params))))(*params)
    return torch.cat([jacobian.reshape(2 * size, -1) for jacobian in jacobians], dim=1)


def uncertainty_scores(batch: PairBatch, options: SamplerOptions) -> Tensor:
    """(2B, 2B) ``u_ij = g_i.g_j``, Eq. (3), in BADGE's closed form or by autograd (``undimix_uncertainty``)."""
    hidden = head_hidden(batch, options)
    if options.undimix_uncertainty == "autograd":
        if options.head_layer is None:
            raise UsageError("undimix with --undimix-uncertainty autograd needs head_layer, the projection head's last linear layer")
        gradients = last_layer_gradients(batch, hidden, options.head_layer)
        return gradients @ gradients.T
    delta = pseudo_label_gradients(batch)
    return (delta @ delta.T) * (hidden @ hidden.T)


def diversity_scores(batch: PairBatch, options: SamplerOptions | None = None) -> Tensor:
    """(2B, 2B) ``r_ij``, Eq. (4): mean ``1 - cos(z_j, z_j')`` over the rows j' of images other than i's and j's."""
    cosine = batch.cosine.detach()
    partner, rows = batch.masks.partner, batch.masks.rows
    own = cosine.sum(dim=0) - cosine.diagonal() - cosine[partner, rows]
    others = own[None, :] - cosine - cosine.index_select(0, partner)
    return 1.0 - others / max(batch.num_negatives - 2, 1)


def similarity_scores(batch: PairBatch, options: SamplerOptions | None = None) -> Tensor:
    """(2B, 2B) ``s_ij``, the cosines (P1)."""
    return batch.cosine.detach()


SCORES: tuple[Callable[[PairBatch, SamplerOptions], Tensor], ...] = (similarity_scores, uncertainty_scores, diversity_scores)
"""The three parts, in the order of ``undimix_weights``."""


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


def initial_attention(weights: str | Sequence[float]) -> Tensor:
    """(3,) float32 logits ``a`` whose softmax over the parts of positive weight is ``weights / sum(weights)``
    (0 for a part of weight 0, which the softmax leaves out): the start of learned weights."""
    fixed = torch.tensor(undimix_weight_values(weights), dtype=torch.float32)
    return torch.where(fixed > 0, (fixed / fixed.sum()).log(), 0.0)


def mixing_weights(batch: PairBatch, options: SamplerOptions) -> Tensor:
    """(3,) lambda: ``undimix_weights``, or with ``undimix_learned`` the softmax of ``undimix_attention``
    over the parts of positive ``undimix_weights`` (differentiable in the attention logits)."""
    fixed = torch.tensor(options.undimix_weights, dtype=batch.compute_dtype, device=batch.cosine.device)
    if not options.undimix_learned:
        return fixed
    attention = options.undimix_attention
    if attention is None or tuple(attention.shape) != (3,):
        raise UsageError("undimix with --undimix-learned true needs undimix_attention, the (3,) learnable logits of the weights")
    return torch.softmax(attention.to(fixed).masked_fill(fixed == 0, -math.inf), dim=0)


def undimix(batch: PairBatch, options: SamplerOptions) -> NegativeWeights:
    """Importance weights ``w_ij`` (mean 1 over each anchor's negatives) from similarity, uncertainty and diversity."""
    negatives = batch.masks.negatives
    mix = mixing_weights(batch, options)
    with torch.no_grad():
        parts = [
            (k, min_max_over_negatives(score(batch, options), negatives))
            for k, score in enumerate(SCORES)
            if options.undimix_weights[k] > 0
        ]
    combined = sum(mix[k] * part for k, part in parts).masked_fill(~negatives, 0.0)
    mean = combined.sum(dim=1, keepdim=True) / batch.num_negatives
    positive = combined > 0
    log_weights = torch.where(positive, torch.where(positive, combined, 1.0).log(), -math.inf) - torch.where(mean > 0, mean, 1.0).log()
    uniform = uniform_log_weights(batch.batch_size, negatives.device, batch.compute_dtype)
    return NegativeWeights(torch.where(mean > 0, log_weights, uniform))
