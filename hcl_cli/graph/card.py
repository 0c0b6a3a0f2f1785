"""The card of a prepared graph dataset (``card.json``): what ``hcl prepare`` records, and its reader, every field checked.

The graph counterpart of :mod:`hcl_cli.image.card`: a card names its modality (``graph``), the TU
files it came from (with their sha256), the classes and their counts, the graphs', nodes' and
edges' statistics, how the node features were built (:mod:`hcl_cli.graph.data`) and the stratified
split stored beside the graphs (:mod:`hcl_cli.graph.prepared`). :func:`load_graph_card` refuses a
card with a missing or malformed field in one line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcl_cli.artifacts.files import read_json
from hcl_cli.artifacts.tensors import SCHEMA_VERSION
from hcl_cli.errors import HclError, InputError

MODALITY = "graph"
CARD_FILE = "card.json"
FEATURES = ("node_labels", "node_attributes+node_labels", "node_attributes", "one_hot_degree", "normalized_degree")
"""How the node features may be built (:func:`hcl_cli.graph.data.build_dataset`)."""


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


def is_graph_folder(folder: str | Path) -> bool:
    """Whether ``folder``'s ``card.json`` is a graph dataset's card (an image card has no ``modality``)."""
    path = Path(folder) / CARD_FILE
    return path.is_file() and read_json(path, what="dataset card").get("modality") == MODALITY


def load_graph_card(folder: str | Path) -> GraphCard:
    """The card of a prepared graph folder, every field checked; a one-line HclError naming the file otherwise."""
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise InputError(f"{folder} is not a prepared dataset folder (no {CARD_FILE}): run hcl prepare first")
    values = read_json(path, what="dataset card")
    if values.get("modality") != MODALITY:
        raise InputError(f"{path} is not a graph dataset's card (modality {values.get('modality')!r}): prepare a TU dataset first")
    if values.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
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
        return InputError(
            f"{path} is not a valid graph dataset card: {field!r} must be {expected} (got {values.get(field)!r}): run hcl prepare again"
        )

    for field, types in _CARD_TYPES.items():
        value = values.get(field)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise invalid(field, " or ".join("null" if t is type(None) else t.__name__ for t in types))
    classes = values["classes"]
    if len(classes) < 2 or not all(isinstance(c, str) for c in classes) or len(set(classes)) != len(classes):
        raise invalid("classes", "a list of at least 2 distinct class names")
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
