"""The papers' graph encoder: InfoGraph's GIN with its FF heads (HCL App. D.2; HCL's graph/gin.py and model.py).

:class:`GINEncoder` is InfoGraph's ``Encoder`` (graph/gin.py lines 21-60): K layers of a GIN
convolution (Xu et al. 2019, Eq. 4.1 with epsilon = 0: h_i = MLP(h_i + sum of h_j over the edges
j -> i), MLP = Linear, ReLU, Linear), each followed by ReLU and then BatchNorm1d; every layer's
node embeddings are sum-pooled per graph and the K poolings concatenated into the graph
embedding (K * hidden = 96 for the papers' K = 3, hidden = 32), the K node embeddings
concatenated into each node's local embedding. :class:`FF` is the heads' 3-layer MLP with a
linear shortcut, the official ``FF`` (graph/model.py lines 48-68); :class:`InfoGraphModel` puts one FF on the nodes
(``local_d``) and one on the graphs (``global_d``) and initialises every linear layer as the code
does (graph/deepinfomax.py lines 61-67, ``init_emb``: Xavier-uniform weights, zero biases).

The message passing and pooling are written with torch alone rather than torch-geometric's
``GINConv`` and ``global_add_pool``: the same sums (tests/test_gin.py checks them equal to the
official encoder built on torch-geometric). Given an ``edge_index``, the messages are summed with
``index_select``/``index_add``; given the batch's :class:`Adjacency` (which
:class:`~hcl_cli.graph.batch.GraphBatcher` builds with each batch), they are one sparse CSR product
``A x``, and its gradient one product with the transposed CSR built beside it, so that backward
transposes nothing. The gradient reaching each BatchNorm is made contiguous first
(:func:`contiguous_grad`): the slice of the concatenation's gradient it gets otherwise sends
``batch_norm_backward`` down a much slower path. Against torch-geometric (the convolutions,
pooling, batching and whole epochs, and the cost of importing it):
benchmarks/results/gin_backend.json, which is why the dependency is left out. The parameter names
are torch-geometric's (``convs.{i}.nn``, ``bns.{i}``), so the official encoder's weights load into
:class:`GINEncoder`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Adjacency:
    """The messages of a batch's edges as CSR index arrays: ``A[i, j] = 1`` for each edge j -> i.

    ``rows``/``columns``: the CSR of ``A`` (one row per target node, its sources); ``sources``/
    ``targets``: the CSR of ``A^T`` (one row per source node, its targets), for the gradient.
    """

    num_nodes: int
    rows: torch.Tensor
    columns: torch.Tensor
    sources: torch.Tensor
    targets: torch.Tensor
    _matrices: dict[tuple[torch.dtype, bool], torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_sorted(cls, num_nodes: int, by_source: torch.Tensor, by_target: torch.Tensor) -> Adjacency:
        """From the (2, E) edges sorted by source (``by_source``) and the same edges sorted by target (``by_target``)."""
        return cls(
            num_nodes,
            _row_offsets(by_target[1], num_nodes),
            by_target[0].contiguous(),
            _row_offsets(by_source[0], num_nodes),
            by_source[1].contiguous(),
        )

    @classmethod
    def from_edges(cls, edge_index: torch.Tensor, num_nodes: int) -> Adjacency:
        """From a (2, E) ``edge_index`` in any order (messages from ``edge_index[0]`` to ``edge_index[1]``)."""
        by_source = edge_index[:, torch.argsort(edge_index[0] * num_nodes + edge_index[1])]
        by_target = edge_index[:, torch.argsort(edge_index[1] * num_nodes + edge_index[0])]
        return cls.from_sorted(num_nodes, by_source, by_target)

    def matrix(self, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
        """``A`` (or ``A^T``) as a sparse CSR tensor of ``dtype`` (built once per dtype)."""
        key = (dtype, transposed)
        if key not in self._matrices:
            rows, columns = (self.sources, self.targets) if transposed else (self.rows, self.columns)
            ones = torch.ones(len(columns), dtype=dtype, device=columns.device)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
                self._matrices[key] = torch.sparse_csr_tensor(rows, columns, ones, (self.num_nodes, self.num_nodes), check_invariants=False)
        return self._matrices[key]


def _row_offsets(rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    offsets = torch.zeros(num_rows + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_rows), 0, out=offsets[1:])
    return offsets


class _Aggregate(torch.autograd.Function):
    """``A x`` with the gradient ``A^T g``, both sparse CSR products."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, adjacency: Adjacency) -> torch.Tensor:  # type: ignore[override]
        ctx.adjacency = adjacency
        return adjacency.matrix(x.dtype) @ x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return ctx.adjacency.matrix(grad.dtype, transposed=True) @ grad.contiguous(), None


