"""Adam for the training steps: a few whole-buffer ops per update, and a non-finite step skipped on the device.

:class:`FlatAdam` is ``torch.optim.Adam`` (Kingma & Ba 2015, Algorithm 1, with torch's L2
``weight_decay`` added to the gradient; the papers train with lr 1e-3 and weight decay 1e-6) run so
that a training step makes no host sync and few ops: the parameters, their gradients and both
moments are views of four flat buffers (the autograd engine accumulates each gradient into its view
in place), and the step count and the bias corrections are tensors on the device. An update is
about twenty ops on whole buffers, where ``torch.optim.Adam`` reads every parameter's step count on
the host (``.item()``, fused on a CPU too) and, unfused, loops over the parameters (the counts:
``benchmarks/results/step_counts.json``). Each element is computed as ``torch.optim.Adam``'s
single-tensor update computes it, op for op, so the two agree bitwise on a CPU
(``tests/test_optimizer.py``).

:func:`update_where_finite` is how both modalities' steps end: the gradients' norm, and the update
only where the loss and that norm are finite, decided on the device (as the fused optimizers do
with GradScaler's ``found_inf``): a skipped update leaves the parameters, both moments and the
step count as they were. The caller reads the result later (:class:`~hcl_cli.modality.StepResult`).

Checkpoints: :meth:`FlatAdam.state_dict` and :meth:`FlatAdam.load_state_dict` speak
``torch.optim.Adam``'s format (per parameter ``step``, ``exp_avg``, ``exp_avg_sq``; Adam's
``param_groups``), so a checkpoint of either loads into the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.runtime import constant

ADAM_FLAGS = {
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}
"""The rest of ``torch.optim.Adam``'s param_group, as it reads for the variant this is (what a checkpoint records)."""
HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay")


def flat_view(flat: Tensor, offset: int, like: Tensor) -> Tensor:
    """The ``like``-shaped view of ``flat`` starting at ``offset``, with ``like``'s strides (channels_last stays so)."""
    return flat.as_strided(like.shape, like.stride(), offset)


