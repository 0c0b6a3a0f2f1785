"""The prepared graph dataset: node features as the papers' code builds them, and its file.

A :class:`GraphDataset` holds every graph of a dataset in one block-diagonal graph, as
torch-geometric's ``InMemoryDataset`` does: node features ``x`` float32 (N, F), ``edge_index``
int64 (2, E) of global node ids sorted by (row, col), ``node_ptr`` and ``edge_ptr`` int64 (G+1,)
(graph g owns nodes ``node_ptr[g]:node_ptr[g+1]`` and edges ``edge_ptr[g]:edge_ptr[g+1]``) and the
class of each graph ``labels`` int64 (G,).

Node features follow the papers' code (HCL's graph/deepinfomax.py lines 118-131, ``dataset.data.x is None``,
with torch-geometric's ``TUDataset``): one-hot node labels (one block per label column, as
``read_tu_data`` makes them; node attributes are dropped unless asked for, as ``TUDataset``'s
``use_node_attr=False`` does); for graphs without node labels, the one-hot out-degree
(``OneHotDegree(max_degree)``) when the largest degree is below 1000, otherwise the degree
standardised by the mean and standard deviation of all nodes' degrees (deepinfomax.py's
``NormalizedDegree``). Degrees count the coalesced edges, so repeated edges count once.

On disk a prepared graph dataset is ``graphs.safetensors`` with its sidecar (written by
:func:`~hcl_cli.artifacts.tensors.save_artifact`, atomic, bound by sha256) and ``card.json``
(:mod:`hcl_cli.graph.card`), which repeats the card the sidecar records; :func:`load_prepared_graphs`
checks all of it. Mini-batches are :mod:`hcl_cli.graph.batch`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from hcl_cli.artifacts.files import write_json
from hcl_cli.artifacts.tensors import TensorSpec, load_artifact, save_artifact
from hcl_cli.errors import HclError, InputError
from hcl_cli.graph.card import CARD_FILE, GraphCard, load_graph_card
from hcl_cli.graph.tu import TuGraphs, read_tu_files

GRAPHS_FILE = "graphs.safetensors"
GRAPHS_KIND = "graph dataset"
GRAPH_TENSORS = {
    "x": TensorSpec(torch.float32, 2),
    "edge_index": TensorSpec(torch.int64, 2),
    "node_ptr": TensorSpec(torch.int64, 1),
    "edge_ptr": TensorSpec(torch.int64, 1),
    "labels": TensorSpec(torch.int64, 1),
}
MAX_ONE_HOT_DEGREE = 1000
"""deepinfomax.py line 126: ``if max_degree < 1000`` one-hot degree, else the normalised degree."""
MAX_ONE_HOT_BYTES = 4 << 30
"""The largest one-hot node-label block ``prepare`` builds (float32): a label range wider is refused, not allocated."""


@dataclass(frozen=True)
class GraphDataset:
    """Every graph of a dataset as one block-diagonal graph (the tensors of the module docstring)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    node_ptr: torch.Tensor
    edge_ptr: torch.Tensor
    labels: torch.Tensor

    @property
    def num_graphs(self) -> int:
        return len(self.labels)

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    def problem(self) -> str | None:
        """What is inconsistent between the tensors (shapes, offsets, an edge leaving its graph), or None."""
        x, edges, node_ptr, edge_ptr, labels = self.x, self.edge_index, self.node_ptr, self.edge_ptr, self.labels
        graphs = len(labels)
        if edges.ndim != 2 or edges.shape[0] != 2:
            return f"edge_index is {list(edges.shape)}, expected [2, edges]"
        if len(node_ptr) != graphs + 1 or len(edge_ptr) != graphs + 1:
            return f"{graphs} labels but node_ptr has {len(node_ptr)} and edge_ptr {len(edge_ptr)} entries (expected {graphs + 1})"
        if node_ptr[0] != 0 or node_ptr[-1] != len(x) or bool((node_ptr[1:] <= node_ptr[:-1]).any()):
            return f"node_ptr is not increasing from 0 to the {len(x)} nodes"
        if edge_ptr[0] != 0 or edge_ptr[-1] != edges.shape[1] or bool((edge_ptr[1:] < edge_ptr[:-1]).any()):
            return f"edge_ptr is not non-decreasing from 0 to the {edges.shape[1]} edges"
        if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= len(x)):
            return f"edge_index has node ids outside 0..{len(x) - 1}"
        if graphs and (int(labels.min()) < 0):
            return "labels are negative"
        owner = torch.repeat_interleave(torch.arange(graphs, device=edges.device), edge_ptr.diff())
        graph_of = torch.repeat_interleave(torch.arange(graphs, device=x.device), node_ptr.diff())
        if bool((graph_of[edges[0]] != owner).any() or (graph_of[edges[1]] != owner).any()):
            return "an edge lies outside the node range of the graph that edge_ptr gives it"
        return None


