"""Quick-thought's loss (Logeswaran & Lee 2018, Sec. 3) under every label-free sampler, against a hand transcription
of each paper's objective on a tiny batch: the positives, no positive across a document boundary, each sampler's weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import negative_distribution
from hcl_cli.objectives.quick_thought import check_sentence_sampler, quick_thought_loss
from hcl_cli.objectives.registry import lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.sentence_batch import SentenceBatch, context_pairs
from hcl_cli.objectives.undimix_sentences import sentence_undimix

DOCUMENTS = torch.tensor([0, 0, 0, 1, 1, 1, 1])
"""Seven consecutive sentences: three of one book, then four of the next."""


def options(sampler: str, **values: object) -> SamplerOptions:
    return SamplerOptions.resolve(lookup(sampler), {"objective": "nce", **values})


def embeddings(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(7, 5, generator=generator, dtype=torch.float64), torch.randn(7, 5, generator=generator, dtype=torch.float64)


def hand_pairs(context: int) -> list[tuple[int, int]]:
    """Every (sentence, neighbour within ``context``) of one document, by loops."""
    size = len(DOCUMENTS)
    return [(i, p) for i in range(size) for p in range(size) if p != i and abs(p - i) <= context and DOCUMENTS[i] == DOCUMENTS[p]]


@pytest.mark.parametrize("context", [1, 2])
def test_positives_are_the_neighbours_of_one_document(context: int) -> None:
    anchor, positive = context_pairs(DOCUMENTS, context)
    assert list(zip(anchor.tolist(), positive.tolist())) == hand_pairs(context)
    assert (2, 3) not in zip(anchor.tolist(), positive.tolist())  # sentences 2 and 3 lie in two books


def hand_loss(f: torch.Tensor, g: torch.Tensor, weights: object, *, tau_plus: float = 0.0, context: int = 1) -> float:
    """HCL's Eq. (4) estimate with Fig. 13's clamp for each (sentence, context) pair, written with loops: the negatives of
    pair (i, p) are every sentence of the batch but i and p, weighted by ``weights(i, p, j)`` (normalised over them)."""
    size = len(f)
    M = size - 2
    terms = []
    for i, p in hand_pairs(context):
        scores = (f[i] @ g.T).tolist()
        negatives = [j for j in range(size) if j not in (i, p)]
        w = [weights(i, p, j) for j in negatives]
        expected = sum(wj * math.exp(scores[j]) for wj, j in zip(w, negatives)) / sum(w)
        positive = math.exp(scores[p])
        negative_term = max((M * expected - tau_plus * M * positive) / (1 - tau_plus), M * math.exp(-1.0))
        if tau_plus == 0.0 and weights is uniform:
            negative_term = M * expected  # plain QT: no clamp
        terms.append(-math.log(positive / (positive + negative_term)))
    return sum(terms) / len(terms)


def uniform(i: int, p: int, j: int) -> float:
    return 1.0


def test_ucl_is_the_papers_softmax_over_the_batch_but_the_sentence() -> None:
    f, g = embeddings()
    loss, stats = quick_thought_loss(f, g, DOCUMENTS, sampler="ucl", options=options("ucl"), context=1)
    scores = f @ g.T
    paper = [
        -torch.log_softmax(torch.cat([scores[i, :i], scores[i, i + 1 :]]), dim=0)[p - (p > i)] for i, p in hand_pairs(1)
    ]  # log p(s_p | s_i, S_cand), S_cand the batch without s_i
    assert float(loss) == pytest.approx(float(torch.stack(paper).mean()), rel=1e-12)
    assert float(loss) == pytest.approx(hand_loss(f, g, uniform), rel=1e-12)
    assert int(stats.terms) == len(hand_pairs(1))


def test_debiased_is_hcls_correction_with_uniform_weights() -> None:
    f, g = embeddings(1)
    loss, _ = quick_thought_loss(f, g, DOCUMENTS, sampler="debiased", options=options("debiased", tau_plus=0.01), context=1)
    assert float(loss) == pytest.approx(hand_loss(f, g, uniform, tau_plus=0.01), rel=1e-10)


@pytest.mark.parametrize("beta", [1.0, 2.0])
def test_hucl_tilts_on_scores_clipped_into_two(beta: float) -> None:
    """HCL App. D.3: the weights exp(beta s) are computed on 2 s / max |s| over the batch's negative pairs (Fig. 14)."""
    f, g = embeddings(2)
    scores = f @ g.T
    largest = max(abs(float(scores[i, j])) for i, p in hand_pairs(1) for j in range(7) if j not in (i, p))

    def tilted(i: int, p: int, j: int) -> float:
        return math.exp(beta * 2.0 * float(scores[i, j]) / largest)

    loss, _ = quick_thought_loss(f, g, DOCUMENTS, sampler="hucl", options=options("hucl", beta=beta, tau_plus=0.0), context=1)
    assert float(loss) == pytest.approx(hand_loss(f, g, tilted), rel=1e-10)
    unclipped, _ = quick_thought_loss(f * 3, g, DOCUMENTS, sampler="hucl", options=options("hucl", beta=beta, tau_plus=0.0), context=1)
    assert float(unclipped) != pytest.approx(float(loss))


