"""Schedules over training: the sampler hyper-parameters' (pure functions of the epoch) and the learning rate's (of the step)."""

from __future__ import annotations

import math

from hcl_cli.errors import UsageError

BETA_ANNEAL_STEPS = 9
"""HCL's number of annealing levels: ``n_steps = 9`` in the official code (App. D.1 leaves l open)."""
ANNEALS = ("none", "paper", "official")


def beta_at(beta: float, epoch: int, epochs: int, anneal: str, steps: int = BETA_ANNEAL_STEPS) -> float:
    """The concentration beta to use in ``epoch`` (0-based) of ``epochs``, with ``steps`` = l.

    ``"none"`` keeps beta fixed. The two others are HCL's annealing (Robinson et al., Fig. 4),
    which takes beta down towards 0 over training:

    ``"paper"``, App. D.1 as written: ``beta_1 = beta``, and once every ``e / l`` epochs
    ``beta_{i+1} = beta_i - beta / l``, the switch from ``beta_i`` to ``beta_{i+1}`` taking place in
    epoch ``i e / l``. So epoch ``k`` (0-based) runs at ``beta - (beta / l) floor(k l / e)``: l
    levels ``beta, (l-1) beta / l, ..., beta / l`` of ``e / l`` epochs each. The l-th change
    would fall in epoch ``l e / l = e``, after the last one, so beta never reaches 0.

    ``"official"``, the schedule of HCL's code (``image/main.py``): ``betas =
    iter(linspace(beta, 0, n_steps))`` with ``n_steps = l``, and after every epoch whose 1-based
    number is a multiple of ``p = int(e / l)``, ``beta = next(betas)``. The first ``next``
    returns beta itself, so the first level lasts two periods; then beta steps by
    ``beta / (l - 1)`` and reaches 0 only in the last ``e - l p`` epochs (none when l divides
    e). Two cases the code does not survive are read here: ``e < l`` (``p = 0``, a modulo by
    zero) takes a period of one epoch, and calls past the end of the iterator
    (``StopIteration``) keep the last level, 0.
    """
    if anneal not in ANNEALS:
        raise UsageError(f"--anneal must be one of {', '.join(ANNEALS)} (got {anneal!r})")
    if not 0 <= epoch < epochs:
        raise ValueError(f"epoch {epoch} is outside 0..{epochs - 1}")
    if steps < 1:
        raise ValueError(f"the annealing needs at least one level (got {steps})")
    if anneal == "none":
        return beta
    if anneal == "paper":
        return beta * (steps - epoch * steps // epochs) / steps
    calls = epoch // max(epochs // steps, 1)
    if calls == 0 or steps == 1:
        return beta
    level = min(calls, steps) - 1
    return beta * (steps - 1 - level) / (steps - 1)


def threshold_at(start: float, end: float, epoch: int, epochs: int) -> float:
    """H-SCL(tau)'s cosine threshold ``l`` in ``epoch`` (0-based) of ``epochs``, Eq. (4) of H-SCL:
    linear from ``start`` at the first epoch to ``end`` at the last."""
    if not 0 <= epoch < epochs:
        raise ValueError(f"epoch {epoch} is outside 0..{epochs - 1}")
    if epochs == 1:
        return start
    return start + (end - start) * epoch / (epochs - 1)


LR_SCHEDULES = ("constant", "cosine")


def learning_rate_at(lr: float, step: int, steps: int, warmup_steps: int, schedule: str) -> float:
    """The learning rate of ``step`` (0-based) of ``steps``: linear warm-up from ``lr / warmup_steps`` at step 0 to ``lr``
    at step ``warmup_steps - 1`` (Goyal et al. 2017's gradual warm-up; SimCLR's code, ``step / warmup_steps * lr``, starts
    at 0 at step 0 and reaches ``lr`` one step later: hcl's rates are SimCLR's one step ahead, and no step trains at
    rate 0), then ``constant`` at ``lr`` or
    ``cosine`` from ``lr`` towards 0 over the remaining steps (SGDR without restarts, Loshchilov & Hutter 2017; MoCo-v2's
    ``--cos``, ``lr * 0.5 * (1 + cos(pi * t / T))``, taken per step where main_moco.py takes it per epoch)."""
    if not 0 <= step < steps:
        raise ValueError(f"step {step} is outside 0..{steps - 1}")
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    return lr * 0.5 * (1.0 + math.cos(math.pi * (step - warmup_steps) / (steps - warmup_steps)))
