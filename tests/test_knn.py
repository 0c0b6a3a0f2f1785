"""Weighted kNN (Wu et al., 2018) against a brute-force reference, through every chunking path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hcl_cli.errors import UsageError
from hcl_cli.knn import knn_predict, nearest_neighbours
from hcl_cli.metrics import topk_accuracy

NUM_CLASSES = 6
K = 25
TEMPERATURE = 0.5
ToyData = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def brute_force_scores(
    bank: torch.Tensor, bank_labels: torch.Tensor, queries: torch.Tensor, k: int, temperature: float = TEMPERATURE
) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain definition in float64: the full (Q, N) cosine matrix, its top-k, and each class's log of
    summed votes exp(cos / T), less the query's top cos / T (the form knn_predict returns)."""
    cosines = F.normalize(queries.double(), dim=1) @ F.normalize(bank.double(), dim=1).T
    top_cosines, top_indices = cosines.topk(k, dim=1)
    logits = (top_cosines / temperature).unsqueeze(-1).expand(-1, -1, NUM_CLASSES)
    voted = F.one_hot(bank_labels[top_indices], NUM_CLASSES).bool()
    log_scores = logits.masked_fill(~voted, float("-inf")).logsumexp(dim=1)
    return log_scores - top_cosines[:, :1] / temperature, top_indices


def class_ranking(scores: torch.Tensor) -> torch.Tensor:
    """Every row's classes from the highest score down (ties, such as classes without a vote, by class index)."""
    return scores.sort(dim=1, descending=True, stable=True).indices


@pytest.fixture(scope="module")
def toy_data() -> ToyData:
    """A bank of 300 and 53 queries in 16 dimensions, labels a noisy function of the features."""
    generator = torch.Generator().manual_seed(0)
    bank, queries = torch.randn(300, 16, generator=generator), torch.randn(53, 16, generator=generator)
    directions = torch.randn(16, NUM_CLASSES, generator=generator)
    bank_labels = (bank @ directions + torch.randn(300, NUM_CLASSES, generator=generator)).argmax(dim=1)
    query_labels = (queries @ directions).argmax(dim=1)
    return bank, bank_labels, queries, query_labels


@pytest.mark.parametrize(("chunk_size", "bank_chunk_size"), [(1000, 1000), (53, 300), (7, 13), (1, 7), (64, 97), (20, 299)])
def test_chunked_knn_equals_brute_force(toy_data: ToyData, chunk_size: int, bank_chunk_size: int) -> None:
    bank, bank_labels, queries, query_labels = toy_data
    reference, reference_neighbours = brute_force_scores(bank, bank_labels, queries, K)
    _, neighbours = nearest_neighbours(bank, queries, k=K, chunk_size=chunk_size, bank_chunk_size=bank_chunk_size)
    scores = knn_predict(
        bank,
        bank_labels,
        queries,
        k=K,
        temperature=TEMPERATURE,
        num_classes=NUM_CLASSES,
        chunk_size=chunk_size,
        bank_chunk_size=bank_chunk_size,
    )
    assert torch.equal(neighbours, reference_neighbours)
    torch.testing.assert_close(scores, reference, rtol=1e-5, atol=1e-5)
    assert torch.equal(scores.argmax(dim=1), reference.argmax(dim=1))
    assert torch.equal(scores.topk(5, dim=1).indices, reference.topk(5, dim=1).indices)
    assert topk_accuracy(scores, query_labels) == topk_accuracy(reference, query_labels)


def test_knn_beats_chance_and_top5_is_at_least_top1(toy_data: ToyData) -> None:
    bank, bank_labels, queries, query_labels = toy_data
    scores = knn_predict(
        bank, bank_labels, queries, k=K, temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=8, bank_chunk_size=64
    )
    accuracy = topk_accuracy(scores, query_labels)
    assert accuracy[1] > 2 / NUM_CLASSES and accuracy[5] >= accuracy[1]


