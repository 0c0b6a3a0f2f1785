"""Step time against the queue size K of the momentum encoder, relative to K = 0 at the same batch size.

A step is ``hcl_cli.image.step.TrainingStep`` as ``build_training`` makes it for ``hcl pretrain
--queue-size K``: two augmented views of a uint8 batch of B prepared digits, the small CNN and its
projection head on both; with K > 0 also the moving average of the key encoder, its forward pass
on both views, the loss over the 2B + K candidates and the keys' entry into the queue; then the
backward, the gradient norm and Adam. Every K gets its own model, built from the same seed, and
its queue is filled before timing (K random unit keys pushed at once), so every timed step
contrasts each anchor with the batch's keys and a full queue. Repetitions are interleaved (the
order of the K rotates every repetition; every K of a repetition trains on the same batch) so
that drifts in machine load hit every K alike; each repetition's step time is divided by the
K = 0 step of the same repetition, and the median of those ratios is reported with the median
step time, for wall-clock and for the process's CPU time. Also recorded: the queue's size in
memory (keys, labels and the sampler's key features, in the training precision) and the
similarity matrix of the loss in float32. Run from the repository root::

    python -m benchmarks.bench_queue --threads 2
    python -m benchmarks.bench_queue --threads 2 --queue-mode moco --samplers ucl hucl

It writes ``benchmarks/results/queue_cpu.json`` (``queue_<device>.json`` off the CPU), and with
``--queue-mode moco`` (MoCo-v2: B queries of one view against their keys and the K queued keys,
the key encoder on the other view with shuffled BatchNorm; the queue starts full of random keys)
``queue_moco.json`` (``queue_moco_<device>.json``), K = 0 being the in-batch step of the same
sampler. With several ``--samplers`` every (sampler, K) is timed in the same interleaved loop and
the results are grouped by sampler.
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
from hcl_cli.image.step import TrainingStep, build_training

QUEUE_SIZES = (0, 4096, 16384, 65536)
SEED = 0


def queue_bytes(step: TrainingStep) -> int:
    """Bytes of the queue's buffers on the device (keys, labels, key features); 0 without a queue."""
    return 0 if step.queue is None else sum(buffer.numel() * buffer.element_size() for buffer in step.queue.buffers(recurse=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", nargs="+", default=["hucl"], help="the samplers to time (default: hucl, the default of hcl pretrain)")
    parser.add_argument("--queue-mode", default="batch", choices=("batch", "moco"), help="how the queue is used (pretrain.queue_mode)")
    parser.add_argument(
        "--queue-sizes", type=int, nargs="+", default=list(QUEUE_SIZES), help="values of K; 0 is the baseline and always runs"
    )
    parser.add_argument("--batch-size", type=int, default=256, help="images per batch (each gives two views)")
    parser.add_argument("--projection-dim", type=int, default=128, help="size of the projections, hence of each queued key")
    parser.add_argument("--repeats", type=int, default=20, help="timed, interleaved steps per K")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per K first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = sorted({0, *args.queue_sizes})
    load_before = load_average()
    with tempfile.TemporaryDirectory() as scratch, distributed_context(args.device) as context:
        device = context.device
        card = prepared(Path(scratch) / "digits", dataset="digits")
        images, labels = load_split(Path(scratch) / "digits", "train", device)
        configs, steps = {}, {}
        for sampler in args.samplers:
            for size in sizes:
                configs[sampler, size] = PretrainConfig(
                    sampler=sampler,
                    arch="small_cnn",
                    projection_dim=args.projection_dim,
                    batch_size=args.batch_size,
                    queue_size=size,
                    queue_mode=args.queue_mode,
                    device=args.device,
                    seed=SEED,
                )
                context.seed_everything(SEED)
                step = steps[sampler, size] = build_training(configs[sampler, size], card, context)[1]
                if step.queue is not None and not step.queue.moco:
                    full = torch.randn(size, args.projection_dim, generator=torch.Generator().manual_seed(SEED)).to(device)
                    step.queue.push(full, torch.zeros(size // 2, dtype=torch.int64, device=device))
        wall, cpu = interleaved_step_times(steps, configs, images, labels, args.batch_size, args.warmup, args.repeats, SEED)

    anchors = args.batch_size if args.queue_mode == "moco" else 2 * args.batch_size
    results: dict[str, dict[str, dict[str, float | int]]] = {}
    for sampler in args.samplers:
        results[sampler] = {}
        for size in sizes:
            ratio = median_ratio(wall[sampler, size], wall[sampler, 0])
            candidates = 2 * args.batch_size if size == 0 else (1 + size if args.queue_mode == "moco" else 2 * args.batch_size + size)
            row = results[sampler][str(size)] = {
                "median_step_ms": round(1e3 * statistics.median(wall[sampler, size]), 3),
                "ratio_to_k0": round(ratio, 4),
                "median_step_cpu_ms": round(1e3 * statistics.median(cpu[sampler, size]), 3),
                "cpu_ratio_to_k0": round(median_ratio(cpu[sampler, size], cpu[sampler, 0]), 4),
                "candidates_per_anchor": candidates,
                "queue_bytes": queue_bytes(steps[sampler, size]),
                "similarity_matrix_bytes": (2 * args.batch_size if size == 0 else anchors) * candidates * 4,
            }
            print(
                f"{sampler:8s} K = {size:6d}  {row['median_step_ms']:9.2f} ms {ratio:7.3f}x   cpu {row['median_step_cpu_ms']:9.2f} ms "
                f"{row['cpu_ratio_to_k0']:7.3f}x   queue {row['queue_bytes'] / 2**20:8.2f} MiB"
            )
    payload = {
        "step": "hcl_cli.image.step.TrainingStep from build_training (augmentation, key encoder average and forward, forward, loss over the candidates, backward, grad norm, Adam, enqueue)",
        "queue_mode": args.queue_mode,
        "model": f"small_cnn on prepared digits {card.image_shape}, projection_dim {args.projection_dim}",
        "samplers": args.samplers,
        "queue_dtype": str(next(step.queue.keys.dtype for step in steps.values() if step.queue is not None)).removeprefix("torch.")
        if len(sizes) > 1
        else None,
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "queue_filled_before_timing": True,
        "load_average_1min": {"before": load_before, "after": load_average()},
        "results": results,
    }
    stem = "queue_moco" if args.queue_mode == "moco" else "queue"
    on_cpu = device.type == "cpu"
    write_result(stem if on_cpu and args.queue_mode == "moco" else f"{stem}_{device.type}", payload, device)


if __name__ == "__main__":
    main()
