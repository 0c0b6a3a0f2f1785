"""The trained graph encoder: InfoGraph's GIN with its heads, as ``hcl pretrain`` writes it and ``embed`` reads it.

:class:`GinModel` is :class:`~hcl_cli.graph.gin.InfoGraphModel` under the names the pipeline reads
of every encoder (``arch``, ``feature_dim``, ``projection_dim``, :meth:`GinModel.architecture`):
its *backbone* is the graph embedding before the heads (the ``layers * hidden`` = 96-d
concatenation of sum-pooled layers that the papers' SVM reads, HCL App. D.2), its *projection*
the global head's output ``global_d`` (what the loss scored).

The artifact (kind :data:`GRAPH_ENCODER_KIND`, written by
:func:`~hcl_cli.artifacts.tensors.save_artifact`: atomic, tensors bound to the sidecar by sha256)
holds the state dict; its sidecar records the architecture (``arch`` gin, ``in_dim``, ``hidden``,
``layers``, ``feature_dim``, ``projection_dim``) and what pretraining records of every encoder
(``config``, ``epoch``, ``seed``, ``dataset``, ``world_size``, ``run``, ``learned``,
``versions``). :func:`load_graph_encoder` checks every field as
:func:`hcl_cli.image.encoder.load_encoder` does: one line naming the file and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from hcl_cli.artifacts.encoders import RecordedEncoder, check_state_dict, load_recorded_weights
from hcl_cli.artifacts.tensors import library_versions, load_artifact, save_artifact
from hcl_cli.errors import InputError
from hcl_cli.graph.gin import Edges, InfoGraphModel

GRAPH_ENCODER_KIND = "graph encoder"
GIN = "gin"
SIZE_FIELDS = ("in_dim", "hidden", "layers")
"""The sidecar's integers that rebuild the model."""
SIZE_LIMIT = 65536
"""The largest width or depth a sidecar may name (a tampered 10**12 would allocate before failing)."""


class GinModel(InfoGraphModel):
    """InfoGraph's GIN and heads (HCL App. D.2) with the attributes every encoder of the pipeline has."""

    arch = GIN

    def __init__(self, in_dim: int, hidden: int = 32, layers: int = 3) -> None:
        super().__init__(in_dim, hidden, layers)
        self.in_dim = in_dim

    @property
    def feature_dim(self) -> int:
        """Size of the backbone feature: the graph embedding, ``layers * hidden``."""
        return self.embedding_dim

    @property
    def projection_dim(self) -> int:
        """Size of the global head's output (the heads keep the width)."""
        return self.embedding_dim

    def architecture(self) -> dict[str, Any]:
        """What :class:`GinModel` needs to be rebuilt, and its embedding sizes."""
        return {
            "arch": self.arch,
            "in_dim": self.in_dim,
            "hidden": self.encoder.hidden,
            "layers": self.encoder.layers,
            "feature_dim": self.feature_dim,
            "projection_dim": self.projection_dim,
        }

    def embed(self, x: torch.Tensor, edges: Edges, batch: torch.Tensor, num_graphs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(graph embeddings, global head outputs)`` of a batch: the backbone and projection that ``embed`` writes
        (the local head, which only the loss reads, is not run)."""
        graphs, _ = self.encoder(x, edges, batch, num_graphs)
        return graphs, self.global_d(graphs)


@dataclass(frozen=True, kw_only=True)
class GraphEncoderSidecar(RecordedEncoder):
    """The checked sidecar of a graph encoder artifact: its architecture (module docstring) and what every encoder records."""

    arch: str
    in_dim: int
    hidden: int
    layers: int
    feature_dim: int
    projection_dim: int
    kind: str = GRAPH_ENCODER_KIND


def save_graph_encoder(path: str | os.PathLike[str], model: GinModel, meta: Mapping[str, Any]) -> None:
    """Write ``model``'s weights as a graph encoder artifact (atomic) with ``meta`` and its architecture in the sidecar."""
    save_artifact(path, model.state_dict(), GRAPH_ENCODER_KIND, {**meta, **model.architecture(), "versions": library_versions()})


def load_graph_encoder(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[GinModel, GraphEncoderSidecar]:
    """The encoder the sidecar describes, with its weights, in eval mode on ``device``, and the checked sidecar.

    A wrong kind, an architecture field that is not a positive integer (or not ``gin``), weights
    of other names or shapes, an embedding size the architecture does not have, a recorded field of
    the wrong type or a non-finite weight is a one-line :class:`HclError` naming the file (and field).
    """
    tensors, values = load_artifact(path, GRAPH_ENCODER_KIND, expected={}, device="cpu")
    if values.get("arch") != GIN:
        raise InputError(f"{path}: sidecar names an unknown arch {values.get('arch')!r} (a graph encoder is {GIN})")
    for name in SIZE_FIELDS:
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= SIZE_LIMIT:
            raise InputError(f"{path}: sidecar field {name!r} must be an integer in [1, {SIZE_LIMIT}] (got {value!r})")
    model = GinModel(values["in_dim"], values["hidden"], values["layers"])
    check_state_dict(path, model.state_dict(), tensors)
    for name in ("feature_dim", "projection_dim"):
        if values.get(name) != getattr(model, name):
            raise InputError(f"{path}: sidecar field {name!r} is {values.get(name)!r}, but this gin has {getattr(model, name)}")
    recorded = load_recorded_weights(path, model, tensors, values)
    sidecar = GraphEncoderSidecar(**model.architecture(), **recorded)
    return model.to(device).eval(), sidecar