def prepare_tu(source: str | Path, name: str, *, node_attributes: bool = False) -> tuple[GraphDataset, GraphCard]:
    """Read the TU dataset ``name`` from ``source`` (archive or folder) into a dataset and its card.

    ``node_attributes`` puts the node attributes before the one-hot labels (``TUDataset(...,
    use_node_attr=True)``); the papers' code leaves it off.
    """
    return build_dataset(read_tu_files(source, name), node_attributes=node_attributes)


def build_dataset(graphs: TuGraphs, *, node_attributes: bool = False) -> tuple[GraphDataset, GraphCard]:
    """The dataset and card of checked TU files (features as in the module docstring)."""
    nodes = graphs.num_nodes
    edge_index = graphs.edge_index
    degree = torch.bincount(edge_index[0], minlength=nodes)
    max_degree = int(degree.max())
    degree_mean = degree_std = None
    blocks = []
    if node_attributes:
        if graphs.node_attributes is None:
            raise InputError(f"{graphs.name} has no node attributes ({graphs.name}_node_attributes.txt) to use")
        blocks.append(graphs.node_attributes)
    if graphs.node_labels is not None:
        labels = graphs.node_labels - graphs.node_labels.min(dim=0).values
        check_one_hot_size(graphs, labels)
        blocks += [torch.nn.functional.one_hot(column).float() for column in labels.unbind(dim=1)]
    if blocks:
        features = "+".join(
            kind for kind, present in (("node_attributes", node_attributes), ("node_labels", graphs.node_labels is not None)) if present
        )
        x = torch.cat(blocks, dim=1)
    elif max_degree < MAX_ONE_HOT_DEGREE:
        features = "one_hot_degree"
        x = torch.nn.functional.one_hot(degree, max_degree + 1).float()
    else:
        features = "normalized_degree"
        degrees = degree.double()
        degree_mean, degree_std = float(degrees.mean()), float(degrees.std())
        x = ((degrees - degree_mean) / degree_std).float().unsqueeze(1)

    graph_of = graphs.node_graph
    node_counts = torch.bincount(graph_of, minlength=graphs.num_graphs)
    edge_counts = torch.bincount(graph_of[edge_index[0]], minlength=graphs.num_graphs)
    values, labels = torch.unique(graphs.graph_labels, sorted=True, return_inverse=True)
    if len(values) < 2:
        raise InputError(
            f"{graphs.name}_graph_labels.txt gives every graph the class {int(values[0])}: classification needs at least 2 classes"
        )
    pairs = torch.unique(torch.minimum(edge_index[0], edge_index[1]) * nodes + torch.maximum(edge_index[0], edge_index[1]))
    dataset = GraphDataset(
        x=x.contiguous(),
        edge_index=edge_index.contiguous(),
        node_ptr=offsets(node_counts),
        edge_ptr=offsets(edge_counts),
        labels=labels,
    )
    card = GraphCard(
        name=graphs.name,
        source=graphs.source,
        files=dict(graphs.files),
        classes=[str(int(v)) for v in values],
        class_counts=torch.bincount(labels, minlength=len(values)).tolist(),
        num_graphs=graphs.num_graphs,
        num_nodes=nodes,
        num_edges=edge_index.shape[1],
        avg_nodes=round(nodes / graphs.num_graphs, 4),
        avg_edges=round(len(pairs) / graphs.num_graphs, 4),
        feature_dim=x.shape[1],
        features=features,
        max_degree=max_degree,
        degree_mean=degree_mean,
        degree_std=degree_std,
        undirected=graphs.undirected,
        self_loops_removed=graphs.self_loops_removed,
        duplicates_removed=graphs.duplicates_removed,
    )
    return dataset, card


