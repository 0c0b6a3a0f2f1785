"""Uncertainty-, diversity- and similarity-weighted negatives of UnDiMix (Tabassum et al., "UnDiMix:
hard negative sampling strategies for contrastive representation learning"), Algorithm 1.

Each negative j of anchor i gets an importance score from three parts:

(a) similarity ``s_ij`` (P1, anchor vicinity);
(b) uncertainty ``u_ij = g_i.g_j`` (P2, decision-boundary vicinity), the gradient similarity of
    Eq. (3): ``g_j`` is the gradient, with respect to the parameters of the projection head's last
    linear layer ``z = W h + b``, of the cross-entropy of the pseudo-labelling task of Eq. (2) and
    Fig. 4: find the row's partner among the B rows of the *other* view, with logits the cosines
    (Eq. (2) has no temperature) and label the argmax (the most confident prediction);
(c) diversity ``r_ij`` (P3), Eq. (4): ``1/(N - 2) sum_{j' not in {i, j}} (1 - s(x~_j, x~_j'))``, the
    mean distance of the negative to the other images in the negative's view, as written
    (``undimix_diversity``, :mod:`~hcl_cli.objectives.undimix_diversity`, which also offers the
    anchor's view and both views).

Eq. (2)'s posterior, ``p(y_j | x~_j) = exp(s(x_i, x~_j)) / sum_{i' != j} exp(s(x_i', x~_j))``, is a
softmax over the B rows of the other view *including* the partner: the paper contradicts itself
here, and hcl follows the task it defines. Its text asks to "locate the matching augmented example
x_j from the set {x_k}_{k=1}^N" with the pseudo-label ``argmax_k``, ``1 <= k <= N``, and Fig. 4
draws the same; the denominator as printed leaves that right answer out, so that either the
candidates are the k != j and the pseudo-label can never be the match the task asks for, or they
are all N and the "posterior" sums to more than 1 (the i' != j reads as Eq. (1)'s j != i carried over).

Uncertainty, ``undimix_uncertainty``:

- ``"literal"`` (the UnDiMix presets' choice), Eq. (3) as written: ``g_j = d l_j / d theta_last`` by
  autograd (``torch.func.jacrev`` over the 2B losses), theta_last being *every* parameter of the last
  layer (W and b), and the gradient flowing through every embedding that ``l_j`` depends on, the
  candidates included, each recomputed as ``W h + b`` from ``head_inputs`` and the layer given as
  ``head_layer``. It costs a (2B, P*H) Jacobian and a (2B x P*H) Gram product, and needs every
  candidate's full gradient, which no queue keeps: in-batch only.
- ``"badge"`` (the option's default, kept because it is cheap and works with a queue), in closed
  form: BADGE's gradient embeddings (Ash et al. 2020), which the paper cites for its uncertainty:
  the gradient with respect to the weight W only, the other embeddings (the candidates of the
  pseudo-labelling task) held fixed, as BADGE holds the class weights. The logit residual
  ``p_j - e_{y_j}`` gives ``dl_j/dz^_j = sum_k (p_jk - e_{y_j,k}) z^_k``
  over the candidates k, the normalisation gives ``delta_j = (I - z^_j z^_j^T) dl_j/dz^_j /
  ||z_j||``, and ``g_j = delta_j h_j^T`` (the outer product with the layer input). Hence
  ``g_i.g_j = (delta_i.delta_j)(h_i.h_j)``: two (2B x 2B) matrix products, no per-sample backward,
  no (2B, P*H) gradient matrix, and the layer itself is not needed.
  It correlates only loosely with the literal reading (the candidates' own dependence on theta is
  dropped), which is why the presets use ``literal``.

On nodes against graphs (InfoGraph, UnDiMix Sec. 4.3) the parts are read by :mod:`~hcl_cli.objectives.undimix_graph`,
and mixed by the same :func:`importance` and :func:`importance_weights`.

With a momentum encoder (MoCo), the candidates are the batch's keys and a queue of earlier keys,
and each part keeps its meaning over them (our reading; the paper ran UnDiMix on MoCo-v2 without
saying how): (a) ``s_ij`` is the anchor's cosine with the candidate; (b) the candidate's ``g_j``
is its key's BADGE gradient embedding, of the pseudo-labelling task among the keys of the batch it
came with, under the key encoder, so a queue keeps the two factors ``delta_j`` and ``h_j`` of each
key (:func:`key_features`) and ``u_ij = (delta_i.delta_j)(h_i.h_j)`` as before; the anchors' own
``g_i`` are unchanged; (c) the mean of Eq. (4) runs over the candidates, keys and queue alike
(the queue holds both views of an image at rows 2p, 2p + 1). The ``literal`` reading of Eq. (3)
runs in-batch only.

Combination, Eq. (5) with h "linear interpolation or attention weights": each part is min-max
normalised to [0, 1] over the anchor's N = 2B - 2 (+ K) negatives (a part constant over them
contributes 0; raw, s + u + r can be negative, so a raw sum would make negative weights), and the
parts are mixed convexly, ``w_ij = sum_k lambda_k part_k`` with ``lambda_k >= 0``, ``sum lambda = 1``
(:func:`importance`, in [0, 1]). lambda is ``undimix_weights`` divided by its sum (similarity,
uncertainty, diversity; the "fixed weights" variant of Table 3, default equal), or, with
``undimix_learned``, ``lambda = softmax(a)`` over the parts of positive ``undimix_weights``, with
logits ``a`` (``undimix_attention``, see :func:`initial_attention`); the scores themselves stay
detached. The importances multiply the ``exp(s_ij)`` terms
of the NT-Xent denominator as a distribution over the negatives (scaled to mean 1, the shared
objective's normalisation; Algorithm 1 adds ``sum_j w_ij exp(s_ij)`` unscaled, a difference the
README's deviations table names): ``-log(pos / (pos + N E_q[exp(s_ij)]))``. No tau+ debiasing. A
negative scoring 0 in every weighted part gets weight 0; an anchor all of whose scores are 0 falls
back to uniform weights (SimCLR).

Learned weights, by descent on this loss. The paper says only that lambda is "learnable"
(Algorithm 1), "a learned hyper-parameter" (Sec. 3, Eq. 5), "attention weights that are learned
during training" (Sec. 4.1), one weight per part for the whole model; hcl trains the logits with
the encoder, by the same optimizer on the same loss, which is what those words describe. What
that does: the loss grows with ``E_q[exp(s_ij)]``, so descent moves lambda toward the parts that
weight the less similar negatives, an inf over q where HCL's hard sampling takes the sup (HCL
App. B.2, ``inf_f sup_q L(f, q)``). On random batches the gradient with respect to the logits is
positive for similarity and negative for diversity (tests/test_paper_readings.py pins it): descent
shrinks the similarity weight and grows the diversity weight, the component the paper finds
"contributes the most" under learned weights (Sec. 4.1, Fig. 6(b)). Ascent (the sup, keeping
negatives hard) would move lambda toward similarity instead, Table 2's weakest part and the one
the paper argues against (P2: similarity alone samples false negatives). For weights that keep
their hardness, fix them (Table 3's "UnDiMix Fixed").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, PairBatch, ScoreBatch
from hcl_cli.objectives.registry import QUEUE_AND_AUTOGRAD, undimix_weight_values
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix_diversity import DIVERSITY_READINGS
from hcl_cli.runtime import constant


def cross_view_logits(unit: Tensor, size: int) -> Tensor:
    """(2B, B) the pseudo-labelling logits of Eq. (2): each row's cosines with the B rows of the other view."""
    return torch.cat([unit[:size] @ unit[size:].T, unit[size:] @ unit[:size].T])


