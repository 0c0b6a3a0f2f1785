"""The training steps' optimizers: torch's own fused ones, with a non-finite update skipped on the device.

:class:`OptimizerSettings` builds ``--optimizer``'s optimizer, always torch's implementation with ``fused=True``: one
kernel per device and dtype updates every parameter, and its step counts stay on the device, so an update reads nothing
back (CPU and CUDA, hcl's devices, both have torch's fused kernels, and only those take the ``found_inf`` below):

- ``adam``: ``torch.optim.Adam`` (Kingma & Ba 2015, Algorithm 1, with torch's L2 ``weight_decay`` added to the gradient;
  the papers train with lr 1e-3 and weight decay 1e-6);
- ``adamw``: ``torch.optim.AdamW`` (decoupled weight decay, Loshchilov & Hutter 2019);
- ``sgd``: ``torch.optim.SGD`` with momentum, Nesterov's if asked (MoCo-v2: lr 0.03, momentum 0.9, weight decay 1e-4);
- ``lars``: the same SGD, each weight's gradient first rescaled on the device by LARS's trust ratio (You et al. 2017)
  as solo-learn computes it (``solo/utils/lars.py``, without its eps), ``g <- eta ||w|| / (||g|| + wd ||w||) (g + wd w)``
  for every weight of more than one dimension; biases and norm parameters are left out of the adaptation and of weight
  decay, as SimCLR (Chen et al. 2020, App. B.1) and solo-learn leave them. (SimCLR's own LARS divides by
  ``||g + wd w||`` and keeps the learning rate inside its momentum.)

:func:`update_where_finite` is how both modalities' steps end: the gradients' norm, and the update only where the loss
and that norm are finite, decided on the device through the ``found_inf`` that ``torch.amp.GradScaler`` hands the fused
optimizers: a skipped update leaves the parameters, the moments or momenta and the step counts as they were. The caller
reads the result later (:class:`~hcl_cli.modality.StepResult`). Under a warm-up or a schedule the learning rate is a 0-d
tensor on the device that the epoch loop writes before each step (:func:`set_scheduled_rate`; a compiled step sees one
tensor at one address); at a constant rate it stays torch's float, the arithmetic of the runs before the schedules
existed. Checkpoints are the optimizer's ``state_dict``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.objectives.schedules import learning_rate_at

TORCH_OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "lars": torch.optim.SGD,
}
"""The torch optimizer each ``--optimizer`` runs (lars: SGD on gradients rescaled by :meth:`SkipNonFinite.apply_trust_ratio`)."""
OWN_STATE = ("found_inf", "lars_eta", "lars_weight_decay", "adapted", "kept")
"""What :class:`SkipNonFinite` adds to a torch optimizer's attributes, kept by a copy."""


