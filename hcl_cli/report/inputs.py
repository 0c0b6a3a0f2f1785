"""The report's inputs, each read and checked before anything is computed or written.

Only the metrics folder is required; the prepared dataset and the encoder are read when they
exist. Each check fails in one line naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hcl_cli.artifacts import sidecar_path
from hcl_cli.config.base import StageConfig
from hcl_cli.config.knn import KnnConfig
from hcl_cli.config.linear import LinearConfig
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.datasets import DatasetCard, load_card, load_split
from hcl_cli.errors import HclError, UsageError
from hcl_cli.metrics import EvaluationMetrics, load_metrics
from hcl_cli.models import ContrastiveModel, EncoderSidecar, check_fits_dataset, load_encoder
from hcl_cli.runtime import resolve_device

METRIC_FILES: dict[str, tuple[str, type[StageConfig]]] = {"knn": ("kNN", KnnConfig), "linear": ("Linear readout", LinearConfig)}
"""The metrics files a report reads, by stage: the evaluation's name in the report, and its configuration."""


@dataclass(frozen=True)
class Recorded:
    """A stage's parameter values as the run recorded them, and what records them (markdown)."""

    values: dict[str, Any]
    source: str


@dataclass(frozen=True)
class TrainedEncoder:
    """The run's encoder (in eval mode), its sidecar and the pretrain configuration the sidecar records."""

    path: Path
    model: ContrastiveModel
    sidecar: EncoderSidecar
    config: PretrainConfig

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


@dataclass(frozen=True)
class Prepared:
    """The prepared dataset folder: its card and its labelled splits, read once."""

    folder: Path
    card: DatasetCard
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]


def read_metric_files(folder: Path) -> dict[str, EvaluationMetrics]:
    """The metrics files present in ``folder``, by stage; a missing folder, or neither file, is an error."""
    if not folder.is_dir():
        raise HclError(f"metrics folder {folder} not found: run hcl knn-eval and hcl linear-eval first")
    paths = {name: folder / f"{name}.json" for name in METRIC_FILES}
    metrics = {name: load_metrics(path, METRIC_FILES[name][1]) for name, path in paths.items() if path.is_file()}
    if not metrics:
        raise HclError(f"metrics folder {folder} holds neither knn.json nor linear.json: run hcl knn-eval and hcl linear-eval first")
    return metrics


def read_prepared(folder: Path, metrics: dict[str, EvaluationMetrics], metrics_folder: Path) -> Prepared:
    """The prepared dataset's card and labelled splits; its test split must be the one the metrics scored."""
    card = load_card(folder)
    for name, values in metrics.items():
        if values.test_size != card.counts["test"]:
            raise HclError(
                f"{metrics_folder / f'{name}.json'} scored {values.test_size} test images, but {folder} holds {card.counts['test']}: "
                "the metrics come from another dataset (run the pipeline again, or give the --data it evaluated)"
            )
    return Prepared(folder, card, {split: load_split(folder, split) for split in ("train", "test")})


def read_encoder(path: Path, prepared: Prepared | None) -> TrainedEncoder:
    """The encoder, its sidecar and its pretrain configuration (``config``), checked against the prepared images."""
    model, sidecar = load_encoder(path, resolve_device("auto"))
    try:
        config = PretrainConfig(**sidecar.config)
    except (KeyError, TypeError, UsageError) as exc:
        raise HclError(f"{sidecar_path(path)}: 'config' is not a valid pretrain configuration ({exc})") from exc
    if prepared is not None:
        check_fits_dataset(model, prepared.card.image_shape, str(path), str(prepared.folder))
    return TrainedEncoder(path, model, sidecar, config)
