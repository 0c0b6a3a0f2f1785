"""The metrics of ``knn-eval`` and ``linear-eval``: the top-k accuracy, and the metrics artifact, one small JSON object per evaluation.

``metrics/knn.json`` and ``metrics/linear.json`` describe themselves, without the stages' option
declarations: at the top level, flat (as ``dvc metrics``, ``dvc exp show`` and ``hcl compare`` read
them), ``top1`` and ``top5`` (shares of the test split), ``test_size`` (the number of test embeddings
scored, from which every confidence interval follows) and the stage's parameters (``feature``, ``k``,
..., each a JSON scalar); under ``details`` (an object) whatever else the stage records about how
it measured (e.g. the augmentation of a linear readout, the SVM protocol's folds); and under
``inputs`` the sha256 of what it scored (:mod:`hcl_cli.artifacts.binding`). :func:`save_metrics` is
the only writer, and :func:`check_metrics` the one check of a metrics file's values, for every reader:
:func:`load_metrics` (the report) reads the file, ``hcl compare`` what ``dvc exp show`` read of it;
it refuses a missing or invalid field in one line naming the file and the field. Which parameters a
reader needs, and their values, it checks itself (the report: ``hcl_cli/report/inputs.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hcl_cli.artifacts import INPUTS, is_finite_number, is_integer, read_inputs, read_json, recorded_output, write_output
from hcl_cli.config.base import FEATURES
from hcl_cli.errors import InputError
from hcl_cli.option import shown

if TYPE_CHECKING:
    import torch  # annotations only: the module itself imports no torch

    from hcl_cli.config.base import StageConfig

ACCURACIES = ("top1", "top5")
FIELDS = (*ACCURACIES, "test_size")
"""What every metrics file holds; a file without them is no metrics file, and no stage writes one over it."""
METRICS_OUTPUTS = {"knn-eval": recorded_output("kNN metrics"), "linear-eval": recorded_output("linear metrics")}
"""Each evaluation's metrics file as an output (:func:`~hcl_cli.artifacts.check_replaceable`): its own only when its folder's
record lists it as that evaluation's, so ``knn-eval`` and ``linear-eval`` never write over each other's metrics."""
DETAILS = "details"
"""The key of the object that holds everything a stage records besides its accuracies and parameters."""
SCALARS = (str, int, float, bool, type(None))
"""The types of a parameter's value: JSON scalars, as params.yaml holds them."""
TEST_SIZE_LIMIT = 2**53
"""The largest ``test_size`` read: the largest count a float holds exactly (the intervals are computed in floats)."""


@dataclass(frozen=True)
class EvaluationMetrics:
    """Top-1 and top-5 accuracy on ``test_size`` test embeddings, the parameters of the stage that measured
    them, and any other record of how it measured (``details``)."""

    top1: float
    top5: float
    test_size: int
    params: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    """The sha256 of what was scored, by role (``embeddings``; ``encoder`` and ``prepared``): :mod:`hcl_cli.artifacts.binding`."""

    @classmethod
    def measured(
        cls,
        accuracy: Mapping[int, float],
        test_size: int,
        config: StageConfig,
        inputs: Mapping[str, Any],
        details: Mapping[str, Any] | None = None,
    ) -> EvaluationMetrics:
        """The metrics of ``topk_accuracy``'s result (``{1: top-1, 5: top-5}``) on ``test_size`` embeddings under ``config``,
        made from ``inputs``."""
        return cls(
            top1=accuracy[1],
            top5=accuracy[5],
            test_size=test_size,
            params=config.params(),
            details=dict(details or {}),
            inputs=dict(inputs),
        )

    @property
    def feature(self) -> str:
        """The embedding that was evaluated: backbone or projection."""
        return str(self.params["feature"])


def save_metrics(path: str | os.PathLike[str], metrics: EvaluationMetrics, command: str) -> None:
    """Write ``metrics`` of ``hcl COMMAND`` atomically as one JSON object (accuracies, test size and parameters flat, the rest
    under ``details``), recorded as that evaluation's (:data:`METRICS_OUTPUTS`)."""
    values = {
        "top1": metrics.top1,
        "top5": metrics.top5,
        "test_size": metrics.test_size,
        **metrics.params,
        DETAILS: metrics.details,
        INPUTS: metrics.inputs,
    }
    write_output(path, json.dumps(values, indent=2) + "\n", METRICS_OUTPUTS[command])


def load_metrics(path: str | os.PathLike[str], command: str) -> EvaluationMetrics:
    """Read a metrics file that ``hcl COMMAND`` (knn-eval or linear-eval) wrote, checked by :func:`check_metrics`."""
    return check_metrics(read_json(path, what=f"hcl {command} metrics"), str(path), command)


