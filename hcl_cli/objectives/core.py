"""The one contrastive objective that every sampler shares, and the batch it is computed on.

Notation: ``Z = [z1; z2]`` L2-normalised, 2B rows, the *anchors*; row ``i``'s *partner* is the
other view of the same image. The *candidates* (:mod:`~hcl_cli.objectives.candidates`) are the rows of ``Z`` themselves
(in-batch), or, with a momentum encoder (:class:`~hcl_cli.objectives.candidates.MomentumKeys`, MoCo), the 2B keys
``[k1; k2]`` of the batch followed by a queue of K keys of earlier batches: 2B + K columns, column ``j < 2B`` being the key
of row ``j``'s view. ``s_ij = z_i.c_j / t``; ``M = N = 2B - 2 + K``, the candidates other than
the anchor's own column and its partner's. A sampler only chooses the negative distribution
``q(j|i)`` (as log-weights over the candidates, ``-inf`` off its support) and whether the HCL
debiasing applies. This module turns that into the loss:

    E_i        = sum_j q(j|i) exp(s_ij)                      (log domain: logsumexp)
    Ng_ip      = M E_i                                        (plain)
    Ng_ip      = max((M E_i - tau+ M exp(s_ip)) / (1 - tau+), M exp(-1/t))   (debiased, HCL Fig. 13)
    term_ip    = log(1 + Ng_ip exp(-s_ip)) = softplus(log Ng_ip - s_ip)      ("nce")
    term_ip    = t (E_q[s_ij] - s_ip) = E_q[z_i.z_j] - z_i.z_p               ("bcl", HCL-OT Eq. 9)

for every positive pair ``(i, p)``: the partner (``positives="partner"``), or every other
candidate with the anchor's label, partner included, queued keys too (the supervised samplers, and
the unsupervised ones with ``positives="labels"``: HCL Fig. 4's oracle, H-SCL Sec. V-B). Only the
positives change with labels; the negatives stay the sampler's. The loss is the mean of the terms over all positive
pairs of the anchors that have at least one negative. ``term_ip`` is exactly HCL's
``-log(pos / (pos + Ng))`` and H-SCL's Eq. (3) ``log(1 + M exp(-s_ip) E_i)``, so SimCLR,
debiased, HCL, SCL, H-SCL, HCL-OT and UnDiMix are all this one function with different ``q``;
the ``objective`` option picks ``nce`` or ``bcl`` for any of them (tau+ does not enter ``bcl``).

The samplers see a :class:`ScoreBatch`: a score matrix of n anchors against m candidates, each
anchor's positive column, its negative mask, and the anchors' and candidates' labels. Two kinds
exist: :class:`PairBatch` here (two views of B images, above), and
:class:`~hcl_cli.objectives.node_graph.NodeGraphBatch` (InfoGraph: the batch's nodes against its
graphs, each node's positive its own graph), whose loss is the Jensen-Shannon objective of
:mod:`~hcl_cli.objectives.infograph`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, replace
from typing import Literal

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.candidates import MomentumKeys, PairMasks, pair_masks, uniform_log_weights, uniform_on
from hcl_cli.objectives.kernels import log_count, nce_terms, row_logsumexp, tilted_log_mean, unit_rows
from hcl_cli.runtime import constant

Objective = Literal["nce", "bcl"]
"""The objectives of :func:`contrastive_objective` (two views); ``jsd`` is the graph objective of
:func:`~hcl_cli.objectives.jsd.jsd_objective`."""


class ScoreBatch(abc.ABC):
    """What a sampler sees: n anchors scored against m candidates, with their masks and labels.

    A sampler that reads only these attributes runs on image pairs (:class:`PairBatch`) and on
    nodes against graphs (:class:`~hcl_cli.objectives.node_graph.NodeGraphBatch`) alike.
    Everything is in ``compute_dtype``: float64 for float64 inputs, float32 otherwise (also for
    bf16/fp16 inputs under autocast).
    """

    compute_dtype: torch.dtype
    temperature: float
    """The temperature t that divides the scores (1 for raw scores)."""
    logits: Tensor
    """(n, m) the scores s_ij the loss exponentiates (or feeds to softplus)."""
    cosine: Tensor
    """(n, m) the cosines between anchors and candidates."""
    masks: PairMasks
    labels: Tensor | None
    """(n,) the anchors' labels, or None."""
    candidate_labels: Tensor | None
    """(m,) the candidates' labels, or None."""
    momentum_keys: MomentumKeys | None = None
    queue_size: int = 0
    unit: bool = True
    """Whether anchors and candidates are unit vectors (so that squared distances lie in [0, 4])."""
    column_valid: Tensor | None = None
    """(m,) bool: the candidates that exist (a filling queue's rows left out: :attr:`MomentumKeys.queue_valid`); None: all."""
    _same_label: Tensor | None = None

    @property
    @abc.abstractmethod
    def num_negatives(self) -> int | Tensor:
        """M, the number of candidates each anchor contrasts with (a 0-d tensor where :attr:`column_valid` counts it)."""

    @property
    @abc.abstractmethod
    def uniform(self) -> Tensor:
        """(n, m) the log-weights of the uniform distribution over each anchor's negatives."""

    @abc.abstractmethod
    def sq_cost(self) -> Tensor:
        """(n, m) the ``sq`` ground cost of the OT sampler, detached: ``||a_i - c_j||^2``, up to terms ``x_i + y_j`` that no
        entropic coupling with fixed marginals sees."""

    @property
    def num_anchors(self) -> int:
        """n, the number of anchors."""
        return self.logits.shape[0]

    @property
    def uniform_log_normaliser(self) -> Tensor:
        """(n,) ``log M``: the ``logsumexp`` of every row of :attr:`uniform` (each anchor has M negatives)."""
        return log_count(self.num_negatives, self.compute_dtype, self.logits.device).expand(self.num_anchors)

    @property
    def labelled(self) -> Tensor:
        """(n,) int64 labels of the anchors; raises if the batch has none."""
        if self.labels is None:
            raise ValueError("this batch has no labels")
        return self.labels

    def positive_pairs(self, label_positives: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        """The candidate positive pairs ``(i, p)``: anchor rows ``i``, flat indices ``i * m + p``, and which are positives
        (None: all). Without ``label_positives`` each anchor and its ``partner`` (cached); with them (H-SCL) every pair,
        flagged where the candidate has the anchor's label and is not the anchor: shapes that need no read-back (no
        ``nonzero``, no host sync)."""
        if not label_positives:
            return self.masks.rows, self.masks.partner_pairs, None
        anchors = self.masks.rows.repeat_interleave(self.logits.shape[1])  # an int's repeats: no read-back
        return anchors, torch.arange(len(anchors), device=anchors.device), (self.same_label & self.masks.others).reshape(-1)

    @property
    def same_label(self) -> Tensor:
        """(n, m) bool: the (anchor, candidate) pairs of one label, self included, once per batch for the positives and a
        supervised sampler's support (kept in the instance by hand: ``functools.cached_property`` takes a lock on
        Python 3.11, a graph break in a compiled step)."""
        if self._same_label is None:
            same = self.labelled[:, None] == self.candidate_labels[None, :]
            self._same_label = same if self.column_valid is None else same & self.column_valid
        return self._same_label


class PairBatch(ScoreBatch):
    """One batch of two views and its candidates, prepared once for the sampler and the objective (in ``compute_dtype``, as
    every :class:`ScoreBatch`, so the loss stays finite at low temperature)."""

    _cosine: Tensor | None = None

    def __init__(self, z1: Tensor, z2: Tensor, labels: Tensor | None, temperature: float, keys: MomentumKeys | None = None) -> None:
        self.batch_size = z1.shape[0]
        self.compute_dtype = torch.float64 if z1.dtype == torch.float64 else torch.float32
        self.temperature = temperature
        self.raw = torch.cat([z1, z2]).to(self.compute_dtype)
        """(2B, d) the projections as given (before normalisation)."""
        self.z = unit_rows(self.raw)
        self.momentum_keys = keys
        """The momentum encoder's keys and queue, or None (in-batch: the candidates are the anchors)."""
        self.queue_size = 0 if keys is None else keys.queue_size
        self.key_raw = self.raw if keys is None else torch.cat([keys.k1, keys.k2]).detach().to(self.compute_dtype)
        """(2B, d) the batch's keys as given (the projections themselves in-batch)."""
        self.key_z = self.z if keys is None else unit_rows(self.key_raw)
        """(2B, d) the batch's unit keys (``z`` itself in-batch)."""
        self.queue_z = None if keys is None else unit_rows(keys.queue.detach().to(self.compute_dtype))
        """(K, d) the unit queued keys, or None."""
        self.candidates = self.z if self.queue_z is None else torch.cat([self.key_z, self.queue_z])
        """(2B + K, d) the unit candidates: the batch's keys, then the queue (``z`` itself in-batch)."""
        self.logits = (self.z / constant(temperature, self.compute_dtype, z1.device)) @ self.candidates.T
        """(2B, 2B + K) s_ij = z_i.c_j / t (the temperature divides the (2B, d) anchors, not the (2B, 2B + K) product)."""
        self.masks = pair_masks(self.batch_size, z1.device, self.queue_size)
        if keys is not None and keys.queue_valid is not None:
            self.column_valid = torch.cat([self.masks.rows >= 0, keys.queue_valid])
            masks = self.masks
            self.masks = replace(masks, negatives=masks.negatives & self.column_valid, others=masks.others & self.column_valid)
        self.labels = None if labels is None else torch.cat([labels, labels]).to(z1.device)
        """(2B,) the image labels of both views, or None."""
        self.candidate_labels = self.labels
        """(2B + K,) the labels of the candidates, or None."""
        if self.labels is not None and keys is not None and keys.queue_labels is not None:
            self.candidate_labels = torch.cat([self.labels, keys.queue_labels.to(z1.device)])

    @property
    def cosine(self) -> Tensor:  # type: ignore[override]
        """(2B, 2B + K) z_i.c_j, as ``t s_ij``, for the samplers and objectives that read it; with gradients enabled, so that
        a sampler that reads it first under ``no_grad`` (ot) does not cache a copy without gradient for the objective (bcl).
        Made once (as :attr:`same_label` is)."""
        if self._cosine is None:
            with torch.enable_grad():
                self._cosine = self.logits * self.temperature
        return self._cosine

    @property
    def num_negatives(self) -> int | Tensor:
        """M = N = 2B - 2 + K, the number of candidates each anchor contrasts with (K the queue's filled rows, counted on
        the device where :attr:`column_valid` marks them)."""
        if self.column_valid is not None:
            return self.column_valid.sum() - 2
        return 2 * self.batch_size - 2 + self.queue_size

    @property
    def uniform(self) -> Tensor:
        """(2B, 2B + K) the cached log-weights of the uniform distribution over each anchor's negatives."""
        if self.column_valid is not None:
            return uniform_on(self.masks.negatives, self.compute_dtype)
        return uniform_log_weights(self.batch_size, self.cosine.device, self.compute_dtype, self.queue_size)

    def sq_cost(self) -> Tensor:
        """(2B, 2B + K) ``||z_i - c_j||^2 = 2 - 2 z_i.c_j`` of the unit anchors and candidates, detached."""
        return (2.0 - 2.0 * self.cosine.detach()).clamp(min=0.0)


@dataclass(frozen=True)
class NegativeWeights:
    """What a sampler returns: its negative distribution over the candidates, up to normalisation."""

    log_weights: Tensor
    """(n, m) (for two views (2B, 2B + K)) log w_ij, ``-inf`` where q(j|i) = 0; rows need not be normalised, but every row
    needs a finite entry (give an invalid anchor any placeholder row: it is ignored)."""
    anchor_valid: Tensor | None = None
    """(n,) bool: anchors that have a negative at all (None: all do). The others are left out."""
    debiased: bool = False
    """Apply HCL's tau+ debiasing and the ``M exp(-1/t)`` floor to ``nce`` (debiased, hucl, ot), and its JSD form to ``jsd``."""
    log_normaliser: Tensor | None = None
    """(n,) ``logsumexp`` of each row of ``log_weights`` where the sampler knows it without a pass over
    the matrix (uniform weights: the log of the support's size; rows already normalised: 0); None:
    the objective computes it."""
    tilt: float | Tensor | None = None
    """``log_weights`` is ``tilt * logits`` on its support (exponential tilting, ``exp(beta s_ij)``; a 0-d tensor in a
    compiled step, whose scheduled beta is one), differentiable
    through the logits alone, or detached: then ``nce`` takes its gradient in one step (:class:`~hcl_cli.objectives.kernels.TiltedLogMean`).
    None: any other weights."""


@dataclass(frozen=True)
class LossStats:
    """Book-keeping of one loss evaluation: 0-d tensors of counts on the loss's device (read them with the step's result)."""

    terms: Tensor
    """Positive pairs of the anchors with negatives, whether or not ``anchor_mask`` keeps them (the denominator of the mean)."""
    anchors_without_negatives: Tensor
    """Anchors left out because no candidate had a different label (supervised samplers)."""


def negative_distribution(negatives: NegativeWeights) -> Tensor:
    """q(j|i), (n, m): the sampler's weights normalised per row; zero rows for invalid anchors."""
    q = torch.softmax(negatives.log_weights, dim=1)
    if negatives.anchor_valid is None:
        return q
    return q * negatives.anchor_valid[:, None]


def contrastive_objective(
    batch: PairBatch,
    negatives: NegativeWeights,
    *,
    label_positives: bool,
    tau_plus: float,
    objective: Objective = "nce",
    anchor_mask: Tensor | None = None,
) -> tuple[Tensor, LossStats]:
    """The loss of the module docstring for a sampler's ``negatives``, and its :class:`LossStats`.

    ``label_positives``: every same-label sample is a positive (else the partner only). ``anchor_mask`` (2B,) bool
    keeps only those anchors' terms in the sum while still dividing by the number of terms over all anchors, so losses
    over disjoint masks add up to the full loss.
    """
    if objective == "jsd":
        raise UsageError("objective jsd is InfoGraph's loss of nodes against graphs (local_global_loss); two views train with nce or bcl")
    log_weights = negatives.log_weights
    anchors, pairs, positive = batch.positive_pairs(label_positives)
    if objective == "bcl":
        expected_cosine = (torch.softmax(log_weights, dim=1) * batch.cosine).sum(dim=1)
        terms = expected_cosine.index_select(0, anchors) - batch.cosine.reshape(-1).index_select(0, pairs)
    else:
        positive_logits = batch.logits.reshape(-1).index_select(0, pairs)
        if negatives.tilt is not None and negatives.log_normaliser is None:
            log_mean = tilted_log_mean(log_weights, batch.logits, negatives.tilt)
        else:
            log_normaliser = row_logsumexp(log_weights) if negatives.log_normaliser is None else negatives.log_normaliser
            log_mean = row_logsumexp(log_weights + batch.logits) - log_normaliser
        if label_positives:  # else the anchors are the rows, in order
            log_mean = log_mean.index_select(0, anchors)
        debiasing = tau_plus if negatives.debiased else None
        terms = nce_terms(log_mean, positive_logits, batch.num_negatives, debiasing, floor=-1.0 / batch.temperature)
    if positive is not None:  # the pairs that are not positives count for nothing
        terms = torch.where(positive, terms, constant(0.0, terms.dtype, terms.device))
    if negatives.anchor_valid is None:  # every anchor has negatives: the counts are the shapes' (or the positives')
        count = constant(len(anchors), terms.dtype, terms.device) if positive is None else positive.sum().to(terms.dtype)
        kept_terms = terms if anchor_mask is None else terms * anchor_mask.index_select(0, anchors)
        return kept_terms.sum() / count, LossStats(terms=count, anchors_without_negatives=constant(0, terms.dtype, terms.device))
    valid = negatives.anchor_valid
    kept = valid if anchor_mask is None else valid & anchor_mask
    valid_pairs = valid.index_select(0, anchors) if positive is None else valid.index_select(0, anchors) & positive
    total_terms = valid_pairs.sum()
    loss = (terms * kept.index_select(0, anchors)).sum() / total_terms.clamp(min=1)
    return loss, LossStats(terms=total_terms, anchors_without_negatives=(~valid).sum())
