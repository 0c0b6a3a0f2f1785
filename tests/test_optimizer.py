"""FlatAdam is torch.optim.Adam (bitwise on a CPU), skips a non-finite update on the device, and reads and writes Adam's
checkpoints; its parameters and gradients stay views of its flat buffers through a deep copy."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from hcl_cli.optimizer import FlatAdam, update_where_finite


def small_net(channels_last: bool = False) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    return net.to(memory_format=torch.channels_last) if channels_last else net


def train(net: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int = 1) -> None:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad()
        net(torch.randn(8, 3, 6, 6, generator=generator)).square().mean().backward()
        optimizer.step()


def states_equal(first: dict, second: dict) -> bool:
    return first["state"].keys() == second["state"].keys() and all(
        torch.equal(first["state"][index][slot].float(), second["state"][index][slot].float())
        for index in first["state"]
        for slot in first["state"][index]
    )


@pytest.mark.parametrize("channels_last", [False, True])
def test_flat_adam_is_torch_adam_bitwise_on_a_cpu(channels_last: bool) -> None:
    reference, flat = small_net(channels_last), small_net(channels_last)
    adam = torch.optim.Adam(reference.parameters(), lr=1e-2, weight_decay=1e-3)
    flat_adam = FlatAdam(flat.parameters(), lr=1e-2, weight_decay=1e-3)
    train(reference, adam, 12)
    train(flat, flat_adam, 12)
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), flat.parameters()))
    assert all(a.stride() == b.stride() for a, b in zip(reference.parameters(), flat.parameters())), "channels_last stays"
    assert states_equal(adam.state_dict(), flat_adam.state_dict())


def test_a_non_finite_loss_or_gradient_moves_nothing_and_the_next_step_goes_on() -> None:
    reference, flat = small_net(), small_net()
    adam, flat_adam = torch.optim.Adam(reference.parameters(), lr=1e-2), FlatAdam(flat.parameters(), lr=1e-2)
    train(reference, adam, 3)
    train(flat, flat_adam, 3)
    before, state = [p.clone() for p in flat.parameters()], copy.deepcopy(flat_adam.state_dict())
    for poison in ("loss", "gradient"):
        flat_adam.zero_grad()
        loss = flat(torch.randn(8, 3, 6, 6)).square().mean()
        loss = loss * (math.nan if poison == "loss" else 1.0)
        scale = math.inf if poison == "gradient" else 1.0
        hook = flat[0].weight.register_hook(lambda grad, scale=scale: grad * scale)
        loss.backward()
        hook.remove()
        values = update_where_finite(flat_adam, loss)
        assert not values[:2].isfinite().all()
        assert all(torch.equal(a, b) for a, b in zip(before, flat.parameters())), poison
        assert states_equal(state, flat_adam.state_dict()), f"{poison}: the moments and the step count stay"
    train(reference, adam, 2, seed=5)
    train(flat, flat_adam, 2, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), flat.parameters())), "as if the bad steps never were"


def test_a_finite_step_reports_the_loss_and_the_gradient_norm() -> None:
    net = small_net()
    optimizer = FlatAdam(net.parameters())
    loss = net(torch.randn(8, 3, 6, 6)).square().mean()
    loss.backward()
    expected = torch.nn.utils.get_total_norm([p.grad.clone() for p in net.parameters()])
    values = update_where_finite(optimizer, loss, torch.tensor(7))
    torch.testing.assert_close(values, torch.stack([loss.detach(), expected, torch.tensor(7.0)]))


def test_checkpoints_cross_between_flat_and_torch_adam() -> None:
    reference, flat = small_net(), small_net()
    adam, flat_adam = torch.optim.Adam(reference.parameters(), lr=1e-2), FlatAdam(flat.parameters(), lr=1e-2)
    train(reference, adam, 4)
    resumed = FlatAdam(small_net().parameters(), lr=1e-2)
    resumed.load_state_dict(adam.state_dict())
    assert states_equal(adam.state_dict(), resumed.state_dict())
    train(flat, flat_adam, 4)
    back = torch.optim.Adam(small_net().parameters(), lr=1e-2)
    back.load_state_dict(flat_adam.state_dict())
    assert states_equal(back.state_dict(), flat_adam.state_dict())


def test_a_deep_copy_trains_its_own_parameters_and_a_replaced_parameter_is_an_error() -> None:
    net = small_net()
    optimizer = FlatAdam(net.parameters(), lr=1e-2)
    copied_net, copied = copy.deepcopy((net, optimizer))
    train(copied_net, copied, 2)
    assert all(p.data_ptr() == view.data_ptr() for p, view in zip(copied_net.parameters(), copied.param_views))
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), small_net().parameters())), "the original did not move"
    net[0].weight.data = net[0].weight.data.clone()
    with pytest.raises(RuntimeError, match="make the optimizer after moving the model"):
        train(net, optimizer, 1)
