"""The training steps' Adam is torch's fused Adam: a non-finite update is skipped on the device (parameters, moments and
step counts untouched, the next step as if the bad one never was), nothing is read back, and a checkpoint of any Adam
resumes it bitwise, fused."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from benchmarks.step_counts import host_syncs
from hcl_cli.optimizer import FusedAdam, fused_adam, update_where_finite


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))


def train(net: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int = 1) -> None:
    """``steps`` steps as the training steps take them (a plain ``step`` for an unfused Adam, which has no ``found_inf``)."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = net(torch.randn(8, 3, 6, 6, generator=generator)).square().mean()
        loss.backward()
        if isinstance(optimizer, FusedAdam):
            update_where_finite(optimizer, loss)
        else:
            optimizer.step()


def states_equal(first: dict, second: dict) -> bool:
    return first["state"].keys() == second["state"].keys() and all(
        torch.equal(first["state"][index][slot], second["state"][index][slot]) for index in first["state"] for slot in first["state"][index]
    )


def test_a_non_finite_loss_or_gradient_moves_nothing_and_the_next_step_goes_on() -> None:
    reference, net = small_net(), small_net()
    adam, optimizer = fused_adam(reference.parameters(), lr=1e-2), fused_adam(net.parameters(), lr=1e-2)
    train(reference, adam, 3)
    train(net, optimizer, 3)
    before, state = [p.clone() for p in net.parameters()], copy.deepcopy(optimizer.state_dict())
    for poison in ("loss", "gradient"):
        optimizer.zero_grad()
        loss = net(torch.randn(8, 3, 6, 6)).square().mean()
        loss = loss * (math.nan if poison == "loss" else 1.0)
        scale = math.inf if poison == "gradient" else 1.0
        hook = net[0].weight.register_hook(lambda grad, scale=scale: grad * scale)
        loss.backward()
        hook.remove()
        values = update_where_finite(optimizer, loss)
        assert not values[:2].isfinite().all()
        assert all(torch.equal(a, b) for a, b in zip(before, net.parameters())), poison
        assert states_equal(state, optimizer.state_dict()), f"{poison}: the moments and the step counts stay"
    train(reference, adam, 2, seed=5)
    train(net, optimizer, 2, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), net.parameters())), "as if the bad steps never were"


def test_a_finite_step_reports_the_loss_and_the_gradient_norm_and_reads_nothing_back() -> None:
    net = small_net()
    optimizer = fused_adam(net.parameters())
    train(net, optimizer, 1)
    optimizer.zero_grad()
    loss = net(torch.randn(8, 3, 6, 6)).square().mean()
    loss.backward()
    expected = torch.nn.utils.get_total_norm([p.grad.clone() for p in net.parameters()])
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        values = update_where_finite(optimizer, loss, torch.tensor(7))
    assert host_syncs(profiler.events()) == 0, "no host sync in the update (the CPU kernel's reads of its own scalars aside)"
    assert "aten::_fused_adam_" in {event.key for event in profiler.key_averages()}
    torch.testing.assert_close(values, torch.stack([loss.detach(), expected, torch.tensor(7.0)]))


def test_a_checkpoint_of_an_unfused_adam_resumes_bitwise_and_stays_fused() -> None:
    reference, net = small_net(), small_net()
    adam, optimizer = fused_adam(reference.parameters(), lr=1e-2), torch.optim.Adam(net.parameters(), lr=1e-2)
    train(reference, adam, 4)
    train(net, optimizer, 4)
    resumed_net = copy.deepcopy(reference)
    resumed = fused_adam(resumed_net.parameters(), lr=1e-2)
    resumed.load_state_dict(copy.deepcopy(adam.state_dict()))
    train(reference, adam, 3, seed=7)
    train(resumed_net, resumed, 3, seed=7)
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), resumed_net.parameters()))
    assert states_equal(adam.state_dict(), resumed.state_dict())
    resumed.load_state_dict(optimizer.state_dict())
    assert resumed.param_groups[0]["fused"] is True, "an unfused Adam's checkpoint leaves it fused"
