"""The baselines beside the trained result: the run's architecture untrained, and the raw input features.

Both are scored with the kNN settings of the run's ``metrics/knn.json`` (:data:`~hcl_cli.report.inputs.KNN_SETTINGS`,
checked when the file is read), so that the trained encoder's row and theirs differ only in the features. When the
run's linear readout is the graph papers' SVM protocol, the untrained encoder is also read out by that protocol with
the settings of ``metrics/linear.json`` (:func:`svm_baseline`): the papers' own measure of what training added.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from tqdm import tqdm

from hcl_cli.config.base import FEATURES
from hcl_cli.config.linear import parse_c_grid
from hcl_cli.graph.svm import heldout_details, heldout_svm, svm_details, svm_protocol
from hcl_cli.knn import knn_predict
from hcl_cli.logs import bars_disabled
from hcl_cli.metrics import EvaluationMetrics, topk_accuracy
from hcl_cli.report.inputs import KNN_SETTINGS, Prepared, TrainedEncoder
from hcl_cli.runtime import resolve_device

BASELINE_BATCH_SIZE = 512


def knn_baselines(knn: EvaluationMetrics, prepared: Prepared, encoder: TrainedEncoder | None) -> dict[str, EvaluationMetrics]:
    """kNN of the untrained encoder (when the encoder is known) and of the raw input features, with the settings of ``knn``, by encoder name.

    The untrained encoder is the run's architecture initialised with the run's seed, in eval mode
    (:meth:`~hcl_cli.modality.Modality.untrained`), embedded as ``embed`` embeds (images: the run's
    eval transform); the raw features are the modality's :meth:`~hcl_cli.modality.Modality.raw_features`
    (images: each image's pixels, flattened; graphs: each graph's summed node features), which kNN L2-normalises.
    """
    modality = prepared.modality
    (train_samples, train_labels), (test_samples, test_labels) = prepared.splits["train"], prepared.splits["test"]
    device = encoder.device if encoder is not None else resolve_device("auto")
    steps: list[tuple[str, str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]] = []
    if encoder is not None:
        steps.append((untrained_name(encoder), knn.feature, partial(untrained_features, encoder, prepared, knn.feature)))
    steps.append(
        (
            f"none: {modality.raw_name}",
            modality.raw_feature,
            lambda: (modality.raw_features(train_samples), modality.raw_features(test_samples)),
        )
    )
    baselines = {}
    for name, feature, features in tqdm(steps, desc="report baselines", unit="baseline", disable=bars_disabled()):
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


def svm_baseline(linear: EvaluationMetrics, prepared: Prepared, encoder: TrainedEncoder) -> EvaluationMetrics:
    """The SVM protocol of ``linear`` (its folds, repeats, C grid, inner folds and seed) on the untrained encoder's embeddings
    of every sample, train and test together, as ``linear-eval --protocol svm`` reads the trained encoder's; under the
    inductive protocol, as it reads those: fitted on the train split, scored on the test split."""
    params = linear.params
    train_x, test_x = untrained_features(encoder, prepared, linear.feature)
    train_y, test_y = (prepared.splits[split][1].cpu() for split in ("train", "test"))
    if linear.details.get("svm", {}).get("label_protocol") == "inductive":
        grid = parse_c_grid(params["svm_c_grid"])
        fold = heldout_svm(
            train_x.double().numpy(),
            train_y.numpy(),
            test_x.double().numpy(),
            test_y.numpy(),
            c_grid=grid,
            inner_folds=params["svm_inner_folds"],
        )
        return EvaluationMetrics(
            fold.accuracy, fold.top5, len(test_y), params, {"svm": heldout_details(fold, grid, params["svm_inner_folds"])}
        )
    features = torch.cat([train_x, test_x])
    labels = torch.cat([train_y, test_y])
    result = svm_protocol(
        features.double().numpy(),
        labels.numpy(),
        folds=params["svm_folds"],
        repeats=params["svm_repeats"],
        c_grid=parse_c_grid(params["svm_c_grid"]),
        inner_folds=params["svm_inner_folds"],
        seed=params["seed"],
        progress_as=("hcl report", "SVM folds of the untrained encoder (baseline)"),
    )
    return EvaluationMetrics(result.mean, result.top5, len(labels), params, {"svm": svm_details(result)})


def untrained_name(encoder: TrainedEncoder) -> str:
    """The untrained encoder as the metric table names it: ``untrained gin (seed 0)``."""
    return f"untrained {encoder.model.arch} (seed {encoder.config.seed})"


def untrained_features(encoder: TrainedEncoder, prepared: Prepared, feature: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``feature`` embeddings of the train and test samples by the run's architecture at its seeded initialisation."""
    model = encoder.modality.untrained(encoder.model, encoder.config.seed)
    index = FEATURES.index(feature)  # embed returns (backbone, projection)
    return tuple(  # type: ignore[return-value]
        encoder.modality.embed(model, encoder.sidecar, prepared.splits[split][0], BASELINE_BATCH_SIZE, f"untrained: embed {split}")[index]
        for split in ("train", "test")
    )
