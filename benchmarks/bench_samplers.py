"""Cost of each negative sampler: one full training step, relative to ucl in the same run (issue 3).

A step is what ``hcl pretrain`` does per batch: the forward of the small CNN with its projection
head on both views of B digits-sized (1 x 8 x 8) images, the contrastive loss, the backward and
an Adam step. The sampler options are ``PretrainConfig``'s defaults (hscl-threshold at its
first-epoch threshold). Repetitions are interleaved (the sampler order rotates every repetition)
so that drifts in machine load hit every sampler alike; each repetition's step time is divided by
the ucl step of the same repetition, and the median of those ratios is reported with the median
step time (the targets are judged on it). The same figures for the process's CPU time, which other
processes on a busy shared machine disturb less, are recorded too. Targets: hucl, debiased, scl
and hscl <= 1.05x; ot <= 1.25x; undimix <= 1.5x. Run from the repository root::

    python -m benchmarks.bench_samplers --threads 1

It writes ``benchmarks/results/samplers.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch
from tqdm import tqdm

from benchmarks.common import synchronize, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.models import build_model
from hcl_cli.objectives import SAMPLERS, contrastive_loss
from hcl_cli.runtime import resolve_device

TARGETS = {"debiased": 1.05, "hucl": 1.05, "scl": 1.05, "hscl": 1.05, "ot": 1.25, "undimix": 1.5}
IMAGE_SIZE, CLASSES = 8, 10


def timed_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, views: torch.Tensor, labels: torch.Tensor, sampler: str, options: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds for one forward, loss, backward and Adam step."""
    synchronize(views.device)
    start, start_cpu = time.perf_counter(), time.process_time()
    _, hidden, z = model(views)
    z1, z2 = z.chunk(2)
    loss = contrastive_loss(z1, z2, labels, sampler=sampler, head_inputs=tuple(hidden.chunk(2)), **options)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    synchronize(views.device)
    return time.perf_counter() - start, time.process_time() - start_cpu


def median_ratio(times: list[float], baseline: list[float]) -> float:
    """Median over repetitions of a sampler's step time over the ucl step of the same repetition."""
    return statistics.median(t / b for t, b in zip(times, baseline))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256, help="images per batch (each gives two views)")
    parser.add_argument("--repeats", type=int, default=100, help="timed, interleaved steps per sampler")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per sampler first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    torch.manual_seed(0)
    config = PretrainConfig()
    options = config.loss_options() | config.sampler_state(0)
    model = build_model("small_cnn", 1, IMAGE_SIZE, config.projection_dim).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    views = torch.randn(2 * args.batch_size, 1, IMAGE_SIZE, IMAGE_SIZE, device=device)
    labels = torch.randint(0, CLASSES, (args.batch_size,), device=device)

    load_before = os.getloadavg()[0]
    samplers = list(SAMPLERS)
    for sampler in samplers:
        for _ in range(args.warmup):
            timed_step(model, optimizer, views, labels, sampler, options)
    wall: dict[str, list[float]] = {sampler: [] for sampler in samplers}
    cpu: dict[str, list[float]] = {sampler: [] for sampler in samplers}
    for repeat in tqdm(range(args.repeats), desc="repetitions", disable=None):
        shift = repeat % len(samplers)
        for sampler in samplers[shift:] + samplers[:shift]:
            wall_seconds, cpu_seconds = timed_step(model, optimizer, views, labels, sampler, options)
            wall[sampler].append(wall_seconds)
            cpu[sampler].append(cpu_seconds)

    results = {}
    for sampler in samplers:
        ratio = median_ratio(wall[sampler], wall["ucl"])
        target = TARGETS.get(sampler)
        results[sampler] = {
            "median_step_ms": round(1e3 * statistics.median(wall[sampler]), 3),
            "ratio_to_ucl": round(ratio, 4),
            "target": target,
            "meets_target": None if target is None else ratio <= target,
            "median_step_cpu_ms": round(1e3 * statistics.median(cpu[sampler]), 3),
            "cpu_ratio_to_ucl": round(median_ratio(cpu[sampler], cpu["ucl"]), 4),
        }
        row = results[sampler]
        print(f"{sampler:15s} {row['median_step_ms']:8.2f} ms {ratio:6.3f}x   cpu {row['median_step_cpu_ms']:8.2f} ms {row['cpu_ratio_to_ucl']:6.3f}x   target {target or '-'}")
    payload = {
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "model": "small_cnn, 1x8x8 inputs, projection_dim 128, Adam",
        "options": options,
        "results": results,
    }
    write_result("samplers", payload, device)


if __name__ == "__main__":
    main()
