"""The kNN probe's share of a default digits pretrain: what ``--eval-every``'s default costs (issue 54, item 5).

Times, on the default digits split (``hcl prepare`` at its defaults, into a temporary folder unless ``--dataset`` names a
prepared one) and at ``hcl pretrain``'s defaults on the CPU, the epochs of the product's training loop
(:func:`hcl_cli.training.loop.train_one_epoch`) and the calls of the probe the run makes
(:class:`hcl_cli.training.probes.KnnProbe`: embed its bank and queries, weighted kNN), each as a median over repetitions.
A run of E epochs probes every ``eval_every`` epochs, so the probe's share is
``E // eval_every * probe / (E * epoch + E // eval_every * probe)``. Writes ``benchmarks/results/knn_probe_cpu.json``.

    python -m benchmarks.bench_knn_probe --epochs 10 --probes 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, prepared, timed_epochs, training_run, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import distributed_context
from hcl_cli.image.card import load_card
from hcl_cli.image.modality import IMAGES
from hcl_cli.training.probes import KnnProbe


def probe_seconds(config: PretrainConfig, epochs: int, probes: int) -> dict[str, object]:
    """Median seconds of an epoch (over ``epochs``) and of a probe call (over ``probes``) on ``config``'s run, and the share."""
    with distributed_context(config.device) as context, tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        epoch_seconds = timed_epochs(training, epochs, warmup=1)
        probe = KnnProbe.from_prepared(config.data, IMAGES, load_card(config.data), config.seed, config.batch_size)
        calls = []
        for _ in range(probes):
            start = time.perf_counter()
            probe(training.model)
            calls.append(time.perf_counter() - start)
    epoch, call = statistics.median(epoch_seconds), statistics.median(calls)
    probed = config.epochs // config.eval_every
    share = probed * call / (config.epochs * epoch + probed * call)
    return {
        "train_images": len(training.samples),
        "probe_bank": len(probe.bank_labels),
        "probe_queries": len(probe.query_labels),
        "steps_per_epoch": training.steps_per_epoch,
        "epoch_seconds": [round(seconds, 4) for seconds in epoch_seconds],
        "probe_seconds": [round(seconds, 4) for seconds in calls],
        "median_epoch_seconds": round(epoch, 4),
        "median_probe_seconds": round(call, 4),
        "probes_per_run": probed,
        "probe_share_of_pretrain": round(share, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="", help="A prepared digits folder (default: prepare one in a temporary folder).")
    parser.add_argument("--epochs", type=int, default=10, help="Timed training epochs (the median is the epoch's time).")
    parser.add_argument("--probes", type=int, default=10, help="Timed probe calls (the median is the probe's time).")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch's CPU threads (default: torch's).")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.dataset or str(Path(scratch) / "prepared")
        card = prepared(folder)
        config = PretrainConfig(data=folder, device="cpu")
        load_before = load_average()
        timings = probe_seconds(config, args.epochs, args.probes)
    setting = {
        "dataset": card.name,
        "sampler": config.sampler,
        "batch_size": config.batch_size,
        "epochs": config.epochs,
        "eval_every": config.eval_every,
        "threads": args.threads,
        "load_average_1min": [load_before, load_average()],
    }
    print(
        f"{card.name}: {timings['median_epoch_seconds']} s per epoch, {timings['median_probe_seconds']} s per probe, "
        f"{timings['probes_per_run']} probes in {config.epochs} epochs: {100 * timings['probe_share_of_pretrain']:.1f}% of the pretrain"
    )
    write_result("knn_probe_cpu", {**setting, **timings})


if __name__ == "__main__":
    main()
