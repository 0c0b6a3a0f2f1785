"""knn-eval: weighted kNN top-1 and top-5 of the test embeddings, the train embeddings being the bank (HCL Sec. 6.3).

Writes the metrics artifact (:mod:`hcl_cli.metrics`) with the number of test embeddings scored and the sha256 of the
embeddings file and of their encoder (:mod:`hcl_cli.artifacts.binding`).
"""

from __future__ import annotations

from hcl_cli.artifacts import check_outputs_apart
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.knn import KnnConfig
from hcl_cli.embeddings import load_embeddings
from hcl_cli.errors import shown
from hcl_cli.knn import knn_predict
from hcl_cli.logs import LOG
from hcl_cli.metrics import EvaluationMetrics, check_metrics_replaceable, save_metrics, topk_accuracy
from hcl_cli.runtime import resolve_device, set_cpu_threads


def run(config: KnnConfig) -> None:
    """Score the test split against the train split's bank and write ``config.out``."""
    check_outputs_apart({"--embeddings": config.embeddings}, {"--out": config.out})
    check_metrics_replaceable(config.out, "knn-eval")
    device = resolve_device(config.device)
    set_cpu_threads(parse_threads(config.threads), device, CUDA_THREADS)
    data = load_embeddings(config.embeddings, config.feature)
    config = config.for_modality(data.modality)
    scores = knn_predict(
        data.train_x,
        data.train_y,
        data.test_x.to(device),
        k=config.k,
        temperature=config.temperature,
        num_classes=data.num_classes,
        chunk_size=config.chunk_size,
        bank_chunk_size=config.bank_chunk_size,
    )
    accuracy = topk_accuracy(scores, data.test_y)
    save_metrics(config.out, EvaluationMetrics.measured(accuracy, len(data.test_y), config, data.scored), "knn-eval")
    LOG.info(
        f"hcl knn-eval: wrote {shown(config.out)}: top-1 {accuracy[1]:.4f}, top-5 {accuracy[5]:.4f} ({config.feature} features, k {config.k})"
    )