def check_one_hot_size(graphs: TuGraphs, labels: torch.Tensor) -> None:
    """Refuse node labels whose one-hot columns (one per value from the column's smallest to its largest)
    would exceed :data:`MAX_ONE_HOT_BYTES` in float32, naming the file and the line of the largest label."""
    widths = labels.amax(dim=0) + 1
    size = graphs.num_nodes * int(widths.sum()) * 4
    if size > MAX_ONE_HOT_BYTES:
        column = int(widths.argmax())
        line = int(labels[:, column].argmax()) + 1
        raise HclError(
            f"{graphs.name}_node_labels.txt line {line}: node label {int(graphs.node_labels[line - 1, column])} makes the one-hot node "
            f"features {int(widths.sum())} columns wide, {size / 2**30:.1f} GiB for {graphs.num_nodes} nodes "
            f"(at most {MAX_ONE_HOT_BYTES / 2**30:.0f} GiB): TU node labels are category ids counted from 0 or 1"
        )


def offsets(counts: torch.Tensor) -> torch.Tensor:
    """The start of each block of ``counts`` and the total: ``[0, c0, c0 + c1, ...]`` (int64, G + 1)."""
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def save_prepared_graphs(folder: str | Path, dataset: GraphDataset, card: GraphCard) -> None:
    """Write ``graphs.safetensors`` (+ sidecar recording the card) and then ``card.json`` in ``folder``, each atomically."""
    values = dataclasses.asdict(card)
    tensors = {field.name: getattr(dataset, field.name) for field in dataclasses.fields(dataset)}
    save_artifact(Path(folder) / GRAPHS_FILE, tensors, GRAPHS_KIND, meta={"card": values})
    write_json(Path(folder) / CARD_FILE, values)


def load_prepared_graphs(folder: str | Path, device: str | torch.device = "cpu") -> tuple[GraphDataset, GraphCard]:
    """The dataset and card that :func:`save_prepared_graphs` wrote, checked against each other."""
    card = load_graph_card(folder)
    path = Path(folder) / GRAPHS_FILE
    tensors, sidecar = load_artifact(path, GRAPHS_KIND, GRAPH_TENSORS, device=device)
    if sidecar.get("card") != dataclasses.asdict(card):
        raise InputError(f"{Path(folder) / CARD_FILE} is not the card {path} was written with: run hcl prepare again")
    dataset = GraphDataset(**{name: tensors[name] for name in GRAPH_TENSORS})
    problem = dataset.problem()
    counted, recorded = (dataset.num_graphs, len(dataset.x), dataset.num_features), (card.num_graphs, card.num_nodes, card.feature_dim)
    if problem is None and counted != recorded:
        problem = "{} graphs, {} nodes, {} features, but the card says {}, {}, {}".format(*counted, *recorded)
    if problem is None and int(dataset.labels.max()) >= card.num_classes:
        problem = f"labels reach {int(dataset.labels.max())} but the card has {card.num_classes} classes"
    if problem is not None:
        raise InputError(f"{path}: {problem}: run hcl prepare again")
    return dataset, card
