"""Weighted kNN (Wu et al., 2018) against a brute-force reference, through every chunking path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hcl_cli.embeddings import topk_accuracy
from hcl_cli.errors import UsageError
from hcl_cli.knn import knn_predict, nearest_neighbours

NUM_CLASSES = 6
K = 25
TEMPERATURE = 0.5
ToyData = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def brute_force_scores(bank: torch.Tensor, bank_labels: torch.Tensor, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain definition: the full (Q, N) cosine matrix, its top-k, one-hot votes weighted exp(cos / T) and summed."""
    cosines = F.normalize(queries, dim=1) @ F.normalize(bank, dim=1).T
    top_cosines, top_indices = cosines.topk(k, dim=1)
    one_hot_votes = F.one_hot(bank_labels[top_indices], NUM_CLASSES).float()
    return (one_hot_votes * (top_cosines / TEMPERATURE).exp().unsqueeze(-1)).sum(dim=1), top_indices


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
    scores = knn_predict(bank, bank_labels, queries, k=K, temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=chunk_size, bank_chunk_size=bank_chunk_size)
    assert torch.equal(neighbours, reference_neighbours)
    torch.testing.assert_close(scores, reference)
    assert torch.equal(scores.argmax(dim=1), reference.argmax(dim=1))
    assert torch.equal(scores.topk(5, dim=1).indices, reference.topk(5, dim=1).indices)
    assert topk_accuracy(scores, query_labels) == topk_accuracy(reference, query_labels)


def test_knn_beats_chance_and_top5_is_at_least_top1(toy_data: ToyData) -> None:
    bank, bank_labels, queries, query_labels = toy_data
    scores = knn_predict(bank, bank_labels, queries, k=K, temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=8, bank_chunk_size=64)
    accuracy = topk_accuracy(scores, query_labels)
    assert accuracy[1] > 2 / NUM_CLASSES and accuracy[5] >= accuracy[1]


def test_k_equal_to_the_bank_sums_every_vote(toy_data: ToyData) -> None:
    bank, bank_labels, queries, _ = toy_data
    scores = knn_predict(bank, bank_labels, queries, k=len(bank), temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=16, bank_chunk_size=70)
    torch.testing.assert_close(scores, brute_force_scores(bank, bank_labels, queries, len(bank))[0])


def test_k_larger_than_the_bank_is_a_one_line_usage_error(toy_data: ToyData) -> None:
    bank, bank_labels, queries, _ = toy_data
    with pytest.raises(UsageError, match="--k 301 is larger than the bank of 300 train embeddings") as caught:
        knn_predict(bank, bank_labels, queries, k=301, temperature=TEMPERATURE, num_classes=NUM_CLASSES, chunk_size=16, bank_chunk_size=64)
    assert "\n" not in str(caught.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_queries_with_a_cpu_bank_match_the_cpu(toy_data: ToyData) -> None:
    bank, bank_labels, queries, _ = toy_data
    options = {"k": K, "temperature": TEMPERATURE, "num_classes": NUM_CLASSES, "chunk_size": 7, "bank_chunk_size": 13}
    on_cuda = knn_predict(bank, bank_labels, queries.cuda(), **options)
    on_cpu = knn_predict(bank, bank_labels, queries, **options)
    assert on_cuda.device.type == "cuda"
    torch.testing.assert_close(on_cuda.cpu(), on_cpu)
    assert torch.equal(on_cuda.argmax(dim=1).cpu(), on_cpu.argmax(dim=1))
