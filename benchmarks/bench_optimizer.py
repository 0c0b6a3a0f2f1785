"""Time of one optimizer update over ResNet-18's parameters: the training step's path for each ``--optimizer`` against
torch's own optimizers (issue 40).

Each optimizer updates the parameters of its own copy of the same ResNet-18 (CIFAR stem, hcl's
projection head; 11.2 M parameters) from the same random gradients, weight decay 1e-6. ``hcl_adam``,
``hcl_sgd`` and ``hcl_lars`` are what the training step runs for ``--optimizer adam|sgd|lars``
(:class:`hcl_cli.optimizer.OptimizerSettings`, lr 1e-3 for Adam and 0.03 with momentum 0.9 for SGD and LARS) through
:func:`~hcl_cli.optimizer.update_where_finite` (the finite check of the loss and the gradients' norm, written into the
optimizer's ``found_inf`` on the device, LARS's trust ratio, then the fused update); ``torch_adam_fused`` is
``torch.optim.Adam(fused=True)`` and ``torch_sgd_fused`` ``torch.optim.SGD(fused=True)``, each given GradScaler's
``found_inf`` (0); ``torch_adam_foreach`` the multi-tensor Adam and ``torch_adam_single`` the single-tensor one (the
arithmetic of the hand-written Adam on flat buffers that the step used before the fused one, whose own median
``optimizer_flat_adam.json`` holds). Repetitions are interleaved (the order rotates each repetition) after a few untimed
updates; the median of the update times is reported, and each one's ratio to ``torch_adam_fused``'s median. One CPU
thread by default. Run from the repository root::

    python -m benchmarks.bench_optimizer
    python -m benchmarks.bench_optimizer --device cuda --repeats 50

Writes ``benchmarks/results/optimizer.json`` (``optimizer_<device>.json`` off the CPU).
"""

from __future__ import annotations

import argparse
import functools
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
from hcl_cli.optimizer import OptimizerSettings, update_where_finite

WEIGHT_DECAY = 1e-6
STEP_PATHS = {
    "hcl_adam": OptimizerSettings("adam", lr=1e-3, weight_decay=WEIGHT_DECAY),
    "hcl_sgd": OptimizerSettings("sgd", lr=0.03, weight_decay=WEIGHT_DECAY),
    "hcl_lars": OptimizerSettings("lars", lr=0.03, weight_decay=WEIGHT_DECAY),
}
"""The training step's optimizer for each ``--optimizer`` timed."""
TORCH_OPTIMIZERS = {
    "torch_adam_fused": (torch.optim.Adam, {"lr": 1e-3, "fused": True}),
    "torch_sgd_fused": (torch.optim.SGD, {"lr": 0.03, "momentum": 0.9, "fused": True}),
    "torch_adam_foreach": (torch.optim.Adam, {"lr": 1e-3, "foreach": True}),
    "torch_adam_single": (torch.optim.Adam, {"lr": 1e-3, "foreach": False}),
}
"""torch's own optimizers, called as a training loop would (the fused ones given GradScaler's ``found_inf``)."""


def resnet18(device: torch.device) -> nn.Module:
    """The seeded ResNet-18 of ``hcl pretrain --arch resnet18`` at 32x32, on ``device``."""
    torch.manual_seed(0)
    return build_model("resnet18", 3, 32, 128).to(device)


def updates(device: torch.device) -> dict[str, Callable[[], object]]:
    """One update of each optimizer (its gradients set once, kept between updates)."""
    generator = torch.Generator(device=device).manual_seed(1)
    runs: dict[str, Callable[[], object]] = {}
    loss = torch.ones((), device=device)
    for name in (*STEP_PATHS, *TORCH_OPTIMIZERS):
        model = resnet18(device)
        generator.manual_seed(1)
        for parameter in model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=generator, device=device)
        if name in STEP_PATHS:
            runs[name] = functools.partial(update_where_finite, STEP_PATHS[name].build(model.parameters()), loss)
            continue
        kind, settings = TORCH_OPTIMIZERS[name]
        optimizer = kind(model.parameters(), weight_decay=WEIGHT_DECAY, **settings)
        if settings.get("fused"):
            optimizer.found_inf = torch.zeros((), dtype=torch.float32, device=device)  # as GradScaler hands it over
        runs[name] = optimizer.step
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
    ratios = {name: median / medians["torch_adam_fused"] for name, median in medians.items()}
    for name, median in medians.items():
        print(f"{name}: median {median * 1000:.1f} ms per update ({ratios[name]:.2f}x torch_adam_fused's time)")
    if not args.no_write:
        write_result(
            "optimizer" if device.type == "cpu" else f"optimizer_{device.type}",
            {
                "recipe": f"ResNet-18 (CIFAR stem, 32x32, projection 128) parameters, weight decay {WEIGHT_DECAY}, Adam lr 1e-3, "
                f"SGD and LARS lr 0.03 momentum 0.9, {args.threads} thread(s), {args.warmup} untimed then {args.repeats} "
                "interleaved updates, medians",
                "parameters": sum(p.numel() for p in resnet18(device).parameters()),
                "threads": args.threads,
                "load_average": load_average(),
                "median_seconds": medians,
                "seconds": seconds,
                "time_over_torch_adam_fused": ratios,
            },
            device,
        )


if __name__ == "__main__":
    main()
