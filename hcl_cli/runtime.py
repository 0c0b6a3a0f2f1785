"""Where and how reproducibly a stage runs: device choice and seeding."""

from __future__ import annotations

import random

import numpy as np
import torch

from hcl_cli.errors import UsageError


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present, else the CPU; asking for ``cuda`` without one is a usage error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but no CUDA device is available")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
