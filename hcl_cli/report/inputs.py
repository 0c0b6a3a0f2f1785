"""The report's inputs, each read and checked before anything is computed or written.

Only the metrics folder is required; the prepared dataset and the encoder are read when they
exist. Each check fails in one line naming the file, and inputs of different runs (graph embeddings
beside a digits run, another encoder's metrics) are refused by the sha256 each artifact records of
what it was made from (:func:`check_one_run`). Each metrics file's sidecar records its parameters and inputs
(:mod:`hcl_cli.metrics`), and :func:`~hcl_cli.metrics.evaluation_metrics` checks them and the parameters
the report computes or writes with, the one validator ``hcl compare`` uses too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcl_cli.artifacts import check_made_from, log_sha256, prepared_sha256, read_inputs, read_json, sidecar_path
from hcl_cli.config.pretrain import RECORDED_BEFORE, PretrainConfig
from hcl_cli.errors import HclError, InputError, UsageError, shown
from hcl_cli.graph.encoder import GRAPH_ENCODER_KIND
from hcl_cli.metrics import EvaluationMetrics, evaluation_metrics, inputs_path, load_metrics
from hcl_cli.modality import Modality, Samples, modality_named, modality_of
from hcl_cli.runtime import resolve_device

METRIC_FILES: dict[str, tuple[str, str]] = {"knn": ("kNN", "knn-eval"), "linear": ("Linear readout", "linear-eval")}
"""The metrics files a report reads, by stage: the evaluation's name in the report, and the command that writes it."""

KNN_SETTINGS = ("k", "temperature", "chunk_size", "bank_chunk_size")
"""The kNN settings of ``metrics/knn.json`` that the report's baselines are scored with (``knn_predict``'s keywords)."""


@dataclass(frozen=True)
class Recorded:
    """A stage's parameter values as the run recorded them, and what records them (markdown)."""

    values: dict[str, Any]
    source: str


@dataclass(frozen=True)
class TrainedEncoder:
    """The run's encoder (in eval mode), its sidecar, the pretrain configuration the sidecar records, and its modality."""

    path: Path
    model: Any
    """A :class:`~hcl_cli.image.networks.ContrastiveModel` (images) or :class:`~hcl_cli.graph.encoder.GinModel` (graphs)."""
    sidecar: Any
    config: PretrainConfig
    modality: Modality = field(default_factory=lambda: modality_named("image"))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


@dataclass(frozen=True)
class Prepared:
    """The prepared dataset folder: its modality, its card and its labelled splits (samples and labels), read once."""

    folder: Path
    card: Any
    splits: dict[str, tuple[Samples, torch.Tensor]]
    modality: Modality


def read_metric_files(folder: Path) -> dict[str, EvaluationMetrics]:
    """The metrics files present in ``folder``, by stage; a missing folder, or neither file, is an error."""
    if not folder.is_dir():
        raise InputError(f"metrics folder {folder} not found: run hcl knn-eval and hcl linear-eval first")
    paths = {name: folder / f"{name}.json" for name in METRIC_FILES}
    metrics = {name: load_metrics(path, METRIC_FILES[name][1], evaluation_metrics) for name, path in paths.items() if path.is_file()}
    if not metrics:
        raise InputError(f"metrics folder {folder} holds neither knn.json nor linear.json: run hcl knn-eval and hcl linear-eval first")
    return metrics


def read_prepared(folder: Path, metrics: dict[str, EvaluationMetrics], metrics_folder: Path) -> Prepared:
    """The prepared dataset's card and labelled splits; its test split must be the one the metrics scored (the SVM
    protocol scores every graph, train and test, but under the inductive protocol the test graphs alone)."""
    modality = modality_of(folder)
    card = modality.load_card(folder)
    for name, values in metrics.items():
        details = values.details.get("svm") if isinstance(values.details.get("svm"), dict) else {}
        svm = values.params.get("protocol") == "svm" and details.get("label_protocol") != "inductive"
        expected = card.counts["train"] + card.counts["test"] if svm else card.counts["test"]
        scored = f"{modality.sample_noun}s" if svm else f"test {modality.sample_noun}s"
        if values.test_size != expected:
            raise InputError(
                f"{metrics_folder / f'{name}.json'} scored {values.test_size} {scored}, but {folder} holds {expected}: "
                "the metrics come from another dataset (run the pipeline again, or give the --data it evaluated)"
            )
    return Prepared(folder, card, {split: modality.load_samples(folder, [split]) for split in ("train", "test")}, modality)


