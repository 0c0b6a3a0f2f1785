"""The training steps' optimizers are torch's fused ones: a non-finite update is skipped on the device (parameters,
moments or momenta and step counts untouched, the next step as if the bad one never was), nothing is read back, SGD is
torch's SGD bitwise, LARS applies SimCLR's trust ratio without biases and norms, a checkpoint of any of them resumes
bitwise, fused, and the learning-rate schedule warms up linearly and then decays along a cosine."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import Tensor, nn
from torch.profiler import ProfilerActivity, profile

from benchmarks.step_counts import host_syncs
from hcl_cli.config import PretrainConfig
from hcl_cli.errors import UsageError
from hcl_cli.objectives.schedules import learning_rate_at
from hcl_cli.optimizer import OptimizerSettings, SkipNonFinite, set_scheduled_rate, update_where_finite

OPTIMIZERS = ("adam", "adamw", "sgd", "lars")
KERNELS = {"adam": "aten::_fused_adam_", "adamw": "aten::_fused_adamw_", "sgd": "aten::_fused_sgd_", "lars": "aten::_fused_sgd_"}


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))


def built(name: str, net: nn.Module, **settings: object) -> SkipNonFinite:
    return OptimizerSettings(name, **{"lr": 1e-2, "weight_decay": 1e-3, **settings}).build(net.parameters())  # type: ignore[arg-type]


def train(net: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int = 1) -> None:
    """``steps`` steps as the training steps take them (a plain ``step`` for a torch optimizer, which has no ``found_inf``)."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = net(torch.randn(8, 3, 6, 6, generator=generator)).square().mean()
        loss.backward()
        if isinstance(optimizer, SkipNonFinite):
            update_where_finite(optimizer, loss)
        else:
            optimizer.step()


def states_equal(first: dict, second: dict) -> bool:
    return first["state"].keys() == second["state"].keys() and all(
        torch.equal(first["state"][index][slot], second["state"][index][slot]) for index in first["state"] for slot in first["state"][index]
    )


def same_parameters(first: nn.Module, second: nn.Module) -> bool:
    return all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))


