"""GIN backend: torch-geometric's ``GINConv``, ``global_add_pool`` and ``Batch`` against hcl's torch-only ones.

Both sides train the papers' model (InfoGraph's GIN, K = 3, hidden 32, FF heads; ``hcl_cli.graph.gin``)
with identical weights for whole epochs the way the official code does (graph/deepinfomax.py: batch
128, no shuffling, Adam lr 0.001; forward, InfoGraph's local-global JSD loss, backward, step):

- ``torch``: :class:`~hcl_cli.graph.batch.GraphBatcher` gathers each batch with tensor operations from
  the dataset kept on the device, and the model sums messages and pools with ``index_add``;
- ``pyg``: torch-geometric's ``DataLoader`` collates ``Data`` objects into a ``Batch`` (then moved to
  the device), and the same model built from ``torch_geometric.nn.GINConv`` and ``global_add_pool``.

Per dataset it first checks that both sides compute the same outputs on the first batch, then times
``--repeats`` epochs of each, interleaved (the machine may be shared), and reports medians and minima (the
least disturbed by other jobs): the whole epoch, and its two parts (collating the batches alone; forward +
backward + step on ready batches). It also times the import of torch-geometric, which every stage using
it would pay.
Run from the repository root::

    python -m benchmarks.bench_gin --archive ../shared/datasets/tu.tar.gz

It writes ``benchmarks/results/gin_backend.json`` (``gin_backend_cuda.json`` with ``--device cuda``).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
import torch_geometric
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv as PygGINConv
from torch_geometric.nn import global_add_pool as pyg_global_add_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, synchronize, write_result
from hcl_cli.graph.batch import GraphBatch, GraphBatcher
from hcl_cli.graph.data import GraphDataset, prepare_tu
from hcl_cli.graph.gin import GINEncoder, InfoGraphModel

BATCH_SIZE = 128
LEARNING_RATE = 0.001


class PygEncoder(nn.Module):
    """The official ``Encoder`` (graph/gin.py) on torch-geometric, with the weights of ``ours``."""

    def __init__(self, ours: GINEncoder) -> None:
        super().__init__()
        self.convs = nn.ModuleList(PygGINConv(copy.deepcopy(conv.nn)) for conv in ours.convs)
        self.bns = copy.deepcopy(ours.bns)
        self.load_state_dict(ours.state_dict(), strict=False)  # GINConv's constructor re-initialises its MLP

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        per_layer = []
        for conv, bn in zip(self.convs, self.bns):
            x = bn(F.relu(conv(x, edge_index)))
            per_layer.append(x)
        return torch.cat([pyg_global_add_pool(h, batch) for h in per_layer], dim=1), torch.cat(per_layer, dim=1)


class PygModel(nn.Module):
    """:class:`InfoGraphModel` with its encoder on torch-geometric (same weights)."""

    def __init__(self, ours: InfoGraphModel) -> None:
        super().__init__()
        self.encoder = PygEncoder(ours.encoder)
        self.local_d, self.global_d = copy.deepcopy(ours.local_d), copy.deepcopy(ours.global_d)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        graphs, nodes = self.encoder(x, edge_index, batch)
        return self.local_d(nodes), self.global_d(graphs), graphs


def jsd_local_global(local: torch.Tensor, global_: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """InfoGraph's loss (graph/losses.py ``local_global_loss_``, measure JSD, with its dense masks): every node
    against its own graph (positive) and the batch's other graphs (negatives)."""
    scores = local @ global_.t()
    positive = F.one_hot(batch, global_.shape[0]).to(scores.dtype)
    log2 = math.log(2.0)
    e_pos = ((log2 - F.softplus(-scores)) * positive).sum() / len(local)
    e_neg = ((F.softplus(-scores) + scores - log2) * (1 - positive)).sum() / (len(local) * (global_.shape[0] - 1))
    return e_neg - e_pos


def torch_batches(batcher: GraphBatcher) -> Iterator[GraphBatch]:
    for start in range(0, len(batcher), BATCH_SIZE):
        yield batcher.batch(torch.arange(start, min(start + BATCH_SIZE, len(batcher))))


def pyg_batches(loader: DataLoader, device: torch.device) -> Iterator[torch_geometric.data.Batch]:
    for data in loader:
        yield data.to(device)


def train_epoch(step: Callable[[object], None], batches: Iterator[object], device: torch.device) -> float:
    """Seconds for one epoch of ``step`` over ``batches`` (batching included, as the batches are produced lazily)."""
    synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    synchronize(device)
    return time.perf_counter() - start


