"""The prepared graph dataset: node features as the papers' code builds them, its card, its files, mini-batches.

A :class:`GraphDataset` holds every graph of a dataset in one block-diagonal graph, as
torch-geometric's ``InMemoryDataset`` does: node features ``x`` float32 (N, F), ``edge_index``
int64 (2, E) of global node ids sorted by (row, col), ``node_ptr`` and ``edge_ptr`` int64 (G+1,)
(graph g owns nodes ``node_ptr[g]:node_ptr[g+1]`` and edges ``edge_ptr[g]:edge_ptr[g+1]``) and the
class of each graph ``labels`` int64 (G,).

Node features follow the papers' code (HCL's graph/deepinfomax.py, lines 109-121, with
torch-geometric's ``TUDataset``): one-hot node labels (one block per label column, as
``read_tu_data`` makes them; node attributes are dropped unless asked for, as ``TUDataset``'s
``use_node_attr=False`` does); for graphs without node labels, the one-hot out-degree
(``OneHotDegree(max_degree)``) when the largest degree is below 1000, otherwise the degree
standardised by the mean and standard deviation of all nodes' degrees (deepinfomax.py's
``NormalizedDegree``). Degrees count the coalesced edges, so repeated edges count once.

On disk a prepared graph dataset is ``graphs.safetensors`` with its sidecar (written by
:func:`~hcl_cli.artifacts.tensors.save_artifact`, atomic, bound by sha256) and ``card.json``, which
repeats the card the sidecar records; :func:`load_prepared_graphs` checks all of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hcl_cli.artifacts.files import read_json, write_json
from hcl_cli.artifacts.tensors import SCHEMA_VERSION, TensorSpec, load_artifact, save_artifact
from hcl_cli.errors import HclError
from hcl_cli.graph.gin import Adjacency
from hcl_cli.graph.tu import TuGraphs, read_tu_files

MODALITY = "graph"
CARD_FILE = "card.json"
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
"""deepinfomax.py line 116: ``if max_degree < 1000`` one-hot degree, else the normalised degree."""
MAX_ONE_HOT_BYTES = 4 << 30
"""The largest one-hot node-label block ``prepare`` builds (float32): a label range wider is refused, not allocated."""
FEATURES = ("node_labels", "node_attributes+node_labels", "node_attributes", "one_hot_degree", "normalized_degree")


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


@dataclass(frozen=True)
class GraphCard:
    """What ``hcl prepare`` records about a prepared graph dataset (its ``card.json``).

    ``classes`` are the graph labels as the source file writes them (sorted numerically; class i is
    the i-th), ``class_counts`` the graphs per class; ``avg_nodes`` and ``avg_edges`` are per graph,
    edges counted as undirected pairs as the TU statistics count them; ``num_edges`` is the number
    of directed entries of ``edge_index``. ``features`` names how the node features were built
    (one of :data:`FEATURES`), ``max_degree`` is the largest out-degree, ``degree_mean`` and
    ``degree_std`` the statistics of the normalised degree (None otherwise). ``files`` maps each
    source file to its sha256; ``undirected`` says whether every edge is listed both ways;
    ``self_loops_removed`` and ``duplicates_removed`` count the entries dropped while coalescing.
    ``counts`` (graphs per split, ``train`` and ``test``) and ``seed`` describe the stratified split
    ``hcl prepare`` stores beside the graphs (:mod:`hcl_cli.graph.modality`); None on a card
    written without one.
    """

    name: str
    source: str
    files: dict[str, str]
    classes: list[str]
    class_counts: list[int]
    num_graphs: int
    num_nodes: int
    num_edges: int
    avg_nodes: float
    avg_edges: float
    feature_dim: int
    features: str
    max_degree: int
    degree_mean: float | None
    degree_std: float | None
    undirected: bool
    self_loops_removed: int
    duplicates_removed: int
    counts: dict[str, int] | None = None
    seed: int | None = None
    modality: str = MODALITY
    schema_version: int = SCHEMA_VERSION

    @property
    def num_classes(self) -> int:
        return len(self.classes)


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
            raise HclError(f"{graphs.name} has no node attributes ({graphs.name}_node_attributes.txt) to use")
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
        raise HclError(
            f"{graphs.name}_graph_labels.txt gives every graph the class {int(values[0])}: classification needs at least 2 classes"
        )
    pairs = torch.unique(torch.minimum(edge_index[0], edge_index[1]) * nodes + torch.maximum(edge_index[0], edge_index[1]))
    dataset = GraphDataset(
        x=x.contiguous(),
        edge_index=edge_index.contiguous(),
        node_ptr=_offsets(node_counts),
        edge_ptr=_offsets(edge_counts),
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


def _offsets(counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def save_prepared_graphs(folder: str | Path, dataset: GraphDataset, card: GraphCard) -> None:
    """Write ``graphs.safetensors`` (+ sidecar recording the card) and then ``card.json`` in ``folder``, each atomically."""
    values = dataclasses.asdict(card)
    tensors = {field.name: getattr(dataset, field.name) for field in dataclasses.fields(dataset)}
    save_artifact(Path(folder) / GRAPHS_FILE, tensors, GRAPHS_KIND, meta={"card": values})
    write_json(Path(folder) / CARD_FILE, values)


def is_graph_folder(folder: str | Path) -> bool:
    """Whether ``folder``'s ``card.json`` is a graph dataset's card (an image card has no ``modality``)."""
    path = Path(folder) / CARD_FILE
    return path.is_file() and read_json(path, what="dataset card").get("modality") == MODALITY


def load_graph_card(folder: str | Path) -> GraphCard:
    """The card of a prepared graph folder, every field checked; a one-line HclError naming the file otherwise."""
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise HclError(f"{folder} is not a prepared dataset folder (no {CARD_FILE}): run hcl prepare first")
    values = read_json(path, what="dataset card")
    if values.get("modality") != MODALITY:
        raise HclError(f"{path} is not a graph dataset's card (modality {values.get('modality')!r}): prepare a TU dataset first")
    if values.get("schema_version") != SCHEMA_VERSION:
        raise HclError(
            f"{path}: schema version {values.get('schema_version')!r} is not supported (this hcl reads {SCHEMA_VERSION}): run hcl prepare again"
        )
    return _card_from(values, path)


_CARD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "source": (str,),
    "files": (dict,),
    "classes": (list,),
    "class_counts": (list,),
    "num_graphs": (int,),
    "num_nodes": (int,),
    "num_edges": (int,),
    "avg_nodes": (int, float),
    "avg_edges": (int, float),
    "feature_dim": (int,),
    "features": (str,),
    "max_degree": (int,),
    "degree_mean": (int, float, type(None)),
    "degree_std": (int, float, type(None)),
    "undirected": (bool,),
    "self_loops_removed": (int,),
    "duplicates_removed": (int,),
}


def _card_from(values: dict[str, Any], path: Path) -> GraphCard:
    def invalid(field: str, expected: str) -> HclError:
        return HclError(
            f"{path} is not a valid graph dataset card: {field!r} must be {expected} (got {values.get(field)!r}): run hcl prepare again"
        )

    for field, types in _CARD_TYPES.items():
        value = values.get(field)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise invalid(field, " or ".join("null" if t is type(None) else t.__name__ for t in types))
    if len(values["classes"]) < 2 or not all(isinstance(c, str) for c in values["classes"]):
        raise invalid("classes", "a list of at least 2 class names")
    counts = values["class_counts"]
    if len(counts) != len(values["classes"]) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise invalid("class_counts", "a count per class")
    if sum(counts) != values["num_graphs"]:
        raise invalid("class_counts", f"counts summing to the {values['num_graphs']} graphs")
    if values["features"] not in FEATURES:
        raise invalid("features", f"one of {', '.join(FEATURES)}")
    if values["feature_dim"] < 1:
        raise invalid("feature_dim", "a positive integer")
    split = values.get("counts")
    if split is not None and (
        not isinstance(split, dict)
        or set(split) != {"train", "test"}
        or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in split.values())
        or sum(split.values()) != values["num_graphs"]
    ):
        raise invalid("counts", f"train and test graph counts summing to the {values['num_graphs']} graphs")
    seed = values.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise invalid("seed", "an integer")
    return GraphCard(
        **{field: values[field] for field in _CARD_TYPES}, counts=split, seed=seed, modality=MODALITY, schema_version=SCHEMA_VERSION
    )


def load_prepared_graphs(folder: str | Path, device: str | torch.device = "cpu") -> tuple[GraphDataset, GraphCard]:
    """The dataset and card that :func:`save_prepared_graphs` wrote, checked against each other."""
    card = load_graph_card(folder)
    path = Path(folder) / GRAPHS_FILE
    tensors, sidecar = load_artifact(path, GRAPHS_KIND, GRAPH_TENSORS, device=device)
    if sidecar.get("card") != dataclasses.asdict(card):
        raise HclError(f"{Path(folder) / CARD_FILE} is not the card {path} was written with: run hcl prepare again")
    dataset = GraphDataset(**{name: tensors[name] for name in GRAPH_TENSORS})
    problem = dataset.problem()
    counted, recorded = (dataset.num_graphs, len(dataset.x), dataset.num_features), (card.num_graphs, card.num_nodes, card.feature_dim)
    if problem is None and counted != recorded:
        problem = "{} graphs, {} nodes, {} features, but the card says {}, {}, {}".format(*counted, *recorded)
    if problem is None and int(dataset.labels.max()) >= card.num_classes:
        problem = f"labels reach {int(dataset.labels.max())} but the card has {card.num_classes} classes"
    if problem is not None:
        raise HclError(f"{path}: {problem}: run hcl prepare again")
    return dataset, card


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
        ptr, edge_offsets = _offsets(node_counts), _offsets(edge_counts)
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