@pytest.mark.parametrize("good_steps", [0, 3], ids=["first-step", "later-step"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_non_finite_loss_or_gradient_moves_nothing_and_the_next_step_goes_on(name: str, good_steps: int) -> None:
    reference, net = small_net(), small_net()
    optimizer_of_reference, optimizer = built(name, reference), built(name, net)
    train(reference, optimizer_of_reference, good_steps)
    train(net, optimizer, good_steps)
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
        after = optimizer.state_dict()
        if state["state"]:
            assert states_equal(state, after), f"{poison}: the moments or momenta and the step counts stay"
        else:  # Adam makes its state at its first step: the zero moments and step count it starts from
            assert all(not value.any() for slots in after["state"].values() for value in slots.values()), poison
    train(reference, optimizer_of_reference, 2, seed=5)
    train(net, optimizer, 2, seed=5)
    assert same_parameters(reference, net), "as if the bad steps never were"


@pytest.mark.parametrize("scheduled", [False, True], ids=["float-lr", "tensor-lr"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_finite_step_reports_the_loss_and_the_gradient_norm_and_reads_nothing_back(name: str, scheduled: bool) -> None:
    net = small_net()
    optimizer = built(name, net, scheduled=scheduled)
    train(net, optimizer, 1)
    optimizer.zero_grad()
    loss = net(torch.randn(8, 3, 6, 6)).square().mean()
    loss.backward()
    expected = torch.nn.utils.get_total_norm([p.grad.clone() for p in net.parameters()])
    count = torch.tensor(7)  # made before the profiled update: a tensor from host data counts as a sync there
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        values = update_where_finite(optimizer, loss, count)
    assert host_syncs(profiler.events()) == 0, "no host sync in the update (the CPU kernel's reads of its own scalars aside)"
    assert KERNELS[name] in {event.key for event in profiler.key_averages()}
    torch.testing.assert_close(values, torch.stack([loss.detach(), expected, torch.tensor(7.0)]))


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_is_torch_s_fused_sgd_bitwise(nesterov: bool) -> None:
    reference, net = small_net(), small_net()
    sgd = torch.optim.SGD(reference.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4, nesterov=nesterov, fused=True)
    train(reference, sgd, 4)
    train(net, built("sgd", net, lr=0.03, weight_decay=1e-4, nesterov=nesterov), 4)
    assert same_parameters(reference, net)


def lars_reference(net: nn.Module, lr: float, weight_decay: float, eta: float, momentum: float, buffers: dict[int, Tensor]) -> None:
    """solo-learn's LARS.step (solo/utils/lars.py, ``exclude_bias_n_norm=True``, ``clip_lr=False``, eps 0), one tensor at a
    time: weights of more than one dimension get ``(g + wd w) * eta ||w|| / (||g|| + wd ||w||)`` where both norms are
    non-zero; biases and norm parameters their plain gradient; then SGD's momentum."""
    with torch.no_grad():
        for index, p in enumerate(net.parameters()):
            d_p = p.grad
            p_norm, g_norm = torch.norm(p), torch.norm(p.grad)
            if p.ndim != 1 and p_norm != 0 and g_norm != 0:
                d_p = (d_p + weight_decay * p) * (eta * p_norm / (g_norm + p_norm * weight_decay))
            buffers[index] = d_p.clone() if index not in buffers else buffers[index].mul_(momentum).add_(d_p)
            p.add_(buffers[index], alpha=-lr)


def test_lars_scales_each_weight_by_its_trust_ratio_and_leaves_biases_and_norms_out() -> None:
    reference, net = small_net(), small_net()
    optimizer = built("lars", net, lr=0.3, weight_decay=1e-2, lars_eta=0.02)
    generator, buffers = torch.Generator().manual_seed(2), {}
    for _ in range(4):
        batch = torch.randn(8, 3, 6, 6, generator=generator)
        for model in (reference, net):
            model.zero_grad()
            model(batch).square().mean().backward()
        lars_reference(reference, 0.3, 1e-2, 0.02, 0.9, buffers)
        update_where_finite(optimizer, torch.zeros(()))
    for (name, expected), actual in zip(reference.named_parameters(), net.parameters()):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, msg=name)
    adapted = {id(p) for p in optimizer.adapted}
    assert [name for name, p in net.named_parameters() if id(p) in adapted] == ["0.weight", "4.weight"], "biases and BatchNorm stay out"


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_checkpoint_of_an_unfused_optimizer_resumes_bitwise_and_stays_fused(name: str) -> None:
    reference, net = small_net(), small_net()
    optimizer, unfused = built(name, reference), torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9, foreach=False)
    train(reference, optimizer, 4)
    train(net, unfused, 4)
    resumed_net = copy.deepcopy(reference)
    resumed = built(name, resumed_net)
    resumed.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    train(reference, optimizer, 3, seed=7)
    train(resumed_net, resumed, 3, seed=7)
    assert same_parameters(reference, resumed_net)
    assert states_equal(optimizer.state_dict(), resumed.state_dict())
    if name == "sgd":
        resumed.load_state_dict(unfused.state_dict())
        assert resumed.param_groups[0]["fused"] is True, "an unfused SGD's checkpoint leaves it fused"


def test_a_scheduled_rate_is_a_device_tensor_that_a_checkpoint_neither_replaces_nor_stores_as_a_tensor() -> None:
    net = small_net()
    optimizer = built("sgd", net, scheduled=True)
    rate = optimizer.param_groups[0]["lr"]
    assert isinstance(rate, Tensor) and rate.device == next(net.parameters()).device
    config = PretrainConfig(optimizer="sgd", lr=0.1, lr_schedule="cosine", warmup_epochs=1, epochs=3)
    set_scheduled_rate(optimizer, config, 4, steps_per_epoch=10)
    assert rate.item() == pytest.approx(0.05)
    optimizer.load_state_dict({**optimizer.state_dict(), "param_groups": [{**optimizer.state_dict()["param_groups"][0], "lr": 9.0}]})
    assert optimizer.param_groups[0]["lr"] is rate, "the loaded learning rate does not replace the tensor the schedule writes"


def test_the_schedule_warms_up_linearly_then_follows_a_cosine_to_zero() -> None:
    steps, warmup, lr = 100, 10, 0.4
    rates = [learning_rate_at(lr, step, steps, warmup, "cosine") for step in range(steps)]
    assert rates[:warmup] == pytest.approx([lr * (step + 1) / warmup for step in range(warmup)])
    assert rates[warmup] == lr and rates[warmup + 45] == pytest.approx(lr / 2) and 0 < rates[-1] < 1e-3 * lr
    assert all(a >= b for a, b in zip(rates[warmup:], rates[warmup + 1 :])), "non-increasing after the warm-up"
    assert [learning_rate_at(lr, step, steps, 0, "constant") for step in (0, 50, 99)] == [lr] * 3
    assert (
        learning_rate_at(lr, 3, steps, warmup, "constant") == pytest.approx(0.16)
        and learning_rate_at(lr, 10, steps, warmup, "constant") == lr
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"optimizer": "sgd", "sgd_momentum": 0.0, "nesterov": True}, "--nesterov needs a momentum"),
        ({"warmup_epochs": 5, "epochs": 5}, r"--warmup-epochs must be fewer than --epochs \(got 5 of 5\)"),
        ({"optimizer": "rmsprop"}, "--optimizer must be one of adam, adamw, sgd, lars"),
        ({"lr_schedule": "step"}, "--lr-schedule must be one of constant, cosine"),
    ],
)
def test_optimizer_options_that_cannot_run_are_refused_in_one_line(values: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        PretrainConfig(**values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"nesterov": True},
            r"--nesterov \(pretrain.nesterov\) true is read only with --optimizer sgd or lars and does nothing with --optimizer adam",
        ),
        (
            {"optimizer": "adamw", "sgd_momentum": 0.5},
            r"--sgd-momentum \(pretrain.sgd_momentum\) 0.5 is read only with --optimizer sgd or lars",
        ),
        (
            {"optimizer": "sgd", "lars_eta": 0.01},
            r"--lars-eta \(pretrain.lars_eta\) 0.01 is read only with --optimizer lars .*default \(0.001\)",
        ),
        ({"anneal_steps": 5}, r"--anneal-steps \(pretrain.anneal_steps\) 5 is read only with --anneal paper or official"),
    ],
)
def test_options_the_run_does_not_read_are_refused_as_the_other_modality_s_are(values: dict[str, object], message: str) -> None:
    """``--optimizer adam --nesterov true`` ran with exit 0 and no word (issue 54, item 2)."""
    with pytest.raises(UsageError, match=message):
        PretrainConfig.from_sources(values, {})


def test_a_whole_params_group_at_its_defaults_is_no_refusal_and_a_record_is_read() -> None:
    """Under DVC every key of the group is given, each at its default: only a value away from its default is refused. The
    pretrain configuration an encoder's sidecar records (it ran) is read back without the refusal."""
    defaults = PretrainConfig().params()
    for optimizer in ("adam", "sgd", "lars"):
        assert PretrainConfig.from_sources({**defaults, "optimizer": optimizer}, {}).optimizer == optimizer
    PretrainConfig.from_sources({"optimizer": "lars", "nesterov": True, "lars_eta": 0.01, "anneal": "paper", "anneal_steps": 3}, {})
    assert PretrainConfig(nesterov=True).unread_options()[0][0].name == "nesterov"
