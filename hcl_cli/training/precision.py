"""Which precision the image encoder trains in: ``--precision auto|fp32|bf16``.

``bf16`` runs the encoder's forward and backward under bfloat16 autocast with the model and views in
channels_last (the loss stays float32: :func:`hcl_cli.objectives.loss.full_precision`); ``fp32``
runs everything in float32. ``auto`` picks bf16 on CUDA and float32 on every CPU. The CPU rule is
measured, not guessed: ``benchmarks/bench_cpu_precision.py`` timed the product's training step both
ways on this repository's machine, an Intel Xeon with AMX and AVX512_BF16 (the CPUs on which bf16
could pay), and bf16 was not measurably faster there, in two sessions (the first, in commit 82146ac's results file, 1.24x float32's
ResNet-18 step, the second 0.98x with runs from 0.89x to 1.41x; the digits' small CNN slower in
both), while the default digits run's kNN top-1 fell by four test images (within the intervals)
(``benchmarks/results/cpu_precision.json``); on an AMD EPYC with AVX512_BF16 it was slower (issue
22). ``--precision bf16`` asks for it on a CPU where it measures faster.
"""

from __future__ import annotations

import torch


def uses_bf16(precision: str, device: torch.device) -> bool:
    """Whether a step on ``device`` at ``--precision precision`` runs under bf16 autocast in channels_last."""
    if precision == "auto":
        return device.type == "cuda"
    return precision == "bf16"
