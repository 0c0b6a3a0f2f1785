"""Adam for the training steps: torch's own fused Adam, with a non-finite update skipped on the device.

:func:`fused_adam` is ``torch.optim.Adam`` (Kingma & Ba 2015, Algorithm 1, with torch's L2
``weight_decay`` added to the gradient; the papers train with lr 1e-3 and weight decay 1e-6) with
``fused=True``: one kernel updates every parameter, and the step counts are tensors on the device,
so an update reads nothing back. It replaced a hand-written Adam on flat buffers, which fused Adam
outruns on a CPU (``benchmarks/results/optimizer.json``) as on CUDA.

:func:`update_where_finite` is how both modalities' steps end: the gradients' norm, and the update
only where the loss and that norm are finite, decided on the device through the ``found_inf`` that
``torch.amp.GradScaler`` hands the fused optimizers: a skipped update leaves the parameters, both
moments and the step counts as they were. The caller reads the result later
(:class:`~hcl_cli.modality.StepResult`). Checkpoints are ``torch.optim.Adam``'s state_dict.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn


class FusedAdam(torch.optim.Adam):
    """``torch.optim.Adam(fused=True)`` with its own ``found_inf``, and that stays fused when it loads a checkpoint
    (``Optimizer.load_state_dict`` takes the saved param_groups' flags, and a checkpoint of an unfused Adam would turn
    it off).

    ``found_inf`` is the 0-d float tensor on the parameters' device that ``Adam.step`` reads where ``GradScaler`` puts
    one: 1 skips the update. It is this optimizer's for good and written in place (:func:`update_where_finite`), so a
    compiled step neither sets nor deletes an attribute, and a CUDA graph finds it at the same address every replay.
    """

    def __init__(self, params: list[nn.Parameter], lr: float, weight_decay: float) -> None:
        super().__init__(params, lr=lr, weight_decay=weight_decay, fused=True)
        self.found_inf = torch.zeros((), dtype=torch.float32, device=params[0].device)

    def __getstate__(self) -> dict[str, Any]:
        """``Optimizer``'s (defaults, state, param_groups) and ``found_inf``, so that a copy keeps it."""
        return {**super().__getstate__(), "found_inf": self.found_inf}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group.update(fused=True, foreach=None)


def fused_adam(params: Iterable[nn.Parameter], lr: float = 1e-3, weight_decay: float = 0.0) -> FusedAdam:
    """torch's fused Adam over ``params`` (the papers' betas and eps, torch's defaults)."""
    return FusedAdam(list(params), lr=lr, weight_decay=weight_decay)


def gradients(optimizer: torch.optim.Optimizer) -> list[Tensor]:
    """The gradients of the optimizer's parameters that have one."""
    return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


def update_where_finite(optimizer: FusedAdam, loss: Tensor, *diagnostics: Tensor) -> Tensor:
    """After the backward: ``[loss, grad norm, *diagnostics]`` as one float32 tensor on the device, and the optimizer's
    update applied only where the loss and the gradients' norm are finite (``found_inf``, decided on the device; nothing
    is read)."""
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gradients(optimizer))))
    values = torch.stack([loss.detach().float(), norm.float(), *(value.float() for value in diagnostics)])
    optimizer.found_inf.copy_(~values[:2].isfinite().all())
    optimizer.step()
    return values
