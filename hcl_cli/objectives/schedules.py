"""Schedules of the sampler hyper-parameters over training (pure functions of the epoch)."""

from __future__ import annotations

from hcl_cli.errors import UsageError

BETA_ANNEAL_LEVELS = 9
ANNEALS = ("none", "down")


def beta_at(beta: float, epoch: int, epochs: int, anneal: str) -> float:
    """The concentration beta to use in ``epoch`` (0-based) of ``epochs``.

    ``anneal="down"`` is HCL's annealing (Robinson et al., App. D.1 and Fig. 4): beta steps
    through ``linspace(beta, 0, 9)``, one step every ``epochs / 9`` epochs, so the last ninth of
    training runs at beta = 0 (the debiased objective). ``"none"`` keeps beta fixed.
    """
    if anneal not in ANNEALS:
        raise UsageError(f"--anneal must be one of {', '.join(ANNEALS)} (got {anneal!r})")
    if not 0 <= epoch < epochs:
        raise ValueError(f"epoch {epoch} is outside 0..{epochs - 1}")
    if anneal == "none":
        return beta
    level = min(epoch * BETA_ANNEAL_LEVELS // epochs, BETA_ANNEAL_LEVELS - 1)
    return beta * (BETA_ANNEAL_LEVELS - 1 - level) / (BETA_ANNEAL_LEVELS - 1)


def threshold_at(start: float, end: float, epoch: int, epochs: int) -> float:
    """H-SCL(tau)'s cosine threshold ``l`` in ``epoch`` (0-based) of ``epochs``, Eq. (4) of H-SCL:
    linear from ``start`` at the first epoch to ``end`` at the last."""
    if not 0 <= epoch < epochs:
        raise ValueError(f"epoch {epoch} is outside 0..{epochs - 1}")
    if epochs == 1:
        return start
    return start + (end - start) * epoch / (epochs - 1)
