"""The metrics of ``knn-eval`` and ``linear-eval``: the top-k accuracy, and the metrics artifact, one small JSON object per evaluation.

``metrics/knn.json`` and ``metrics/linear.json`` hold, flat (as ``dvc metrics`` and ``dvc exp show``
read them), ``top1`` and ``top5`` (shares of the test split), ``test_size`` (the number of test
embeddings scored, from which every confidence interval follows) and the stage's parameters
(``feature``, ``k``, ...), and whatever else the stage records about how it measured (``details``,
e.g. the augmentation of a linear readout). :func:`save_metrics` is the only writer and :func:`load_metrics` the
only reader; the reader refuses a file with a missing or invalid field in one line naming the file
and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hcl_cli.artifacts import is_finite_number, read_json, write_json
from hcl_cli.config.base import StageConfig
from hcl_cli.errors import HclError, UsageError

if TYPE_CHECKING:
    import torch  # annotations only: the module itself imports no torch

ACCURACIES = ("top1", "top5")
FIELDS = (*ACCURACIES, "test_size")
"""What every metrics file holds; a file without them is no metrics file, and no stage writes one over it."""


@dataclass(frozen=True)
class EvaluationMetrics:
    """Top-1 and top-5 accuracy on ``test_size`` test embeddings, the parameters of the stage that measured
    them, and any other record of how it measured (``details``, written beside them)."""

    top1: float
    top5: float
    test_size: int
    params: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def measured(
        cls, accuracy: Mapping[int, float], test_size: int, config: StageConfig, details: Mapping[str, Any] | None = None
    ) -> EvaluationMetrics:
        """The metrics of ``topk_accuracy``'s result (``{1: top-1, 5: top-5}``) on ``test_size`` embeddings under ``config``."""
        return cls(top1=accuracy[1], top5=accuracy[5], test_size=test_size, params=config.params(), details=dict(details or {}))

    @property
    def feature(self) -> str:
        """The embedding that was evaluated: backbone or projection."""
        return str(self.params["feature"])


def save_metrics(path: str | os.PathLike[str], metrics: EvaluationMetrics) -> None:
    """Write ``metrics`` atomically as one flat JSON object."""
    write_json(path, {"top1": metrics.top1, "top5": metrics.top5, "test_size": metrics.test_size, **metrics.params, **metrics.details})


def load_metrics(path: str | os.PathLike[str], stage: type[StageConfig]) -> EvaluationMetrics:
    """Read and check a metrics file that ``stage`` (KnnConfig or LinearConfig) wrote.

    Each accuracy must be a number in [0, 1] with top-5 >= top-1, ``test_size`` a positive
    integer, and every parameter of ``stage`` present with a value it accepts; anything else is a
    one-line :class:`HclError` naming the file and the field. Other keys are kept as ``details``.
    """
    values = read_json(path, what=f"hcl {stage.command} metrics")
    for key in ACCURACIES:
        value = values.get(key)
        if not is_finite_number(value) or not 0.0 <= value <= 1.0:
            raise HclError(f"{path}: {key!r} must be a number in [0, 1] (got {value!r})")
    if values["top5"] < values["top1"]:
        raise HclError(f"{path}: 'top5' ({values['top5']!r}) is below 'top1' ({values['top1']!r})")
    test_size = values.get("test_size")
    if not isinstance(test_size, int) or isinstance(test_size, bool) or test_size < 1:
        raise HclError(f"{path}: 'test_size' must be a positive integer (got {test_size!r}): run hcl {stage.command} again")
    params = {}
    for option in stage.declared_options():
        if option.runtime:
            continue
        if option.name not in values:
            raise HclError(f"{path}: {option.name!r} is missing (the setting it was measured with): run hcl {stage.command} again")
        try:
            params[option.name] = option.check(values[option.name], where=f"{path}: {option.name!r}")
        except UsageError as exc:
            raise HclError(str(exc)) from None
    details = {key: value for key, value in values.items() if key not in {*ACCURACIES, "test_size", *params}}
    return EvaluationMetrics(top1=float(values["top1"]), top5=float(values["top5"]), test_size=test_size, params=params, details=details)


def topk_accuracy(scores: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Share of rows whose true label is among the ``k`` highest class scores, for each ``k``.

    ``k`` is capped at the number of classes, so top-5 of a 3-class problem is 1.0.
    """
    ranked = scores.topk(min(max(ks), scores.shape[1]), dim=1).indices
    hits = ranked == labels.to(ranked.device)[:, None]
    return {k: int(hits[:, :k].any(dim=1).sum()) / len(labels) for k in ks}  # exact ratios, not float32 means
