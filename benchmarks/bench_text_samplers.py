"""Quick-thought's training cost under each sampler that reads no labels, against ucl (QT itself): sentences per second.

Every sampler trains the default model on sentences (:func:`hcl_cli.text.step.build_text_training`: 64-d GRUs f and g on
64-d words, Adam) through the product's own step on windows of ``--batch-size`` consecutive sentences of the prepared
corpus (``--corpus``: a folder of .txt files, the repository's data/text by default; ../shared's books for the table's).
Each repetition times ``--steps`` steps of every sampler, in an order rotated each repetition, after ``--warmup``
untimed steps, on one torch thread. A sampler's figure is the median step's seconds; its epoch cost against ucl is the
ratio of the medians (an epoch is the same number of steps for every sampler). Goal: every sampler <= 1.5x ucl. Run::

    nice -n 10 python -m benchmarks.bench_text_samplers

It writes ``benchmarks/results/text_samplers.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, write_result
from hcl_cli.config import PrepareConfig
from hcl_cli.objectives.registry import lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.optimizer import OptimizerSettings
from hcl_cli.stages import prepare
from hcl_cli.text.modality import TEXT
from hcl_cli.text.step import build_text_training

GOAL = 1.5
BASELINE = "ucl"
SAMPLERS: dict[str, tuple[str, dict[str, Any]]] = {
    "ucl": ("ucl", {}),
    "debiased": ("debiased", {"tau_plus": 0.01}),
    "hucl-beta1": ("hucl", {"beta": 1.0, "tau_plus": 0.0}),
    "hucl-beta2": ("hucl", {"beta": 2.0, "tau_plus": 0.0}),
    "undimix": ("undimix", {}),
    "ot": ("ot", {"tau_plus": 0.0}),
}
"""HCL Table 2's and UnDiMix Table 4's samplers, and ot."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="data/text", help="a folder of .txt files, one sentence a line")
    parser.add_argument("--batch-size", type=int, default=400)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per sampler and repetition")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="text_samplers")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        prepare.run(PrepareConfig(dataset="text", path=args.corpus, out=f"{work}/corpus"))
        card = TEXT.load_card(f"{work}/corpus")
        samples, _ = TEXT.load_samples(f"{work}/corpus", ["train"])
    seconds: dict[str, list[float]] = {name: [] for name in SAMPLERS}
    settings = OptimizerSettings(lr=3e-3, weight_decay=1e-6)
    starts = torch.randint(0, len(samples) - args.batch_size + 1, (args.warmup + args.steps,), generator=torch.Generator().manual_seed(0))
    for repeat in range(args.repeats):
        order = list(SAMPLERS)[repeat % len(SAMPLERS) :] + list(SAMPLERS)[: repeat % len(SAMPLERS)]
        for name in order:
            sampler, values = SAMPLERS[name]
            torch.manual_seed(repeat)
            options = SamplerOptions.resolve(lookup(sampler), {"objective": "nce", **values})
            _, step = build_text_training(sampler, card.vocab_size, 64, 64, 1, settings, torch.device("cpu"))
            for index, start in enumerate(starts.tolist()):
                began = time.perf_counter()
                step(samples.window(start, args.batch_size), torch.empty(0), options).read()
                if index >= args.warmup:
                    seconds[name].append(time.perf_counter() - began)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    rows = {
        name: {
            "median_step_seconds": medians[name],
            "sentences_per_second": args.batch_size / medians[name],
            "epoch_cost_vs_ucl": medians[name] / medians[BASELINE],
            "within_goal": medians[name] / medians[BASELINE] <= GOAL,
            "step_seconds": seconds[name],
        }
        for name in SAMPLERS
    }
    for name, row in rows.items():
        print(f"{name:12s} {row['sentences_per_second']:8.0f} sentences/s  {row['epoch_cost_vs_ucl']:.2f}x ucl")
    corpus = {"sentences": card.num_sentences, "documents": card.documents, "vocab_size": card.vocab_size}
    payload = {"corpus": corpus, "batch_size": args.batch_size, "model": "qt-gru 64-d GRUs on 64-d words", "threads": 1}
    write_result(args.name, {**payload, "goal": GOAL, "samplers": rows, "load_average": load_average()})


if __name__ == "__main__":
    main()