def collate_epoch(batches: Iterator[object], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in batches:
        pass
    synchronize(device)
    return time.perf_counter() - start


def measure(dataset: GraphDataset, device: torch.device, repeats: int) -> dict[str, object]:
    torch.manual_seed(0)
    ours = InfoGraphModel(dataset.num_features).to(device)
    theirs = PygModel(ours).to(device)
    batcher = GraphBatcher(dataset, device)
    data_list = [
        Data(
            x=dataset.x[dataset.node_ptr[g] : dataset.node_ptr[g + 1]],
            edge_index=dataset.edge_index[:, dataset.edge_ptr[g] : dataset.edge_ptr[g + 1]] - dataset.node_ptr[g],
            y=dataset.labels[g : g + 1],
        )
        for g in range(dataset.num_graphs)
    ]
    loader = DataLoader(data_list, batch_size=BATCH_SIZE, shuffle=False)

    first_ours, first_theirs = next(torch_batches(batcher)), next(pyg_batches(loader, device))
    same_batch = torch.equal(first_ours.edge_index, first_theirs.edge_index) and torch.equal(first_ours.batch, first_theirs.batch)
    outputs = (
        ours(first_ours.x, first_ours.edge_index, first_ours.batch, first_ours.num_graphs),
        theirs(first_theirs.x, first_theirs.edge_index, first_theirs.batch),
    )
    max_difference = max(float((a - b).abs().max()) for a, b in zip(*(tuple(t.detach() for t in side) for side in outputs)))

    ours_opt, theirs_opt = torch.optim.Adam(ours.parameters(), lr=LEARNING_RATE), torch.optim.Adam(theirs.parameters(), lr=LEARNING_RATE)

    def ours_step(batch: GraphBatch) -> None:
        ours_opt.zero_grad()
        local, global_, _ = ours(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
        jsd_local_global(local, global_, batch.batch).backward()
        ours_opt.step()

    def theirs_step(batch: torch_geometric.data.Batch) -> None:
        theirs_opt.zero_grad()
        local, global_, _ = theirs(batch.x, batch.edge_index, batch.batch)
        jsd_local_global(local, global_, batch.batch).backward()
        theirs_opt.step()

    ours_ready, theirs_ready = list(torch_batches(batcher)), list(pyg_batches(loader, device))
    sides: dict[str, dict[str, Callable[[], float]]] = {
        "torch": {
            "epoch": lambda: train_epoch(ours_step, torch_batches(batcher), device),
            "collate": lambda: collate_epoch(torch_batches(batcher), device),
            "compute": lambda: train_epoch(ours_step, iter(ours_ready), device),
        },
        "pyg": {
            "epoch": lambda: train_epoch(theirs_step, pyg_batches(loader, device), device),
            "collate": lambda: collate_epoch(pyg_batches(loader, device), device),
            "compute": lambda: train_epoch(theirs_step, iter(theirs_ready), device),
        },
    }
    for side in sides.values():  # warm-up
        for run in side.values():
            run()
    times: dict[str, dict[str, list[float]]] = {name: {part: [] for part in side} for name, side in sides.items()}
    loads = []
    for repeat in range(repeats):
        order = ["torch", "pyg"] if repeat % 2 == 0 else ["pyg", "torch"]
        for part in ("epoch", "collate", "compute"):
            for name in order:
                times[name][part].append(sides[name][part]())
        loads.append(load_average())
    medians = {name: {part: statistics.median(values) for part, values in parts.items()} for name, parts in times.items()}
    fastest = {name: {part: min(values) for part, values in parts.items()} for name, parts in times.items()}
    return {
        "graphs": dataset.num_graphs,
        "nodes": len(dataset.x),
        "edges": dataset.edge_index.shape[1],
        "batches_per_epoch": math.ceil(dataset.num_graphs / BATCH_SIZE),
        "same_first_batch": same_batch,
        "max_abs_output_difference": max_difference,
        "median_seconds": medians,
        "min_seconds": fastest,
        "pyg_over_torch": {part: medians["pyg"][part] / medians["torch"][part] for part in ("epoch", "collate", "compute")},
        "pyg_over_torch_min": {part: fastest["pyg"][part] / fastest["torch"][part] for part in ("epoch", "collate", "compute")},
        "seconds": times,
        "load_average_1min": loads,
    }


def import_seconds(repeats: int = 3) -> float:
    """Median seconds ``import torch_geometric.nn`` adds to a process that has imported torch (what every stage would pay)."""
    code = "import time, torch; t = time.perf_counter(); import torch_geometric.nn; print(time.perf_counter() - t)"
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout) for _ in range(repeats)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default=str(Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tu.tar.gz"))
    parser.add_argument("--datasets", nargs="+", default=["MUTAG", "DD"])
    parser.add_argument("--repeats", type=int, default=9, help="timed epochs per side and part")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (one: the machine is shared, and two sides on two threads fight for its cores)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    results = {}
    for name in args.datasets:
        dataset, _ = prepare_tu(args.archive, name)
        results[name] = measure(dataset, device, args.repeats)
        row = results[name]
        print(
            name,
            "median",
            {part: round(r, 2) for part, r in row["pyg_over_torch"].items()},
            "min",
            {part: round(r, 2) for part, r in row["pyg_over_torch_min"].items()},
        )
    write_result(
        "gin_backend" if device.type == "cpu" else f"gin_backend_{device.type}",
        {
            "torch_geometric": torch_geometric.__version__,
            "threads": args.threads,
            "torch_geometric_import_seconds": import_seconds(min(3, args.repeats)),
            "cpu_count_os": os.cpu_count(),
            "batch_size": BATCH_SIZE,
            "model": "InfoGraph GIN, 3 layers, hidden 32, FF heads, JSD local-global loss, Adam",
            "note": "pyg_over_torch > 1 means the torch-only side is faster; medians of interleaved epochs on a machine shared with other jobs",
            "datasets": results,
        },
        device,
    )


if __name__ == "__main__":
    main()