def read_encoder(path: Path, prepared: Prepared | None) -> TrainedEncoder:
    """The encoder, its sidecar and its pretrain configuration (``config``), checked against the prepared data. Without
    it, the modality is the one whose encoder the sidecar's ``kind`` names."""
    modality = (
        prepared.modality if prepared is not None else modality_named("graph" if encoder_kind(path) == GRAPH_ENCODER_KIND else "image")
    )
    model, sidecar = modality.load_encoder(path, resolve_device("auto"))
    try:
        config = PretrainConfig(**{"label_protocol": RECORDED_BEFORE, **sidecar.config})  # an encoder from before the option
    except (KeyError, TypeError, UsageError) as exc:
        raise InputError(f"{sidecar_path(path)}: 'config' is not a valid pretrain configuration ({exc})") from exc
    if prepared is not None:
        modality.check_fits(model, prepared.card, str(path), str(prepared.folder))
    return TrainedEncoder(path, model, sidecar, config, modality)


def encoder_kind(path: Path) -> Any:
    """The ``kind`` its sidecar records of an encoder artifact (None when the sidecar is unreadable: the reader names why)."""
    try:
        return read_json(sidecar_path(path), what="encoder sidecar").get("kind")
    except HclError:
        return None


def check_training_log(encoder: TrainedEncoder | None, plots: Path, logs: Path) -> None:
    """One-line HclError unless the training log the report draws (``logs``, its curves' folder under ``--plots``) is the
    one that trained ``encoder``: the files its sidecar records under ``inputs.training_log`` (:func:`log_sha256`)."""
    if encoder is not None:
        made = f"--model {shown(encoder.path)}"
        check_made_from(made, encoder.sidecar.inputs, "training_log", f"--plots {shown(plots)}", log_sha256(logs.parent.parent))


def check_one_run(
    metrics: dict[str, EvaluationMetrics], metrics_folder: Path, prepared: Prepared | None, encoder: TrainedEncoder | None, embeddings: Path
) -> None:
    """One-line HclError unless the report's inputs come from one run: every record of what an artifact was made from
    (:mod:`hcl_cli.artifacts.binding`) matches the input given beside it, and the embeddings' dataset is the card's.

    The encoder's prepared dataset, the embeddings' encoder and prepared dataset, and each metrics file's embeddings
    (the ``paper`` protocol: encoder and prepared dataset) are compared with ``--data``, ``--model`` and
    ``--embeddings`` where given, and the two metrics files' embeddings with each other.
    """
    data = f"--data {shown(prepared.folder)}" if prepared is not None else ""
    prepared_digests = prepared_sha256(prepared.folder) if prepared is not None else None
    model = f"--model {shown(encoder.path)}" if encoder is not None else ""
    if encoder is not None:
        check_made_from(model, encoder.sidecar.inputs, "prepared", data, prepared_digests)
    embedded = read_json(sidecar_path(embeddings), what="embeddings sidecar") if embeddings.is_file() else None
    given = f"--embeddings {shown(embeddings)}"
    if embedded is not None:
        inputs = read_inputs(embedded, str(sidecar_path(embeddings)))
        check_made_from(given, inputs, "encoder", model, encoder.sidecar.sha256 if encoder is not None else None)
        check_made_from(given, inputs, "prepared", data, prepared_digests)
        if prepared is not None and embedded.get("dataset", prepared.card.name) != prepared.card.name:
            raise InputError(
                f"{given} embeds the dataset {shown(embedded.get('dataset'))}, but {data} holds {shown(prepared.card.name)}: "
                "they come from different runs; run the stages again, or give the inputs of one run"
            )
    for name, values in metrics.items():
        source = shown(inputs_path(metrics_folder / f"{name}.json"))
        check_made_from(source, values.inputs, "embeddings", given, embedded.get("sha256") if embedded is not None else None)
        check_made_from(source, values.inputs, "encoder", model, encoder.sidecar.sha256 if encoder is not None else None)
        check_made_from(source, values.inputs, "prepared", data, prepared_digests)
    if "knn" in metrics and "linear" in metrics:
        knn, linear = (shown(inputs_path(metrics_folder / f"{name}.json")) for name in ("knn", "linear"))
        check_made_from(
            linear, metrics["linear"].inputs, "embeddings", f"the embeddings {knn} scored", metrics["knn"].inputs.get("embeddings")
        )