def test_k_equal_to_the_bank_sums_every_vote(toy_data: ToyData) -> None:
    bank, bank_labels, queries, _ = toy_data
    scores = knn_predict(
        bank, bank_labels, queries, k=len(bank), temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=16, bank_chunk_size=70
    )
    torch.testing.assert_close(scores, brute_force_scores(bank, bank_labels, queries, len(bank))[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature", [1e-8, 1e-6, 1e-4, 1e-3, 0.01, 0.011, 0.05, 0.5, 1.0, 10.0])
def test_low_and_high_temperatures_rank_classes_as_a_float64_reference(toy_data: ToyData, temperature: float) -> None:
    """exp(cos / T) overflows float32 below T of about 0.011; the log-domain votes rank like float64 at any T."""
    bank, bank_labels, queries, query_labels = toy_data
    reference, _ = brute_force_scores(bank, bank_labels, queries, K, temperature)
    scores = knn_predict(
        bank, bank_labels, queries, k=K, temperature=temperature, num_classes=NUM_CLASSES, chunk_size=7, bank_chunk_size=13
    )
    assert not scores.isnan().any() and (scores < float("inf")).all()
    assert torch.equal(class_ranking(scores), class_ranking(reference))
    assert topk_accuracy(scores, query_labels) == topk_accuracy(reference, query_labels)
    finite = reference.isfinite()
    assert torch.equal(scores.isfinite(), finite)
    if temperature >= 0.01:  # below, float32 cosines' rounding (1e-7) divided by T outweighs the tolerance
        torch.testing.assert_close(scores[finite], reference[finite], rtol=1e-5, atol=1e-4)


def test_tiny_temperature_votes_like_the_single_nearest_neighbour(toy_data: ToyData) -> None:
    """As T -> 0 the weighted kNN becomes 1-NN: the top class is the nearest neighbour's."""
    bank, bank_labels, queries, _ = toy_data
    scores = knn_predict(bank, bank_labels, queries, k=K, temperature=1e-8, num_classes=NUM_CLASSES, chunk_size=16, bank_chunk_size=64)
    _, nearest = nearest_neighbours(bank, queries, k=1, chunk_size=16, bank_chunk_size=64)
    assert torch.equal(scores.argmax(dim=1), bank_labels[nearest[:, 0]])


def test_k_larger_than_the_bank_is_a_one_line_usage_error(toy_data: ToyData) -> None:
    bank, bank_labels, queries, _ = toy_data
    with pytest.raises(UsageError, match="--k 301 is larger than the bank of 300 train embeddings") as caught:
        knn_predict(bank, bank_labels, queries, k=301, temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=16, bank_chunk_size=64)
    assert "\n" not in str(caught.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_queries_with_a_cpu_bank_match_the_cpu(toy_data: ToyData) -> None:
    """The cosines are float32 sums, added in another order on each device: each may be off by about (D + 2) float32
    roundings (a normalisation, D products added), and a score holds the difference of two cosines over T. Within that
    bound of each other (the H100 was 3.6e-7 off the CPU), and both as close to the float64 reference as the CPU path."""
    bank, bank_labels, queries, _ = toy_data
    options = {"k": K, "temperature": TEMPERATURE, "num_classes": NUM_CLASSES, "chunk_size": 7, "bank_chunk_size": 13}
    on_cuda = knn_predict(bank, bank_labels, queries.cuda(), **options)
    on_cpu = knn_predict(bank, bank_labels, queries, **options)
    assert on_cuda.device.type == "cuda"
    float32_sums = 2 * 2 * (bank.shape[1] + 2) * torch.finfo(torch.float32).eps / TEMPERATURE
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=0, atol=float32_sums)
    assert torch.equal(on_cuda.argmax(dim=1).cpu(), on_cpu.argmax(dim=1))
    reference, _ = brute_force_scores(bank, bank_labels, queries, K)
    finite = reference.isfinite()
    torch.testing.assert_close(on_cuda.cpu()[finite], reference[finite], rtol=1e-5, atol=1e-4)


def test_near_duplicates_at_t_0_01_are_not_flattened_by_overflow() -> None:
    """At T = 0.01 every vote with cos > 0.887 overflowed float32 to inf, so each class with such a
    neighbour tied; one neighbour at cos 0.99 outweighs three at 0.9 by exp(9) / 3."""
    generator = torch.Generator().manual_seed(1)
    queries = F.normalize(torch.randn(20, 32, generator=generator), dim=1)
    bank, labels = [], []
    for query in queries:
        directions = torch.randn(4, 32, generator=generator)
        orthogonal = F.normalize(directions - (directions @ query)[:, None] * query, dim=1)
        for cosine, label, direction in (
            (0.99, 1, orthogonal[0]),
            (0.9, 0, orthogonal[1]),
            (0.9, 0, orthogonal[2]),
            (0.9, 0, orthogonal[3]),
        ):
            bank.append(cosine * query + (1 - cosine**2) ** 0.5 * direction)
            labels.append(label)
    bank_tensor, bank_labels = torch.stack(bank), torch.tensor(labels)
    scores = knn_predict(bank_tensor, bank_labels, queries, k=4, temperature=0.01, num_classes=2, chunk_size=8, bank_chunk_size=16)
    assert topk_accuracy(scores, torch.ones(20, dtype=torch.int64), ks=(1,))[1] == 1.0
    reference = torch.log(torch.tensor(3.0)) + (0.9 - 0.99) / 0.01
    torch.testing.assert_close(scores[:, 0], torch.full((20,), reference.item(), dtype=torch.float64), rtol=0, atol=1e-3)
