"""InfoGraph's batch as the samplers see it: a batch's nodes against its graphs (Sun et al., ICLR 2020).

Anchors are the batch's n nodes' local embeddings ``l_i``, candidates its G graphs' global
embeddings ``g_j``, the score is the raw inner product ``s_ij = l_i.g_j`` (no normalisation, no
temperature, as InfoGraph), each node's positive is its own graph and its negatives are the other
graphs of the batch. The samplers of :mod:`hcl_cli.objectives` run on it unchanged and give
q(j|i) over the graphs (:mod:`hcl_cli.objectives.infograph` lists them).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives.candidates import PairMasks, uniform_on
from hcl_cli.objectives.core import ScoreBatch


def node_graph_masks(node_graph: Tensor, num_graphs: int) -> PairMasks:
    """The :class:`~hcl_cli.objectives.candidates.PairMasks` of n nodes (graph index ``node_graph``) against G graphs, without a loop over nodes."""
    nodes = torch.arange(len(node_graph), device=node_graph.device)
    own = node_graph[:, None] == torch.arange(num_graphs, device=node_graph.device)[None, :]
    return PairMasks(
        rows=nodes,
        partner=node_graph,
        partner_pairs=nodes * num_graphs + node_graph,
        negatives=~own,
        others=torch.ones_like(own),
    )


class NodeGraphBatch(ScoreBatch):
    """n nodes' local embeddings against the G global embeddings of their batch of graphs (InfoGraph)."""

    temperature = 1.0
    unit = False

    def __init__(self, local: Tensor, global_: Tensor, node_graph: Tensor, graph_labels: Tensor | None) -> None:
        self.compute_dtype = torch.float64 if local.dtype == torch.float64 else torch.float32
        self.local = local.to(self.compute_dtype)
        """(n, d) the nodes' local embeddings."""
        self.global_ = global_.to(self.compute_dtype)
        """(G, d) the graphs' global embeddings."""
        self.num_graphs = global_.shape[0]
        self.logits = self.local @ self.global_.T
        """(n, G) s_ij = l_i.g_j."""
        self.masks = node_graph_masks(node_graph, self.num_graphs)
        self.candidate_labels = None if graph_labels is None else graph_labels.to(local.device)
        """(G,) the graphs' labels, or None."""
        self.labels = None if graph_labels is None else self.candidate_labels[node_graph]
        """(n,) each node's graph's label, or None."""

    @property
    def num_negatives(self) -> int:
        """M = G - 1: the other graphs of the batch."""
        return self.num_graphs - 1

    @functools.cached_property
    def uniform(self) -> Tensor:
        """(n, G) the log-weights of the uniform distribution over each node's G - 1 other graphs."""
        return uniform_on(self.masks.negatives, self.compute_dtype)

    @functools.cached_property
    def cosine(self) -> Tensor:  # type: ignore[override]
        """(n, G) cos(l_i, g_j), which ``hscl-threshold`` compares with its threshold."""
        return F.normalize(self.local, dim=1) @ F.normalize(self.global_, dim=1).T

    def sq_cost(self) -> Tensor:
        """(n, G) ``-2 s_ij`` (detached): ``||l_i - g_j||^2`` less ``|l_i|^2 + |g_j|^2``, terms that no coupling with fixed
        marginals sees, so the ``sq`` cost's coupling is that of the squared distances."""
        return -2.0 * self.logits.detach()
