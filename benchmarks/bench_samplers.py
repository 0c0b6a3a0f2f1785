"""Cost of each negative sampler: one step of the real training step, relative to ucl in the same run.

A step is ``hcl_cli.image.step.TrainingStep`` as ``build_training`` makes it for ``hcl
pretrain``: two augmented views of a uint8 batch of B prepared digits (1 x 8 x 8), the small CNN
and its projection head on both, the sampler's contrastive loss, the backward, the gradient norm
and Adam (bf16 autocast on CUDA). Every sampler in ``hcl_cli.objectives.registry.SAMPLERS`` gets
its own model, built from the same seed, and ``PretrainConfig``'s default options at the first
epoch (``config.loss_options(0)``). Repetitions are interleaved (the sampler order rotates every
repetition, and every sampler of a repetition trains on the same random batch) so that drifts in
machine load hit every sampler alike; each repetition's step time is divided by the ucl step of
the same repetition, and the median of those ratios is one run's figure. ``--runs`` such runs (5 by
default, each of ``--repeats`` repetitions) give the reported ratio, the median of the runs'
ratios, with their spread (min and max), and the median step time over all repetitions. The
same figures for the process's CPU time, which other processes on a busy shared machine disturb
less, are recorded too. Targets: hucl, debiased, scl and hscl <= 1.05x; ot <= 1.25x;
undimix <= 1.5x. Run from the repository root::

    python -m benchmarks.bench_samplers --threads 1

It writes ``benchmarks/results/samplers.json`` (``samplers_<device>.json`` off the CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import interleaved_step_times, load_average, median_ratio, prepared, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import distributed_context
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.objectives.registry import SAMPLERS

TARGETS = {"debiased": 1.05, "hucl": 1.05, "scl": 1.05, "hscl": 1.05, "ot": 1.25, "undimix": 1.5}
SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256, help="images per batch (each gives two views)")
    parser.add_argument("--repeats", type=int, default=30, help="timed, interleaved steps per sampler in each run")
    parser.add_argument("--runs", type=int, default=5, help="runs, each giving one median ratio per sampler")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per sampler first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = load_average()
    with tempfile.TemporaryDirectory() as scratch, distributed_context(args.device) as context:
        device = context.device
        card = prepared(Path(scratch) / "digits", dataset="digits")
        images, labels = load_split(Path(scratch) / "digits", "train", device)
        configs = {
            name: PretrainConfig(sampler=name, arch="small_cnn", batch_size=args.batch_size, device=args.device, seed=SEED)
            for name in SAMPLERS
        }
        steps = {}
        for name, config in configs.items():
            context.seed_everything(SEED)
            steps[name] = build_training(config, card, context)[1]
        samplers = list(SAMPLERS)
        runs = [
            interleaved_step_times(steps, configs, images, labels, args.batch_size, args.warmup, args.repeats, SEED + run)
            for run in range(args.runs)
        ]

    results = {}
    for name in samplers:
        ratios = [median_ratio(wall[name], wall["ucl"]) for wall, _ in runs]
        cpu_ratios = [median_ratio(cpu[name], cpu["ucl"]) for _, cpu in runs]
        ratio, target = statistics.median(ratios), TARGETS.get(name)
        results[name] = {
            "median_step_ms": round(1e3 * statistics.median(t for wall, _ in runs for t in wall[name]), 3),
            "ratio_to_ucl": round(ratio, 4),
            "ratio_to_ucl_min_max": [round(min(ratios), 4), round(max(ratios), 4)],
            "ratio_to_ucl_per_run": [round(r, 4) for r in ratios],
            "target": target,
            "meets_target": None if target is None else ratio <= target,
            "median_step_cpu_ms": round(1e3 * statistics.median(t for _, cpu in runs for t in cpu[name]), 3),
            "cpu_ratio_to_ucl": round(statistics.median(cpu_ratios), 4),
            "cpu_ratio_to_ucl_min_max": [round(min(cpu_ratios), 4), round(max(cpu_ratios), 4)],
            "loss_options": dict(configs[name].loss_options(0)),
        }
        row = results[name]
        print(
            f"{name:15s} {row['median_step_ms']:8.2f} ms {ratio:6.3f}x   cpu {row['median_step_cpu_ms']:8.2f} ms {row['cpu_ratio_to_ucl']:6.3f}x   target {target or '-'}"
        )
    payload = {
        "step": "hcl_cli.image.step.TrainingStep from build_training (augmentation, forward, loss, backward, grad norm, Adam)",
        "model": f"small_cnn on prepared digits {card.image_shape}, projection_dim {configs['ucl'].projection_dim}",
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "runs": args.runs,
        "warmup": args.warmup,
        "load_average_1min": {"before": load_before, "after": load_average()},
        "results": results,
    }
    write_result("samplers" if device.type == "cpu" else f"samplers_{device.type}", payload, device)


if __name__ == "__main__":
    main()