def pseudo_label_gradients(unit: Tensor, raw: Tensor, logits: Tensor | None = None) -> Tensor:
    """(2B, P) ``delta_j = dl_j / dz_j``: the pseudo-labelling cross-entropy's gradient at each raw
    projection ``raw`` of ``[z1; z2]`` (``unit`` its normalisation), among the rows of that batch;
    ``logits``: their :func:`cross_view_logits` where already computed."""
    size = len(unit) // 2
    unit = unit.detach()
    logits = cross_view_logits(unit, size) if logits is None else logits
    return torch.cat(
        [
            posterior_gradients(unit[:size], raw[:size], unit[size:], logits[:size]),
            posterior_gradients(unit[size:], raw[size:], unit[:size], logits[size:]),
        ]
    )


def posterior_gradients(unit: Tensor, raw: Tensor, candidates: Tensor, logits: Tensor) -> Tensor:
    """(n, P) ``delta_j = dl_j / dz_j`` of Eq. (2)-(3)'s pseudo-labelling cross-entropy, each row ``z_j`` (raw ``raw``,
    normalised ``unit``) against the unit ``candidates`` with ``logits`` their cosines (a softmax over every candidate,
    the pseudo-label its argmax), the candidates held fixed: ``(I - z^ z^T) sum_k (p_k - e_y,k) c_k / ||z||``.
    Images: a view's rows against the other view's; graphs: a node's local embedding against the batch's graphs."""
    residual = torch.softmax(logits, dim=1)
    residual[torch.arange(len(residual), device=residual.device), logits.argmax(dim=1)] -= 1.0
    unit_gradient = residual @ candidates.detach()
    unit = unit.detach()
    tangent = unit_gradient - (unit_gradient * unit).sum(dim=1, keepdim=True) * unit
    return tangent / raw.detach().norm(dim=1, keepdim=True)


