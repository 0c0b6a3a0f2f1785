"""Quick-thought's batch as the samplers see it (Logeswaran & Lee, ICLR 2018): one row per (sentence, context
sentence) pair, ``f(s_i)`` against the batch's ``g(s_j)``; :mod:`~hcl_cli.objectives.quick_thought` says why and
computes the loss on it."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives.core import PairMasks, ScoreBatch, uniform_on


def context_pairs(documents: Tensor, context: int) -> tuple[Tensor, Tensor]:
    """The (anchor, context sentence) pairs of a batch of consecutive sentences whose documents are ``documents`` (m,):
    every ``(i, i + d)`` with ``0 < |d| <= context`` inside the batch and in one document, anchors in order."""
    size = len(documents)
    anchors, positives = [], []
    for offset in (d for d in range(-context, context + 1) if d != 0):
        index = torch.arange(max(0, -offset), min(size, size - offset), device=documents.device)
        same = documents[index] == documents[index + offset]
        anchors.append(index[same])
        positives.append(index[same] + offset)
    anchor, positive = torch.cat(anchors), torch.cat(positives)
    order = torch.argsort(anchor * (2 * context + 1) + (positive - anchor + context), stable=True)
    return anchor[order], positive[order]


def sentence_masks(anchor: Tensor, positive: Tensor, size: int) -> PairMasks:
    """The :class:`~hcl_cli.objectives.core.PairMasks` of the P (anchor, context) rows against the batch's m candidates."""
    rows = torch.arange(len(anchor), device=anchor.device)
    columns = torch.arange(size, device=anchor.device)
    is_self = anchor[:, None] == columns[None, :]
    return PairMasks(
        rows=rows,
        partner=positive,
        partner_pairs=rows * size + positive,
        negatives=~(is_self | (positive[:, None] == columns[None, :])),
        others=~is_self,
    )


class SentenceBatch(ScoreBatch):
    """QT's batch: one row per (sentence, context sentence) pair, ``f(s_i)`` against the batch's ``g(s_j)``
    (:mod:`~hcl_cli.objectives.quick_thought`)."""

    temperature = 1.0
    unit = False

    def __init__(self, f: Tensor, g: Tensor, documents: Tensor, context: int) -> None:
        self.compute_dtype = torch.float64 if f.dtype == torch.float64 else torch.float32
        self.f = f.to(self.compute_dtype)
        """(m, d) the batch's sentences under f, the anchors' encoder."""
        self.g = g.to(self.compute_dtype)
        """(m, d) under g, the candidates' encoder."""
        self.size = len(f)
        self.anchor, self.positive = context_pairs(documents, context)
        """(P,) each row's sentence and its context sentence."""
        self.logits = (self.f @ self.g.T).index_select(0, self.anchor)
        """(P, m) ``c(s_i, s_j) = f(s_i).g(s_j)`` of each row's sentence."""
        self.masks = sentence_masks(self.anchor, self.positive, self.size)
        self.labels = None
        self.candidate_labels = None

    @property
    def num_negatives(self) -> int:
        """M = m - 2: every sentence of the batch but the anchor and the row's context sentence."""
        return self.size - 2

    @functools.cached_property
    def uniform(self) -> Tensor:
        """(P, m) the log-weights of the uniform distribution over each row's m - 2 negatives."""
        return uniform_on(self.masks.negatives, self.compute_dtype)

    @functools.cached_property
    def cosine(self) -> Tensor:  # type: ignore[override]
        """(P, m) cos(f(s_i), g(s_j))."""
        return (F.normalize(self.f, dim=1) @ F.normalize(self.g, dim=1).T).index_select(0, self.anchor)

    def sq_cost(self) -> Tensor:
        """(P, m) ``-2 f(s_i).g(s_j)`` (detached): ``||f_i - g_j||^2`` less ``|f_i|^2 + |g_j|^2``, which no coupling with fixed
        marginals sees."""
        return -2.0 * self.logits.detach()