class FlatAdam(torch.optim.Optimizer):
    """Adam over one parameter group of dense parameters of one dtype on one device, on flat buffers.

    The parameters are moved into a flat buffer when the optimizer is made (each keeps its shape
    and strides; ``load_state_dict`` of the model copies into them in place). Every parameter takes
    part in every step, one that got no gradient with a zero gradient; ``zero_grad`` zeroes the flat
    gradient, and a gradient that something else put in ``.grad`` is copied into it at the next step.
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(list(params), {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, **ADAM_FLAGS})
        (group,) = self.param_groups
        self.params: list[Tensor] = group["params"]
        first = self.params[0]
        if any(p.dtype != first.dtype or p.device != first.device for p in self.params):
            raise ValueError("FlatAdam needs parameters of one dtype on one device")
        if not all(p.is_contiguous() or p.is_contiguous(memory_format=torch.channels_last) for p in self.params):
            raise ValueError("FlatAdam needs dense parameters (contiguous or channels_last)")
        offsets = [0]
        for parameter in self.params:
            offsets.append(offsets[-1] + parameter.numel())
        buffers = [torch.zeros(offsets[-1], dtype=first.dtype, device=first.device) for _ in range(4)]
        self.flat_params, self.flat_grad, self.exp_avg, self.exp_avg_sq = buffers
        views = [[flat_view(flat, offset, p) for offset, p in zip(offsets, self.params)] for flat in buffers]
        self.param_views, self.grads, self.exp_avgs, self.exp_avg_sqs = views
        self.steps = torch.zeros((), dtype=torch.float64, device=first.device)
        """The steps taken (an integer; float64 for the bias corrections, float32 in :meth:`state_dict` as Adam keeps it)."""
        self.bind()

    @torch.no_grad()
    def bind(self, *, strict: bool = False) -> None:
        """Make every parameter and its gradient the views of the flat buffers that they are not (any more), keeping their
        values. ``strict``: a parameter whose tensor was replaced is an error (the flat buffer is what trains)."""
        for parameter, data, grad in zip(self.params, self.param_views, self.grads):
            if parameter.data_ptr() != data.data_ptr():
                if strict:
                    raise RuntimeError(
                        "a parameter's tensor was replaced after FlatAdam took it: make the optimizer after moving the model"
                    )
                data.copy_(parameter)
                parameter.data = data
            if parameter.grad is not grad:
                if parameter.grad is None:
                    grad.zero_()
                else:
                    grad.copy_(parameter.grad)
                parameter.grad = grad

    @property
    def flat_buffers(self) -> tuple[Tensor, ...]:
        """Every tensor an update writes: the parameters', gradients' and moments' flat buffers, and the step count."""
        return self.flat_params, self.flat_grad, self.exp_avg, self.exp_avg_sq, self.steps

    def __getstate__(self) -> dict[str, Any]:
        """All of it (``Optimizer``'s keeps only defaults, state and param_groups), so that a deep copy keeps the buffers."""
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A deep copy's: its parameters are copies of their own (``Parameter.__deepcopy__`` clones): bind them again."""
        super().__setstate__(state)
        self.bind()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient (the gradients stay its views whatever ``set_to_none`` says)."""
        self.flat_grad.zero_()

    def grad_norm(self) -> Tensor:
        """The gradients' total L2 norm (one op on the flat buffer)."""
        self.bind(strict=True)
        return torch.linalg.vector_norm(self.flat_grad)

    @torch.no_grad()
    def step(self, closure: None = None, *, apply: Tensor | None = None) -> None:  # type: ignore[override]
        """One Adam update of every parameter; with ``apply`` (a 0-d bool tensor) only where it is true, decided on the device.

        ``torch.optim.Adam``'s single-tensor update: ``g = grad + wd p``, ``m.lerp_(g, 1 - b1)``,
        ``v.mul_(b2).addcmul_(g, g, 1 - b2)``, ``p.addcdiv_(m, sqrt(v) / sqrt(1 - b2^t) + eps, -lr / (1 - b1^t))``
        (``addcdiv``'s ``p + (s m) / d``). Where ``apply`` is false the gradient reads as 0, the
        averages' weights as 0 and 1 and the step size as 0, so nothing moves.
        """
        if closure is not None:
            raise ValueError("FlatAdam.step takes no closure")
        (group,) = self.param_groups
        beta1, beta2 = group["betas"]
        self.bind(strict=True)

        def value(number: float, dtype: torch.dtype = self.flat_params.dtype) -> Tensor:
            return constant(number, dtype, self.flat_params.device)

        grad = torch.add(self.flat_grad, self.flat_params, alpha=group["weight_decay"]) if group["weight_decay"] else self.flat_grad
        average_weight, decay, one = value(1.0 - beta1), value(beta2), value(1.0, torch.float64)
        if apply is None:
            self.steps.add_(one)
        else:
            grad = torch.where(apply, grad, value(0.0))
            average_weight, decay = torch.where(apply, average_weight, value(0.0)), torch.where(apply, decay, value(1.0))
            self.steps.add_(apply)
        steps = self.steps.clamp(min=one)  # a skipped first step leaves 0: its (unused) corrections stay finite
        step_size = value(-group["lr"], torch.float64) / (one - torch.pow(value(beta1, torch.float64), steps))
        if apply is not None:
            step_size = torch.where(apply, step_size, value(0.0, torch.float64))
        correction = (one - torch.pow(value(beta2, torch.float64), steps)).sqrt()
        self.exp_avg.lerp_(grad, average_weight)
        self.exp_avg_sq.mul_(decay).addcmul_(grad, grad, value=1.0 - beta2)
        denominator = (self.exp_avg_sq.sqrt() / correction).add_(value(group["eps"]))
        self.flat_params.add_(torch.mul(self.exp_avg, step_size).div_(denominator))

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam``'s state_dict: per parameter its step (float32), ``exp_avg`` and ``exp_avg_sq`` (copies)."""
        (group,) = self.param_groups
        steps = self.steps.float()
        state = {
            index: {"step": steps.clone(), "exp_avg": exp_avg.clone(), "exp_avg_sq": exp_avg_sq.clone()}
            for index, (exp_avg, exp_avg_sq) in enumerate(zip(self.exp_avgs, self.exp_avg_sqs))
        }
        saved_group = {**{key: value for key, value in group.items() if key != "params"}, "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [saved_group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state of :meth:`state_dict` or of a ``torch.optim.Adam`` over the same parameters, in order."""
        (saved_group,) = state_dict["param_groups"]
        if len(saved_group["params"]) != len(self.params):
            raise ValueError(f"the saved optimizer has {len(saved_group['params'])} parameters, this one {len(self.params)}")
        (group,) = self.param_groups
        group.update({key: tuple(saved_group[key]) if key == "betas" else saved_group[key] for key in HYPERPARAMETERS})
        states = [state_dict["state"].get(index, {}) for index in saved_group["params"]]
        steps = {float(state["step"]) for state in states if "step" in state}
        if len(steps) > 1:
            raise ValueError(
                f"the saved optimizer's parameters took different numbers of steps ({sorted(steps)}): FlatAdam steps them together"
            )
        with torch.no_grad():
            self.steps.fill_(steps.pop() if steps else 0.0)
            for state, exp_avg, exp_avg_sq in zip(states, self.exp_avgs, self.exp_avg_sqs):
                if "exp_avg" in state:
                    exp_avg.copy_(state["exp_avg"])
                    exp_avg_sq.copy_(state["exp_avg_sq"])
                else:  # a parameter that torch's Adam has not stepped yet
                    exp_avg.zero_()
                    exp_avg_sq.zero_()


def update_where_finite(optimizer: FlatAdam, loss: Tensor, *diagnostics: Tensor) -> Tensor:
    """After the backward: ``[loss, grad norm, *diagnostics]`` as one float32 tensor on the device, and the optimizer's
    update applied only where the loss and the gradients' norm are finite (decided on the device; nothing is read)."""
    values = torch.stack([loss.detach().float(), optimizer.grad_norm(), *(value.float() for value in diagnostics)])
    optimizer.step(apply=values[:2].isfinite().all())
    return values
