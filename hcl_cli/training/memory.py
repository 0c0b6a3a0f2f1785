"""Peak memory of a training run, estimated before its first step, and a refusal when it will not fit.

A ResNet-50 at batch 512 on a CPU needs tens of GiB; without a check the kernel kills the run at
its first step, after minutes, with no message. :func:`check_memory` estimates the memory that
training adds to what is already resident (the data and the model): the gradients and Adam's two
moments (three copies of the parameters, float32), and the tensors a step keeps for its backward
pass, measured by running the real step (on a copy of the model, the optimizer and the RNG, so
the run is unchanged) on 4, 8 and 16 samples with :func:`torch.autograd.graph.saved_tensors_hooks`
and extrapolating to the batch: activations grow linearly in it, the loss's 2B x 2B matrices
quadratically, so three sizes fit both exactly. :data:`LINEAR_FACTOR` and :data:`QUADRATIC_FACTOR`
cover what a step holds besides the saved tensors (the activations' gradients during backward, the
loss's temporaries); they were calibrated against the peak resident memory (``ru_maxrss``) that a
real first step adds on a CPU (2-core x86_64, torch 2.14.1): ResNet-18 at B = 64 and 256 and
ResNet-50 at B = 64 peak at 1.0-1.26x their saved activations; a small CNN at B = 2048, where the
loss dominates, at 4x (hucl), 9x (ot) and 10x (undimix) the loss's saved matrices.

The estimate is compared with the memory the device has free (CUDA: ``torch.cuda.mem_get_info``;
CPU: ``MemAvailable`` of ``/proc/meminfo``, and the cgroup's limit when one is set). When it does
not fit, the run stops with the estimate and what to change; ``HCL_SKIP_MEMORY_CHECK=1`` skips
the check for a user who knows better (swap, a lazy allocator).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.errors import HclError
from hcl_cli.modality import Samples, Step
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.runtime import GIB, SKIP_VARIABLE, available_bytes, memory_check_skipped

PROBE_SIZES = (4, 8, 16)
"""Batch sizes of the three measuring steps (a line and a parabola through them are exact)."""
LINEAR_FACTOR = 1.3
"""A step's peak over the activations it saves for backward: their gradients and temporaries (CPU ResNet-18/50 steps: 1.0-1.26)."""
QUADRATIC_FACTOR = 10.0
"""The loss's peak over the pairwise matrices it saves: temporaries of the 2B x 2B matrices (small CNN, B = 2048: hucl 4, ot 9, undimix 10)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """What a training step adds at its peak to the memory already resident, in bytes, split by cause."""

    optimizer: int
    """Gradients and Adam's two moments: three float32 copies of the trained parameters."""
    linear: float
    """Bytes per sample of the batch that a step holds (activations), :data:`LINEAR_FACTOR` included."""
    quadratic: float
    """Bytes per squared sample (the loss's pairwise matrices), :data:`QUADRATIC_FACTOR` included."""

    def step_bytes(self, batch_size: int) -> float:
        """The activations and loss matrices of one step on ``batch_size`` samples."""
        return self.linear * batch_size + self.quadratic * batch_size**2

    def total(self, batch_size: int) -> float:
        return self.optimizer + self.step_bytes(batch_size)

    def largest_batch(self, available: float) -> int:
        """The largest power-of-two batch whose step fits in ``available`` bytes (0 if none does)."""
        batch = 0
        while self.total(max(1, batch * 2)) <= available and batch < 2**20:
            batch = max(1, batch * 2)
        return batch


def saved_bytes(run: Callable[[], Any]) -> int:
    """The bytes of the distinct storages that ``run`` saves for backward, other than parameters (already resident)."""
    storages: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        if not isinstance(tensor, nn.Parameter):
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(storages.values())


def estimate_step_memory(
    step: Step,
    samples: Samples,
    labels: Tensor,
    loss_options: SamplerOptions,
    device: torch.device,
    timings: list[tuple[int, float]] | None = None,
) -> MemoryEstimate:
    """Measure ``step`` (a training step, called as ``step(batch, labels, loss_options)``) on a copy of itself.

    The copy's three small steps see the same kind of samples as training; the random state is
    forked, so the run's draws are unchanged, and the real model, optimizer and queue are not touched.
    ``timings``, when given, receives each step's (batch size, wall seconds): ``hcl preset``'s time
    estimate (:mod:`hcl_cli.presets.cost`) reads them instead of running more steps.
    """
    parameters = [parameter for group in step.optimizer.param_groups for parameter in group["params"] if parameter.requires_grad]
    optimizer = 3 * sum(parameter.numel() * parameter.element_size() for parameter in parameters)
    sizes = [size for size in PROBE_SIZES if size <= len(samples)]
    if len(sizes) < len(PROBE_SIZES):
        return MemoryEstimate(optimizer, 0.0, 0.0)
    probe = copy.deepcopy(step)
    measured = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for size in sizes:
            index = torch.linspace(0, len(samples) - 1, size).long().to(labels.device)
            start = time.perf_counter()
            measured.append(saved_bytes(lambda index=index: probe(samples[index], labels[index], loss_options)))
            if timings is not None:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                timings.append((size, time.perf_counter() - start))
    # The parabola a + b n + c n^2 through the three points; a (what does not grow with the batch) is already resident.
    (n1, n2, n3), (y1, y2, y3) = sizes, measured
    c = ((y3 - y1) / (n3 - n1) - (y2 - y1) / (n2 - n1)) / (n3 - n2)
    b = (y2 - y1) / (n2 - n1) - c * (n1 + n2)
    return MemoryEstimate(optimizer, LINEAR_FACTOR * max(b, 0.0), QUADRATIC_FACTOR * max(c, 0.0))


def check_training_memory(
    step: Step, samples: Samples, labels: Tensor, loss_options: SamplerOptions, batch_size: int, device: torch.device
) -> None:
    """Before the first step: a one-line :class:`HclError` when a step on ``batch_size`` samples will not fit on ``device``.

    Nothing is measured when ``HCL_SKIP_MEMORY_CHECK=1`` or the device's free memory is unknown,
    nor for a loss that takes gradients itself (``torch.func``, as UnDiMix's literal gradient does),
    where saved-tensor hooks cannot run.
    """
    available = None if memory_check_skipped() else available_bytes(device)
    if available is None:
        return
    try:
        estimate = estimate_step_memory(step, samples, labels, loss_options, device)
    except RuntimeError as error:
        if "saved tensor hooks" not in str(error):
            raise
        return
    check_memory(estimate, batch_size, device, available)


def check_memory(estimate: MemoryEstimate, batch_size: int, device: torch.device, available: int) -> None:
    """A one-line :class:`HclError` when the step's estimated peak does not fit in ``available`` bytes of ``device``."""
    needed = estimate.total(batch_size)
    if needed <= available:
        return
    fits = estimate.largest_batch(available)
    batch_hint = f"--batch-size {fits} (about {estimate.total(fits) / GIB:.1f} GiB)" if fits else "a smaller --arch"
    gpu_hint = "" if device.type == "cuda" else ", or a GPU (--device cuda)"
    raise HclError(
        f"training would need about {needed / GIB:.1f} GiB more at its first step (gradients and Adam {estimate.optimizer / GIB:.1f} GiB, "
        f"a step on a batch of {batch_size} {estimate.step_bytes(batch_size) / GIB:.1f} GiB), but the {device.type} has "
        f"{available / GIB:.1f} GiB free: try {batch_hint}{gpu_hint}; {SKIP_VARIABLE}=1 skips this check"
    )
