"""Quick-thought's batch as the samplers see it, and its loss under every sampler that reads no labels.

Quick-thought (QT; Logeswaran & Lee, ICLR 2018, Sec. 3): two encoders f and g with separate weights,
a batch of consecutive sentences s_1 .. s_m, the score ``c(s_i, s_j) = f(s_i).g(s_j)`` (a raw inner
product: no normalisation, no temperature), and the objective

    sum_i  sum_{p in ctx(i)}  log p(s_p | s_i, S_cand),   p(s_p | s_i, S_cand) = exp(c(s_i, s_p)) / sum_{j in S_cand} exp(c(s_i, s_j))

with ``ctx(i)`` the sentences within ``context`` places of s_i (1 on each side in QT; UnDiMix App. A's
k) and ``S_cand`` the batch's sentences but s_i itself. hcl keeps document boundaries: a context
sentence is never in another document (another book), and a sentence with no neighbour in the batch
has no term. Each (i, p) is one row of the shared objective (:mod:`~hcl_cli.objectives.core`): anchor
``f(s_i)``, candidates ``g(s_1) .. g(s_m)``, positive column p, negatives every column but i and p,
M = m - 2 of them. With uniform q (``ucl``) its term ``softplus(log sum_neg exp(s_ij) - s_ip)`` is
``-log p(s_p | s_i, S_cand)`` exactly, the other context sentences of s_i in the denominator as the paper
writes S_cand (and as the official s2v code's soft-target cross-entropy over the batch has them); the
loss is the mean over the (i, p) pairs (the code averages per sentence, its targets 1/|ctx(i)| each,
and keeps s_i in its own softmax with score 0, ``matrix_set_diag(scores, 0)``; hcl follows the paper's S_cand).

The samplers supply q over those candidates through the same loss as images and graphs:
``debiased`` and ``hucl`` (HCL Table 2's rows) with HCL App. D.3's reading, "since the sentence
embeddings are also not constrained to lie on a hypersphere, we use the same clipping trick as for the
graph embeddings" (Fig. 14): hucl's weights ``exp(beta s)`` are computed on the scores scaled into
[-2, 2] by ``2 s / max |s|`` over the batch's negative pairs, always on sentences (the ``clip`` option is
not read), the loss's ``exp(s_ij)`` keeping the plain scores; ``undimix`` reads its three parts on
sentences (:mod:`~hcl_cli.objectives.undimix_sentences`; UnDiMix App. A follows HCL's instructions; its
parts are min-max normalised per row, which the clipping's positive scale leaves unchanged); ``ot`` the
entropic coupling of the anchors with the candidates under the cost ``-2 f.g`` (the squared distance less
terms no coupling with fixed marginals sees, as on nodes against graphs). The samplers that read labels
are refused: a corpus has none (:func:`check_sentence_sampler`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import LossStats, contrastive_objective
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.sentence_batch import SentenceBatch
from hcl_cli.objectives.undimix_sentences import sentence_undimix

SENTENCE_OBJECTIVES = ("nce",)
"""The objectives quick-thought trains with: its softmax is the shared ``nce``."""


def check_sentence_sampler(sampler: str, options: SamplerOptions) -> None:
    """One-line usage errors for a sampler or options that quick-thought cannot train with: the samplers and positives
    that read labels (a corpus has none), an objective other than ``nce`` (``auto`` is ``nce`` on sentences)."""
    spec = lookup(sampler)
    if spec.supervised:
        unsupervised = ", ".join(name for name, other in SAMPLERS.items() if not other.supervised)
        raise UsageError(f"--sampler {sampler} reads labels, and a text corpus has none: use one of {unsupervised}")
    if spec.label_positives(options):
        raise UsageError("--positives labels reads labels, and a text corpus has none: sentences' positives are their neighbours")
    if options.objective not in ("auto", *SENTENCE_OBJECTIVES):
        raise UsageError(f"sentences train with --objective nce (quick-thought's softmax), not {options.objective}")


def quick_thought_loss(
    f: Tensor, g: Tensor, documents: Tensor, *, sampler: str, options: SamplerOptions, context: int
) -> tuple[Tensor, LossStats]:
    """QT's loss (module docstring) of a batch of consecutive sentences under ``sampler``, and its
    :class:`~hcl_cli.objectives.core.LossStats`; the training step's entry: the options were checked once
    (:func:`check_sentence_sampler`)."""
    with torch.autocast(device_type=f.device.type, enabled=False):
        batch = SentenceBatch(f, g, documents, context)
        if len(batch.anchor) == 0 or batch.size < 3:
            raise UsageError(f"a batch of {batch.size} sentences holds no (sentence, context) pair with a negative")
        if sampler == "undimix":
            negatives = sentence_undimix(batch, options)
        else:
            negatives = SAMPLERS[sampler].load()(batch, options.replaced({"clip": True}, {}))
        return contrastive_objective(batch, negatives, label_positives=False, tau_plus=options.tau_plus, objective="nce")