class SkipNonFinite(torch.optim.Optimizer):
    """A torch optimizer (the class it is mixed into by :func:`skipping`) with its own ``found_inf``, LARS's trust ratio
    where ``lars_eta`` is set, and that keeps its fused kernel and its learning-rate tensor when it loads a checkpoint
    (``Optimizer.load_state_dict`` takes the saved param_groups' values, and a checkpoint of an unfused optimizer would
    turn the kernel off).

    ``found_inf`` is the 0-d float tensor on the parameters' device that the fused step reads where ``GradScaler`` puts
    one: 1 skips the update. It is this optimizer's for good and written in place (:func:`update_where_finite`), so a
    compiled step neither sets nor deletes an attribute, and a CUDA graph finds it at the same address every replay.
    SGD's momentum buffers are made at zero before the first step, whose update ``0 * momentum + g`` is torch's first
    ``buf = g``, so that a skipped first step leaves them defined.
    """

    def __init__(self, params: list[nn.Parameter], *, lars_eta: float = 0.0, lars_weight_decay: float = 0.0, **settings: Any) -> None:
        super().__init__(params, **settings, fused=True)  # type: ignore[call-arg]
        self.found_inf = torch.zeros((), dtype=torch.float32, device=params[0].device)
        self.lars_eta, self.lars_weight_decay = lars_eta, lars_weight_decay
        self.adapted = [parameter for parameter in params if parameter.ndim > 1] if lars_eta else []
        self.kept = [
            {"fused": True, "foreach": None, **({"lr": group["lr"]} if isinstance(group["lr"], Tensor) else {})}
            for group in self.param_groups
        ]
        for group in self.param_groups:
            for parameter in group["params"] if group.get("momentum") else []:
                self.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)

    def __getstate__(self) -> dict[str, Any]:
        """``Optimizer``'s (defaults, state, param_groups) and :data:`OWN_STATE`, so that a copy keeps them."""
        return {**super().__getstate__(), **{name: self.__dict__[name] for name in OWN_STATE}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group, kept in zip(self.param_groups, self.kept):
            group.update(kept)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        if self.adapted:
            self.apply_trust_ratio()
        return super().step(closure)  # type: ignore[safe-super]

    def apply_trust_ratio(self) -> None:
        """LARS (module docstring): each adapted weight's gradient ``g`` becomes ``ratio (g + wd w)``, ``ratio`` its trust
        ratio, or (solo-learn's cases) ``g`` itself where ``||w||`` is 0 and 0 where ``||g||`` is; on the device, in
        multi-tensor ops."""
        weights = [parameter for parameter in self.adapted if parameter.grad is not None]
        grads = [parameter.grad for parameter in weights if parameter.grad is not None]
        weight_norms, grad_norms = (torch.stack(torch._foreach_norm(tensors)) for tensors in (weights, grads))
        trust = self.lars_eta * weight_norms / (grad_norms + self.lars_weight_decay * weight_norms)
        ratio = torch.where(weight_norms > 0, torch.where(grad_norms > 0, trust, 0.0), 1.0)
        torch._foreach_add_(grads, weights, alpha=self.lars_weight_decay)
        torch._foreach_mul_(grads, ratio.unbind())


@functools.cache
def skipping(kind: type[torch.optim.Optimizer]) -> type[SkipNonFinite]:
    """The torch optimizer class ``kind`` with :class:`SkipNonFinite` mixed in (one class per kind)."""
    return type(f"Skipping{kind.__name__}", (SkipNonFinite, kind), {})


@dataclass(frozen=True)
class OptimizerSettings:
    """What builds a training step's optimizer: ``--optimizer`` and its options (:class:`~hcl_cli.config.PretrainConfig`)."""

    name: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.9
    nesterov: bool = False
    lars_eta: float = 1e-3
    scheduled: bool = False
    """The learning rate changes over the run (a warm-up or a schedule): a tensor that :func:`set_scheduled_rate` writes."""

    @classmethod
    def of(cls, config: PretrainConfig) -> OptimizerSettings:
        return cls(
            config.optimizer, config.lr, config.weight_decay, config.sgd_momentum, config.nesterov, config.lars_eta, config.scheduled
        )

    def build(self, params: Iterable[nn.Parameter]) -> SkipNonFinite:
        """The optimizer over ``params``: torch's fused one of :data:`TORCH_OPTIMIZERS` with its found_inf."""
        params = list(params)
        lr: float | Tensor = torch.tensor(self.lr, device=params[0].device) if self.scheduled else self.lr
        kind = skipping(TORCH_OPTIMIZERS[self.name])
        if self.name in ("adam", "adamw"):
            return kind(params, lr=lr, weight_decay=self.weight_decay)
        sgd = {"lr": lr, "momentum": self.momentum, "nesterov": self.nesterov}
        if self.name == "sgd":
            return kind(params, weight_decay=self.weight_decay, **sgd)
        return kind(params, lars_eta=self.lars_eta, lars_weight_decay=self.weight_decay, weight_decay=0.0, **sgd)


def set_scheduled_rate(optimizer: torch.optim.Optimizer, config: PretrainConfig, step: int, steps_per_epoch: int) -> None:
    """Write the learning rate of the run's ``step`` (0-based; :func:`~hcl_cli.objectives.schedules.learning_rate_at`
    under ``config``'s warm-up and schedule) into the learning-rate tensor of every group of ``optimizer`` (built
    ``scheduled``): a fill on the device, nothing read back."""
    epochs, warmup = config.epochs * steps_per_epoch, config.warmup_epochs * steps_per_epoch
    lr = learning_rate_at(config.lr, step, epochs, warmup, config.lr_schedule)
    for group in optimizer.param_groups:
        group["lr"].fill_(lr)


def gradients(optimizer: torch.optim.Optimizer) -> list[Tensor]:
    """The gradients of the optimizer's parameters that have one."""
    return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


def update_where_finite(optimizer: SkipNonFinite, loss: Tensor, *diagnostics: Tensor) -> Tensor:
    """After the backward: ``[loss, grad norm, *diagnostics]`` as one float32 tensor on the device, and the optimizer's
    update applied only where the loss and the gradients' norm are finite (``found_inf``, decided on the device; nothing
    is read)."""
    values = finite_check(optimizer, loss, *diagnostics)
    optimizer.step()
    return values


def finite_check(optimizer: SkipNonFinite, loss: Tensor, *diagnostics: Tensor) -> Tensor:
    """:func:`update_where_finite` without the update: the values, and ``found_inf`` written for the ``optimizer.step()``
    that follows (a compiled image step ends here and takes the update outside: :mod:`hcl_cli.image.step`)."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gradients(optimizer))))
    values = torch.stack([loss.detach().float(), norm.float(), *(value.float() for value in diagnostics)])
    optimizer.found_inf.copy_(~values[:2].isfinite().all())
    return values
