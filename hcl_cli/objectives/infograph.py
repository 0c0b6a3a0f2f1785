"""InfoGraph's local-global objective (Sun et al., ICLR 2020) with every negative sampler, and the
two readings of HCL's hard graph objective (Robinson et al., ICLR 2021, App. B and D.2).

The batch is nodes against graphs (:class:`NodeGraphBatch`): anchors are the batch's n nodes'
local embeddings ``l_i``, candidates its G graphs' global embeddings ``g_j``, the score is the
raw inner product ``s_ij = l_i.g_j`` (no normalisation, no temperature, as InfoGraph), each
node's positive is its own graph and its negatives are the other graphs of the batch. The
samplers of :mod:`hcl_cli.objectives` run on it unchanged and give q(j|i) over the graphs:
``ucl`` uniform (InfoGraph itself), ``debiased``/``hucl`` HCL's tilt, ``scl``/``hscl``/
``hscl-threshold`` the graphs of other labels (a node's label is its graph's; its positives are
then every graph of its label, its own included), ``ot`` the entropic coupling of nodes with
graphs. ``undimix`` is refused: its uncertainty part is the gradient of a pseudo-labelling task
between two views of each sample through the projection head's last layer, which a node-graph
batch does not have.

The loss is the Jensen-Shannon estimator of InfoGraph (Nowozin et al. 2016; the official
``local_global_loss_`` with ``measure="JSD"``, losses.py lines 6-33 and gan_losses.py lines 34 and
74-75 of HCL's graph code), with the sampler's q weighting each node's negatives:

    E_pos = mean over positive pairs (i, p) of  log 2 - sp(-s_ip)
    E_neg = mean over nodes i of                sum_j q(j|i) sp(s_ij) - log 2        (sp = softplus)
    loss  = E_neg - E_pos

(``sp(-s) + s = sp(s)``). With uniform q over the G - 1 other graphs this is InfoGraph exactly.

``graph_weights="paper"`` (every sampler): HCL App. B writes InfoGraph's loss as alignment plus
uniformity, ``L_unif = E_{(u, G') ~ p x q} sp(T(h_u, H(G')))``, and tilts its negative
distribution, ``q_beta(G') ~ exp(beta T(h_u, H(G'))) p(G')``; App. D.2: "for a batch we clip all the
inner products to live in the interval [-2, 2] while computing the reweighting" (Fig. 14: scaled
by ``2 s / max |s|`` over the batch's negative pairs). The debiasing of Eq. (2)-(4),
``E_{q^-}[g] = (E_{q_beta}[g] - tau+ E_{q_beta^+}[g]) / (1 - tau+)``, with the node's positives as
the sample of ``q_beta^+``, gives for debiased, hucl and ot:

    w_ij = exp(beta * 2 s_ij / max_{negative pairs} |s|),   q(j|i) = w_ij / sum_j w_ij
    N_i  = max((sum_j q(j|i) sp(s_ij) - tau+ mean_p sp(s_ip)) / (1 - tau+), 0)
    E_neg = mean_i N_i - log 2

the floor 0 being the infimum of ``sp``, as HCL's clamp (Eq. 4, Fig. 13) keeps its estimate at
its theoretical minimum. The scores are always scaled for the weights on graphs (the ``clip``
option is not read: App. D.2 says it is needed there); only the weights see them.

``graph_weights="official"`` (debiased and hucl): ``JSD_hard`` exactly as HCL's graph code
computes it (:func:`official_jsd_hard`), which differs from the paper in four places: its weights
``exp(-2 beta q / max|q|)`` fall as the score rises (easy negatives are up-weighted); tau+ is
0.5 in both terms whatever ``tau_plus`` says (never passed); the masked positive slot (score 0
after masking) is counted in each row's weight mean and in the sums; and the positive term
subtracts ``tau+/(1 - tau+) sp(s_ip)`` from E_pos, i.e. adds it to the loss. ``debiased``, and
``hucl`` at beta 0, are the code's ``beta == 0`` branch.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import LossStats, NegativeWeights, PairMasks, ScoreBatch, uniform_on
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions

GraphWeights = Literal["paper", "official"]

OFFICIAL_SAMPLERS = ("debiased", "hucl")
"""The samplers whose ``graph_weights="official"`` reading is the official ``JSD_hard``."""

OFFICIAL_TAU_PLUS = 0.5
"""tau+ of the official ``JSD_hard``: the default of ``get_positive_expectation`` and
``get_negative_expectation`` (gan_losses.py lines 17 and 58), never passed by ``local_global_loss_``."""

LOG_2 = math.log(2.0)


def node_graph_masks(node_graph: Tensor, num_graphs: int) -> PairMasks:
    """The :class:`~hcl_cli.objectives.core.PairMasks` of n nodes (graph index ``node_graph``) against G graphs, without a loop over nodes."""
    nodes = torch.arange(len(node_graph), device=node_graph.device)
    graphs = torch.arange(num_graphs, device=node_graph.device)
    own = node_graph[:, None] == graphs[None, :]
    return PairMasks(
        rows=nodes,
        partner=node_graph,
        partner_pairs=nodes * num_graphs + node_graph,
        negatives=~own,
        others=torch.ones_like(own),
        candidate_images=graphs,
        anchor_images=node_graph,
    )


class NodeGraphBatch(ScoreBatch):
    """n nodes' local embeddings against the G global embeddings of their batch of graphs (InfoGraph)."""

    temperature = 1.0
    unit = False

    def __init__(self, local: Tensor, global_: Tensor, node_graph: Tensor, graph_labels: Tensor | None) -> None:
        self.compute_dtype = torch.float64 if local.dtype == torch.float64 else torch.float32
        self.local = local.to(self.compute_dtype)
        """(n, d) the nodes' local embeddings."""
        self.global_ = global_.to(self.compute_dtype)
        """(G, d) the graphs' global embeddings."""
        self.num_graphs = global_.shape[0]
        self.logits = self.local @ self.global_.T
        """(n, G) s_ij = l_i.g_j."""
        self.masks = node_graph_masks(node_graph, self.num_graphs)
        self.candidate_labels = None if graph_labels is None else graph_labels.to(local.device)
        """(G,) the graphs' labels, or None."""
        self.labels = None if graph_labels is None else self.candidate_labels[node_graph]
        """(n,) each node's graph's label, or None."""

    @property
    def num_negatives(self) -> int:
        """M = G - 1: the other graphs of the batch."""
        return self.num_graphs - 1

    @functools.cached_property
    def uniform(self) -> Tensor:
        """(n, G) the log-weights of the uniform distribution over each node's G - 1 other graphs."""
        return uniform_on(self.masks.negatives, self.compute_dtype)

    @functools.cached_property
    def cosine(self) -> Tensor:  # type: ignore[override]
        """(n, G) cos(l_i, g_j), which ``hscl-threshold`` compares with its threshold."""
        return F.normalize(self.local, dim=1) @ F.normalize(self.global_, dim=1).T

    def squared_distances(self) -> Tensor:
        """(n, G) ``-2 s_ij``: ``||l_i - g_j||^2`` less ``|l_i|^2 + |g_j|^2``, which no coupling with fixed marginals sees (detached)."""
        return -2.0 * self.logits.detach()


