"""The kNN baselines beside the trained result: the run's architecture untrained, and the raw pixels.

Both are scored with the kNN settings of the run's ``metrics/knn.json``, so that the trained
encoder's row and theirs differ only in the features.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from tqdm import tqdm

from hcl_cli.augment import build_eval_transform
from hcl_cli.config.base import FEATURES
from hcl_cli.knn import knn_predict
from hcl_cli.metrics import EvaluationMetrics, topk_accuracy
from hcl_cli.models import build_model, encode
from hcl_cli.report.inputs import Prepared, TrainedEncoder
from hcl_cli.runtime import resolve_device

BASELINE_BATCH_SIZE = 512
KNN_SETTINGS = ("k", "temperature", "chunk_size", "bank_chunk_size")
PIXELS = "none: raw pixels"


def knn_baselines(knn: EvaluationMetrics, prepared: Prepared, encoder: TrainedEncoder | None) -> dict[str, EvaluationMetrics]:
    """kNN of the untrained encoder (when the encoder is known) and of the raw pixels, with the settings of ``knn``, by encoder name.

    The untrained encoder is the run's architecture initialised with the run's seed, in eval mode,
    embedded with the run's eval transform; the pixels are each image flattened (the bank stays
    uint8: kNN converts each chunk to float32 and L2-normalises it, in which the 1/255 scale cancels).
    """
    (train_images, train_labels), (test_images, test_labels) = prepared.splits["train"], prepared.splits["test"]
    device = encoder.device if encoder is not None else resolve_device("auto")
    steps: list[tuple[str, str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]] = []
    if encoder is not None:
        untrained = f"untrained {encoder.model.arch} (seed {encoder.config.seed})"
        steps.append((untrained, knn.feature, partial(untrained_features, encoder, train_images, test_images, knn.feature)))
    steps.append((PIXELS, "pixels", lambda: (train_images.flatten(1), test_images.flatten(1).float() / 255.0)))
    baselines = {}
    for name, feature, features in tqdm(steps, desc="report baselines", unit="baseline", disable=None):
        bank, queries = features()
        scores = knn_predict(
            bank,
            train_labels,
            queries.to(device),
            num_classes=prepared.card.num_classes,
            **{key: knn.params[key] for key in KNN_SETTINGS},
        )
        accuracy = topk_accuracy(scores, test_labels)
        baselines[name] = EvaluationMetrics(accuracy[1], accuracy[5], len(test_labels), knn.params | {"feature": feature})
    return baselines


def untrained_features(
    encoder: TrainedEncoder, train_images: torch.Tensor, test_images: torch.Tensor, feature: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``feature`` embeddings of the train and test images by the run's architecture at its seeded initialisation."""
    trained = encoder.model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(encoder.config.seed)
        model = build_model(trained.arch, trained.in_channels, trained.image_size, trained.projection_dim)
    model = model.to(encoder.device).eval()
    transform = build_eval_transform(encoder.sidecar.mean, encoder.sidecar.std)
    index = FEATURES.index(feature)  # encode returns (backbone, projection)
    train = encode(model, transform, train_images, BASELINE_BATCH_SIZE, description="untrained: embed train")[index]
    test = encode(model, transform, test_images, BASELINE_BATCH_SIZE, description="untrained: embed test")[index]
    return train, test