def check_metrics(values: Mapping[str, Any], source: str, command: str) -> EvaluationMetrics:
    """The metrics of ``values``, the content of the metrics file ``source`` that ``hcl COMMAND`` wrote, checked: the one
    check of every reader (the report, ``hcl compare``).

    Each accuracy must be a number in [0, 1] (not a boolean, not NaN) with top-5 >= top-1, ``test_size`` an
    integer in [1, :data:`TEST_SIZE_LIMIT`], ``details`` an object (a file without it has none), ``inputs`` a
    record of sha256 (:func:`~hcl_cli.artifacts.read_inputs`), and every other key a parameter whose value is a
    JSON scalar; anything else is a one-line :class:`HclError` naming the file and the field.
    """
    for key in ACCURACIES:
        value = values.get(key)
        if not is_finite_number(value) or not 0.0 <= value <= 1.0:
            raise InputError(f"{source}: {key!r} must be a number in [0, 1] (got {shown(value)}): run hcl {command} again")
    if values["top5"] < values["top1"]:
        raise InputError(f"{source}: 'top5' ({values['top5']!r}) is below 'top1' ({values['top1']!r}): run hcl {command} again")
    test_size = values.get("test_size")
    if not is_integer(test_size) or not 1 <= test_size <= TEST_SIZE_LIMIT:
        raise InputError(f"{source}: 'test_size' must be a positive integer (got {shown(test_size)}): run hcl {command} again")
    details = values.get(DETAILS, {})
    if not isinstance(details, dict):
        raise InputError(f"{source}: {DETAILS!r} must be an object (got {type(details).__name__}): run hcl {command} again")
    inputs = read_inputs(values, source)
    params = {key: value for key, value in values.items() if key not in {*FIELDS, DETAILS, INPUTS}}
    for key, value in params.items():
        if not isinstance(value, SCALARS) or (isinstance(value, float) and not is_finite_number(value)):
            raise InputError(
                f"{source}: parameter {key!r} must be a string, number, boolean or null (got {shown(value)}): run hcl {command} again"
            )
    return EvaluationMetrics(
        top1=float(values["top1"]), top5=float(values["top5"]), test_size=test_size, params=params, details=details, inputs=inputs
    )


def positive_int(value: Any) -> bool:
    """Whether a JSON value is an integer >= 1 (not a bool)."""
    return is_integer(value) and value >= 1


def positive_number(value: Any) -> bool:
    """Whether a JSON value is a finite number > 0."""
    return is_finite_number(value) and value > 0


LINEAR_PROTOCOL_SETTINGS: dict[str, tuple[str, ...]] = {
    "fixed": ("optimizer", "epochs", "lr", "weight_decay", "seed"),
    "paper": ("epochs", "batch_size", "lr", "weight_decay", "seed"),
    "svm": ("svm_repeats", "svm_folds", "svm_c_grid", "svm_inner_folds", "seed"),
}
"""The settings of a linear readout's metrics that the report's protocol bullet quotes, by ``protocol`` (any JSON scalar)."""
FEATURE = (lambda value: value in FEATURES, " or ".join(FEATURES))
PRESENT = (lambda value: True, "present")
SETTINGS: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "knn-eval": {
        "feature": FEATURE,
        "k": (positive_int, "a positive integer"),
        "temperature": (positive_number, "a positive number"),
        "chunk_size": (positive_int, "a positive integer"),
        "bank_chunk_size": (positive_int, "a positive integer"),
    },
    "linear-eval": {"feature": FEATURE, "protocol": (lambda value: value in LINEAR_PROTOCOL_SETTINGS, ", ".join(LINEAR_PROTOCOL_SETTINGS))},
}
"""The parameters every reader of an evaluation's metrics uses (the report scores its baselines with the kNN ones and
quotes them; ``hcl compare`` tabulates them), with the check of each value and what it must be."""


def evaluation_metrics(values: Mapping[str, Any], source: str, command: str, *, complete: bool = True) -> EvaluationMetrics:
    """The one validator of an evaluation's metrics for every reader (``hcl report``, ``hcl compare``): :func:`check_metrics`,
    then each parameter of :data:`SETTINGS` with a value a reader can use (``k`` <= 0, a ``feature`` that is a path, a
    ``temperature`` <= 0 are refused), else a one-line HclError naming the file and the field. Each must be present
    when ``complete`` (the report computes with them; ``hcl compare`` only tabulates, also runs that predate one)."""
    metrics = check_metrics(values, source, command)
    checks = SETTINGS[command]
    if command == "linear-eval" and metrics.params.get("protocol") in LINEAR_PROTOCOL_SETTINGS:
        checks = checks | dict.fromkeys(LINEAR_PROTOCOL_SETTINGS[metrics.params["protocol"]], PRESENT)
    for name, (check, expected) in checks.items():
        if name not in metrics.params and not complete:
            continue
        if name not in metrics.params:
            raise InputError(f"{source}: {name!r} is missing (the setting it was measured with): run hcl {command} again")
        if not check(metrics.params[name]):
            raise InputError(f"{source}: {name!r} must be {expected} (got {shown(metrics.params[name])}): run hcl {command} again")
    return metrics


def topk_accuracy(scores: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Share of rows whose true label is among the ``k`` highest class scores, for each ``k``.

    ``k`` is capped at the number of classes, so top-5 of a 3-class problem is 1.0.
    """
    ranked = scores.topk(min(max(ks), scores.shape[1]), dim=1).indices
    hits = ranked == labels.to(ranked.device)[:, None]
    return {k: int(hits[:, :k].any(dim=1).sum()) / len(labels) for k in ks}  # exact ratios, not float32 means