def jsd_objective(batch: ScoreBatch, negatives: NegativeWeights, *, label_positives: bool, tau_plus: float) -> tuple[Tensor, LossStats]:
    """The q-weighted Jensen-Shannon loss of the module docstring (``graph_weights="paper"``), and its :class:`LossStats`.

    Anchors without negatives (``negatives.anchor_valid``) are left out of both means.
    """
    q = torch.softmax(negatives.log_weights, dim=1)
    negative_softplus = (q * F.softplus(batch.logits)).sum(dim=1)
    anchors, pairs = batch.positive_pairs(label_positives)
    positive_logits = batch.logits.reshape(-1).index_select(0, pairs)
    if negatives.debiased:
        positive_softplus = torch.zeros_like(negative_softplus).index_add_(0, anchors, F.softplus(positive_logits))
        positives_per_anchor = torch.bincount(anchors, minlength=batch.num_anchors).to(positive_softplus)
        corrected = negative_softplus - tau_plus * positive_softplus / positives_per_anchor
        negative_softplus = (corrected / (1.0 - tau_plus)).clamp(min=0.0)
    valid = torch.ones_like(batch.masks.rows, dtype=torch.bool) if negatives.anchor_valid is None else negatives.anchor_valid
    valid_pairs = valid.index_select(0, anchors)
    terms, valid_anchors = valid_pairs.sum(), valid.sum()
    expected_negative = ((negative_softplus - LOG_2) * valid).sum() / valid_anchors.clamp(min=1)
    expected_positive = ((LOG_2 - F.softplus(-positive_logits)) * valid_pairs).sum() / terms.clamp(min=1)
    return expected_negative - expected_positive, LossStats(terms=terms, anchors_without_negatives=(~valid).sum())


