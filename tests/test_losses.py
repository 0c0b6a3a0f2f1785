"""hcl_cli.losses: each module is the loss ``hcl pretrain`` trains with, bit for bit.

The reference is the training step's loss (:class:`~hcl_cli.image.step.TrainingStep`): the sampler options of a
``PretrainConfig`` built from the same values as ``hcl pretrain``'s options (``auto`` resolved to the images'
objective as the stage resolves it), the step's tensors added, through :func:`~hcl_cli.objectives.loss.sampler_loss`.
Same inputs: ``torch.equal`` on the loss and on every gradient."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.errors import UsageError
from hcl_cli.image.modality import IMAGES
from hcl_cli.losses import HardNegativeLoss, OTNegativeLoss, SamplerLoss, SupervisedHardNegativeLoss, UnDiMixLoss
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.loss import sampler_loss

ROOT = Path(__file__).resolve().parents[1]
BATCH, DIM, HIDDEN = 12, 16, 24


def views(seed: int) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor]]:
    """Two views' projections (leaves with gradients), labels of three classes, and the head's inputs."""
    generator = torch.Generator().manual_seed(seed)
    z1, z2 = (torch.randn(BATCH, DIM, generator=generator).requires_grad_() for _ in range(2))
    labels = torch.randint(3, (BATCH,), generator=generator)
    hidden = (torch.randn(BATCH, HIDDEN, generator=generator), torch.randn(BATCH, HIDDEN, generator=generator))
    return z1, z2, labels, hidden


def the_clis_loss(cli_options: dict[str, Any], z1: Tensor, z2: Tensor, labels: Tensor, **inputs: Any) -> Tensor:
    """The training step's loss under ``hcl pretrain``'s options ``cli_options`` (their params.yaml names)."""
    config = PretrainConfig(**cli_options)
    options = config.loss_options(0)
    if options["objective"] == "auto":
        options = options.replaced({"objective": IMAGES.objectives[0]}, {})
    spec = config.spec
    batch_labels = labels if spec.label_positives(options) else None
    return sampler_loss(z1, z2, batch_labels, spec=spec, options=options.with_inputs(**inputs))[0]


def assert_bitwise(ours: Callable[[Tensor, Tensor], Tensor], cli: Callable[[Tensor, Tensor], Tensor], seed: int) -> None:
    """Loss and gradients of both on fresh copies of one batch: equal bit for bit, and not trivially (finite, nonzero)."""
    results = []
    for loss_of in (ours, cli):
        z1, z2, _, _ = views(seed)
        loss = loss_of(z1, z2)
        loss.backward()
        results.append((loss.detach(), z1.grad, z2.grad))
    (loss, *grads), (expected, *expected_grads) = results
    assert torch.isfinite(loss) and torch.equal(loss, expected), (loss, expected)
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad.abs().sum() > 0 and torch.equal(grad, expected_grad)


HARD_NEGATIVES = [
    ({}, {"sampler": "hucl"}),
    ({"beta": 2.0, "tau_plus": 0.05, "temperature": 0.2}, {"sampler": "hucl", "beta": 2.0, "tau_plus": 0.05, "temperature": 0.2}),
    ({"beta": 0.5, "detach_weights": True, "clip": True}, {"sampler": "hucl", "beta": 0.5, "detach_weights": True, "clip": True}),
    ({"objective": "bcl"}, {"sampler": "hucl", "objective": "bcl"}),
    ({"beta": 0.0}, {"sampler": "debiased"}),
    ({"beta": 0.0, "tau_plus": 0.0}, {"sampler": "ucl"}),
]


@pytest.mark.parametrize(("ours", "cli"), HARD_NEGATIVES, ids=lambda case: str(case))
def test_hard_negative_loss_is_the_clis_objective_bitwise(ours: dict[str, Any], cli: dict[str, Any]) -> None:
    module = HardNegativeLoss(**ours)
    assert module.sampler == cli["sampler"]
    assert_bitwise(module, lambda z1, z2: the_clis_loss(cli, z1, z2, views(0)[2]), seed=0)


def test_hard_negative_loss_with_label_positives_reads_the_labels() -> None:
    labels = views(1)[2]
    module = HardNegativeLoss(positives="labels")
    assert_bitwise(
        lambda z1, z2: module(z1, z2, labels), lambda z1, z2: the_clis_loss({"sampler": "hucl", "positives": "labels"}, z1, z2, labels), 1
    )
    with pytest.raises(UsageError, match="--positives labels needs labels"):
        module(*views(1)[:2])


SUPERVISED = [
    ({}, {"sampler": "hscl"}),
    ({"beta": 0.0}, {"sampler": "scl"}),
    (
        {"beta": 3.0, "detach_weights": True, "temperature": 0.1},
        {"sampler": "hscl", "beta": 3.0, "detach_weights": True, "temperature": 0.1},
    ),
    ({"threshold": -0.1}, {"sampler": "hscl-threshold", "threshold_start": -0.1}),
]


@pytest.mark.parametrize(("ours", "cli"), SUPERVISED, ids=lambda case: str(case))
def test_supervised_hard_negative_loss_is_the_clis_objective_bitwise(ours: dict[str, Any], cli: dict[str, Any]) -> None:
    module, labels = SupervisedHardNegativeLoss(**ours), views(2)[2]
    assert module.sampler == cli["sampler"]
    assert_bitwise(lambda z1, z2: module(z1, z2, labels), lambda z1, z2: the_clis_loss(cli, z1, z2, labels), seed=2)


@pytest.mark.parametrize(("module", "sampler"), [(HardNegativeLoss(), "hucl"), (OTNegativeLoss(), "ot")], ids=["hucl", "ot"])
def test_a_momentum_encoders_keys_and_queue_are_the_clis_candidates(module: SamplerLoss, sampler: str) -> None:
    generator = torch.Generator().manual_seed(6)
    keys = MomentumKeys(*(torch.randn(size, DIM, generator=generator) for size in (BATCH, BATCH, 8)))
    assert_bitwise(
        lambda z1, z2: module(z1, z2, momentum_keys=keys),
        lambda z1, z2: the_clis_loss({"sampler": sampler}, z1, z2, views(6)[2], momentum_keys=keys),
        seed=6,
    )


def test_a_threshold_with_h_scl_betas_options_is_refused() -> None:
    with pytest.raises(UsageError, match="threshold"):
        SupervisedHardNegativeLoss(beta=2.0, threshold=0.0)


OPTIMAL_TRANSPORT = [
    ({}, {}),
    ({"epsilon": 0.1, "tau_plus": 0.0, "iterations": 200}, {"ot_epsilon": 0.1, "tau_plus": 0.0, "ot_iterations": 200}),
    ({"cost": "exp", "kappa": 0.5, "objective": "bcl"}, {"ot_cost": "exp", "ot_kappa": 0.5, "objective": "bcl"}),
]


@pytest.mark.parametrize(("ours", "cli"), OPTIMAL_TRANSPORT, ids=lambda case: str(case))
def test_ot_negative_loss_is_the_clis_objective_bitwise(ours: dict[str, Any], cli: dict[str, Any]) -> None:
    assert_bitwise(OTNegativeLoss(**ours), lambda z1, z2: the_clis_loss({"sampler": "ot", **cli}, z1, z2, views(3)[2]), seed=3)


UNDIMIX = [
    ({}, {}),
    ({"weights": (1.0, 0.0, 2.0), "diversity": "both-views"}, {"undimix_weights": "1,0,2", "undimix_diversity": "both-views"}),
    ({"uncertainty": "literal", "temperature": 0.3}, {"undimix_uncertainty": "literal", "temperature": 0.3}),
]


@pytest.mark.parametrize(("ours", "cli"), UNDIMIX, ids=lambda case: str(case))
def test_undimix_loss_is_the_clis_objective_bitwise(ours: dict[str, Any], cli: dict[str, Any]) -> None:
    hidden, layer = views(4)[3], nn.Linear(HIDDEN, DIM)  # the head's last layer, as the step passes it
    module = UnDiMixLoss(**ours)
    assert module.attention is None and not list(module.parameters())
    assert_bitwise(
        lambda z1, z2: module(z1, z2, head_inputs=hidden, head_layer=layer),
        lambda z1, z2: the_clis_loss({"sampler": "undimix", **cli}, z1, z2, views(4)[2], head_inputs=hidden, head_layer=layer),
        seed=4,
    )


def test_learned_undimix_weights_are_the_modules_parameter_and_train_as_the_clis() -> None:
    hidden = views(5)[3]
    module = UnDiMixLoss((2.0, 1.0, 1.0), learned=True)
    config = PretrainConfig(sampler="undimix", undimix_weights="2,1,1", undimix_learned=True)
    learned = nn.ParameterDict({name: nn.Parameter(value) for name, value in config.spec.learned_tensors(config.sampler_options).items()})
    assert [name for name, _ in module.named_parameters()] == ["attention"]
    assert torch.equal(module.attention, learned["undimix_attention"])
    cli_options = {"sampler": "undimix", "undimix_weights": "2,1,1", "undimix_learned": True}
    assert_bitwise(
        lambda z1, z2: module(z1, z2, head_inputs=hidden),
        lambda z1, z2: the_clis_loss(cli_options, z1, z2, views(5)[2], head_inputs=hidden, **learned),
        seed=5,
    )
    assert module.attention.grad is not None and module.attention.grad.abs().sum() > 0
    assert torch.equal(module.attention.grad, learned["undimix_attention"].grad)


def test_options_are_checked_once_with_the_clis_one_line_errors() -> None:
    with pytest.raises(UsageError, match="--tau-plus must be < 1.0"):
        HardNegativeLoss(tau_plus=1.0)
    with pytest.raises(UsageError, match="--ot-epsilon must be >"):
        OTNegativeLoss(epsilon=0.0)
    with pytest.raises(UsageError, match="z1 and z2 must both be"):
        HardNegativeLoss()(torch.randn(4, 8), torch.randn(5, 8))


def test_each_module_says_its_sampler_and_options() -> None:
    assert repr(HardNegativeLoss(beta=2.0)).startswith("HardNegativeLoss(sampler='hucl', temperature=0.5, objective='nce'")
    assert all(
        issubclass(cls, SamplerLoss) and cls.__doc__ and "Eq." in cls.__doc__
        for cls in (HardNegativeLoss, SupervisedHardNegativeLoss, OTNegativeLoss, UnDiMixLoss)
    )


def test_the_package_ships_its_py_typed_marker() -> None:
    assert (ROOT / "hcl_cli" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["hcl_cli"]
