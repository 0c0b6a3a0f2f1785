"""UnDiMix's importance on InfoGraph's nodes against graphs (Tabassum et al., Sec. 4.3 and App. A "Graph representation").

UnDiMix ran its graph experiment (Fig. 7) in HCL's graph code, "incorporat[ing] our importance score calculation
mechanism in gan_losses.py": the weights ``JSD_hard`` puts on each node's negatives (the other graphs of the batch)
replaced by Eq. (5)'s ``w_ij = h(u_ij, s_ij, r_ij)``. The paper says no more; hcl's reading of each part, for node i
(local embedding ``l_i``, graph ``o_i``) against negative graph j (global embedding ``g_j``), G graphs in the batch:

- (a) similarity, P1: ``s_ij = l_i.g_j``, InfoGraph's critic score, the one the objective contrasts and from which
  ``JSD_hard`` computes the weights UnDiMix's replace (a node's norm is constant over its row, and every part is
  min-max normalised per row, so only the graphs' norms set it apart from the cosine of Eq. 1);
- (b) uncertainty, P2, Eq. (2)-(3): a node's pseudo-posterior over the batch's graphs,
  ``p(k | i) = exp(cos(l_i, g_k)) / sum_k' exp(cos(l_i, g_k'))`` over all G graphs, its own included (Eq. 2's s is the
  normalised inner product, without temperature; the task "find the node's own graph" is Fig. 4's "find the matching
  view", and its denominator keeps the match as on images, :mod:`~hcl_cli.objectives.undimix`), pseudo-label
  ``y_i = argmax_k``, and ``g_i = d CE(p(. | i), y_i) / d theta_last`` with theta_last the last linear layer of the
  local head ``local_d`` (the third Linear of InfoGraph's FF block, followed by its ReLU; the shortcut is a skip from
  the head's input), the head that scores the node. A negative graph's ``g_j`` is the mean of its nodes' ``g_v`` (its
  pseudo-labelling loss is its nodes' mean, as InfoGraph's loss is a mean over nodes), and ``u_ij = g_i.g_j``.
  The graphs' embeddings do not depend on the local head, so Eq. (3)'s gradient through every embedding is the
  closed form ``g_i = delta'_i [a_i; 1]^T`` with ``a_i`` the layer's input, ``delta'_i = delta_i * 1[W a_i + b > 0]``
  and ``delta_i`` :func:`~hcl_cli.objectives.undimix.posterior_gradients`; hence
  ``u_ij = mean_{v in j} (delta'_i.delta'_v)(a_i.a_v + c)``, ``c = 1`` for ``literal`` (weight and bias) and ``0`` for
  ``badge`` (the weight alone, as BADGE): the two readings differ only by the bias here;
- (c) diversity, P3, Eq. (4): ``r_ij = 1/(G - 2) sum_{j' not in {o_i, j}} (1 - cos(g_j, g_j'))``, the negative graph's
  mean distance to the other graphs of the batch but the anchor's own (graphs are never scored against graphs by the
  critic: Eq. 4's cosine as written).

The parts are min-max normalised over each node's G - 1 negatives and mixed convexly with fixed or learned lambda,
exactly as on images (:func:`~hcl_cli.objectives.undimix.importance`, :func:`~hcl_cli.objectives.undimix.importance_weights`).

How the weights enter the loss (``graph_weights``):

- ``official`` (the Fig. 7 presets): in place of ``JSD_hard``'s ``reweight`` before its row mean, the rest of
  ``JSD_hard`` unchanged (:func:`official_undimix_jsd`): ``w~_ij = w_ij / mean_k w_ik`` over the row's G slots, the own
  (masked) slot weighing 0 (it is no negative), ``E_neg = sum_ij (w~_ij sp(q_ij) / (1 - tau+) - log 2) / (n (G - 1))``
  with ``q`` the scores, 0 on the own slot, tau+ 0.5; ``E_pos`` the code's; loss ``E_neg - E_pos``;
- ``paper``: InfoGraph's Jensen-Shannon loss with ``q(j|i) = w_ij / sum_j w_ij`` (:func:`~hcl_cli.objectives.jsd.jsd_objective`,
  no tau+: UnDiMix has none), as every other sampler's ``paper`` reading.

The scores carry no gradient; learned lambda does, through the weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import LossStats, NegativeWeights
from hcl_cli.objectives.jsd import LOG_2
from hcl_cli.objectives.jsd_hard import OFFICIAL_TAU_PLUS, official_positive_expectation
from hcl_cli.objectives.node_graph import NodeGraphBatch
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix import importance, importance_weights, posterior_gradients

GRAM_BLOCK_ROWS = 512
"""Rows (and columns) of each block of the nodes' gradient Gram in :func:`graph_uncertainty_scores` (1 MiB of float32)."""


def own_graph_pairs(batch: NodeGraphBatch) -> tuple[Tensor, Tensor]:
    """The (row, column) indices of the pairs that are no negatives: each node with its own graph."""
    return batch.masks.rows, batch.masks.partner


def graph_similarity_scores(batch: NodeGraphBatch, options: SamplerOptions | None = None) -> Tensor:
    """(n, G) ``s_ij = l_i.g_j``, the critic's scores (P1), as a new tensor."""
    return batch.logits.detach().clone()