def official_positive_expectation(p: Tensor, tau_plus: float) -> Tensor:
    """``get_positive_expectation(p, "JSD_hard")`` elementwise (gan_losses.py line 36): ``log 2 - sp(-p) - tau+/(1 - tau+) (sp(-p) + p)``."""
    return LOG_2 - F.softplus(-p) - tau_plus / (1.0 - tau_plus) * (F.softplus(-p) + p)


SOFTPLUS_THRESHOLD = 20.0
"""``F.softplus``'s default threshold: above it sp(x) is x (float32 cannot tell log1p(e^-20) = 2e-9 from 0 next to x)."""

OFFICIAL_CHUNK_ELEMENTS = 1 << 18
"""Score entries per row block of :func:`official_jsd_hard` (1 MiB of float32: the block stays in cache through its passes)."""


def official_jsd_hard(
    local: Tensor, global_: Tensor, node_graph: Tensor, *, beta: float, detach_weights: bool = False, counts: Tensor | None = None
) -> Tensor:
    """``local_global_loss_(..., measure="JSD_hard", beta)`` of HCL's graph code, as it computes it.

    losses.py lines 20-33: ``res = l g^T``; ``E_pos`` is ``get_positive_expectation`` summed over
    the whole (n, G) matrix ``res * pos_mask`` and divided by n, so each of the G - 1 masked slots
    adds ``Ep(0) = -tau+/(1 - tau+) log 2`` (a constant); ``E_neg`` is ``get_negative_expectation``
    of ``q = res * neg_mask`` summed over the matrix and divided by n (G - 1); loss ``E_neg - E_pos``.
    gan_losses.py lines 76-89, ``JSD_hard``: for beta = 0, ``(sp(q) - log 2) / (1 - tau+)`` (0 on
    the masked slot); otherwise ``r = exp(-2 beta q / max(q.max(), |q.min()|))``, ``r / mean_j r``
    over all G slots of the row (the masked one, r = 1, included) times ``sp(q) / (1 - tau+)``,
    less log 2, on every slot. tau+ is :data:`OFFICIAL_TAU_PLUS`. The weights are computed in the
    log domain (no overflow for large beta); ``detach_weights`` stops their gradient (the code's
    flows through them, and through the max).

    The same values and gradients as autograd through those dense (n, G) expressions (up to
    rounding), computed by :class:`_OfficialJsdHard` in one pass over blocks of rows: the node's own
    graph is one index per row (no mask), and the gradient is written in the same pass.

    ``counts`` (int64, one per row, >= 1): row i stands for ``counts[i]`` nodes of graph
    ``node_graph[i]`` with the same local embedding (rows merged by
    :func:`~hcl_cli.graph.step.merge_duplicate_nodes`): the loss of the batch of ``counts.sum()``
    nodes, and row i's gradient the sum of its nodes'.
    """
    loss = _OfficialJsdHard.apply(local, global_, node_graph, float(beta), bool(detach_weights), counts)
    assert isinstance(loss, Tensor)
    return loss


