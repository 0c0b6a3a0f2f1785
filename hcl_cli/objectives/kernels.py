"""The loss's kernels: autograd Functions whose gradients are written out, and cached constants.

:func:`~hcl_cli.objectives.core.contrastive_objective` and :class:`~hcl_cli.objectives.core.PairBatch`
are written with them. Each Function computes the plain torch expression it replaces, in the same
order, and its gradient in a few ops where autograd would walk the expression's graph op by op
(``tests/test_loss_speed_paths.py`` holds values and gradients against the plain forms). The
scalars of the loss are cached 0-d tensors (:func:`~hcl_cli.runtime.constant`): a Python number in a tensor op is
wrapped into a tensor and converted at every call. The op counts of a training step are in
``benchmarks/results/step_counts.json``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.runtime import constant

NORMALIZE_EPS = 1e-12
"""``F.normalize``'s default ``eps``: the smallest norm a row is divided by."""


def log_count(count: int | Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    """0-d ``log count`` in ``dtype``: the cached constant of a number, or the log of a 0-d count on the device (taken in
    float64, as ``math.log`` takes a number's)."""
    return constant(math.log(count), dtype, device) if not isinstance(count, Tensor) else count.double().log().to(dtype)


class UnitRows(torch.autograd.Function):
    """``F.normalize(x, dim=1)``, ``z = x / max(||x_i||, eps)``, with its gradient written out: ``(g - z (z.g)) / ||x_i||``
    by row (``g / eps`` on a row shorter than eps, where the norm is clamped), in place of autograd's walk back through
    the division, the clamp and the norm."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, rows: Tensor) -> Tensor:
        norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
        eps = constant(NORMALIZE_EPS, rows.dtype, rows.device)
        denominators = norms.clamp_min(NORMALIZE_EPS)
        units = rows / denominators
        ctx.save_for_backward(units, denominators, norms >= eps)
        return units

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, gradient: Tensor) -> Tensor:
        units, denominators, unclamped = ctx.saved_tensors
        along = torch.where(unclamped, (units * gradient).sum(dim=1, keepdim=True), constant(0.0, units.dtype, units.device))
        return torch.addcmul(gradient, units, along, value=-1.0).div_(denominators)


def unit_rows(rows: Tensor) -> Tensor:
    """(n, d) ``F.normalize(rows, dim=1)``, differentiable in one step (:class:`UnitRows`)."""
    return UnitRows.apply(rows)


class RowLogSumExp(torch.autograd.Function):
    """``logsumexp`` over the last dimension of a matrix, from one fused ``softmax``, which backward reuses.

    ``torch.logsumexp`` runs four passes over the matrix (max, subtract, exp, sum) and its backward
    three more (subtract, exp, multiply); here the forward is a ``softmax`` (one fused kernel) and two
    row maxima, with ``lse_i = max_j x_ij - log max_j p_ij`` (the softmax at the row's largest entry
    is ``1 / sum_j exp(x_ij - max_j x_ij)``, at least 1/m, so its log is accurate), and the backward
    one product ``p * g``. Rows need a finite entry. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, matrix: Tensor) -> Tensor:
        probabilities, logsumexp = softmax_logsumexp(matrix)
        ctx.save_for_backward(probabilities)
        return logsumexp

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, gradient: Tensor) -> Tensor:
        (probabilities,) = ctx.saved_tensors
        return probabilities * gradient[:, None]


def softmax_logsumexp(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """The row softmax of an (n, m) matrix and its rows' ``logsumexp``, ``max_j x_ij - log max_j p_ij`` (:class:`RowLogSumExp`)."""
    probabilities = torch.softmax(matrix, dim=1)
    return probabilities, matrix.amax(dim=1) - probabilities.amax(dim=1).log()


def row_logsumexp(matrix: Tensor) -> Tensor:
    """(n,) ``torch.logsumexp(matrix, dim=1)`` of an (n, m) matrix, in about half the passes (:class:`RowLogSumExp`)."""
    if not torch.is_grad_enabled() or not matrix.requires_grad:
        return softmax_logsumexp(matrix)[1]
    return RowLogSumExp.apply(matrix)


class TiltedLogMean(torch.autograd.Function):
    """(n,) ``log E_q[exp(s_ij)] = lse_j(w_ij + s_ij) - lse_j(w_ij)`` for exponentially tilted weights, ``w = tilt * s``
    on a support and ``-inf`` off it (HCL Eq. 4's ``q_beta``, H-SCL's ``eta_exp``), with its gradient in ``s`` written out.

    With ``p = softmax(w)`` and ``p' = softmax(w + s)``, the gradient is ``(1 + tilt) p' - tilt p`` through the weights
    (``p'`` alone when the weights are detached): two passes over the matrix, where autograd would run the two
    ``logsumexp`` backwards, the sum's, and the weights' own graph (mask, scaling) before adding the two paths.
    The forward computes exactly what :func:`row_logsumexp` gives for the two terms. Not twice differentiable.
    """

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, log_weights: Tensor, logits: Tensor, tilt: float | Tensor, through_weights: bool
    ) -> Tensor:
        weights, log_normaliser = softmax_logsumexp(log_weights)
        tilted, log_total = softmax_logsumexp(log_weights + logits)
        ctx.tilt, ctx.through_weights = tilt, through_weights
        ctx.save_for_backward(weights if through_weights else None, tilted)
        return log_total - log_normaliser

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, gradient: Tensor) -> tuple[None, Tensor, None, None]:
        weights, tilted = ctx.saved_tensors
        if not ctx.through_weights:
            return None, tilted * gradient[:, None], None, None
        tilt = ctx.tilt
        if isinstance(tilt, Tensor):  # a compiled step's scheduled beta (hcl_cli.image.step.ScheduledValues)
            logits_gradient = tilted * (gradient * (1.0 + tilt).to(gradient.dtype))[:, None]
            return None, logits_gradient.sub_(weights * (gradient * tilt.to(gradient.dtype))[:, None]), None, None
        logits_gradient = tilted * (gradient * constant(1.0 + tilt, gradient.dtype, gradient.device))[:, None]
        return None, logits_gradient.addcmul_(weights, gradient[:, None], value=-tilt), None, None