class _ContiguousGrad(torch.autograd.Function):
    """The identity, whose gradient is made contiguous."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad.contiguous()


def contiguous_grad(x: torch.Tensor) -> torch.Tensor:
    """``x``, with the gradient flowing back through it made contiguous (module docstring)."""
    out = _ContiguousGrad.apply(x)
    assert isinstance(out, torch.Tensor)
    return out


Edges = torch.Tensor | Adjacency
"""A batch's edges: a (2, E) ``edge_index`` (messages from row 0 to row 1) or its :class:`Adjacency`."""


class GINConv(nn.Module):
    """One GIN convolution with epsilon = 0: ``nn(x_i + sum_{(j, i) in edges} x_j)``, messages flowing
    from ``edge_index[0]`` to ``edge_index[1]`` as in torch-geometric's ``GINConv``."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.nn = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))

    def forward(self, x: torch.Tensor, edges: Edges) -> torch.Tensor:
        if isinstance(edges, Adjacency):
            messages = _Aggregate.apply(x, edges)
            assert isinstance(messages, torch.Tensor)
            return self.nn(x + messages)
        return self.nn(x.index_add(0, edges[1], x.index_select(0, edges[0])))


def global_add_pool(x: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
    """The sum of the node rows of each graph, (num_graphs, F); ``batch`` gives each node's graph."""
    return x.new_zeros(num_graphs, x.shape[1]).index_add_(0, batch, x)


class GINEncoder(nn.Module):
    """InfoGraph's GIN encoder: ``layers`` GIN convolutions of width ``hidden`` (module docstring)."""

    def __init__(self, in_dim: int, hidden: int = 32, layers: int = 3) -> None:
        super().__init__()
        if in_dim < 1 or hidden < 1 or layers < 1:
            raise ValueError(f"GINEncoder needs positive sizes, got in_dim={in_dim}, hidden={hidden}, layers={layers}")
        self.hidden, self.layers = hidden, layers
        self.convs = nn.ModuleList(GINConv(in_dim if i == 0 else hidden, hidden) for i in range(layers))
        self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers))

    @property
    def embedding_dim(self) -> int:
        """The width of the graph and node embeddings, ``layers * hidden``."""
        return self.layers * self.hidden

    def forward(self, x: torch.Tensor, edges: Edges, batch: torch.Tensor, num_graphs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(graph embeddings (num_graphs, layers * hidden), node embeddings (nodes, layers * hidden))``."""
        per_layer = []
        for conv, bn in zip(self.convs, self.bns):
            x = bn(torch.relu(conv(x, edges)))
            per_layer.append(contiguous_grad(x))
        nodes = torch.cat(per_layer, dim=1)
        return global_add_pool(nodes, batch, num_graphs), nodes


class FF(nn.Module):
    """InfoGraph's head: three Linear + ReLU layers plus a linear shortcut, width kept (graph/model.py)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU())
        self.linear_shortcut = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x) + self.linear_shortcut(x)

    @property
    def last_layer(self) -> nn.Linear:
        """The block's third Linear (its ReLU follows): the head's last layer, whose inputs :meth:`with_last_inputs` gives."""
        layer = self.block[4]
        assert isinstance(layer, nn.Linear)
        return layer

    def with_last_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(forward(x), the inputs of :attr:`last_layer`)``, for UnDiMix's uncertainty on graphs."""
        inputs = self.block[:4](x)
        return self.block[4:](inputs) + self.linear_shortcut(x), inputs


class InfoGraphModel(nn.Module):
    """The GIN encoder with InfoGraph's local and global FF heads (deepinfomax.py's ``GcnInfomax``, prior off)."""

    def __init__(self, in_dim: int, hidden: int = 32, layers: int = 3) -> None:
        super().__init__()
        self.encoder = GINEncoder(in_dim, hidden, layers)
        self.local_d = FF(self.encoder.embedding_dim)
        self.global_d = FF(self.encoder.embedding_dim)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    @property
    def embedding_dim(self) -> int:
        return self.encoder.embedding_dim

    def forward(
        self, x: torch.Tensor, edges: Edges, batch: torch.Tensor, num_graphs: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(local node embeddings after local_d, global graph embeddings after global_d, graph
        embeddings before the heads)``: the last is the representation that embed and the SVM read."""
        graphs, nodes = self.encoder(x, edges, batch, num_graphs)
        return self.local_d(nodes), self.global_d(graphs), graphs
