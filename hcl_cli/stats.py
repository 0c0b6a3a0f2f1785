"""Confidence intervals for accuracies measured on a finite test split."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(accuracy: float, count: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of an accuracy measured on ``count`` test samples.

    Unlike the normal approximation it stays inside [0, 1] and is sound near 0 and 1 (Wilson 1927).
    """
    if count <= 0:
        raise ValueError("the test split must hold at least one sample")
    z2 = z * z / count
    centre = (accuracy + z2 / 2) / (1 + z2)
    half = z * math.sqrt(accuracy * (1 - accuracy) / count + z2 / (4 * count)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)