def tilted_log_mean(log_weights: Tensor, logits: Tensor, tilt: float | Tensor) -> Tensor:
    """(n,) :class:`TiltedLogMean`: its gradient runs through the weights where ``log_weights`` requires one. ``tilt`` is a
    number, or a 0-d tensor (a compiled step's scheduled beta, which changes without a recompile)."""
    return TiltedLogMean.apply(log_weights, logits, tilt, log_weights.requires_grad)


class NceTerms(torch.autograd.Function):
    """(n,) the ``nce`` terms ``softplus(log M + D_ip - s_ip)`` from each pair's ``log E_i`` and ``s_ip``, with
    ``D_ip = log E_i`` plain or HCL's debiased one, and the gradient written out.

    Debiased (HCL, Robinson et al. 2021, Eq. 4 with Fig. 13's clamp ``Ng >= M exp(-1/t)``, divided by M):
    ``D = log((E - tau+ exp(s_ip)) / (1 - tau+)) = log E + log1p(-r) - log1p(-tau+)`` with
    ``r = tau+ exp(s_ip) / E``, and at least ``floor``; where ``r`` is 1 or more to within rounding the
    correction is not positive and the floor applies (zero gradient, never NaN). With ``x = log M + D - s_ip``
    and ``sigma(x)`` the softplus' derivative, the gradients are ``sigma(x) dD/dlog E`` and
    ``sigma(x) (dD/ds_ip - 1)``, where off the floor ``dD/dlog E = 1 / (1 - r)`` and ``dD/ds_ip - 1 = -1 / (1 - r)``
    (``1`` and ``-1`` when ``tau+`` is 0; ``0`` and ``-1`` on the floor): a few ops on (n,) vectors where autograd
    would run the graph of every clamp, exp and log1p.
    """

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        log_mean: Tensor,
        positive_logits: Tensor,
        num_negatives: int | Tensor,
        tau_plus: float | None,
        floor: float,
    ) -> Tensor:
        def value(number: float) -> Tensor:
            return constant(number, log_mean.dtype, log_mean.device)

        mean_slope = positive_slope = None
        """``dD/dlog E`` and ``1 - dD/ds_ip``; None: 1."""
        if tau_plus is None:
            debiased = log_mean
        elif tau_plus == 0:
            debiased = log_mean.clamp(min=value(floor))
            mean_slope = torch.where(log_mean >= value(floor), value(1.0), value(0.0))
        else:
            largest_ratio = value(math.log1p(-torch.finfo(log_mean.dtype).eps))
            log_ratio = positive_logits + value(math.log(tau_plus)) - log_mean
            ratio = torch.exp(log_ratio.clamp(max=largest_ratio))
            corrected = log_mean + torch.log1p(-ratio) - value(math.log1p(-tau_plus))
            corrects = (log_ratio < largest_ratio).logical_and_(corrected >= value(floor))
            debiased = torch.where(corrects, corrected, value(floor))
            inverse = ratio.neg_().add_(value(1.0)).reciprocal_()
            mean_slope, positive_slope = torch.where(corrects, inverse, value(0.0)), torch.where(corrects, inverse, value(1.0))
        exponent = log_count(num_negatives, log_mean.dtype, log_mean.device) + debiased - positive_logits
        ctx.save_for_backward(exponent, mean_slope, positive_slope)
        return F.softplus(exponent)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, gradient: Tensor) -> tuple[Tensor, Tensor, None, None, None]:
        exponent, mean_slope, positive_slope = ctx.saved_tensors
        outer = torch.sigmoid(exponent).mul_(gradient)
        mean_gradient = outer if mean_slope is None else outer * mean_slope
        positive_gradient = -outer if positive_slope is None else outer.mul_(positive_slope).neg_()
        return mean_gradient, positive_gradient, None, None, None


def nce_terms(log_mean: Tensor, positive_logits: Tensor, num_negatives: int | Tensor, tau_plus: float | None, floor: float) -> Tensor:
    """(n,) :class:`NceTerms` for ``M = num_negatives`` (a number, or a 0-d count on the device): debiased with ``tau_plus`` and ``floor`` (``-1/t``), or plain when
    ``tau_plus`` is None."""
    return NceTerms.apply(log_mean, positive_logits, num_negatives, tau_plus, floor)
