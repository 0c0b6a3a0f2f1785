"""The ot sampler's Sinkhorn on a CPU: its CPU path (stabilised scaling rounds, the stop read every round) against its device
path (log-domain rounds, the stop read every ``SETTLED_READ_EVERY`` rounds), on graph training costs.

Both paths run through the product's own entry, :func:`hcl_cli.objectives.ot.sinkhorn_log_coupling` (the device path on
the CPU by :data:`~hcl_cli.objectives.ot.DEVICE_PATH_ON_CPU`). The costs are what the ot sampler gives Sinkhorn in
``hcl pretrain`` (:func:`~hcl_cli.objectives.ot.transport_cost` of the nodes against the graphs of a batch): the MUTAG
of data/raw prepared as ``hcl prepare`` does, HCL-OT Table V's preset (``hclot-mutag-ot-eps0.05``: GIN 3 x 32, batch
128), its untrained encoder of seed s (:func:`hcl_cli.tables.runs.train_encoder`) on the first batch of its epoch 0,
for s in 0..``--batches``-1. At each epsilon (Table V's 0.05 and 0.5), ``--iterations`` rounds at most (the preset's
1000), one torch thread: each path's CPU seconds per call (median over ``--repeats`` calls, the paths alternating),
the rounds it ran, and the largest difference of the couplings, ``max |P_cpu - P_device|`` (and of q = n P). Run from
the repository root::

    nice -n 10 python -m benchmarks.bench_sinkhorn_cpu

It writes ``benchmarks/results/sinkhorn_cpu.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, write_result
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.objectives import ot
from hcl_cli.objectives.node_graph import NodeGraphBatch
from hcl_cli.stages import prepare
from hcl_cli.tables.methods import preset_values
from hcl_cli.tables.runs import Prepared, load_prepared, train_encoder
from hcl_cli.training.loop import epoch_order

PRESET = "hclot-mutag-ot-eps0.05"
"""HCL-OT Table V's ot row on MUTAG: the model and batch size the costs come from (its epsilon is set per measurement)."""
PATHS = {"cpu": False, "device": True}
"""Each path's name and its :data:`~hcl_cli.objectives.ot.DEVICE_PATH_ON_CPU`."""


@torch.no_grad()
def training_cost(data: Prepared, seed: int, scratch: Path) -> Tensor:
    """The ot sampler's cost of the first batch of epoch 0 under :data:`PRESET`'s untrained encoder of ``seed``."""
    config = PretrainConfig(**{**preset_values(PRESET), "seed": seed, "data": str(data.folder), "device": "cpu"})
    model = train_encoder(config, data, scratch, train=False)
    batch = data.samples[epoch_order(len(data.samples), seed, 0)[: config.batch_size]]
    graphs, nodes = model.encoder(batch.x, batch.edges, batch.batch, batch.num_graphs)
    return ot.transport_cost(NodeGraphBatch(model.local_d(nodes), model.global_d(graphs), batch.batch, None), config.loss_options(0))


def rounds_run(run: Callable[[], Tensor], device_path: bool) -> int:
    """The rounds one call of ``run`` ran on a path: its row updates (a log-domain round takes two ``logsumexp`` passes)."""
    owner, name = (ot, "logsumexp_flushed") if device_path else (ot.StabilisedKernel, "update_rows")
    counted, calls = getattr(owner, name), []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return counted(*args, **kwargs)

    with mock.patch.object(owner, name, counting):
        run()
    return len(calls) // 2 if device_path else len(calls)


def measure(cost: Tensor, epsilon: float, iterations: int, repeats: int) -> dict[str, Any]:
    """Both paths on ``cost``: CPU seconds per call (median, the paths alternating), rounds run, the couplings' difference."""
    couplings, seconds, rounds = {}, {name: [] for name in PATHS}, {}
    for repeat in range(repeats):
        for name in list(PATHS)[:: 1 if repeat % 2 else -1]:
            with ot.device_path_on_cpu(PATHS[name]):
                start = time.process_time()
                couplings[name] = ot.sinkhorn_log_coupling(cost, epsilon, iterations).exp()
                seconds[name].append(time.process_time() - start)
    for name, device_path in PATHS.items():
        with ot.device_path_on_cpu(device_path):
            rounds[name] = rounds_run(lambda: ot.sinkhorn_log_coupling(cost, epsilon, iterations), device_path)
    difference = float((couplings["cpu"] - couplings["device"]).abs().max())
    return {
        "cpu_seconds_per_call": {name: round(statistics.median(values), 4) for name, values in seconds.items()},
        "device_over_cpu": round(statistics.median(seconds["device"]) / statistics.median(seconds["cpu"]), 2),
        "rounds": rounds,
        "max_abs_p_difference": difference,
        "max_abs_q_difference": difference * cost.shape[0],
        "row_sum_error": {name: float((coupling.sum(1) * cost.shape[0] - 1).abs().max()) for name, coupling in couplings.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default="data/raw", help="the TU data: a folder (data/raw: tu/NAME.zip), a zip or a tar archive")
    parser.add_argument("--dataset", default="MUTAG", help="the TU dataset's name")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.05, 0.5])
    parser.add_argument("--iterations", type=int, default=1000, help="Sinkhorn's rounds at most (the preset's 1000)")
    parser.add_argument("--batches", type=int, default=3, help="costs measured: the first batch under seeds 0..N-1")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per path and cost")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "prepared"
        prepare.run(PrepareConfig(dataset="tu", name=args.dataset, path=str(args.archive), out=str(folder)))
        data = load_prepared(folder)
        costs = [training_cost(data, seed, Path(scratch) / "checkpoints") for seed in range(args.batches)]
    for seed, cost in enumerate(costs):
        finite = cost[cost.isfinite()]
        for epsilon in args.epsilons:
            row = {
                "seed": seed,
                "shape": list(cost.shape),
                "epsilon": epsilon,
                "max_finite_cost_over_epsilon": float(finite.abs().max()) / epsilon,
            }
            row |= measure(cost, epsilon, args.iterations, args.repeats)
            print(
                f"seed {seed} {tuple(cost.shape)} eps {epsilon}: {row['cpu_seconds_per_call']} s, rounds {row['rounds']}, max|dP| {row['max_abs_p_difference']:.2e}"
            )
            rows.append(row)
    write_result(
        "sinkhorn_cpu",
        {
            "costs": f"{args.dataset} (data/raw), preset {PRESET}'s untrained GIN, the first batch of epoch 0 per seed: transport_cost",
            "iterations": args.iterations,
            "threads": 1,
            "repeats": args.repeats,
            "load_average_1min": load_average(),
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
