"""Hard negatives by entropic optimal transport, HCL-OT (Jiang et al., "Hard negative sampling via
regularized optimal transport for contrastive representation learning", IJCNN 2023).

The negative distribution is the coupling P of the batch with itself that solves Eq. (5) with
phi = KL (entropic OT), uniform marginals 1/(2B), ground cost ``C_ij = ||z_i - z_j||^2`` (or, with
``ot_cost="exp"``, Sec. VII-C's ``exp(||z_i - z_j||^2 - kappa)``, ``ot_kappa`` = 1 by default as in
the official code) and ``C = +inf`` on self and partner (the "non self-coupling" property). By
Lemma 3 it is ``P ~ exp((u_i + v_j - C_ij) / eps)``, found with Sinkhorn iterations on
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

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import NegativeWeights, ScoreBatch
from hcl_cli.objectives.kernels import log_count
from hcl_cli.objectives.sampler_options import SamplerOptions

DEVICE_PATH_ON_CPU = False
"""True: :func:`sinkhorn_log_coupling` runs its device path (log-domain rounds, the stop read every
:data:`SETTLED_READ_EVERY` rounds) on a CPU cost too. It is there to count the device path: the step counts
(benchmarks/step_counts.py), which count a GPU step's ops and syncs on a CPU, set it, and the tests that hold that path
on a CPU."""


@contextlib.contextmanager
def device_path_on_cpu(enabled: bool = True) -> Iterator[None]:
    """Set :data:`DEVICE_PATH_ON_CPU` to ``enabled`` for the block (the step counts, the Sinkhorn benchmark); restored after."""
    global DEVICE_PATH_ON_CPU
    before, DEVICE_PATH_ON_CPU = DEVICE_PATH_ON_CPU, enabled
    try:
        yield
    finally:
        DEVICE_PATH_ON_CPU = before


def sinkhorn_log_coupling(
    cost: Tensor, epsilon: float, iterations: int, columns: Tensor | None = None, span: float | None = None
) -> Tensor:
    """log P of the entropic OT coupling between the uniform distributions over the n rows and the m columns of ``cost``.

    Sinkhorn-Knopp (Cuturi 2013): at most ``iterations`` rounds of the column update then the row
    update, the order of POT's ``ot.sinkhorn``, from the row potential 0, so the rows sum to exactly
    1/n and the columns to 1/m up to the convergence error, and the coupling after k rounds is POT's
    ``sinkhorn_log`` after k iterations (``stopThr=0``) to rounding, at any ``epsilon`` and range of
    costs. It stops once a round changes the row potentials by less than the square root of the
    machine epsilon (3e-4 in float32, 1.5e-8 in float64), i.e. once the marginals hold to that
    relative error; float32 rounding keeps the potentials from settling much below ~1e-5. ``+inf``
    costs get zero mass. ``columns`` (m,) bool, where given, says which columns exist (the others'
    costs +inf, as :func:`transport_cost` makes them): the coupling is then the one with the others'
    columns removed (the column marginal spread over those alone), with zero mass in the others.

    The path is chosen by the cost's device. On a CPU, eager, a host read costs nothing (there is
    no device queue to stall), so the rounds are scaling iterations against a kernel stabilised by
    absorbed potentials (:class:`StabilisedKernel`), two matrix-vector products a round, and the
    stop is read every round. On a GPU, or while compiling, a read would stall the device (or break
    the graph), so the rounds are log-domain updates of log P itself (:func:`_sinkhorn_rounds`),
    two ``logsumexp`` passes over the matrix a round, with the stop decided on the device: a round
    after it adds exact zeros, and the host reads the decision only every :data:`SETTLED_READ_EVERY`
    rounds to end the loop early (:data:`DEVICE_PATH_ON_CPU` runs this path on a CPU too). Kernel
    entries below ``tiny`` count as zero, so the rounds run with subnormals flushed
    (:func:`subnormals_flushed`) and exponentiate by :func:`exp_flushed`. Where the caller bounds the finite costs,
    ``0 <= C_ij <= span`` (unit embeddings: :func:`cost_span`), and ``span / epsilon`` is at most
    :data:`BOUNDED_SPAN`, no entry of the kernel can underflow nor a scaling overflow, and the device runs plain
    scaling rounds instead (:func:`_bounded_scaling_rounds`: POT's ``ot.sinkhorn``, two matrix-vector products a round),
    with the same stop.
    """
    bounded = span is not None and span / epsilon <= BOUNDED_SPAN[cost.dtype]
    device_rounds = _bounded_scaling_rounds if bounded else _sinkhorn_rounds
    if torch.compiler.is_compiling():  # dynamo cannot trace set_flush_denormal (a graph break); exp_flushed zeroes the same
        return device_rounds(cost, epsilon, iterations, columns)
    with subnormals_flushed():
        if cost.device.type == "cpu" and not DEVICE_PATH_ON_CPU:
            return _scaling_rounds(cost, epsilon, iterations, columns)
        return device_rounds(cost, epsilon, iterations, columns)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Flush subnormal floats to zero on the CPU for the block, then restore the default.

    At small ``epsilon`` most kernel entries underflow into the subnormal range, where every
    multiply costs the CPU a microcode assist, so the sums of a round slow down many times over
    (benchmarks/results/ot_subnormals.json). An entry below ``tiny`` is below float resolution
    next to a row's or column's largest entry, which is 1 in every ``logsumexp``.
    """
    flushing = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if flushing:
            torch.set_flush_denormal(False)


def exp_flushed(exponent: Tensor) -> Tensor:
    """``exp(exponent)`` with every value below the dtype's ``tiny`` set to zero, as flushing subnormals does.

    The CPU's vectorised exp takes a slow path for every lane whose result underflows (per element,
    many times a normal result's time: benchmarks/results/ot_subnormals.json, ``exp``), and at small
    epsilon almost every kernel entry underflows: the exponents whose exp is below ``tiny`` are set
    to ``-inf`` first (exp's fast path gives it zero), in one thresholding pass. With subnormals flushed this is ``torch.exp`` as every later
    operation reads it (a subnormal result reads as zero); without, it drops the subnormal results,
    below the dtype's resolution of a sum whose largest term is 1. NaN stays NaN.
    """
    return F.threshold(exponent, _UNDERFLOWING_EXPONENT[exponent.dtype], -math.inf).exp_()


def logsumexp_flushed(values: Tensor, dim: int) -> Tensor:
    """``torch.logsumexp(values, dim)`` computed as torch does (the maximum taken out, an infinite maximum read as 0), with :func:`exp_flushed`."""
    largest = values.amax(dim=dim, keepdim=True)
    largest = largest.masked_fill(largest.abs() == math.inf, 0.0)
    return exp_flushed(values - largest).sum(dim=dim).log_().add_(largest.squeeze(dim))


def _largest_underflowing_exponent(dtype: torch.dtype) -> float:
    """The largest x of ``dtype`` whose exp is below the dtype's ``tiny`` (subnormal or zero)."""
    tiny = torch.finfo(dtype).tiny
    exponent = torch.tensor(math.log(tiny), dtype=dtype)
    while torch.exp(exponent) < tiny:
        exponent = torch.nextafter(exponent, torch.tensor(0.0, dtype=dtype))
    return float(torch.nextafter(exponent, torch.tensor(-math.inf, dtype=dtype)))


_UNDERFLOWING_EXPONENT = {
    dtype: _largest_underflowing_exponent(dtype) for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
}


SETTLED_READ_EVERY = 50
"""Rounds between the host's reads of Sinkhorn's stopping test: none within the image presets' 50 rounds; a graph
preset's 1000 end within 50 rounds of settling. A compiled step never reads it (a read would break its graph)."""


def _sinkhorn_rounds(cost: Tensor, epsilon: float, iterations: int, columns: Tensor | None) -> Tensor:
    """The device path of :func:`sinkhorn_log_coupling`: the rounds move ``log P = log K + f + g`` itself by each update of the
    potentials, whose steps shrink as it converges, so the entries that carry mass stay near ``log(1/(n m))``, where
    float32 resolves them finely, rather than being sums of potentials of hundreds (a log-kernel spanning e^600)."""
    log_coupling = -cost / epsilon
    rows = log_coupling.shape[0]
    zero = torch.zeros((), dtype=cost.dtype, device=cost.device)
    log_row_marginal = -math.log(rows)
    log_column_marginal = -math.log(log_coupling.shape[1]) if columns is None else -log_count(columns.sum(), cost.dtype, cost.device)
    settled = torch.zeros((), dtype=torch.bool, device=cost.device)
    tolerance = math.sqrt(torch.finfo(cost.dtype).eps)
    reads = not torch.compiler.is_compiling()
    for done in range(1, iterations + 1):
        column_step = log_column_marginal - logsumexp_flushed(log_coupling, dim=0)
        kept = settled if columns is None else settled | ~columns  # a column that does not exist keeps its -inf (not inf - inf)
        log_coupling = log_coupling + torch.where(kept, zero, column_step)[None, :]
        row_step = log_row_marginal - logsumexp_flushed(log_coupling, dim=1)
        log_coupling = log_coupling + torch.where(settled, zero, row_step)[:, None]
        settled = settled | (torch.linalg.vector_norm(row_step, math.inf) < tolerance)
        if reads and done % SETTLED_READ_EVERY == 0 and done < iterations and bool(settled):
            break  # the rounds left would add zeros
    return log_coupling


BOUNDED_SPAN = {dtype: 0.25 * -math.log(torch.finfo(dtype).tiny) for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}
"""The largest ``span / epsilon`` of :func:`_bounded_scaling_rounds` (21.8 in float32): the kernel's entries are then at least
``e^-S``, the scalings within ``e^{+-S}`` of the marginals' scale, and a coupling entry ``u_i K_ij v_j`` at least ``e^-3S``
of it, above the dtype's ``tiny``."""


def cost_span(squared_distance_bound: float, options: SamplerOptions) -> float:
    """The largest finite cost of ``options.ot_cost`` when squared distances are at most ``squared_distance_bound``."""
    return squared_distance_bound if options.ot_cost == "sq" else math.exp(squared_distance_bound - options.ot_kappa)


def _bounded_scaling_rounds(cost: Tensor, epsilon: float, iterations: int, columns: Tensor | None) -> Tensor:
    """The device path of :func:`sinkhorn_log_coupling` for costs in ``[0, span]`` with ``span / epsilon`` at most
    :data:`BOUNDED_SPAN`: the scaling rounds of Sinkhorn-Knopp on ``K = exp(-C / eps)`` as POT's ``ot.sinkhorn`` runs
    them, ``v = b / (K^T u)`` then ``u = a / (K v)`` from ``u = 1`` (the marginals folded into two copies of ``K``), the
    stop (the row potentials ``log u`` changing by less than the square root of the machine epsilon) decided on the
    device as :func:`_sinkhorn_rounds` decides it: a round after it keeps ``u`` and ``v``, and the host reads it every
    :data:`SETTLED_READ_EVERY` rounds. ``log P = log u + log K + log v``; a column that does not exist (a zero column of
    ``K``) gets the largest ``v_j`` (its sum kept at ``tiny``) and no mass."""
    log_kernel = -cost / epsilon
    kernel = log_kernel.exp()
    column_count = kernel.shape[1] if columns is None else columns.sum()
    by_rows, by_columns = kernel * kernel.shape[0], (kernel * column_count).T.contiguous()  # K / a and (K / b)^T
    tiny = torch.finfo(cost.dtype).tiny
    tolerance = torch.full((), math.sqrt(torch.finfo(cost.dtype).eps), dtype=cost.dtype, device=cost.device)  # no scalar copy a round
    row_scaling = torch.ones(kernel.shape[0], dtype=cost.dtype, device=cost.device)
    column_scaling = torch.ones(kernel.shape[1], dtype=cost.dtype, device=cost.device)
    settled = torch.zeros((), dtype=torch.bool, device=cost.device)
    reads = not torch.compiler.is_compiling()
    for done in range(1, iterations + 1):
        column_sums = torch.mv(by_columns, row_scaling)
        updated_columns = (column_sums if columns is None else column_sums.clamp_min_(tiny)).reciprocal_()
        updated_rows = torch.mv(by_rows, updated_columns).reciprocal_()
        change = torch.linalg.vector_norm(torch.div(updated_rows, row_scaling).log_(), math.inf)
        column_scaling = torch.where(settled, column_scaling, updated_columns)
        row_scaling = torch.where(settled, row_scaling, updated_rows)
        settled = settled | torch.lt(change, tolerance)
        if reads and done % SETTLED_READ_EVERY == 0 and done < iterations and bool(settled):
            break  # the rounds left would keep u and v
    return log_kernel + row_scaling.log()[:, None] + column_scaling.log()[None, :]


def _scaling_rounds(cost: Tensor, epsilon: float, iterations: int, columns: Tensor | None) -> Tensor:
    """The CPU path of :func:`sinkhorn_log_coupling`: :class:`StabilisedKernel`'s rounds on the columns that exist, the stop
    read every round."""
    if columns is not None:
        log_coupling = torch.full_like(cost, -math.inf)
        log_coupling[:, columns] = _scaling_rounds(cost[:, columns], epsilon, iterations, None)
        return log_coupling
    kernel = StabilisedKernel(-cost / epsilon)
    tolerance = math.sqrt(torch.finfo(cost.dtype).eps)
    row_potential = torch.zeros(cost.shape[0], dtype=cost.dtype, device=cost.device)
    for _ in range(iterations):
        kernel.update_columns()
        updated = kernel.update_rows()
        change = torch.linalg.vector_norm(updated - row_potential, math.inf)
        row_potential = updated
        if change < tolerance:
            break
    return kernel.log_coupling()


class StabilisedKernel:
    """Sinkhorn's state as absorbed potentials ``f``, ``g`` and scalings ``u``, ``v`` (Schmitzer 2019, "Stabilized sparse
    scaling algorithms for entropy regularized transport problems", Alg. 2).

    The log potentials of the iteration are ``f + log u`` (rows) and ``g + log v`` (columns); the
    kernel ``K_ij = exp(E_ij)``, ``E = log K + f + g``, is kept exponentiated, so an update is a
    product with a vector: ``v = b / (K^T u)``, ``u = a / (K v)``, the log-domain updates
    ``g + log v = log b - logsumexp_i(log K_ij + f_i + log u_i)`` (and the rows' likewise) exactly.

    Exactness: entries of K below the dtype's ``tiny`` are lost, at most ``n tiny e^tau`` per sum
    while the other side's scaling is at most ``e^tau``; a new scaling within ``e^{+-tau}`` means
    its sums are at least ``marginal e^-tau``, so the relative error is at most
    ``n m tiny e^{2 tau}``, which :attr:`bound` keeps below the machine epsilon (tau ~ 27 in
    float32, ~330 in float64). A scaling past the bound (or not finite, as when ``epsilon`` is tiny
    or the costs span thousands of epsilons and one update moves the potentials that far) is
    recomputed by ``logsumexp`` in the log domain and absorbed into its potential, and the kernel
    is rebuilt around the new potentials: then its entries are at most 1 again.

    ``f``, ``g`` and ``log K`` (the cost's dtype's ``-C / eps``, as the device path starts from) are
    kept in float64 and ``E`` rounded once to the cost's dtype: potentials of 1e5 (graph costs at
    epsilon 0.05) would round every ``E_ij`` by float32's ulp there, 0.008, a relative error of
    the coupling's entries and its row sums nearly as large. ``E_ij`` that carry mass are within a
    few ``tau`` of ``log(1/(n m))``, where the cost's dtype resolves them finely.
    """

    def __init__(self, log_kernel: Tensor) -> None:
        self.kernel_dtype = log_kernel.dtype
        self.log_kernel = log_kernel.double()
        rows, columns = log_kernel.shape
        info = torch.finfo(log_kernel.dtype)
        self.bound = 0.5 * (math.log(info.eps) - math.log(rows * columns) - math.log(info.tiny))
        self.log_row_marginal, self.log_column_marginal = -math.log(rows), -math.log(columns)
        self.f = torch.zeros(rows, dtype=torch.float64, device=log_kernel.device)
        largest = self.log_kernel.amax(dim=0)
        self.g = -torch.where(torch.isfinite(largest), largest, 0.0)
        """The start: column maxima absorbed (any g is; POT's first update reads only u = 1), so K's entries are at most 1."""
        self.rebuild()

    def update_columns(self) -> None:
        """``v = b / (K^T u)``; by ``logsumexp``, absorbed, where that leaves the bound."""
        log_u = self.u.log()
        log_v = self.log_column_marginal - torch.log(self.u @ self.kernel)
        if not bool(torch.linalg.vector_norm(log_v, math.inf) <= self.bound):
            self.f = self.f + log_u
            self.g = self.g + (self.log_column_marginal - logsumexp_flushed(self.exponent + log_u[:, None], dim=0))
            self.rebuild()
            return
        self.v = log_v.exp()

    def update_rows(self) -> Tensor:
        """``u = a / (K v)``; by ``logsumexp``, absorbed, where that leaves the bound. Returns the row potentials ``f + log u``."""
        log_v = self.v.log()
        log_u = self.log_row_marginal - torch.log(self.kernel @ self.v)
        if not bool(torch.linalg.vector_norm(log_u, math.inf) <= self.bound):
            self.g = self.g + log_v
            self.f = self.f + (self.log_row_marginal - logsumexp_flushed(self.exponent + log_v[None, :], dim=1))
            self.rebuild()
            return self.f
        self.u = log_u.exp()
        return self.f + log_u

    def rebuild(self) -> None:
        """Exponentiate the kernel around the current potentials; the scalings start again at 1."""
        self.exponent = torch.add(self.log_kernel, self.f[:, None]).add_(self.g[None, :]).to(self.kernel_dtype)
        self.kernel = exp_flushed(self.exponent)
        self.u = torch.ones(self.f.shape, dtype=self.kernel_dtype, device=self.f.device)
        self.v = torch.ones(self.g.shape, dtype=self.kernel_dtype, device=self.g.device)

    def log_coupling(self) -> Tensor:
        """log P = E + log u + log v: the kernel's own rounded exponent, so the rows sum to the marginal as the last ``K v``
        does (entries below ``tiny`` keep their value)."""
        return self.exponent + self.u.log()[:, None] + self.v.log()[None, :]


def transport_cost(batch: ScoreBatch, options: SamplerOptions) -> Tensor:
    """(n, m) ground cost between the detached anchors and candidates, ``+inf`` off the negatives (self and partner; a node's own graph).

    The exp cost of Sec. VII-C needs distances of unit vectors (at most 4): on unnormalised
    embeddings (nodes and graphs) ``exp(||a - c||^2)`` overflows, so it is refused there.
    """
    if options.ot_cost == "exp" and not batch.unit:
        raise UsageError("--ot-cost exp needs unit embeddings (image views); nodes and graphs are not normalised: use --ot-cost sq")
    squared_distance = batch.sq_cost()
    cost = squared_distance if options.ot_cost == "sq" else torch.exp(squared_distance - options.ot_kappa)
    return cost.masked_fill(~batch.masks.negatives, math.inf)


@torch.no_grad()
def ot(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """q(j|i) = n P_ij from the entropic OT coupling of the n anchors with their candidates (n = 2B; the batch itself in-batch).

    Sinkhorn ends on the row update, so every row of q sums to 1 to rounding: its ``log_normaliser`` is 0."""
    span = cost_span(4.0, options) if batch.unit else None  # unit vectors lie at squared distances of at most 4
    log_coupling = sinkhorn_log_coupling(
        transport_cost(batch, options), options.ot_epsilon, options.ot_iterations, batch.column_valid, span
    )
    rows_sum_to_one = torch.zeros(batch.num_anchors, dtype=log_coupling.dtype, device=log_coupling.device)
    return NegativeWeights(log_coupling + math.log(batch.num_anchors), debiased=True, log_normaliser=rows_sum_to_one)
