"""The loss's fast paths equal the plain computations they replace (values and gradients), never timing.

``row_logsumexp`` against ``torch.logsumexp``, ``unit_rows`` against ``F.normalize``, the ``nce`` terms' kernel against the
plain debiased expression; the tilted weights' one-step gradient (``TiltedLogMean``) against autograd through
the weights; H-SCL's supports and UnDiMix's parts against their plain (n, m) masks; the samplers'
known ``log_normaliser`` against the rows' ``logsumexp``; both paths of Sinkhorn (the CPU's stabilised scaling
rounds, the device's log-domain rounds) against POT's log-domain Sinkhorn (same number of iterations) at tiny
epsilon and on wide-range node-graph costs, with its marginals, and against each other.
"""

from __future__ import annotations

import math

import numpy as np
import ot as pot
import pytest
import torch

from hcl_cli.objectives.core import NegativeWeights, PairBatch, contrastive_objective
from hcl_cli.objectives.hscl import hscl_threshold
from hcl_cli.objectives.kernels import nce_terms, row_logsumexp, tilted_log_mean, unit_rows
from hcl_cli.objectives.ot import sinkhorn_log_coupling
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix import importance, min_max_over_negatives, symmetric_gram_product, undimix


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_logsumexp_equals_torch_logsumexp_with_gradient(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    matrix = 40 * torch.randn(30, 25, generator=generator, dtype=dtype)
    matrix = matrix.masked_fill(torch.rand(30, 25, generator=generator) < 0.6, -math.inf)
    matrix[:, 3] = torch.randn(30, generator=generator, dtype=dtype)
    matrix.requires_grad_()
    weights = torch.randn(30, generator=generator, dtype=dtype)
    fast, plain = row_logsumexp(matrix), torch.logsumexp(matrix, dim=1)
    torch.testing.assert_close(fast, plain)
    torch.testing.assert_close(torch.autograd.grad(fast, matrix, weights)[0], torch.autograd.grad(plain, matrix, weights)[0])
    with torch.no_grad():
        torch.testing.assert_close(row_logsumexp(matrix), plain.detach())


def test_unit_rows_are_f_normalize_with_gradient() -> None:
    """Rows of every length, a zero row and one below F.normalize's eps (where the norm is clamped) among them."""
    generator = torch.Generator().manual_seed(3)
    rows = torch.randn(7, 5, generator=generator, dtype=torch.float64) * torch.tensor([[1e-3], [1.0], [30.0], [0.0], [1e-14], [2.0], [1.0]])
    rows.requires_grad_()
    weights = torch.randn(7, 5, generator=generator, dtype=torch.float64)
    fast, plain = unit_rows(rows), torch.nn.functional.normalize(rows, dim=1)
    assert torch.equal(fast, plain)
    torch.testing.assert_close(torch.autograd.grad(fast, rows, weights)[0], torch.autograd.grad(plain, rows, weights)[0])


def plain_nce_terms(
    log_mean: torch.Tensor, positive: torch.Tensor, count: int, tau_plus: float | None, floor: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """HCL Eq. 4 with Fig. 13's clamp, in the log domain, as autograd runs it (what the kernel replaces): the terms and
    the debiased ``log E``."""
    if tau_plus is not None:
        if tau_plus > 0:
            largest_ratio = math.log1p(-torch.finfo(log_mean.dtype).eps)
            log_ratio = math.log(tau_plus) + positive - log_mean
            corrected = log_mean + torch.log1p(-torch.exp(log_ratio.clamp(max=largest_ratio))) - math.log1p(-tau_plus)
            log_mean = torch.where(log_ratio < largest_ratio, corrected, -math.inf)
        log_mean = log_mean.clamp(min=floor)
    return torch.nn.functional.softplus(math.log(count) + log_mean - positive), log_mean


@pytest.mark.parametrize("tau_plus", [None, 0.0, 0.1, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_nce_terms_kernel_is_the_plain_debiased_expression_with_gradient(tau_plus: float | None, dtype: torch.dtype) -> None:
    """Anchors on and off the floor, and some where tau+ exp(s_ip) exceeds E (no positive correction): same terms, same
    gradients in log E and s_ip."""
    generator = torch.Generator().manual_seed(4)
    log_mean = (2 * torch.randn(40, generator=generator, dtype=dtype)).requires_grad_()
    positive = (2 * torch.randn(40, generator=generator, dtype=dtype)).requires_grad_()
    weights = torch.rand(40, generator=generator, dtype=dtype)
    fast, (plain, debiased) = nce_terms(log_mean, positive, 126, tau_plus, -2.0), plain_nce_terms(log_mean, positive, 126, tau_plus, -2.0)
    assert torch.equal(fast, plain), "the forward is the plain expression, op for op"
    if tau_plus is not None:
        assert 0 < int((debiased == -2.0).sum()) < 40, "the case covers the floor and the correction"
    for fast_gradient, plain_gradient in zip(
        torch.autograd.grad(fast, (log_mean, positive), weights), torch.autograd.grad(plain, (log_mean, positive), weights)
    ):
        torch.testing.assert_close(fast_gradient, plain_gradient)


@pytest.mark.parametrize("through_weights", [True, False])
def test_tilted_log_mean_is_autograd_through_the_weights(through_weights: bool) -> None:
    """``lse(w + s) - lse(w)`` with ``w = tilt * s`` on a support: the same value, and the gradient of autograd through w."""
    generator = torch.Generator().manual_seed(12)
    logits = (3 * torch.randn(9, 11, generator=generator, dtype=torch.float64)).requires_grad_()
    support = torch.rand(9, 11, generator=generator) < 0.7
    support[:, 2] = True
    similarity = logits if through_weights else logits.detach()
    log_weights = (1.7 * similarity).masked_fill(~support, -math.inf)
    weights = torch.randn(9, generator=generator, dtype=torch.float64)
    fast = tilted_log_mean(log_weights, logits, 1.7)
    plain = torch.logsumexp(log_weights + logits, dim=1) - torch.logsumexp(log_weights, dim=1)
    torch.testing.assert_close(fast, plain)
    torch.testing.assert_close(
        torch.autograd.grad(fast, logits, weights, retain_graph=True)[0], torch.autograd.grad(plain, logits, weights)[0]
    )


@pytest.mark.parametrize("sampler", ["hucl", "hscl"])
@pytest.mark.parametrize("options", [{}, {"detach_weights": True}, {"beta": 0.0}, {"clip": True}, {"objective": "bcl"}])
@pytest.mark.parametrize("labels", [[0, 1, 2, 0, 1, 2, 0, 3], [1] * 8])
def test_tilted_weights_take_the_plain_objectives_value_and_gradient(sampler: str, options: dict, labels: list[int]) -> None:
    """hucl and hscl state their tilt; the objective gives what it gives the same weights without it (one label: placeholders)."""
    generator = torch.Generator().manual_seed(13)
    z1, z2 = (torch.randn(8, 5, generator=generator, dtype=torch.float64).requires_grad_() for _ in range(2))
    spec = lookup(sampler)
    resolved = SamplerOptions.resolve(spec, options)
    label_positives = spec.label_positives(resolved)
    batch = PairBatch(z1, z2, torch.tensor(labels) if label_positives else None, resolved.temperature)
    negatives = spec.load()(batch, resolved)
    assert (negatives.tilt is None) == bool(options.get("clip"))
    plain = NegativeWeights(negatives.log_weights, negatives.anchor_valid, negatives.debiased)
    kwargs = {"label_positives": label_positives, "tau_plus": resolved.tau_plus, "objective": resolved.objective}
    fast_loss, plain_loss = contrastive_objective(batch, negatives, **kwargs)[0], contrastive_objective(batch, plain, **kwargs)[0]
    torch.testing.assert_close(fast_loss, plain_loss)
    for fast, slow in zip(torch.autograd.grad(fast_loss, (z1, z2), retain_graph=True), torch.autograd.grad(plain_loss, (z1, z2))):
        torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("threshold", [-1.0, 0.0, 0.3, 1.0])
def test_hscl_threshold_support_is_the_plain_mask(threshold: float) -> None:
    """Different labels with cosine >= l, all different labels where none reaches l, uniform over them (its log_normaliser)."""
    generator = torch.Generator().manual_seed(14)
    z1, z2 = (torch.randn(10, 4, generator=generator, dtype=torch.float64) for _ in range(2))
    labels = torch.randint(0, 3, (10,), generator=generator)
    batch = PairBatch(z1, z2, labels, 0.5)
    negatives = hscl_threshold(batch, SamplerOptions.resolve(lookup("hscl-threshold"), {"threshold": threshold}))
    different = batch.labels[:, None] != batch.labels[None, :]
    hard = different & (batch.cosine >= threshold)
    support = torch.where(hard.any(dim=1, keepdim=True), hard, different)
    assert torch.equal(negatives.log_weights == 0, support) and torch.equal(negatives.log_weights == -math.inf, ~support)
    torch.testing.assert_close(negatives.log_normaliser, torch.logsumexp(negatives.log_weights, dim=1))


def test_undimix_parts_equal_their_plain_masked_forms() -> None:
    """The symmetric Gram product, the min-max over the negatives, and the in-place log of fixed weights equal the
    plain (n, m) computations (the learned weights' guarded log at the same mixing weights)."""
    generator = torch.Generator().manual_seed(15)
    first, second = (
        torch.randn(12, 3, generator=generator, dtype=torch.float64),
        torch.randn(12, 7, generator=generator, dtype=torch.float64),
    )
    torch.testing.assert_close(symmetric_gram_product(first, second), (first @ first.T) * (second @ second.T))
    z1, z2, h1, h2 = (torch.randn(6, 4, generator=generator, dtype=torch.float64) for _ in range(4))
    batch = PairBatch(z1, z2, None, 0.5)
    scores, negatives = torch.randn(12, 12, generator=generator, dtype=torch.float64), batch.masks.negatives
    low = torch.where(negatives, scores, math.inf).amin(dim=1, keepdim=True)
    high = torch.where(negatives, scores, -math.inf).amax(dim=1, keepdim=True)
    scale, offset = min_max_over_negatives(scores.clone(), (torch.arange(12).repeat(2), torch.cat([torch.arange(12), batch.masks.partner])))
    torch.testing.assert_close(scale, 1 / (high - low))
    torch.testing.assert_close(offset, -low / (high - low))
    spec = lookup("undimix")
    fixed = SamplerOptions.resolve(spec, {"head_inputs": (h1, h2), "undimix_weights": "1,0,1"})
    learned = SamplerOptions.resolve(
        spec,
        {
            "head_inputs": (h1, h2),
            "undimix_weights": "1,0,1",
            "undimix_learned": True,
            "undimix_attention": torch.zeros(3, requires_grad=True),
        },
    )
    torch.testing.assert_close(undimix(batch, fixed).log_weights, undimix(batch, learned).log_weights.detach())
    assert (importance(batch, fixed)[~negatives] == 0).all()


@pytest.mark.parametrize("sampler", [name for name in SAMPLERS if name not in ("hucl", "hscl", "hscl-threshold")])
def test_known_log_normalisers_are_the_rows_logsumexp(sampler: str) -> None:
    """A sampler that states its rows' ``logsumexp`` states it right (float64, so only the statement can differ)."""
    generator = torch.Generator().manual_seed(2)
    z1, z2 = (torch.randn(6, 5, generator=generator, dtype=torch.float64) for _ in range(2))
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    spec = lookup(sampler)
    options = SamplerOptions.resolve(spec, {})
    if spec.head_inputs:
        options = options.with_inputs(head_inputs=tuple(torch.randn(6, 4, generator=generator, dtype=torch.float64) for _ in range(2)))
    batch = PairBatch(z1, z2, labels, options.temperature)
    negatives = spec.load()(batch, options)
    assert negatives.log_normaliser is not None
    torch.testing.assert_close(negatives.log_normaliser, torch.logsumexp(negatives.log_weights, dim=1).detach())


def node_graph_cost(nodes: int, graphs: int, scale: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``-2 l.g`` of unnormalised node and graph embeddings (scores up to about ``scale^2``), and each node's own graph."""
    generator = torch.Generator().manual_seed(seed)
    local = scale * torch.randn(nodes, 8, generator=generator, dtype=torch.float64) / math.sqrt(8)
    global_ = scale * torch.randn(graphs, 8, generator=generator, dtype=torch.float64) / math.sqrt(8)
    own = torch.arange(graphs).repeat_interleave(nodes // graphs)[:, None] == torch.arange(graphs)
    return -2 * local @ global_.T, own


@pytest.mark.parametrize("epsilon", [1e-3, 0.05, 0.5])
@pytest.mark.parametrize("iterations", [1, 3, 40])
def test_stabilised_sinkhorn_is_pot_log_domain_on_wide_range_costs(epsilon: float, iterations: int, sinkhorn_path: str) -> None:
    """Scores of ~+-30 at epsilon 1e-3: the log-kernel spans 1e5; still POT's sinkhorn_log after the same iterations."""
    cost, own = node_graph_cost(60, 6, 5.0, seed=3)
    nodes, graphs = cost.shape
    log_coupling = sinkhorn_log_coupling(cost.masked_fill(own, math.inf), epsilon, iterations)
    expected = pot.bregman.sinkhorn_log(
        np.full(nodes, 1 / nodes),
        np.full(graphs, 1 / graphs),
        cost.masked_fill(own, 1e9).numpy(),
        epsilon,
        numItermax=iterations,
        stopThr=0.0,
        warn=False,
    )
    np.testing.assert_allclose(log_coupling.exp().numpy(), expected, rtol=1e-9, atol=1e-15)
    torch.testing.assert_close(log_coupling.exp().sum(1) * nodes, torch.ones(nodes, dtype=torch.float64), rtol=1e-10, atol=0)
    assert log_coupling.exp()[own].max() == 0


def test_stabilised_sinkhorn_in_float32_is_pot_to_float32_rounding(sinkhorn_path: str) -> None:
    """float32 on a node-graph batch at epsilon 0.05 (scores of ~+-16, a log-kernel spanning e^600): POT's
    float64 log-domain coupling after the same 20 iterations, to float32 rounding; the rows sum to 1/n."""
    cost, own = node_graph_cost(120, 8, 4.0, seed=4)
    nodes, graphs = cost.shape
    coupling = sinkhorn_log_coupling(cost.float().masked_fill(own, math.inf), 0.05, 20).exp().double()
    expected = pot.bregman.sinkhorn_log(
        np.full(nodes, 1 / nodes),
        np.full(graphs, 1 / graphs),
        cost.masked_fill(own, 1e9).numpy(),
        0.05,
        numItermax=20,
        stopThr=0.0,
        warn=False,
    )
    # log P = log K + f + g with terms of ~640 in float32: 640 * 6e-8 ~ 4e-5 of rounding, relative, in every entry
    np.testing.assert_allclose(coupling.numpy() * nodes, expected * nodes, rtol=2e-4, atol=1e-6)
    torch.testing.assert_close(coupling.sum(1) * nodes, torch.ones(nodes, dtype=torch.float64), rtol=0, atol=2e-4)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("scale", [4.0, 20.0])
@pytest.mark.parametrize("epsilon", [0.05, 0.2, 1.0])
@pytest.mark.parametrize("queued", [False, True], ids=["all-columns", "columns-mask"])
def test_sinkhorn_s_cpu_and_device_paths_give_one_coupling_to_float32_rounding(
    scale: float, epsilon: float, queued: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 node-graph costs whose finite part spans up to 26,000 epsilons (scale 20 at epsilon 0.05), +inf on each
    node's own graph, and, with a batch queue's ``columns``, two graphs absent (+inf, as ``transport_cost`` makes them):
    the CPU's scaling rounds and the device's log-domain rounds (``DEVICE_PATH_ON_CPU``) give q = n P to 3e-4 in every
    entry (P to 3e-4 / n), zero mass on the +inf costs and on the absent columns."""
    from hcl_cli.objectives import ot

    cost, own = node_graph_cost(240, 12, scale, seed=5)
    nodes = cost.shape[0]
    cost = cost.float().masked_fill(own, math.inf)
    columns = None
    if queued:
        columns = torch.ones(12, dtype=torch.bool)
        columns[[3, 8]] = False
        cost = cost.masked_fill(~columns, math.inf)
    couplings = []
    for device_path in (False, True):
        monkeypatch.setattr(ot, "DEVICE_PATH_ON_CPU", device_path)
        couplings.append(sinkhorn_log_coupling(cost, epsilon, 300, columns).exp())
    cpu, device = couplings
    torch.testing.assert_close(cpu * nodes, device * nodes, rtol=0, atol=3e-4)
    assert cpu[cost == math.inf].max() == 0
    torch.testing.assert_close(cpu.sum(1) * nodes, torch.ones(nodes), rtol=0, atol=1e-5)