def _log1p(x: Tensor, *, out: Tensor, scratch: Tensor) -> Tensor:
    """``log1p(x)`` for ``x`` in [0, 1] into ``out`` (``scratch`` is overwritten).

    float32: ``log(u) - ((u - 1) - x) / u`` with ``u = 1 + x`` (the rounding of u corrected to first
    order; within 2 ulp of log1p, and x itself where u rounds to 1), four times faster than
    ``torch.log1p``, whose float32 kernel is not vectorised (12.5 against 2.8 ns an entry, one thread).
    float64 keeps ``torch.log1p``, which is vectorised.
    """
    if x.dtype != torch.float32:
        return torch.log1p(x, out=out)
    torch.add(x, 1.0, out=out)
    torch.sub(out, 1.0, out=scratch).sub_(x).div_(out)
    return out.log_().sub_(scratch)


class _OfficialJsdHard(torch.autograd.Function):
    """:func:`official_jsd_hard` with its gradient written by hand, block by block of rows.

    With ``s_ij = l_i.g_j``, o_i the node's graph, c = tau+/(1 - tau+), ``K = 1/((1 - tau+) n (G - 1))``,
    ``q`` the scores with ``q_io = 0``, ``f = sp(q)``, ``m = max |q|``, ``w_ij = G softmax_j(-2 beta q_ij / m)``
    and ``A_i = sum_j w_ij f_ij``: ``loss = K sum_i A_i - G log 2 / (G - 1) - E_pos`` and

        d/ds_ij (j != o_i) = K w_ij [sigma(q_ij) - 2 beta / m (f_ij - A_i / G)]
        d/dm               = K 2 beta / m^2 sum_ij w_ij (f_ij - A_i / G) q_ij   (to the entries |q| = m, as amax)
        d/ds_io            = -((1 + c) sigma(-s_io) - c) / n

    (beta = 0: ``K sum_(j != o_i) f_ij - log 2 / (1 - tau+)``, gradient ``K sigma(s_ij)``). With
    ``counts`` c_i, n is their sum and each row's terms count c_i times: the weights w carry c_i
    (their row normalisation is c_i G instead of G), and so do the positive terms and beta 0's rows.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, local: Tensor, global_: Tensor, node_graph: Tensor, beta: float, detach_weights: bool, counts: Tensor | None
    ) -> Tensor:
        rows, graphs = local.shape[0], global_.shape[0]
        nodes = rows if counts is None else int(counts.sum())
        weight = None if counts is None else counts.to(local.dtype)[:, None]
        tau = OFFICIAL_TAU_PLUS
        c = tau / (1.0 - tau)
        k = 1.0 / ((1.0 - tau) * nodes * (graphs - 1))
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        through_weights = beta != 0 and not detach_weights and need_grad
        local, global_ = local.detach(), global_.detach()
        own = torch.arange(rows, device=local.device) * graphs + node_graph
        q = local @ global_.T
        positive = q.view(-1).index_select(0, own)
        q.view(-1).index_fill_(0, own, 0.0)
        zero = official_positive_expectation(positive.new_zeros(()), tau)  # each of the G - 1 other graphs' slots, zeroed
        positive_terms = official_positive_expectation(positive, tau)
        if weight is not None:
            positive_terms = positive_terms * weight[:, 0]
        expected_positive = positive_terms.sum() / nodes + (graphs - 1) * zero
        # The gradient is accumulated as (d loss / d s) / k; global_k and the positive slots' values carry k back.
        positive_grad = -((1.0 + c) * torch.sigmoid(-positive) - c) / (nodes * k)
        if weight is not None:
            positive_grad *= weight[:, 0]
        global_k = global_ * k
        grad_local = torch.empty_like(local) if need_grad else None
        grad_global = torch.zeros_like(global_) if need_grad else None
        block = max(1, OFFICIAL_CHUNK_ELEMENTS // graphs)
        starts = range(0, rows, block)
        factor = scale = largest = 0.0
        direct = False
        if beta != 0:
            # m = max |q| (amax); each block's extremes keep the search for its ties to the blocks that hold them.
            extremes = torch.stack([torch.stack(q[start : start + block].aminmax()) for start in starts]).tolist()
            largest = max(max(high, -low) for low, high in extremes)
            scale = max(largest, torch.finfo(q.dtype).tiny)
            factor = -2.0 * beta / scale
            # |factor q| <= 2 |beta| and every row holds its own slot's exp(0) = 1: exp needs no shift below 2 |beta| = 80.
            direct = 2.0 * abs(beta) <= 80.0
        total = q.new_zeros(())
        grad_scale = q.new_zeros(())
        # Fresh (block, G) tensors would each be mapped and faulted in anew: the passes write into these.
        f, e, w, grad = (q.new_empty(min(block, rows), graphs) for _ in range(4))
        # exp is floored at e^floor, a normal number: an underflow to subnormals (the heads' scores
        # reach 1e4) costs ten times a normal exp, and changes the sums by less than 1e-30; in float32,
        # log1p(exp(-|q|)) stops at |q| = 20 (the threshold of F.softplus, where it is within 2e-9 of 0).
        floor = math.log(torch.finfo(q.dtype).tiny) + 1.0
        limit = -floor if q.dtype == torch.float64 else SOFTPLUS_THRESHOLD
        for start in starts:
            stop = min(start + block, rows)
            size = stop - start
            q_block = q[start:stop]
            own_block = own[start:stop] - start * graphs
            f_block, e_block, w_block, grad_block = f[:size], e[:size], w[:size], grad[:size]
            weight_block = None if weight is None else weight[start:stop]
            # sp(q) = max(q, 0) + log1p(exp(-|q|)); sigma(q) = exp(q - sp(q)).
            torch.abs(q_block, out=e_block).clamp_(max=limit).neg_().exp_()
            _log1p(e_block, out=f_block, scratch=grad_block).add_(torch.clamp(q_block, min=0.0, out=e_block))
            if need_grad:
                torch.sub(q_block, f_block, out=grad_block).clamp_(min=floor).exp_()
            if beta == 0:
                f_block.view(-1).index_fill_(0, own_block, 0.0)
                total += f_block.sum() if weight_block is None else f_block.sum(dim=1).dot(weight_block[:, 0])
            else:
                # w_ij = c_i G softmax_j: the row normalisation carries the row's count.
                norm = graphs if weight_block is None else graphs * weight_block
                torch.mul(q_block, factor, out=w_block)
                if direct:
                    w_block.exp_()
                    w_block.mul_(norm / w_block.sum(dim=1, keepdim=True))
                else:
                    w_block.sub_(torch.logsumexp(w_block, dim=1, keepdim=True) - torch.log(torch.as_tensor(norm, dtype=q.dtype))).exp_()
                weighted = f_block.mul_(w_block)
                row_sums = weighted.sum(dim=1, keepdim=True)
                total += row_sums.sum()
            if not need_grad:
                continue
            if beta != 0:
                grad_block.mul_(w_block)
                if through_weights:
                    row_means = row_sums if weight_block is None else row_sums / weight_block  # A_i
                    tilt = weighted.addcmul_(w_block, row_means, value=-1.0 / graphs)
                    grad_scale += torch.dot(tilt.view(-1), q_block.reshape(-1))
                    grad_block.add_(tilt, alpha=factor)
            elif weight_block is not None:
                grad_block.mul_(weight_block)
            grad_block.view(-1).index_copy_(0, own_block, positive_grad[start:stop])
            torch.mm(grad_block, global_k, out=grad_local[start:stop])
            grad_global.addmm_(grad_block.T, local[start:stop])
        if beta == 0:
            expected_negative = k * total - LOG_2 / (1.0 - tau)
        else:
            expected_negative = k * total - graphs * LOG_2 / (graphs - 1)
        loss = expected_negative - expected_positive
        if need_grad:
            grad_global.mul_(k)
        if through_weights and largest >= torch.finfo(q.dtype).tiny:
            # d loss / d m = k 2 beta / m^2 sum (tilt q) = -k factor / m sum (tilt q); amax shares it among the ties.
            ties = [
                (q_block.abs() == largest).nonzero() + torch.tensor([start, 0], device=q.device)
                for start, (low, high) in zip(starts, extremes)
                if max(high, -low) == largest
                for q_block in [q[start : start + block]]
            ]
            where = torch.cat(ties)
            i, j = where[:, 0], where[:, 1]
            tied = torch.ones_like(q[i, j]) if weight is None else weight[i, 0]  # the nodes each tied entry stands for
            share = (-k * factor / scale) * grad_scale / tied.sum()
            signed = (share * tied * torch.sign(q[i, j]))[:, None]
            grad_local.index_add_(0, i, signed * global_[j])
            grad_global.index_add_(0, j, signed * local[i])
        ctx.grads = (grad_local, grad_global)
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_local, grad_global = ctx.grads
        return grad_output * grad_local, grad_output * grad_global, None, None, None, None


@overload
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = ...,
    *,
    sampler: str,
    return_stats: Literal[False] = ...,
    **options: Any,
) -> Tensor: ...
@overload
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = ...,
    *,
    sampler: str,
    return_stats: Literal[True],
    **options: Any,
) -> tuple[Tensor, LossStats]: ...
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = None,
    *,
    sampler: str,
    return_stats: bool = False,
    **options: Any,
) -> Tensor | tuple[Tensor, LossStats]:
    """InfoGraph's loss of a batch of graphs under ``sampler``'s negative distribution (a scalar).

    ``local``: (n, d) the nodes' local embeddings (InfoGraph's ``local_d(M)``); ``global_``:
    (G, d) the graphs' global embeddings (``global_d(y)``), G >= 2; ``node_graph``: (n,) int64,
    the graph of each node (torch-geometric's ``batch`` vector); ``graph_labels``: (G,), read by
    the supervised samplers and with ``positives="labels"``. ``options`` are those of
    :func:`~hcl_cli.objectives.contrastive_loss` (``beta``, ``tau_plus``, ``graph_weights``, ...),
    ``objective`` ``jsd`` (the default here, and the only one; ``auto`` is ``jsd`` too); ``temperature`` and ``clip`` are
    not read. The arithmetic runs in float32 (float64 for float64 inputs) with autocast off.
    ``return_stats=True`` also returns the :class:`~hcl_cli.objectives.core.LossStats`.
    """
    spec = lookup(sampler)
    values = SamplerOptions.resolve(spec, {"objective": "jsd", **options})
    check_graph_sampler(sampler, values)
    if values.momentum_keys is not None:
        raise UsageError("a momentum queue (momentum_keys) is not defined for nodes against graphs")
    check_graph_batch(local, global_, node_graph)
    if spec.label_positives(values) and (graph_labels is None or graph_labels.shape != (global_.shape[0],)):
        got = None if graph_labels is None else tuple(graph_labels.shape)
        raise UsageError(f"--sampler {sampler} reads labels: graph_labels must have shape ({global_.shape[0]},) (got {got})")
    loss, stats = node_graph_loss(local, global_, node_graph, graph_labels, sampler=sampler, options=values)
    return (loss, stats) if return_stats else loss


def check_graph_sampler(sampler: str, options: SamplerOptions) -> None:
    """One-line usage errors for a sampler or options that nodes against graphs cannot train with.

    The objective must be ``jsd`` (or ``auto``, which is ``jsd`` on graphs); ``undimix`` needs two views
    and the projection head's inputs; ``graph_weights="official"`` has one positive per node. The
    public :func:`local_global_loss` calls it on every call, a stage once at its entry.
    """
    if options.objective not in ("auto", "jsd"):
        raise UsageError(f"nodes against graphs train with --objective jsd (InfoGraph's loss), not {options.objective}")
    spec = lookup(sampler)
    if spec.head_inputs:
        raise UsageError(
            f"--sampler {sampler} needs two views of each sample and the projection head's inputs; nodes against graphs have neither"
        )
    if options.graph_weights == "official" and sampler in OFFICIAL_SAMPLERS and spec.label_positives(options):
        raise UsageError("--graph-weights official has one positive per node, its own graph: use --positives partner")


def reads_officially(sampler: str, options: SamplerOptions) -> bool:
    """Whether ``sampler`` under ``options`` is the official ``JSD_hard`` (:func:`official_jsd_hard`)."""
    return options.graph_weights == "official" and sampler in OFFICIAL_SAMPLERS


def node_graph_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None,
    *,
    sampler: str,
    options: SamplerOptions,
    counts: Tensor | None = None,
) -> tuple[Tensor, LossStats]:
    """:func:`local_global_loss` with its statistics, for inputs and options checked beforehand: it checks nothing.

    The graph training step's entry (:class:`~hcl_cli.graph.step.GraphTrainingStep`), as
    :func:`~hcl_cli.objectives.loss.sampler_loss` is the image step's: ``options`` are the stage's
    configuration, checked once (:func:`check_graph_sampler`) and resolved once per epoch.
    ``counts``: the nodes each row of ``local`` stands for, read by the official reading only
    (:func:`reads_officially`; :func:`official_jsd_hard`).
    """
    spec = SAMPLERS[sampler]
    label_positives = spec.label_positives(options)
    official = reads_officially(sampler, options)
    if counts is not None and not official:
        raise ValueError("merged node rows (counts) are read by the official reading only")
    with torch.autocast(device_type=local.device.type, enabled=False):
        if official:
            beta = options.beta if sampler == "hucl" else 0.0
            compute_dtype = torch.float64 if local.dtype == torch.float64 else torch.float32
            loss = official_jsd_hard(
                local.to(compute_dtype),
                global_.to(compute_dtype),
                node_graph,
                beta=beta,
                detach_weights=options.detach_weights,
                counts=counts,
            )
            count = torch.tensor(local.shape[0] if counts is None else int(counts.sum()), device=loss.device)
            return loss, LossStats(terms=count, anchors_without_negatives=torch.zeros_like(count))
        batch = NodeGraphBatch(local, global_, node_graph, graph_labels if label_positives else None)
        negatives = spec.load()(batch, options.replaced({"clip": True}, {}))
        return jsd_objective(batch, negatives, label_positives=label_positives, tau_plus=options.tau_plus)


def check_graph_batch(local: Tensor, global_: Tensor, node_graph: Tensor) -> None:
    """One-line usage errors for embeddings and a ``node_graph`` vector that do not form a batch of G >= 2 graphs."""
    if local.ndim != 2 or global_.ndim != 2 or local.shape[1] != global_.shape[1] or local.shape[0] < 1:
        raise UsageError(f"local and global_ must be (n, d) and (G, d) with n >= 1 (got {tuple(local.shape)} and {tuple(global_.shape)})")
    if global_.shape[0] < 2:
        raise UsageError(f"a batch needs at least 2 graphs, each node's negatives being the other graphs (got {global_.shape[0]})")
    if node_graph.shape != (local.shape[0],) or node_graph.dtype != torch.int64:
        raise UsageError(
            f"node_graph must be int64 of shape ({local.shape[0]},), one graph index per node (got {node_graph.dtype} {tuple(node_graph.shape)})"
        )
    if int(node_graph.min()) < 0 or int(node_graph.max()) >= global_.shape[0]:
        raise UsageError(
            f"node_graph must index the {global_.shape[0]} graphs (got values in [{int(node_graph.min())}, {int(node_graph.max())}])"
        )
