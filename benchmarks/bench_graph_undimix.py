"""UnDiMix on graphs against InfoGraph (ucl): seconds per epoch through the product's own training path.

Each method is a row of ``hcl table --methods fig7`` (:mod:`hcl_cli.tables.methods`: UnDiMix Fig. 7's presets, lr
1e-3, batch 128): ``fig7-infograph`` (ucl), ``fig3-beta1@official`` (HCL at beta 1, JSD_hard) and ``fig7-undimix``
(UnDiMix's importances in JSD_hard's place, Eq. 3 literally, lambda learned), plus ``fig7-undimix`` with
``undimix_uncertainty: badge``. Every run is :func:`hcl_cli.tables.runs.train_encoder`, what ``hcl pretrain`` trains
(its seeding, model, step and epoch loop) on every graph of the dataset, for ``--epochs`` epochs; the first epoch of a
run is left out (first-call costs). The methods run in an order rotated each repetition (seed r), on one torch thread.
A method's figure is the median of its epochs' seconds; the ratio undimix / ucl is that of the medians, and beside it
the median over repetitions of the per-repetition ratios of their median epochs. The image goal is at most 1.5x ucl.
Run from the repository root::

    nice -n 10 python -m benchmarks.bench_graph_undimix

It writes ``benchmarks/results/graph_undimix_cost.json`` (``graph_undimix_cost_NAME.json`` for another ``--dataset``;
``--archive ../shared/datasets/tu.tar.gz --dataset PROTEINS`` for the largest graphs of Fig. 7).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, write_result
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.stages import prepare
from hcl_cli.tables.methods import method
from hcl_cli.tables.runs import load_prepared, train_encoder

IMAGE_GOAL = 1.5
"""The image goal of UnDiMix's cost: at most 1.5x ucl per epoch."""
BASELINE = "ucl"


def methods(dataset_key: str) -> dict[str, dict[str, Any]]:
    """Name -> the pretrain values of each timed method (module docstring)."""
    undimix = method(dataset_key, "fig7-undimix").pretrain
    return {
        BASELINE: method(dataset_key, "fig7-infograph").pretrain,
        "hucl-official": method(dataset_key, "fig3-beta1@official").pretrain,
        "undimix-literal": undimix,
        "undimix-badge": {**undimix, "undimix_uncertainty": "badge"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default="data/raw", help="the TU data: a folder (data/raw: tu/NAME.zip), a zip or a tar archive")
    parser.add_argument("--dataset", default="MUTAG", help="the TU dataset's name")
    parser.add_argument("--epochs", type=int, default=6, help="epochs per run (the first of each is not timed)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per method, seeds 0..N-1, in a rotated order")
    parser.add_argument("--batch-size", type=int, default=128, help="graphs per step (the presets' 128)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", type=Path, help="where the dataset is prepared (default: a temporary folder)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        folder = work / f"prepared-{args.dataset}"
        if not (folder / "card.json").is_file():
            prepare.run(PrepareConfig(dataset="tu", name=args.dataset, path=str(args.archive), out=str(folder)))
        data = load_prepared(folder)
        rows = methods("mutag")  # the Fig. 7 values (the same on every dataset)
        names = list(rows)
        seconds: dict[str, list[list[float]]] = {name: [] for name in names}
        loads = []
        for repeat in range(args.repeats):
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                config = PretrainConfig(
                    **{**rows[name], "epochs": args.epochs, "batch_size": args.batch_size}, seed=repeat, data=str(folder), device="cpu"
                )
                epochs: list[float] = []
                train_encoder(config, data, Path(scratch) / "checkpoints", epoch_seconds=epochs)
                seconds[name].append(epochs[1:] or epochs)
                loads.append(load_average())
                print(f"{name} seed {repeat}: median {statistics.median(seconds[name][-1]):.4f} s per epoch", flush=True)
    medians = {name: statistics.median(s for run in runs for s in run) for name, runs in seconds.items()}
    per_run = {name: [statistics.median(run) for run in runs] for name, runs in seconds.items()}
    ratios = {
        name: {
            "of_medians": round(medians[name] / medians[BASELINE], 3),
            "median_of_paired": round(statistics.median(a / b for a, b in zip(per_run[name], per_run[BASELINE])), 3),
        }
        for name in names
        if name != BASELINE
    }
    write_result(
        "graph_undimix_cost" + ("" if args.dataset == "MUTAG" else f"_{args.dataset.lower()}"),
        {
            "dataset": args.dataset,
            "graphs": len(data.labels),
            "epochs_per_run": args.epochs,
            "timed_epochs_per_run": max(args.epochs - 1, 1),
            "repeats": args.repeats,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "load_average": {"min": min(loads), "max": max(loads)},
            "path": "hcl_cli.tables.runs.train_encoder: hcl pretrain's seeding, model, step and epoch loop",
            "methods": {name: {"pretrain": rows[name], "seconds_per_epoch_median": round(medians[name], 4)} for name in names},
            "ratio_to_ucl": ratios,
            "image_goal": f"at most {IMAGE_GOAL}x ucl",
        },
    )


if __name__ == "__main__":
    main()