def node_gradient_factors(batch: NodeGraphBatch, options: SamplerOptions) -> tuple[Tensor, Tensor]:
    """(n, d) ``delta'_i`` and (n, H) ``a_i``: the two factors of each node's Eq. (3) gradient at the local head's last layer."""
    layer, inputs = options.head_layer, options.head_inputs
    if layer is None or not isinstance(inputs, Tensor) or inputs.shape != (len(batch.local), layer.weight.shape[1]):
        raise UsageError("undimix on graphs needs head_layer, the local head's last linear layer, and head_inputs, its (n, H) inputs")
    inputs = inputs.detach().to(batch.compute_dtype)
    weight, bias = (None if p is None else p.detach().to(batch.compute_dtype) for p in (layer.weight, layer.bias))
    local, graphs = batch.local.detach(), batch.global_.detach()
    unit, candidates = F.normalize(local, dim=1), F.normalize(graphs, dim=1)
    delta = posterior_gradients(unit, local, candidates, unit @ candidates.T)
    return delta * (F.linear(inputs, weight, bias) > 0), inputs


def graph_uncertainty_scores(batch: NodeGraphBatch, options: SamplerOptions) -> Tensor:
    """(n, G) ``u_ij = mean_{v in j} (delta'_i.delta'_v)(a_i.a_v + c)`` (module docstring), by blocks of the nodes' Gram."""
    delta, inputs = node_gradient_factors(batch, options)
    bias = 1.0 if options.undimix_uncertainty == "literal" and options.head_layer.bias is not None else 0.0
    sizes = torch.zeros(batch.num_graphs, dtype=delta.dtype, device=delta.device).index_add_(
        0, batch.masks.partner, torch.ones_like(delta[:, 0])
    )
    membership = F.one_hot(batch.masks.partner, batch.num_graphs).to(delta.dtype) / sizes.clamp(min=1.0)
    scores = torch.zeros(len(delta), batch.num_graphs, dtype=delta.dtype, device=delta.device)
    block = min(GRAM_BLOCK_ROWS, len(delta))
    starts = range(0, len(delta), block)
    # The graphs of each block of nodes lie in [low, high] (one read of the device): only those columns of the membership.
    padded = F.pad(batch.masks.partner, (0, -len(delta) % block), value=-1).view(-1, block)
    lows = padded.masked_fill(padded < 0, batch.num_graphs).amin(dim=1)
    graphs = {start: slice(low, high + 1) for start, low, high in zip(starts, lows.tolist(), padded.amax(dim=1).tolist())}
    # The Gram is symmetric: each off-diagonal block is computed once and serves both of its row blocks.
    for first in starts:
        rows = slice(first, first + block)
        for second in (start for start in starts if start >= first):
            columns = slice(second, second + block)
            gram = (delta[rows] @ delta[columns].T).mul_((inputs[rows] @ inputs[columns].T).add_(bias))
            scores[rows, graphs[second]].addmm_(gram, membership[columns, graphs[second]])
            if second != first:
                scores[columns, graphs[first]].addmm_(gram.T, membership[rows, graphs[first]])
    return scores


def graph_diversity_scores(batch: NodeGraphBatch, options: SamplerOptions | None = None) -> Tensor:
    """(n, G) ``r_ij``, Eq. (4) over the batch's graphs: ``1 - mean cos(g_j, g_j')`` over the G - 2 graphs other than j and o_i."""
    unit = F.normalize(batch.global_.detach(), dim=1)
    cosine = unit @ unit.T
    others = cosine.sum(dim=0) - cosine.diagonal()
    return 1.0 - (others[None, :] - cosine.index_select(0, batch.masks.partner)) / max(batch.num_graphs - 2, 1)


GRAPH_SCORES = (graph_similarity_scores, graph_uncertainty_scores, graph_diversity_scores)
"""The three parts on graphs, in the order of ``undimix_weights``."""


def node_graph_undimix(batch: NodeGraphBatch, options: SamplerOptions) -> NegativeWeights:
    """Each node's weights over its negative graphs (mean 1 over them, 0 on its own graph) from the three parts."""
    excluded = own_graph_pairs(batch)
    return importance_weights(batch, importance(batch, options, GRAPH_SCORES, excluded), excluded)


def official_undimix_jsd(batch: NodeGraphBatch, negatives: NegativeWeights) -> tuple[Tensor, LossStats]:
    """``JSD_hard`` of HCL's graph code with UnDiMix's weights in place of its ``reweight`` (module docstring, ``official``)."""
    nodes, graphs = batch.logits.shape
    tau = OFFICIAL_TAU_PLUS
    # negatives: mean 1 over the G - 1 negatives, 0 on the own slot; JSD_hard divides by the mean over all G slots.
    weights = negatives.log_weights.exp() * (graphs / (graphs - 1))
    scores = batch.logits.masked_fill(~batch.masks.negatives, 0.0)
    expected_negative = (weights * F.softplus(scores)).sum() / ((1.0 - tau) * nodes * (graphs - 1)) - graphs * LOG_2 / (graphs - 1)
    positive = batch.logits.reshape(-1).index_select(0, batch.masks.partner_pairs)
    zero = official_positive_expectation(positive.new_zeros(()), tau)
    expected_positive = official_positive_expectation(positive, tau).mean() + (graphs - 1) * zero
    count = torch.tensor(nodes, device=positive.device)
    return expected_negative - expected_positive, LossStats(terms=count, anchors_without_negatives=torch.zeros_like(count))
