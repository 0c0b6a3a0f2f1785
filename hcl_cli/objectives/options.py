"""The options every sampler reads, validated once, with one-line usage errors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import Objective

OT_COSTS = ("sq", "exp")
OT_LOSSES = ("nce", "bcl")


@dataclass(frozen=True)
class SamplerOptions:
    """The keyword options of :func:`~hcl_cli.objectives.contrastive_loss`.

    Each sampler reads only its own: ``beta`` and ``clip`` (hucl, hscl), ``tau_plus`` (debiased,
    hucl, ot), ``threshold`` (hscl-threshold: the current cosine threshold, see
    :func:`~hcl_cli.objectives.threshold_at`), ``ot_*`` (ot), ``undimix_weights`` (similarity,
    uncertainty, diversity) and ``head_inputs`` (undimix: ``(h1, h2)``, the two views' inputs of
    the projection head's last linear layer, from ``ContrastiveModel.forward``).
    """

    temperature: float = 0.5
    beta: float = 1.0
    tau_plus: float = 0.0
    threshold: float | None = None
    ot_epsilon: float = 0.5
    ot_cost: Literal["sq", "exp"] = "sq"
    ot_kappa: float = 2.0
    ot_iterations: int = 50
    ot_loss: Objective = "nce"
    undimix_weights: Sequence[float] = (1.0, 1.0, 1.0)
    head_inputs: tuple[Tensor, Tensor] | None = None
    clip: bool = False

    def __post_init__(self) -> None:
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise UsageError(f"--temperature must be a positive number (got {self.temperature})")
        if not (self.beta >= 0 and math.isfinite(self.beta)):
            raise UsageError(f"--beta must be a non-negative number (got {self.beta})")
        if not 0 <= self.tau_plus < 1:
            raise UsageError(f"--tau-plus must be in [0, 1) (got {self.tau_plus})")
        if self.threshold is not None and not -1 <= self.threshold <= 1:
            raise UsageError(f"the hscl-threshold cosine threshold must be in [-1, 1] (got {self.threshold})")
        if not (self.ot_epsilon > 0 and math.isfinite(self.ot_epsilon)):
            raise UsageError(f"--ot-epsilon must be > 0 (got {self.ot_epsilon})")
        if self.ot_cost not in OT_COSTS:
            raise UsageError(f"--ot-cost must be one of {', '.join(OT_COSTS)} (got {self.ot_cost!r})")
        if not math.isfinite(self.ot_kappa):
            raise UsageError(f"--ot-kappa must be a finite number (got {self.ot_kappa})")
        if self.ot_iterations < 1:
            raise UsageError(f"--ot-iterations must be >= 1 (got {self.ot_iterations})")
        if self.ot_loss not in OT_LOSSES:
            raise UsageError(f"--ot-loss must be one of {', '.join(OT_LOSSES)} (got {self.ot_loss!r})")
        weights = self.undimix_weights
        numbers = not isinstance(weights, str) and all(isinstance(w, (int, float)) and math.isfinite(w) and w >= 0 for w in weights)
        if not numbers or len(weights) != 3 or sum(weights) == 0:
            raise UsageError(f"--undimix-weights must be three non-negative numbers (similarity, uncertainty, diversity), not all zero (got {self.undimix_weights!r})")


def sampler_options(temperature: float, beta: float, tau_plus: float, options: dict[str, object]) -> SamplerOptions:
    """Build :class:`SamplerOptions`, turning an unknown keyword into a one-line usage error."""
    unknown = sorted(set(options) - set(SamplerOptions.__dataclass_fields__))
    if unknown:
        raise UsageError(f"unknown sampler option(s): {', '.join(unknown)}")
    return SamplerOptions(temperature=temperature, beta=beta, tau_plus=tau_plus, **options)  # type: ignore[arg-type]
