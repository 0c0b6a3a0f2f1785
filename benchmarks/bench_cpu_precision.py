"""float32 against bf16 autocast + channels_last on this CPU: training step time, and the digits accuracy.

Step time: the product's TrainingStep (``build_training`` at ``--precision fp32`` and ``bf16``, the
same seed) on the same random batches, the two interleaved and their order rotated each repetition
(:func:`benchmarks.common.interleaved_step_times`): the default digits run (small CNN, 8x8, batch
256, hucl) and a ResNet-18 on 32x32 RGB images (CIFAR's stem, batch 32). Accuracy: the default
pipeline on digits (prepare, pretrain 60 epochs of hucl, embed, kNN and the fixed linear readout)
once per precision, with Wilson 95% intervals from the 450 test images. ``--precision auto`` keeps
float32 on a CPU because of what this measured (hcl_cli/runtime.py: uses_bf16).

    python -m benchmarks.bench_cpu_precision
    python -m benchmarks.bench_cpu_precision --repeats 1 --resnet-repeats 1 --warmup 0 --batch-size 16 --resnet-batch-size 2 --skip-accuracy
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import interleaved_step_times, load_average, prepared, write_result
from hcl_cli.config import EmbedConfig, KnnConfig, LinearConfig, PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.image.card import DatasetCard, load_card
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.stages import embed, knn_eval, linear_eval, pretrain
from hcl_cli.stats import wilson_interval

PRECISIONS = ("fp32", "bf16")


def step_times(
    card: DatasetCard, images: torch.Tensor, labels: torch.Tensor, arch: str, batch_size: int, warmup: int, repeats: int
) -> dict[str, object]:
    """Median wall seconds of one step at each precision, their spread, and the ratio bf16/fp32 (median of per-repetition ratios)."""
    context = DistributedContext(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    configs = {p: PretrainConfig(arch=arch, batch_size=batch_size, precision=p, device="cpu") for p in PRECISIONS}
    steps = {}
    for precision, config in configs.items():
        context.seed_everything(0)
        steps[precision] = build_training(config, card, context)[1]
    wall, _ = interleaved_step_times(steps, configs, images, labels, batch_size, warmup=warmup, repeats=repeats, seed=0)
    ratios = [b / f for b, f in zip(wall["bf16"], wall["fp32"])]
    return {
        "arch": arch,
        "batch_size": batch_size,
        "image_shape": list(images.shape[1:]),
        "median_step_s": {p: round(statistics.median(wall[p]), 4) for p in PRECISIONS},
        "min_max_step_s": {p: [round(min(wall[p]), 4), round(max(wall[p]), 4)] for p in PRECISIONS},
        "bf16_over_fp32_median": round(statistics.median(ratios), 3),
        "bf16_over_fp32_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
        "repeats": repeats,
    }


def digits_accuracy(folder: Path, data: Path, precision: str) -> dict[str, object]:
    """kNN and linear top-1 of the default digits pipeline trained at ``precision``, with Wilson 95% intervals."""
    out = folder / precision
    pretrain.run(PretrainConfig(data=str(data), out=str(out / "models"), live_dir=str(out / "live"), precision=precision, device="cpu"))
    encoder, embeddings = out / "models" / "encoder.safetensors", out / "embeddings.safetensors"
    embed.run(EmbedConfig(data=str(data), model=str(encoder), out=str(embeddings), device="cpu"))
    knn_eval.run(KnnConfig(embeddings=str(embeddings), out=str(out / "knn.json"), device="cpu"))
    linear_eval.run(
        LinearConfig(embeddings=str(embeddings), model=str(encoder), data=str(data), out=str(out / "linear.json"), device="cpu")
    )
    result = {}
    for name in ("knn", "linear"):
        metrics = json.loads((out / f"{name}.json").read_text())
        low, high = wilson_interval(metrics["top1"], metrics["test_size"])
        result[name] = {"top1": metrics["top1"], "interval_95": [round(low, 4), round(high, 4)], "test_size": metrics["test_size"]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--resnet-repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2, help="untimed repetitions first")
    parser.add_argument("--batch-size", type=int, default=256, help="digits per batch of the small CNN")
    parser.add_argument("--resnet-batch-size", type=int, default=32, help="random 32x32 images per batch of the ResNet-18")
    parser.add_argument("--skip-accuracy", action="store_true", help="time the steps only")
    args = parser.parse_args()
    loads = [load_average()]
    with tempfile.TemporaryDirectory(prefix="hcl-precision-") as tmp:
        folder = Path(tmp)
        data = folder / "prepared"
        prepared(data)
        digits, digit_labels = load_split(data, "train", torch.device("cpu"))
        rgb = torch.randint(0, 256, (512, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
        rgb_labels = torch.arange(512) % 10
        rgb_card = DatasetCard("random", [str(i) for i in range(10)], 10, {"train": 512}, [3, 32, 32], [0.5] * 3, [0.29] * 3)
        timings = [step_times(load_card(data), digits, digit_labels, "small_cnn", args.batch_size, args.warmup, args.repeats)]
        loads.append(load_average())
        timings.append(step_times(rgb_card, rgb, rgb_labels, "resnet18", args.resnet_batch_size, args.warmup, args.resnet_repeats))
        loads.append(load_average())
        accuracy = {} if args.skip_accuracy else {p: digits_accuracy(folder, data, p) for p in PRECISIONS}
        loads.append(load_average())
    write_result(
        "cpu_precision",
        {
            "amx_tile": bool(torch.cpu._is_amx_tile_supported()),
            "avx512_bf16": bool(torch.cpu._is_avx512_bf16_supported()),
            "threads": torch.get_num_threads(),
            "load_average_1min": loads,
            "note": "interleaved on a shared machine: read the ratios; accuracy from one default digits run per precision",
            "step_time": timings,
            "digits_accuracy": accuracy,
        },
    )


if __name__ == "__main__":
    main()
