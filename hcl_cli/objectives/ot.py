"""Hard negatives by entropic optimal transport, HCL-OT (Jiang et al., "Hard negative sampling via
regularized optimal transport for contrastive representation learning", IJCNN 2023).

The negative distribution is the coupling P of the batch with itself that solves Eq. (5) with
phi = KL (entropic OT), uniform marginals 1/(2B), ground cost ``C_ij = ||z_i - z_j||^2`` (or, with
``ot_cost="exp"``, Sec. VII-C's ``exp(||z_i - z_j||^2 - kappa)``, ``ot_kappa`` = 1 by default as in
the official code) and ``C = +inf`` on self and partner (the "non self-coupling" property). By
Lemma 3 it is ``P ~ exp((u_i + v_j - C_ij) / eps)``, found with log-domain Sinkhorn iterations on
detached embeddings (no gradient flows through P). Each anchor's negative distribution is its row,
``q(j|i) = 2B P_ij``, and the loss is Eq. (8) with HCL's tau+ debiasing and clamp
(``objective="nce"``: ``Ng_i = N sum_j q_ij exp(s_ij)``), or the basic contrastive loss of Eq.
(9), ``E_q[z_i.z_j] - z_i.z_p`` (``objective="bcl"``; tau+ does not apply). As ``eps -> inf``, q
becomes uniform over the N negatives and ``ot`` becomes ``debiased``.

With a momentum encoder's queue (MoCo), P couples the 2B anchors (marginal 1/(2B)) with the
2B + K candidates, the batch's keys and the queue (marginal 1/(2B + K)), under the same cost, with
+inf on each anchor's own key and its partner's: the coupling between the batch and the queue
that Eq. (5) asks for once the negatives are drawn from both. Still ``q(j|i) = 2B P_ij``; with
K = 0 and the batch as its own candidates it is the coupling above.

The cost has no factor 0.5: it is the official code's ``sum(|x - y|^2)``, and ``ot_epsilon`` is
the code's ``reg``. Eq. (5) writes the cost as ``c = 0.5 ||f(x) - f(x-)||^2``, and
``exp(-0.5 ||.||^2 / eps_paper) = exp(-||.||^2 / (2 eps_paper))``, so the paper's epsilon is half
of ours: ``ot_epsilon = 2 eps_paper``. The exp cost of Sec. VII-C has no 0.5 in the paper
either, so with ``ot_cost="exp"`` the two epsilons are the same.

On nodes against graphs (InfoGraph, HCL-OT Sec. VII-B: the HCL graph code with its negative
distribution replaced), P couples the n nodes (marginal 1/n) with the G graphs of the batch
(marginal 1/G), ``+inf`` on each node's own graph, and ``q(j|i) = n P_ij``. The embeddings are
not normalised; the ``sq`` cost ``||l_i - g_j||^2 = |l_i|^2 + |g_j|^2 - 2 s_ij`` gives the same
coupling as ``-2 s_ij`` (terms of one row or one column are absorbed by the potentials), so the
coupling depends on the node-to-graph scores only, and Sinkhorn is given ``-2 s_ij``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, ScoreBatch
from hcl_cli.objectives.sampler_options import SamplerOptions

Reduction = Callable[[Tensor], Tensor]


class KernelProducts:
    """Sinkhorn's two log-domain reductions of the kernel ``log K`` as matrix-vector products.

    ``rows(g)_i = log sum_j exp(log K_ij + g_j)`` is computed as
    ``m_i + max(g) + log(sum_j exp(log K_ij - m_i) exp(g_j - max(g)))`` with ``m_i = max_j log K_ij``
    (and ``columns(f)`` likewise): the kernel, scaled to a largest entry of 1 per row (column), is
    exponentiated once, so an iteration costs a product with a vector instead of an exponential
    over the whole matrix. The values equal ``logsumexp``'s unless a sum gets so small that the
    entries lost to underflow (each below the dtype's ``tiny``) could matter;
    :meth:`lost_precision` reports that, and the caller then redoes the work with ``logsumexp``.
    """

    def __init__(self, log_kernel: Tensor) -> None:
        self.row_shift = log_kernel.amax(dim=1)
        self.column_shift = log_kernel.amax(dim=0)
        self.row_kernel = torch.exp(log_kernel - self.row_shift[:, None])
        self.column_kernel = torch.exp(log_kernel - self.column_shift[None, :]).T
        info = torch.finfo(log_kernel.dtype)
        self.smallest_safe_sum = max(log_kernel.shape) * info.tiny / info.eps
        self.smallest_sum = torch.tensor(math.inf, dtype=log_kernel.dtype, device=log_kernel.device)

    def rows(self, potential: Tensor) -> Tensor:
        return self._reduce(self.row_kernel, self.row_shift, potential)

    def columns(self, potential: Tensor) -> Tensor:
        return self._reduce(self.column_kernel, self.column_shift, potential)

    def lost_precision(self) -> bool:
        """Whether some sum was small enough for underflowed entries to exceed one rounding error (or was NaN)."""
        return not bool(self.smallest_sum >= self.smallest_safe_sum)

    def _reduce(self, kernel: Tensor, shift: Tensor, potential: Tensor) -> Tensor:
        top = potential.max()
        sums = kernel @ torch.exp(potential - top)
        self.smallest_sum = torch.minimum(self.smallest_sum, sums.min())
        return shift + top + torch.log(sums)


def sinkhorn_log_coupling(cost: Tensor, epsilon: float, iterations: int) -> Tensor:
    """log P of the entropic OT coupling between the uniform distributions over the n rows and the m columns of ``cost``.

    Sinkhorn-Knopp (Cuturi 2013) in the log domain: at most ``iterations`` rounds of the column
    update then the row update, the order of POT's ``ot.sinkhorn``, so the rows sum to exactly 1/n
    and the columns to 1/m up to the convergence error. It stops early once a round changes the
    row potentials by less than the square root of the machine epsilon (3e-4 in float32, 1.5e-8
    in float64), i.e. once the marginals hold to that relative error; float32 rounding keeps the
    potentials from settling much below ~1e-5. The reductions are :class:`KernelProducts`, or
    plain ``logsumexp`` when those would lose precision (a kernel of very wide dynamic range, e.g.
    a tiny ``epsilon``). ``+inf`` costs get zero mass.
    """
    log_kernel = -cost / epsilon
    products = KernelProducts(log_kernel)
    log_coupling = sinkhorn_iterations(log_kernel, products.rows, products.columns, iterations)
    if products.lost_precision():
        log_coupling = sinkhorn_iterations(
            log_kernel,
            lambda potential: torch.logsumexp(log_kernel + potential[None, :], dim=1),
            lambda potential: torch.logsumexp(log_kernel + potential[:, None], dim=0),
            iterations,
        )
    return log_coupling


def sinkhorn_iterations(log_kernel: Tensor, reduce_rows: Reduction, reduce_columns: Reduction, iterations: int) -> Tensor:
    """The log-domain Sinkhorn loop of :func:`sinkhorn_log_coupling` with the given reductions."""
    rows, columns = log_kernel.shape
    log_row_marginal, log_column_marginal = -math.log(rows), -math.log(columns)
    tolerance = math.sqrt(torch.finfo(log_kernel.dtype).eps)
    row_potential = torch.zeros(rows, dtype=log_kernel.dtype, device=log_kernel.device)
    for _ in range(iterations):
        column_potential = log_column_marginal - reduce_columns(row_potential)
        updated = log_row_marginal - reduce_rows(column_potential)
        change = (updated - row_potential).abs().max()
        row_potential = updated
        if change < tolerance:
            break
    return log_kernel + row_potential[:, None] + column_potential[None, :]


def transport_cost(batch: ScoreBatch, options: SamplerOptions) -> Tensor:
    """(n, m) ground cost between the detached anchors and candidates, ``+inf`` off the negatives (self and partner; a node's own graph).

    The exp cost of Sec. VII-C needs distances of unit vectors (at most 4): on unnormalised
    embeddings (nodes and graphs) ``exp(||a - c||^2)`` overflows, so it is refused there.
    """
    if options.ot_cost == "exp" and not batch.unit:
        raise UsageError("--ot-cost exp needs unit embeddings (image views); nodes and graphs are not normalised: use --ot-cost sq")
    squared_distance = batch.squared_distances()
    cost = squared_distance if options.ot_cost == "sq" else torch.exp(squared_distance - options.ot_kappa)
    return cost.masked_fill(~batch.masks.negatives, math.inf)


@torch.no_grad()
def ot(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """q(j|i) = n P_ij from the entropic OT coupling of the n anchors with their candidates (n = 2B; the batch itself in-batch)."""
    log_coupling = sinkhorn_log_coupling(transport_cost(batch, options), options.ot_epsilon, options.ot_iterations)
    return NegativeWeights(log_coupling + math.log(batch.num_anchors), debiased=True)
