"""Where and how reproducibly a stage runs: device choice, the memory it has free, CPU threads, seeding and the training precision."""

from __future__ import annotations

import functools
import os
import random
from pathlib import Path

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


SKIP_VARIABLE = "HCL_SKIP_MEMORY_CHECK"
"""Set to 1, it skips the memory checks (prepare's and pretrain's) for a user who knows better (swap, a lazy allocator)."""
GIB = 2**30


def memory_check_skipped() -> bool:
    return os.environ.get(SKIP_VARIABLE) == "1"


def available_bytes(device: torch.device) -> int | None:
    """Memory the device can still give: CUDA's free memory, or on a CPU the kernel's MemAvailable within the cgroup's limit."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    values = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                values.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit, used = (Path("/sys/fs/cgroup", name).read_text().strip() for name in ("memory.max", "memory.current"))
        if limit != "max":
            values.append(int(limit) - int(used))
    except (OSError, ValueError):
        pass
    return min(values) if values else None


def set_cpu_threads(threads: int | None, device: torch.device, cuda_threads: int) -> int:
    """Set torch's CPU threads for a stage on ``device`` and return them: ``threads`` (``--threads N``), or for ``auto``
    (None) at most ``cuda_threads`` on CUDA and, on a CPU, what the process already has (torch's default)."""
    if threads is None:
        threads = min(torch.get_num_threads(), cuda_threads) if device.type == "cuda" else torch.get_num_threads()
    torch.set_num_threads(threads)
    return threads


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def uses_bf16(precision: str, device: torch.device) -> bool:
    """Whether a step on ``device`` at ``--precision precision`` (``auto|fp32|bf16``) runs under bf16 autocast in channels_last.

    The loss stays float32 (:func:`hcl_cli.objectives.loss.full_precision`). ``auto`` is bf16 on CUDA
    and float32 on every CPU: on the CPUs measured, bf16 was not faster and moved the default run's
    kNN top-1 (``benchmarks/results/cpu_precision.json``); ``--precision bf16`` asks for it anyway.
    """
    if precision == "auto":
        return device.type == "cuda"
    return precision == "bf16"


@functools.lru_cache(maxsize=128)
def constant(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A cached 0-d tensor of ``value`` on ``device`` (never written to), for the scalars a training step uses at every
    step: a Python number in a tensor op is wrapped into a tensor and converted at every call, and a tensor made from
    one on the host would be copied to the device. The same value: the number cast to ``dtype``."""
    with torch.inference_mode(False):
        return torch.full((), value, dtype=dtype, device=device)
