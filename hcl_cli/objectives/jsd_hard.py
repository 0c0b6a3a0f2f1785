"""``JSD_hard`` exactly as HCL's graph code computes it: the ``official`` reading of HCL's hard graph objective.

``graph_weights="official"`` (debiased and hucl; :func:`~hcl_cli.objectives.infograph.reads_officially`):
the loss of HCL's graph code (cortex_DIM/functions/gan_losses.py, losses.py), which differs from
the paper (:mod:`hcl_cli.objectives.jsd`) in four places: its weights ``exp(-2 beta q / max|q|)``
fall as the score rises (easy negatives are up-weighted); tau+ is 0.5 in both terms whatever
``tau_plus`` says (never passed); the masked positive slot (score 0 after masking) is counted in
each row's weight mean and in the sums; and the positive term subtracts ``tau+/(1 - tau+) sp(s_ip)``
from E_pos, i.e. adds it to the loss. ``debiased``, and ``hucl`` at beta 0, are the code's
``beta == 0`` branch. The value and its gradient are one hand-written autograd Function over
blocks of rows (:class:`_OfficialJsdHard`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives.jsd import LOG_2

OFFICIAL_TAU_PLUS = 0.5
"""tau+ of the official ``JSD_hard``: the default of ``get_positive_expectation`` and
``get_negative_expectation`` (gan_losses.py lines 17 and 58), never passed by ``local_global_loss_``."""


def official_positive_expectation(p: Tensor, tau_plus: float) -> Tensor:
    """``get_positive_expectation(p, "JSD_hard")`` elementwise (gan_losses.py lines 35-36, ``'JSD_hard'``): ``log 2 - sp(-p) - tau+/(1 - tau+) (sp(-p) + p)``."""
    return LOG_2 - F.softplus(-p) - tau_plus / (1.0 - tau_plus) * (F.softplus(-p) + p)


SOFTPLUS_THRESHOLD = 20.0
"""``F.softplus``'s default threshold: above it sp(x) is x (float32 cannot tell log1p(e^-20) = 2e-9 from 0 next to x)."""

OFFICIAL_CHUNK_ELEMENTS = 1 << 18
"""Score entries per row block of :func:`official_jsd_hard` (1 MiB of float32: the block stays in cache through its passes)."""


def official_jsd_hard(
    local: Tensor, global_: Tensor, node_graph: Tensor, *, beta: float, detach_weights: bool = False, counts: Tensor | None = None
) -> Tensor:
    """``local_global_loss_(..., measure="JSD_hard", beta)`` of HCL's graph code, as it computes it.

    losses.py lines 20-33: ``res = torch.mm(l_enc, g_enc.t())``, l g^T; ``E_pos`` is ``get_positive_expectation`` summed over
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
    order; within 2 ulp of log1p, and x itself where u rounds to 1), in place of ``torch.log1p``,
    whose float32 kernel is not vectorised (the whole step's speed against the official code:
    benchmarks/results/graph_peer.json). float64 keeps ``torch.log1p``, which is vectorised.
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