def key_features(keys: Tensor, head_inputs: Tensor) -> Tensor:
    """(2B, P + H) ``[delta_j, h_j]`` of the batch's keys ``[k1; k2]`` (raw, (2B, P)) and their head
    inputs (2B, H): the two factors of each key's BADGE gradient embedding ``g_j = delta_j h_j^T``,
    what a momentum encoder's queue keeps of each key for :func:`uncertainty_scores`."""
    keys = keys.detach()
    return torch.cat([pseudo_label_gradients(F.normalize(keys, dim=1), keys), head_inputs.detach().to(keys.dtype)], dim=1)


def candidate_factors(batch: PairBatch, delta: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
    """(2B + K, P) and (2B + K, H): the candidates' ``delta_j`` and ``h_j``; the anchors' own ``delta``
    and ``hidden`` in-batch, else the batch's keys' (:func:`key_features`) and the queue's."""
    keys = batch.momentum_keys
    if keys is None:
        return delta, hidden
    if keys.head_inputs is None or (batch.queue_size and keys.queue_features is None):
        raise UsageError("undimix with a queue needs the key encoder's head_inputs and each queued key's queue_features (key_features)")
    if batch.queue_size and keys.queue_features.shape != (batch.queue_size, delta.shape[1] + hidden.shape[1]):
        raise UsageError(
            f"queue_features must be ({batch.queue_size}, {delta.shape[1] + hidden.shape[1]}): each queued key's key_features (got {tuple(keys.queue_features.shape)})"
        )
    batch_keys = key_features(batch.key_raw, torch.cat(keys.head_inputs))
    features = batch_keys if keys.queue_features is None else torch.cat([batch_keys, keys.queue_features.detach().to(batch.compute_dtype)])
    return features.split([delta.shape[1], hidden.shape[1]], dim=1)


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
    """(2B, 2B + K) ``u_ij = g_i.g_j``, Eq. (3), literally (autograd) or in BADGE's closed form (``undimix_uncertainty``)."""
    hidden = head_hidden(batch, options)
    if options.undimix_uncertainty == "literal":
        if batch.momentum_keys is not None:
            raise UsageError(QUEUE_AND_AUTOGRAD)
        if options.head_layer is None:
            raise UsageError("undimix with --undimix-uncertainty literal needs head_layer, the projection head's last linear layer")
        gradients = last_layer_gradients(batch, hidden, options.head_layer)
        return gradients @ gradients.T
    if batch.momentum_keys is None:
        size, cosine = batch.batch_size, batch.cosine.detach()
        delta = pseudo_label_gradients(batch.z, batch.raw, torch.cat([cosine[:size, size:], cosine[size:, :size]]))
        return symmetric_gram_product(delta, hidden)
    delta = pseudo_label_gradients(batch.z, batch.raw)
    candidate_delta, candidate_hidden = candidate_factors(batch, delta, hidden)
    return (delta @ candidate_delta.T) * (hidden @ candidate_hidden.T)


def symmetric_gram_product(first: Tensor, second: Tensor) -> Tensor:
    """(2B, 2B) ``(first first^T) * (second second^T)`` of the in-batch candidates: symmetric, so the top rows and the
    bottom-right block are multiplied out and the bottom-left block is the top-right one transposed (3/4 of the products).
    A compiled step takes the whole product: writes into slices of a buffer (``out=``) break dynamo's graph."""
    if torch.compiler.is_compiling():
        return (first @ first.T) * (second @ second.T)
    size = len(first) // 2
    product = first.new_empty(len(first), len(first))
    top = torch.mul(first[:size] @ first.T, second[:size] @ second.T, out=product[:size])
    torch.mul(first[size:] @ first[size:].T, second[size:] @ second[size:].T, out=product[size:, size:])
    product[size:, :size] = top[:, size:].T
    return product


def diversity_scores(batch: PairBatch, options: SamplerOptions) -> Tensor:
    """(2B, 2B + K) ``r_ij``, Eq. (4), in the reading ``undimix_diversity`` names (:mod:`~hcl_cli.objectives.undimix_diversity`)."""
    return DIVERSITY_READINGS[options.undimix_diversity](batch)


def similarity_scores(batch: PairBatch, options: SamplerOptions | None = None) -> Tensor:
    """(2B, 2B + K) ``s_ij``, the cosines (P1), as a new tensor (:func:`min_max_over_negatives` writes into it)."""
    return batch.cosine.detach().clone()


SCORES: tuple[Callable[[PairBatch, SamplerOptions], Tensor], ...] = (similarity_scores, uncertainty_scores, diversity_scores)
"""The three parts, in the order of ``undimix_weights``."""


def excluded_pairs(batch: PairBatch) -> tuple[Tensor, Tensor]:
    """The (row, column) indices of the pairs that are no negatives: each anchor with itself and with its partner."""
    rows = batch.masks.rows
    return torch.cat([rows, rows]), torch.cat([rows, batch.masks.partner])


def min_max_over_negatives(scores: Tensor, excluded: tuple[Tensor, Tensor], valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per row, ``(scale, offset)`` (n, 1) with ``scores * scale + offset`` scaled to [0, 1] over the row's negatives
    (``(s - low) / (high - low)``); a constant row gets 0 and 0. Affine, so that :func:`importance` mixes the
    parts in one pass each (``addcmul``) instead of normalising every part as a matrix first.

    The non-negatives of each row (``excluded``: the anchor and its partner, or a node's own graph) are set to ``+inf`` for the minimum and ``-inf`` for the
    maximum, so only whole-row reductions run; ``scores`` is left with 0 there (:func:`importance` zeroes them). So are
    the columns that do not exist (``valid``, (m,) bool: a filling queue's empty rows), whatever they hold."""
    low = only_valid(scores.index_put_(excluded, constant(math.inf, scores.dtype, scores.device)), valid, math.inf).amin(
        dim=1, keepdim=True
    )
    high = only_valid(scores.index_put_(excluded, constant(-math.inf, scores.dtype, scores.device)), valid, -math.inf).amax(
        dim=1, keepdim=True
    )
    scores.index_put_(excluded, constant(0.0, scores.dtype, scores.device))
    span = high - low
    scale = torch.where(span > 0, 1.0 / span, 0.0)
    return scale, -low * scale


def only_valid(matrix: Tensor, valid: Tensor | None, fill: float) -> Tensor:
    """(n, m) ``matrix`` with ``fill`` in the columns that do not exist (``valid`` (m,) bool false); ``matrix`` itself
    when ``valid`` is None (every column exists)."""
    return matrix if valid is None else torch.where(valid, matrix, constant(fill, matrix.dtype, matrix.device))


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


def learned_tensors(options: Mapping[str, Any]) -> dict[str, Tensor]:
    """With ``undimix_learned``, the attention logits to learn, starting at :func:`initial_attention` (UnDiMix Table 3)."""
    return {"undimix_attention": initial_attention(options["undimix_weights"])} if options.get("undimix_learned") else {}


def mixing_weights(batch: ScoreBatch, options: SamplerOptions) -> Tensor:
    """(3,) lambda, a convex combination: ``undimix_weights / sum(undimix_weights)``, or with ``undimix_learned`` the
    softmax of ``undimix_attention`` over the parts of positive ``undimix_weights`` (differentiable in the attention logits)."""
    device = batch.masks.rows.device
    fixed = torch.stack([constant(weight, batch.compute_dtype, device) for weight in options.undimix_weights])
    if not options.undimix_learned:
        return fixed / fixed.sum()
    attention = options.undimix_attention
    if attention is None or tuple(attention.shape) != (3,):
        raise UsageError("undimix with --undimix-learned true needs undimix_attention, the (3,) learnable logits of the weights")
    return torch.softmax(attention.to(fixed).masked_fill(fixed == 0, -math.inf), dim=0)


Scores = Sequence[Callable[[Any, SamplerOptions], Tensor]]
"""The three parts' functions, in the order of ``undimix_weights``: :data:`SCORES` on images, the graph module's on graphs."""


def importance(
    batch: ScoreBatch, options: SamplerOptions, scores: Scores = SCORES, excluded: tuple[Tensor, Tensor] | None = None
) -> Tensor:
    """(n, m) ``w_ij`` of Eq. (5), in [0, 1]: the convex combination of the min-max normalised parts, 0 off the negatives
    (``excluded``, :func:`excluded_pairs` by default: the pairs that are no negatives; and the candidates that do not
    exist, :attr:`~hcl_cli.objectives.core.ScoreBatch.column_valid`)."""
    excluded = excluded_pairs(batch) if excluded is None else excluded
    mix = mixing_weights(batch, options)
    with torch.no_grad():
        parts = [
            (k, values, *min_max_over_negatives(values, excluded, batch.column_valid))
            for k, score in enumerate(scores)
            if options.undimix_weights[k] > 0
            for values in (score(batch, options),)
        ]
    combined = None
    for k, values, scale, _ in parts:
        combined = values * (mix[k] * scale) if combined is None else combined.addcmul_(values, mix[k] * scale)
    combined.add_(sum(mix[k] * part_offset for k, _, _, part_offset in parts))
    return only_valid(combined.index_put_(excluded, constant(0.0, combined.dtype, combined.device)), batch.column_valid, 0.0)


def undimix(batch: PairBatch, options: SamplerOptions) -> NegativeWeights:
    """Importance weights ``w_ij`` (mean 1 over each anchor's negatives) from similarity, uncertainty and diversity."""
    excluded = excluded_pairs(batch)
    return importance_weights(batch, importance(batch, options, SCORES, excluded), excluded)


def importance_weights(batch: ScoreBatch, combined: Tensor, excluded: tuple[Tensor, Tensor]) -> NegativeWeights:
    """The :class:`NegativeWeights` of the importances ``combined`` (0 on the ``excluded`` pairs): mean 1 over each anchor's negatives.

    Every row sums to M (the uniform fallback too, for a row of importances 0), whatever the learned mixing weights: its
    ``log_normaliser`` is ``log M`` (M counted on the device where a filling queue's empty columns are left out). Learned weights take the logarithm of the positive weights only (``where`` on both
    sides: no NaN gradient at a weight of 0); fixed ones in place, ``log 0 = -inf``."""
    mean = combined.sum(dim=1, keepdim=True) / batch.num_negatives
    weighted = mean > 0
    log_mean = torch.where(weighted, mean, 1.0).log()
    if combined.requires_grad:
        positive = combined > 0
        log_weights = torch.where(positive, combined, 1.0).log().sub_(log_mean)
        log_weights = torch.where(positive | ~weighted, log_weights, -math.inf)
    else:
        log_weights = combined.clamp_(min=0.0).add_(~weighted).log_().sub_(log_mean)
    log_weights.index_put_(excluded, constant(-math.inf, log_weights.dtype, log_weights.device))
    return NegativeWeights(only_valid(log_weights, batch.column_valid, -math.inf), log_normaliser=batch.uniform_log_normaliser)
