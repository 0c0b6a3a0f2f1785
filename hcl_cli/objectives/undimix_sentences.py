"""UnDiMix's importance on quick-thought's sentences (Tabassum et al., Sec. 4.2 and App. A "Sentence representation").

UnDiMix "implement[s] our importance calculation in s2v-model.py", the QT code, "following instructions from
Robinson et al. (2021)", and says no more. hcl's reading of each part for row (i, p) of a
:class:`~hcl_cli.objectives.sentence_batch.SentenceBatch` (anchor ``f_i = f(s_i)``) against the negative
candidate ``g_j = g(s_j)``, m sentences in the batch:

- (a) similarity, P1: ``s_ij = f_i.g_j``, QT's score, the one the objective contrasts (as on graphs the critic
  score; each part is min-max normalised per row, so HCL App. D.3's clipping, a positive scale, changes nothing);
- (b) uncertainty, P2, Eq. (2)-(3): Eq. (2) is a posterior of the candidate over the anchors,
  ``p(k | j) = exp(cos(f_k, g_j)) / sum_k' exp(cos(f_k', g_j))`` over the batch's m sentences, pseudo-label
  ``argmax_k``; "similarly" the anchor's over the candidates. QT's encoders end in their GRU, with no linear last
  layer, so hcl takes Eq. (3)'s gradient at the embedding itself: ``delta^g_j = dCE_j / dg_j`` and
  ``delta^f_i = dCE_i / df_i`` (:func:`~hcl_cli.objectives.undimix.posterior_gradients`, the other side held
  fixed, as BADGE), and ``u_ij = delta^f_i.delta^g_j`` (``undimix_uncertainty`` is not read);
- (c) diversity, P3, Eq. (4): ``r_ij = 1/(m - 2) sum_{j' not in {i, j}} (1 - cos(g_j, g_j'))``, the candidate's mean
  distance to the batch's other candidates but the anchor's.

The parts are mixed by :func:`~hcl_cli.objectives.undimix.importance` and enter the shared ``nce`` objective as q
(:func:`~hcl_cli.objectives.undimix.importance_weights`), exactly as on images; no tau+ (UnDiMix has none).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.objectives.core import NegativeWeights
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.sentence_batch import SentenceBatch
from hcl_cli.objectives.undimix import importance, importance_weights, posterior_gradients


def sentence_similarity_scores(batch: SentenceBatch, options: SamplerOptions | None = None) -> Tensor:
    """(P, m) ``s_ij = f_i.g_j``, QT's scores (P1), as a new tensor."""
    return batch.logits.detach().clone()


def sentence_uncertainty_scores(batch: SentenceBatch, options: SamplerOptions | None = None) -> Tensor:
    """(P, m) ``u_ij = delta^f_i.delta^g_j``, Eq. (2)-(3) at the embeddings (module docstring)."""
    f, g = batch.f.detach(), batch.g.detach()
    unit_f, unit_g = F.normalize(f, dim=1), F.normalize(g, dim=1)
    cosine = unit_f @ unit_g.T
    anchor_gradients = posterior_gradients(unit_f, f, unit_g, cosine)
    candidate_gradients = posterior_gradients(unit_g, g, unit_f, cosine.T.contiguous())
    return (anchor_gradients @ candidate_gradients.T).index_select(0, batch.anchor)


def sentence_diversity_scores(batch: SentenceBatch, options: SamplerOptions | None = None) -> Tensor:
    """(P, m) ``r_ij``, Eq. (4) over the batch's candidates: ``1 - mean cos(g_j, g_j')`` over the m - 2 other than j and i."""
    unit = F.normalize(batch.g.detach(), dim=1)
    cosine = unit @ unit.T
    others = cosine.sum(dim=0) - cosine.diagonal()
    return 1.0 - (others[None, :] - cosine.index_select(0, batch.anchor)) / max(batch.size - 2, 1)


SENTENCE_SCORES = (sentence_similarity_scores, sentence_uncertainty_scores, sentence_diversity_scores)
"""The three parts on sentences, in the order of ``undimix_weights``."""


def sentence_undimix(batch: SentenceBatch, options: SamplerOptions) -> NegativeWeights:
    """Each row's weights over its m - 2 negatives (mean 1 over them, 0 on the anchor and its context sentence)."""
    rows = batch.masks.rows
    excluded = (torch.cat([rows, rows]), torch.cat([batch.anchor, batch.positive]))
    return importance_weights(batch, importance(batch, options, SENTENCE_SCORES, excluded), excluded)
