"""``hcl knn-eval``'s options: weighted kNN on L2-normalised features."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import BATCH_LIMIT, DEVICES, FEATURES, RUNS, StageConfig, output_file, param, runtime, threads_option


@dataclass(init=False, frozen=True)
class KnnConfig(StageConfig):
    """Weighted kNN on L2-normalised features, votes weighted exp(cos / T)."""

    group: ClassVar[str] = "knn"
    command: ClassVar[str] = "knn-eval"
    k: int = param(
        200,
        "Neighbours that vote, at most the train split's size (HCL Sec. 6.3: 200; on graphs fewer than the train graphs of "
        "any class of the papers' TU datasets, where 200 exceeds MUTAG's 141 train graphs).",
        minimum=1,
        maximum=BATCH_LIMIT,
        modality_defaults=(("graph", 20),),
    )
    temperature: float = param(0.5, "Vote weight exp(cos / T).", minimum=1e-8, maximum=1e4)
    feature: str = param("backbone", "Which embedding: backbone or projection.", choices=FEATURES)
    chunk_size: int = param(
        1024,
        "Queries compared per chunk; with --bank-chunk-size it bounds the memory kNN needs beyond the embeddings.",
        minimum=1,
        maximum=BATCH_LIMIT,
    )
    bank_chunk_size: int = param(
        32768,
        "Bank (train) embeddings compared per chunk; the similarity block is chunk-size x bank-chunk-size.",
        minimum=1,
        maximum=BATCH_LIMIT,
    )
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings from hcl embed.")
    out: str = output_file(f"{RUNS}/metrics/knn.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)
    threads: str = threads_option()
