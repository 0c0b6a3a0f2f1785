"""Mini-batches of graphs gathered from a dataset kept on the training device, with tensor operations only.

A :class:`GraphBatch` is torch-geometric's ``Batch`` of the graphs asked for, in that order, with
the CSR adjacency the GIN's sparse products read (:class:`~hcl_cli.graph.gin.Adjacency`);
:class:`GraphBatcher` gathers it from a :class:`~hcl_cli.graph.data.GraphDataset` without a loop
over graphs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hcl_cli.graph.data import GraphDataset, offsets
from hcl_cli.graph.gin import Adjacency


@dataclass(frozen=True)
class GraphBatch:
    """A mini-batch of graphs as one graph: node features ``x``, ``edge_index`` in batch node ids, the
    graph of each node ``batch`` (0..B-1), node offsets ``ptr`` (B+1,), ``labels`` (B,) and the
    dataset ``indices`` (B,) of its graphs, in the order asked for (torch-geometric's ``Batch``);
    ``adjacency``, the same edges as CSR arrays for the GIN's sparse products
    (:class:`~hcl_cli.graph.gin.Adjacency`), or None (the GIN then sums over ``edge_index``)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    ptr: torch.Tensor
    labels: torch.Tensor
    indices: torch.Tensor
    adjacency: Adjacency | None = None

    @property
    def edges(self) -> torch.Tensor | Adjacency:
        """What the GIN reads: ``adjacency`` when built, else ``edge_index``."""
        return self.edge_index if self.adjacency is None else self.adjacency

    @property
    def num_graphs(self) -> int:
        return len(self.labels)


class GraphBatcher:
    """Gathers mini-batches from a dataset kept on ``device``, with tensor operations only.

    The batch sizes are computed from copies of the per-graph counts on the CPU, so building a
    batch on a GPU makes no device-to-host synchronisation. The edges are kept twice, sorted by
    (source, target) and by (target, source): each graph's edges stay in its ``edge_ptr`` block
    either way, so a batch gathers both orders with the same indices and has its
    :class:`~hcl_cli.graph.gin.Adjacency` (both CSR) without sorting.
    """

    def __init__(self, dataset: GraphDataset, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.x = dataset.x.to(self.device)
        edge_index = dataset.edge_index.to(self.device)
        nodes = len(dataset.x)
        self.edge_index = edge_index[:, torch.argsort(edge_index[0] * nodes + edge_index[1])]
        self.by_target = edge_index[:, torch.argsort(edge_index[1] * nodes + edge_index[0])]
        self.labels = dataset.labels.to(self.device)
        self.node_ptr = dataset.node_ptr.to(self.device)
        self.edge_ptr = dataset.edge_ptr.to(self.device)
        self._node_counts = dataset.node_ptr.diff().cpu()
        self._edge_counts = dataset.edge_ptr.diff().cpu()

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, indices: torch.Tensor | Sequence[int] | np.ndarray) -> GraphBatch:
        """The graphs ``indices`` (in that order) as one :class:`GraphBatch` on the batcher's device."""
        order = torch.as_tensor(indices, dtype=torch.int64).cpu().reshape(-1)
        node_counts, edge_counts = self._node_counts[order], self._edge_counts[order]
        nodes, edges = int(node_counts.sum()), int(edge_counts.sum())
        ptr, edge_offsets = offsets(node_counts), offsets(edge_counts)
        order, node_counts, edge_counts = (t.to(self.device, non_blocking=True) for t in (order, node_counts, edge_counts))
        ptr, edge_offsets = ptr.to(self.device, non_blocking=True), edge_offsets.to(self.device, non_blocking=True)
        node_shift = self.node_ptr[order] - ptr[:-1]
        node_ids = torch.arange(nodes, device=self.device) + torch.repeat_interleave(node_shift, node_counts, output_size=nodes)
        edge_ids = torch.arange(edges, device=self.device) + torch.repeat_interleave(
            self.edge_ptr[order] - edge_offsets[:-1], edge_counts, output_size=edges
        )
        edge_shift = torch.repeat_interleave(node_shift, edge_counts, output_size=edges)
        edge_index = self.edge_index.index_select(1, edge_ids) - edge_shift
        by_target = self.by_target.index_select(1, edge_ids) - edge_shift
        graph = torch.repeat_interleave(torch.arange(len(order), device=self.device), node_counts, output_size=nodes)
        return GraphBatch(
            x=self.x.index_select(0, node_ids),
            edge_index=edge_index,
            batch=graph,
            ptr=ptr,
            labels=self.labels[order],
            indices=order,
            adjacency=Adjacency.from_sorted(nodes, edge_index, by_target),
        )
