"""Time of one optimizer update over ResNet-18's parameters: the training step's path against torch's own Adams (issue 40).

Each optimizer updates the parameters of its own copy of the same ResNet-18 (CIFAR stem, hcl's
projection head; 11.2 M parameters) from the same random gradients, lr 1e-3 and weight decay 1e-6
as the papers train. ``hcl_step`` is what the training step runs: :func:`hcl_cli.optimizer.fused_adam` through
:func:`~hcl_cli.optimizer.update_where_finite` (the finite check of the loss and the gradients' norm, written into the
optimizer's ``found_inf`` on the device, then the fused update); ``torch_adam_fused`` is ``torch.optim.Adam(fused=True)``
given GradScaler's ``found_inf`` (0), ``torch_adam_foreach`` the multi-tensor Adam and ``torch_adam_single`` the
single-tensor one (the arithmetic of the hand-written Adam on flat buffers that the step used before
``fused_adam``, whose own median the results file of that commit holds). Repetitions are interleaved (the order
rotates each repetition) after a few untimed updates; the median of the update times is reported,
and the ratio of the medians. One CPU thread by default. Run from the repository root::

    python -m benchmarks.bench_optimizer
    python -m benchmarks.bench_optimizer --device cuda --repeats 50

Writes ``benchmarks/results/optimizer_cpu.json`` (``optimizer_<device>.json`` off the CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, synchronize, write_result
from hcl_cli.image.networks import build_model
from hcl_cli.optimizer import fused_adam, update_where_finite

LR, WEIGHT_DECAY = 1e-3, 1e-6


def resnet18(device: torch.device) -> nn.Module:
    """The seeded ResNet-18 of ``hcl pretrain --arch resnet18`` at 32x32, on ``device``."""
    torch.manual_seed(0)
    return build_model("resnet18", 3, 32, 128).to(device)


def updates(device: torch.device) -> dict[str, Callable[[], None]]:
    """One update of each optimizer (its gradients set once, kept between updates)."""
    generator = torch.Generator(device=device).manual_seed(1)
    runs: dict[str, Callable[[], None]] = {}
    loss = torch.ones((), device=device)
    flags = {"torch_adam_fused": {"fused": True}, "torch_adam_foreach": {"foreach": True}, "torch_adam_single": {"foreach": False}}
    for name in ("hcl_step", *flags):
        model = resnet18(device)
        generator.manual_seed(1)
        for parameter in model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=generator, device=device)
        if name == "hcl_step":
            step_optimizer = fused_adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
            runs[name] = lambda optimizer=step_optimizer: update_where_finite(optimizer, loss)
            continue
        adam = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, **flags[name])
        if name == "torch_adam_fused":
            adam.found_inf = torch.zeros((), dtype=torch.float32, device=device)  # as GradScaler hands it over
        runs[name] = adam.step
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    runs = updates(device)
    names = list(runs)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(-args.warmup, args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            synchronize(device)
            start = time.perf_counter()
            runs[name]()
            synchronize(device)
            if repeat >= 0:
                seconds[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(times) for name, times in seconds.items()}
    for name, median in medians.items():
        print(
            f"{name}: median {median * 1000:.1f} ms per update ({medians['torch_adam_single'] / median:.2f}x the single-tensor Adam's speed)"
        )
    if not args.no_write:
        write_result(
            "optimizer" if device.type == "cpu" else f"optimizer_{device.type}",
            {
                "recipe": f"ResNet-18 (CIFAR stem, 32x32, projection 128) parameters, lr {LR}, weight decay {WEIGHT_DECAY}, "
                f"{args.threads} thread(s), {args.warmup} untimed then {args.repeats} interleaved updates, medians",
                "parameters": sum(p.numel() for p in resnet18(device).parameters()),
                "threads": args.threads,
                "load_average": load_average(),
                "median_seconds": medians,
                "seconds": seconds,
                "speedup_over_single_tensor_adam": {name: medians["torch_adam_single"] / median for name, median in medians.items()},
                "hcl_step_over_torch_adam_fused": medians["hcl_step"] / medians["torch_adam_fused"],
            },
            device,
        )


if __name__ == "__main__":
    main()
