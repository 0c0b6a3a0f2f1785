"""Who each anchor is contrasted with: the candidates of a batch of two views, and the masks over them.

In-batch, the candidates of the 2B anchors ``Z = [z1; z2]`` are the rows of ``Z`` themselves; with a momentum encoder
(:class:`MomentumKeys`, MoCo) they are the 2B keys ``[k1; k2]`` of the batch followed by a queue of K keys of earlier
batches, column ``j < 2B`` being the key of row ``j``'s view. Either way each anchor's *partner* is the column of its
other view, and its negatives every candidate but its own column and its partner's (:class:`PairMasks`): the structure
that :class:`~hcl_cli.objectives.core.PairBatch` scores and the uniform distribution (SimCLR's) weights. None of it
reads an embedding or a label.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from hcl_cli.runtime import constant


@dataclass(frozen=True)
class PairMasks:
    """The label-free structure of n anchors against m candidates.

    For B images in two views against 2B + K candidates (n = 2B, m = 2B + K, built once per
    (B, K, device) by :func:`pair_masks`) the shapes below are given in those terms; a node-graph
    batch (:func:`~hcl_cli.objectives.node_graph.node_graph_masks`) has the same fields with
    n nodes and m = G graphs.
    """

    rows: Tensor
    """(2B,) int64: ``0 .. 2B - 1``."""
    partner: Tensor
    """(2B,) int64: the column of each anchor's positive: the row of its other view, ``(i + B) mod 2B`` (a node's graph)."""
    partner_pairs: Tensor
    """(2B,) int64: the flat index ``i * (2B + K) + partner(i)`` of each (anchor, positive) pair."""
    negatives: Tensor
    """(2B, 2B + K) bool: every pair except self and partner (a node against every graph but its own)."""
    others: Tensor
    """(2B, 2B + K) bool: every pair except self (every pair for nodes and graphs: no anchor is a candidate)."""


@functools.lru_cache(maxsize=16)
def pair_masks(batch_size: int, device: torch.device, queue_size: int = 0) -> PairMasks:
    """The cached :class:`PairMasks` of a batch size and a queue size on a device (no loop over the batch)."""
    with torch.inference_mode(False):
        rows = 2 * batch_size
        index = torch.arange(rows, device=device)
        columns = torch.arange(rows + queue_size, device=device)
        partner = (index + batch_size) % rows
        is_self = index[:, None] == columns[None, :]
        is_partner = partner[:, None] == columns[None, :]
        return PairMasks(
            rows=index,
            partner=partner,
            partner_pairs=index * (rows + queue_size) + partner,
            negatives=~(is_self | is_partner),
            others=~is_self,
        )


def uniform_on(support: Tensor, dtype: torch.dtype) -> Tensor:
    """Log-weights of the uniform distribution on ``support`` (bool): 0 there, ``-inf`` elsewhere (one ``torch.where``)."""
    return torch.where(support, constant(0.0, dtype, support.device), constant(-math.inf, dtype, support.device))


@functools.lru_cache(maxsize=16)
def uniform_log_weights(batch_size: int, device: torch.device, dtype: torch.dtype, queue_size: int = 0) -> Tensor:
    """The cached (2B, 2B + K) log-weights of the uniform distribution over each anchor's N negatives."""
    with torch.inference_mode(False):
        return uniform_on(pair_masks(batch_size, device, queue_size).negatives, dtype)


@dataclass(frozen=True)
class MomentumKeys:
    """The candidates of a momentum encoder (MoCo, He et al. 2020; MoCo-v2 in HCL App. C.1).

    With them, the anchors ``[z1; z2]`` (the query encoder's projections) are contrasted with the
    2B + K candidates ``[k1; k2; queue]`` instead of with themselves: anchor ``i``'s partner is the
    key of its image's other view, the key of its own view is left out as its own row is in-batch,
    and every other key of the batch and every queued key is a candidate negative. The keys and the
    queue carry no gradient. Every sampler keeps its meaning over them; each module says how.
    """

    k1: Tensor
    """(B, d) the key projections of the first views."""
    k2: Tensor
    """(B, d) those of the second views."""
    queue: Tensor
    """(K, d) keys of earlier batches, in any order (normalised here); K is even, rows ``2p`` and
    ``2p + 1`` being the two views of one image."""
    queue_labels: Tensor | None = None
    """(K,) the queued keys' labels, where the loss reads labels."""
    head_inputs: tuple[Tensor, Tensor] | None = None
    """The key encoder's inputs of its head's last layer for both views (undimix)."""
    queue_features: Tensor | None = None
    """(K, e) what the sampler's ``key_features`` gave for each queued key when it was a batch key (undimix)."""
    queue_valid: Tensor | None = None
    """(K,) bool: the queue's rows that hold keys, the others left out of every distribution and count as though the
    queue were those rows alone (a compiled step's queue while it fills: one shape throughout); None: every row."""

    @property
    def queue_size(self) -> int:
        return self.queue.shape[0]
