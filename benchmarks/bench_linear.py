"""Wall time of ``hcl linear-eval`` on CIFAR-sized embeddings on the CPU (target: 2 minutes or less).

Synthetic embeddings: 50,000 train and 10,000 test rows of 512 backbone features in 10 classes
(Gaussian classes whose means overlap, so the readout has work to do). The timed span is the whole
stage (``hcl_cli.stages.linear_eval.run``): reading the embeddings, standardising, fitting, scoring and
writing the metrics. Run from the repository root::

    python -m benchmarks.bench_linear
    python -m benchmarks.bench_linear --train 500 --test 100   # a smoke run

It writes ``benchmarks/results/linear_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result
from hcl_cli.config import LinearConfig
from hcl_cli.embeddings import SPLITS, save_embeddings
from hcl_cli.stages import linear_eval

TRAIN, TEST, DIM, PROJECTION_DIM, NUM_CLASSES = 50_000, 10_000, 512, 128, 10
TARGET_SECONDS = 120.0
SETTINGS = ({"optimizer": "lbfgs"}, {"optimizer": "adam", "lr": 0.05})


def synthetic_embeddings(path: Path, train: int, test: int) -> None:
    """Write ``train`` and ``test`` embeddings of CIFAR's width: class means 0.1 apart per feature, unit Gaussian noise."""
    generator = torch.Generator().manual_seed(0)
    means = 0.1 * torch.randn(NUM_CLASSES, DIM, generator=generator)
    tensors = {}
    for split, count in zip(SPLITS, (train, test)):
        labels = torch.arange(count) % NUM_CLASSES
        backbone = means[labels] + torch.randn(count, DIM, generator=generator)
        tensors |= {f"{split}_backbone": backbone, f"{split}_projection": backbone[:, :PROJECTION_DIM].clone(), f"{split}_labels": labels}
    save_embeddings(path, tensors, {"dataset": "synthetic", "classes": [f"class{c}" for c in range(NUM_CLASSES)], "encoder": None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=TRAIN, help="train embeddings")
    parser.add_argument("--test", type=int, default=TEST, help="test embeddings")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        embeddings, metrics = Path(folder) / "embeddings.safetensors", Path(folder) / "linear.json"
        synthetic_embeddings(embeddings, args.train, args.test)
        for overrides in SETTINGS:
            config = LinearConfig(embeddings=str(embeddings), out=str(metrics), device="cpu", **overrides)
            start = time.perf_counter()
            linear_eval.run(config)
            seconds = time.perf_counter() - start
            top1 = json.loads(metrics.read_text())["top1"]
            runs.append({**config.params(), "seconds": round(seconds, 2), "top1": top1, "within_target": seconds <= TARGET_SECONDS})
    write_result(
        "linear_cpu",
        {
            "setup": {
                "train": [args.train, DIM],
                "test": [args.test, DIM],
                "num_classes": NUM_CLASSES,
                "threads": torch.get_num_threads(),
                "load_average": os.getloadavg(),
            },
            "target_seconds": TARGET_SECONDS,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
