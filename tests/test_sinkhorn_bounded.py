"""The device's Sinkhorn on bounded costs (``hcl_cli.objectives.ot._bounded_scaling_rounds``): image views are unit vectors,
so their costs lie in [0, 4] and at the image presets' epsilons the kernel cannot underflow: the device runs POT's scaling
rounds (two matrix-vector products a round) instead of the log-domain ones, with the same stop, decided on the device."""

from __future__ import annotations

import math

import numpy as np
import ot as pot
import pytest
import torch
import torch.nn.functional as F

from hcl_cli.objectives import contrastive_loss
from hcl_cli.objectives import ot as ot_module
from hcl_cli.objectives.ot import device_path_on_cpu, sinkhorn_log_coupling


def unit_cost(seed: int, n: int = 32, dim: int = 16, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """The in-batch cost of ``n`` unit views (``2 - 2 z.z``, in [0, 4]) and its forbidden entries (self and partner)."""
    generator = torch.Generator().manual_seed(seed)
    z = F.normalize(torch.randn(n, dim, generator=generator, dtype=dtype), dim=1)
    forbidden = torch.eye(n, dtype=torch.bool) | torch.eye(n, dtype=torch.bool).roll(n // 2, dims=1)
    return (2 - 2 * z @ z.T).clamp(min=0), forbidden


@pytest.mark.parametrize("epsilon", [0.2, 0.5, 1.0])
@pytest.mark.parametrize("rounds", [1, 3, 1000])
def test_the_bounded_rounds_are_pot_s_sinkhorn_after_as_many_iterations(epsilon: float, rounds: int) -> None:
    """Before the stop holds, the coupling after k rounds is POT's ot.sinkhorn after k iterations to float64 rounding; once
    settled (the row potentials moving by under 1.5e-8), POT's after all 1000 to 1e-6."""
    cost, forbidden = unit_cost(3, dtype=torch.float64)
    with device_path_on_cpu():
        coupling = sinkhorn_log_coupling(cost.masked_fill(forbidden, math.inf), epsilon, rounds, span=4.0).exp()
    marginal = np.full(32, 1 / 32)
    expected = pot.sinkhorn(
        marginal, marginal, cost.masked_fill(forbidden, 1e4).numpy(), epsilon, numItermax=rounds, stopThr=0.0, warn=False
    )
    np.testing.assert_allclose(coupling.numpy(), expected, rtol=1e-10 if rounds < 4 else 1e-6, atol=1e-15)
    assert coupling[forbidden].max() == 0


@pytest.mark.parametrize("queued", [False, True], ids=["in-batch", "queue-columns"])
def test_the_bounded_rounds_give_the_cpu_path_s_coupling_to_float32_rounding(queued: bool) -> None:
    """Against the CPU's stabilised rounds, in float32, with a queue's absent columns too: q = n P to 1e-5, no mass on
    +inf costs or absent columns, and rows summing to 1/n (what the loss's zero log-normaliser relies on)."""
    cost, forbidden = unit_cost(4)
    columns = None
    if queued:
        queue = F.normalize(torch.randn(8, 16, generator=torch.Generator().manual_seed(5)), dim=1)
        z = F.normalize(torch.randn(32, 16, generator=torch.Generator().manual_seed(4)), dim=1)
        cost = torch.cat([cost, (2 - 2 * z @ queue.T).clamp(min=0)], dim=1)
        forbidden = torch.cat([forbidden, torch.zeros(32, 8, dtype=torch.bool)], dim=1)
        columns = torch.ones(40, dtype=torch.bool)
        columns[[33, 38]] = False
        forbidden = forbidden | ~columns
    cost = cost.masked_fill(forbidden, math.inf)
    cpu = sinkhorn_log_coupling(cost, 0.5, 1000, columns).exp()
    with device_path_on_cpu():
        device = sinkhorn_log_coupling(cost, 0.5, 1000, columns, span=4.0).exp()
    torch.testing.assert_close(device * 32, cpu * 32, rtol=0, atol=1e-5)
    assert device[forbidden].max() == 0 and torch.isfinite(device).all()
    torch.testing.assert_close(device.sum(1) * 32, torch.ones(32), rtol=0, atol=1e-6)


def test_the_bounded_rounds_end_early_once_settled_as_running_every_round_would(
    monkeypatch: pytest.MonkeyPatch, host_reads: list[object]
) -> None:
    """Rounds after the stopping test holds keep u and v: ending at the first read after it (every ``SETTLED_READ_EVERY``
    rounds) gives the coupling of all 1000 rounds bit for bit, and no read happens within the image presets' 50."""
    cost, forbidden = unit_cost(21)
    cost = cost.masked_fill(forbidden, math.inf)
    reads = host_reads
    every = ot_module.SETTLED_READ_EVERY
    with device_path_on_cpu():
        early = sinkhorn_log_coupling(cost, 0.5, 1000, span=4.0)
        assert 0 < len(reads) < 1000 // every, "it settled and ended early"
        reads.clear()
        sinkhorn_log_coupling(cost, 0.5, every, span=4.0)
        assert reads == [], "no read within the image presets' rounds"
        monkeypatch.setattr(ot_module, "SETTLED_READ_EVERY", 10**9)
        assert torch.equal(sinkhorn_log_coupling(cost, 0.5, 1000, span=4.0), early)


def test_costs_that_span_too_many_epsilons_keep_the_log_domain_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """span / epsilon over ``BOUNDED_SPAN`` (4 / 0.05 = 80 in float32), or no span (nodes and graphs): the log-domain rounds."""
    cost, forbidden = unit_cost(6)
    cost = cost.masked_fill(forbidden, math.inf)
    taken = []
    bounded = ot_module._bounded_scaling_rounds
    monkeypatch.setattr(ot_module, "_bounded_scaling_rounds", lambda *args: taken.append(args[1]) or bounded(*args))
    with device_path_on_cpu():
        for epsilon, span in ((0.05, 4.0), (0.5, None), (0.5, 4.0), (0.2, 4.0)):
            sinkhorn_log_coupling(cost, epsilon, 10, span=span)
    assert taken == [0.5, 0.2]


def test_the_ot_loss_on_the_device_path_is_the_cpu_path_s() -> None:
    """The ot sampler on unit views: the device path's loss and gradients are the CPU path's to float32 rounding."""
    generator = torch.Generator().manual_seed(9)
    z1, z2 = (torch.randn(16, 8, generator=generator) for _ in range(2))
    results = []
    for on_device in (False, True):
        inputs = (z1.clone().requires_grad_(), z2.clone().requires_grad_())
        with device_path_on_cpu(on_device):
            loss = contrastive_loss(*inputs, sampler="ot", temperature=0.5, ot_epsilon=0.5, ot_iterations=1000)
        results.append((loss, torch.autograd.grad(loss, inputs)))
    (cpu_loss, cpu_grads), (device_loss, device_grads) = results
    torch.testing.assert_close(device_loss, cpu_loss, rtol=1e-5, atol=1e-6)
    for device_grad, cpu_grad in zip(device_grads, cpu_grads, strict=True):
        torch.testing.assert_close(device_grad, cpu_grad, rtol=1e-4, atol=1e-6)
