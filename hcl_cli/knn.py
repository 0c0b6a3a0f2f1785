"""Weighted k-nearest-neighbour classifier (Wu et al., 2018, Sec. 3.4), as in the HCL evaluation (HCL Sec. 6.3).

Features are L2-normalised. For a query ``q``, each of its ``k`` nearest bank entries ``b_j`` by
cosine similarity votes for its label ``y_j`` with weight ``exp(cos(q, b_j) / T)``::

    score_c(q) = sum_{j in N_k(q)} exp(cos(q, b_j) / T) * [y_j = c]

``exp(1 / T)`` overflows float32 below T of about 0.011, so the scores are computed in the log
domain, as a per-class log-sum-exp shifted by the query's top similarity (in float64):
``log score_c(q) - max_j cos(q, b_j) / T``, which ranks the classes as ``score_c`` does at any
temperature, and is -inf for a class without a vote. Top-1 and top-5 come from the ranked class
scores. The bank is streamed in chunks of ``bank_chunk_size`` rows and the queries in chunks of
``chunk_size`` rows, keeping a running top-k per query, so the working memory is bounded by
:func:`knn_working_memory_bytes` whatever the bank size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tqdm import tqdm

from hcl_cli.errors import UsageError
from hcl_cli.logs import bars_disabled

FLOAT_BYTES = 4
DOUBLE_BYTES = 8
INDEX_BYTES = 8


def knn_predict(
    bank: torch.Tensor,
    bank_labels: torch.Tensor,
    queries: torch.Tensor,
    *,
    k: int,
    temperature: float,
    num_classes: int,
    chunk_size: int,
    bank_chunk_size: int,
) -> torch.Tensor:
    """Class scores (Q, num_classes) of ``queries`` (Q, D) voted by their ``k`` nearest ``bank`` (N, D) rows.

    The scores are float64 logs, shifted per query: ``log score_c - max_j cos_j / T`` (see the
    module docstring), so they rank the classes exactly at any temperature. Similarities run on
    ``queries.device`` in float32; ``bank`` may stay on the CPU, each chunk is moved once.
    """
    if k > len(bank):
        raise UsageError(f"--k {k} is larger than the bank of {len(bank)} train embeddings (use --k {len(bank)} or less)")
    similarities, indices = nearest_neighbours(bank, queries, k=k, chunk_size=chunk_size, bank_chunk_size=bank_chunk_size)
    bank_labels = bank_labels.to(queries.device)
    scores = torch.empty(len(queries), num_classes, dtype=torch.float64, device=queries.device)
    for start in range(0, len(queries), chunk_size):
        stop = start + chunk_size
        scores[start:stop] = class_log_votes(similarities[start:stop], bank_labels[indices[start:stop]], temperature, num_classes)
    return scores


def class_log_votes(similarities: torch.Tensor, labels: torch.Tensor, temperature: float, num_classes: int) -> torch.Tensor:
    """Per row, ``log sum_{j: labels_j = c} exp(s_j / T) - max_j s_j / T`` for each class ``c`` (float64).

    ``similarities`` (R, k) holds each row's neighbours, most similar first, and ``labels`` (R, k)
    their classes. Each class's votes are summed relative to its own largest one, so nothing
    overflows or underflows to a tie however small ``T`` is.
    """
    logits = (similarities.double() - similarities[:, :1].double()) / temperature
    class_max = torch.full((len(logits), num_classes), float("-inf"), dtype=torch.float64, device=logits.device)
    class_max.scatter_reduce_(1, labels, logits, reduce="amax")
    sums = torch.zeros_like(class_max).scatter_add_(1, labels, (logits - class_max.gather(1, labels)).exp())
    return class_max + sums.log()


def nearest_neighbours(
    bank: torch.Tensor,
    queries: torch.Tensor,
    *,
    k: int,
    chunk_size: int,
    bank_chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine similarity and bank index of each query's ``k`` nearest bank rows, most similar first.

    Streams the bank chunk by chunk; for every query chunk the chunk's own top-k is merged into the
    running top-k, so no (Q, N) similarity matrix is ever formed.
    """
    device = queries.device
    queries = F.normalize(queries.float(), dim=1)
    best_similarities = torch.full((len(queries), k), float("-inf"), device=device)
    best_indices = torch.zeros((len(queries), k), dtype=torch.int64, device=device)
    for bank_start in tqdm(range(0, len(bank), bank_chunk_size), desc="kNN bank chunks", unit="chunk", disable=bars_disabled()):
        bank_chunk = F.normalize(bank[bank_start : bank_start + bank_chunk_size].to(device, torch.float32), dim=1)
        chunk_k = min(k, len(bank_chunk))
        for start in range(0, len(queries), chunk_size):
            stop = start + chunk_size
            chunk_similarities, chunk_indices = (queries[start:stop] @ bank_chunk.T).topk(chunk_k, dim=1)
            candidates = torch.cat([best_similarities[start:stop], chunk_similarities], dim=1)
            candidate_indices = torch.cat([best_indices[start:stop], chunk_indices + bank_start], dim=1)
            best_similarities[start:stop], order = candidates.topk(k, dim=1)
            best_indices[start:stop] = candidate_indices.gather(1, order)
    return best_similarities, best_indices


def knn_working_memory_bytes(
    num_queries: int,
    dim: int,
    *,
    k: int,
    num_classes: int,
    chunk_size: int,
    bank_chunk_size: int,
) -> int:
    """Upper bound on the memory :func:`knn_predict` allocates beyond its inputs, in bytes.

    Independent of the bank size: normalised queries (Q, D); running top-k values and indices (Q, k);
    one bank chunk moved and normalised (2 x B, D); one similarity block (q, B); the top-k merge of one
    query chunk (at most 4 x (q, 2k) values and indices); the float64 scores (Q, C); and the votes of
    one query chunk (labels and 4 x float64 (q, k), 4 x float64 (q, C)).
    """
    rows = min(chunk_size, num_queries)
    queries = num_queries * dim * FLOAT_BYTES
    running_top_k = num_queries * k * (FLOAT_BYTES + INDEX_BYTES)
    bank_chunk = 2 * bank_chunk_size * dim * FLOAT_BYTES
    similarity_block = chunk_size * bank_chunk_size * FLOAT_BYTES
    merge = 4 * chunk_size * 2 * k * (FLOAT_BYTES + INDEX_BYTES)
    scores = num_queries * num_classes * DOUBLE_BYTES
    votes = rows * k * (INDEX_BYTES + 4 * DOUBLE_BYTES) + 4 * rows * num_classes * DOUBLE_BYTES
    return queries + running_top_k + bank_chunk + similarity_block + merge + scores + votes