def hand_undimix_parts(f: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    """Similarity, uncertainty (Eq. 2-3's cross-entropy gradient at each embedding, by autograd) and diversity (Eq. 4)."""
    size = len(f)
    similarity = f @ g.T

    def gradient(row: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
        row = row.clone().requires_grad_(True)
        logits = F.normalize(row, dim=0) @ F.normalize(others, dim=1).T
        F.cross_entropy(logits[None], logits.argmax()[None]).backward()
        return row.grad

    anchors = torch.stack([gradient(f[i], g) for i in range(size)])
    candidates = torch.stack([gradient(g[j], f) for j in range(size)])
    uncertainty = anchors @ candidates.T
    unit = F.normalize(g, dim=1)
    diversity = torch.tensor(
        [
            [sum(1 - float(unit[j] @ unit[k]) for k in range(size) if k not in (i, j)) / (size - 2) for j in range(size)]
            for i in range(size)
        ],
        dtype=torch.float64,
    )
    return [similarity, uncertainty, diversity]


def test_undimix_mixes_its_three_parts_min_max_normalised_over_the_negatives() -> None:
    f, g = embeddings(3)
    parts = hand_undimix_parts(f, g)

    def importance(i: int, p: int, j: int) -> float:
        total = 0.0
        for part in parts:
            row = [float(part[i, k]) for k in range(7) if k not in (i, p)]
            total += (float(part[i, j]) - min(row)) / (max(row) - min(row)) / 3
        return total

    loss, _ = quick_thought_loss(f, g, DOCUMENTS, sampler="undimix", options=options("undimix"), context=1)
    assert float(loss) == pytest.approx(hand_loss(f, g, importance), rel=1e-9)
    batch = SentenceBatch(f, g, DOCUMENTS, 1)
    q = negative_distribution(sentence_undimix(batch, options("undimix")))
    assert float(q[batch.masks.rows, batch.anchor].abs().max()) == 0.0
    assert float(q[batch.masks.rows, batch.positive].abs().max()) == 0.0


def test_ot_couples_anchors_with_candidates_off_their_own_pairs() -> None:
    f, g = embeddings(4)
    loss, _ = quick_thought_loss(f, g, DOCUMENTS, sampler="ot", options=options("ot", tau_plus=0.0), context=1)
    assert math.isfinite(float(loss))
    from hcl_cli.objectives.ot import ot

    batch = SentenceBatch(f, g, DOCUMENTS, 1)
    q = negative_distribution(ot(batch, options("ot", tau_plus=0.0)))
    assert float(q[batch.masks.rows, batch.anchor].max()) == 0.0
    assert float(q[batch.masks.rows, batch.positive].max()) == 0.0


@pytest.mark.parametrize("sampler", ["scl", "hscl", "hscl-threshold"])
def test_label_samplers_are_refused_in_one_line(sampler: str) -> None:
    with pytest.raises(UsageError, match="a text corpus has none") as error:
        check_sentence_sampler(sampler, options(sampler))
    assert "\n" not in str(error.value)


def test_label_positives_are_refused() -> None:
    with pytest.raises(UsageError, match="neighbours"):
        check_sentence_sampler("ucl", options("ucl", positives="labels"))
