"""Whether a rerun of a table's row is the same experiment as the recorded one: verification by distribution.

A row's accuracy is a draw: one seed scores one fold (inductive: about 19 MUTAG graphs, 5.26-point steps), and the same
code moves a seed's draw by a few points on another CPU's float kernels. So a rerun agrees with the record when the 95%
t interval of the difference of the means contains 0 and the difference is under a stated tolerance (in accuracy
points): paired by seed where the rerun's seeds are among the recorded ones (a seed fixes the initial encoder and the
folds, so the per-seed differences are the paired sample), and Welch's interval of two independent samples where they
are not (another seed set draws other folds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from hcl_cli.tables.summary import mean_interval

DEFAULT_TOLERANCE = 3.0
"""Accuracy points: the largest difference of means read as the same experiment (about the papers' gaps between methods)."""


def agreement(recorded: dict[int, float], rerun: dict[int, float], tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """The rerun's accuracies by seed against the recorded ones: both means, the difference (rerun minus recorded), its 95%
    interval (None with a single paired seed), whether the seeds were paired, and ``agrees``: the interval contains 0
    (a single seed has none: the tolerance alone decides) and the difference is under ``tolerance``."""
    if not rerun or not recorded:
        raise ValueError("agreement needs at least one recorded and one rerun accuracy")
    paired = set(rerun) <= set(recorded)
    if paired:
        seeds = sorted(rerun)
        recorded_values, rerun_values = [recorded[seed] for seed in seeds], [rerun[seed] for seed in seeds]
        difference = mean_interval([now - then for now, then in zip(rerun_values, recorded_values, strict=True)])
        interval = difference["ci95"]
    else:
        recorded_values, rerun_values = list(recorded.values()), list(rerun.values())
        interval = welch_interval(rerun_values, recorded_values)
    gap = float(np.mean(rerun_values)) - float(np.mean(recorded_values))
    contains_zero = interval is None or interval[0] <= 0 <= interval[1]
    return {
        "recorded_mean": round(float(np.mean(recorded_values)), 2),
        "now_mean": round(float(np.mean(rerun_values)), 2),
        "difference": round(gap, 2),
        "ci95": interval,
        "paired": paired,
        "tolerance": tolerance,
        "agrees": contains_zero and abs(gap) < tolerance,
    }


def welch_interval(first: list[float], second: list[float]) -> list[float] | None:
    """The 95% interval of ``mean(first) - mean(second)`` for two independent samples (Welch's t, unequal variances); None
    where either has under two values."""
    if len(first) < 2 or len(second) < 2:
        return None
    gap = float(np.mean(first)) - float(np.mean(second))
    shares = [float(np.var(values, ddof=1)) / len(values) for values in (first, second)]
    spread = math.sqrt(sum(shares))
    if spread == 0:
        return [round(gap, 2), round(gap, 2)]
    freedom = sum(shares) ** 2 / sum(share**2 / (len(values) - 1) for share, values in zip(shares, (first, second), strict=True))
    half = float(stats.t.ppf(0.975, freedom)) * spread
    return [round(gap - half, 2), round(gap + half, 2)]


def verdict_text(check: dict[str, Any]) -> str:
    """``agrees: 85.53 recorded, 86.10 now, +0.57 [-1.20, +2.34] (10 seeds, paired; tolerance 3.00)``."""
    interval = f" [{check['ci95'][0]:+.2f}, {check['ci95'][1]:+.2f}]" if check["ci95"] else " (no interval: 1 seed)"
    return (
        f"{'agrees' if check['agrees'] else 'DIFFERS'}: {check['recorded_mean']:.2f} recorded, {check['now_mean']:.2f} now, "
        f"{check['difference']:+.2f}{interval} ({len(check['seeds'])} seeds, {'paired' if check['paired'] else 'unpaired'}; "
        f"tolerance {check['tolerance']:.2f})"
    )
