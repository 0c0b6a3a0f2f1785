"""The papers' GIN encoder and InfoGraph heads: shapes, sums equal to torch-geometric's, the official names and initialisation."""

from __future__ import annotations

import pytest
import torch

from hcl_cli.graph.batch import GraphBatch, GraphBatcher
from hcl_cli.graph.data import GraphDataset
from hcl_cli.graph.gin import GINEncoder, InfoGraphModel


def random_dataset(graphs: int = 12, features: int = 7, seed: int = 0) -> GraphDataset:
    """Random undirected graphs of 2..9 nodes with one-hot node features."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(2, 10, (graphs,), generator=generator)
    node_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    edges, edge_counts = [], []
    for g in range(graphs):
        n, first = int(sizes[g]), int(node_ptr[g])
        upper = torch.triu(torch.rand(n, n, generator=generator) < 0.4, diagonal=1)
        adjacency = upper | upper.t()
        pairs = adjacency.nonzero() + first
        edges.append(pairs.t())
        edge_counts.append(len(pairs))
    x = torch.nn.functional.one_hot(torch.randint(0, features, (int(node_ptr[-1]),), generator=generator), features).float()
    edge_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.tensor(edge_counts).cumsum(0)])
    return GraphDataset(x, torch.cat(edges, dim=1), node_ptr, edge_ptr, torch.arange(graphs) % 2)


def whole(dataset: GraphDataset) -> GraphBatch:
    return GraphBatcher(dataset).batch(range(dataset.num_graphs))


def test_the_papers_sizes_give_96_dimensional_embeddings() -> None:
    dataset = random_dataset()
    batch = whole(dataset)
    local, global_, representation = InfoGraphModel(dataset.num_features)(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
    assert local.shape == (len(dataset.x), 96)
    assert global_.shape == representation.shape == (dataset.num_graphs, 96)


def test_the_sizes_are_constructor_arguments() -> None:
    dataset = random_dataset()
    batch = whole(dataset)
    model = InfoGraphModel(dataset.num_features, hidden=16, layers=2)
    graphs, nodes = model.encoder(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
    assert model.embedding_dim == 32 and graphs.shape == (dataset.num_graphs, 32) and nodes.shape == (len(dataset.x), 32)
    assert len(model.encoder.convs) == 2
    with pytest.raises(ValueError, match="positive sizes"):
        GINEncoder(7, hidden=0)


def test_the_encoder_equals_the_official_one_on_torch_geometric() -> None:
    """The official Encoder (HCL graph/gin.py lines 21-59), transcribed on torch-geometric's GINConv and global_add_pool."""
    nn_module = pytest.importorskip("torch_geometric.nn")

    class OfficialEncoder(torch.nn.Module):
        def __init__(self, num_features: int, dim: int, num_gc_layers: int) -> None:
            super().__init__()
            self.num_gc_layers = num_gc_layers
            self.convs, self.bns = torch.nn.ModuleList(), torch.nn.ModuleList()
            for i in range(num_gc_layers):
                width = dim if i else num_features
                mlp = torch.nn.Sequential(torch.nn.Linear(width, dim), torch.nn.ReLU(), torch.nn.Linear(dim, dim))
                self.convs.append(nn_module.GINConv(mlp))
                self.bns.append(torch.nn.BatchNorm1d(dim))

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            xs = []
            for i in range(self.num_gc_layers):
                x = torch.nn.functional.relu(self.convs[i](x, edge_index))
                x = self.bns[i](x)
                xs.append(x)
            return torch.cat([nn_module.global_add_pool(x, batch) for x in xs], 1), torch.cat(xs, 1)

    torch.manual_seed(0)
    dataset = random_dataset(graphs=20)
    batch = whole(dataset)
    official = OfficialEncoder(dataset.num_features, 32, 3).double()
    ours = GINEncoder(dataset.num_features).double()
    missing, unexpected = ours.load_state_dict(official.state_dict(), strict=False)
    assert missing == [] and unexpected == [f"convs.{i}.eps" for i in range(3)]  # torch-geometric's fixed eps = 0 buffer
    x = batch.x.double()
    for mode in ("train", "eval"):
        getattr(official, mode)()
        getattr(ours, mode)()
        reference = official(x, batch.edge_index, batch.batch)
        result = ours(x, batch.edge_index, batch.batch, batch.num_graphs)
        for a, b in zip(result, reference):
            assert torch.allclose(a, b, atol=1e-10)


def test_a_graphs_embedding_does_not_depend_on_its_batch() -> None:
    dataset = random_dataset(graphs=10)
    model = InfoGraphModel(dataset.num_features).eval()
    batcher = GraphBatcher(dataset)
    together = batcher.batch(range(10))
    with torch.no_grad():
        all_at_once = model(together.x, together.edge_index, together.batch, together.num_graphs)[2]
        for g in (0, 7):
            alone = batcher.batch([g])
            assert torch.allclose(model(alone.x, alone.edge_index, alone.batch, 1)[2][0], all_at_once[g], atol=1e-5)


def test_the_heads_are_infographs_ff_and_every_linear_starts_as_the_code_does() -> None:
    model = InfoGraphModel(5)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 3 * 2 + 2 * 4  # two per GIN layer, four per FF head (three + shortcut)
    assert all(bool((m.bias == 0).all()) for m in linears)
    for m in linears:  # Xavier-uniform bound sqrt(6 / (fan_in + fan_out))
        bound = (6 / (m.in_features + m.out_features)) ** 0.5
        assert float(m.weight.detach().abs().max()) <= bound
    x = torch.randn(4, 96)
    head = model.local_d
    with torch.no_grad():
        assert torch.allclose(head(x), head.block(x) + head.linear_shortcut(x))
        assert float(head.block(x).min()) >= 0  # the block ends with a ReLU, as in graph/model.py


def test_every_parameter_gets_a_gradient() -> None:
    dataset = random_dataset()
    batch = whole(dataset)
    model = InfoGraphModel(dataset.num_features)
    local, global_, _ = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
    (local @ global_.t()).logsumexp(dim=1).mean().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
