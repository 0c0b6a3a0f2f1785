"""The metrics of ``knn-eval`` and ``linear-eval``: the top-k accuracy, and the metrics artifact, one small JSON object per
evaluation, with a sidecar of what it was measured from.

``metrics/knn.json`` and ``metrics/linear.json`` hold what the stage measured, flat, as ``dvc metrics show``, ``dvc exp
show`` and ``hcl compare`` read them: ``top1`` and ``top5`` (shares of the test split), ``test_size`` (the number of test
embeddings scored, from which every confidence interval follows) and, under ``details`` (an object, left out when
empty), whatever else the stage records of the measurement (the SVM protocol's folds, the augmentation of a linear
readout). What identifies its inputs lies beside it, in ``metrics/knn.inputs.json`` (:func:`inputs_path`), which DVC
keeps as an output but does not tabulate: the sha256 of the metrics file it belongs to, the stage's parameters
(``feature``, ``k``, ..., each a JSON scalar) and under ``inputs`` the sha256 of what it scored
(:mod:`hcl_cli.artifacts.binding`). :func:`save_metrics` is the only writer; :func:`check_metrics` the one check of a
metrics file's values, for every reader: :func:`load_metrics` (the report) reads the file and its sidecar, ``hcl compare``
what ``dvc exp show`` read of the file and the parameters params.yaml held for it; it refuses a missing or invalid field,
or a sidecar of another metrics file, in one line naming the file and the field. Which parameters a reader needs, and
their values, :func:`evaluation_metrics` checks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hcl_cli.artifacts import (
    INPUTS,
    check_replaceable,
    is_finite_number,
    is_integer,
    read_inputs,
    read_json,
    recorded_output,
    sha256_of,
    write_output,
)
from hcl_cli.config.base import FEATURES
from hcl_cli.errors import InputError
from hcl_cli.interrupts import uninterrupted
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
INPUTS_OUTPUTS = {"knn-eval": recorded_output("kNN metrics inputs"), "linear-eval": recorded_output("linear metrics inputs")}
"""Each metrics file's sidecar (:func:`inputs_path`) as an output, recorded as that evaluation's like the file itself."""
INPUTS_SUFFIX = ".inputs.json"
METRICS_SHA256 = "metrics_sha256"
"""The sidecar's key for the sha256 of the metrics file it belongs to."""
PARAMS = "params"
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


def inputs_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar of the metrics file ``path``: ``metrics/knn.json`` -> ``metrics/knn.inputs.json``."""
    metrics = Path(path)
    return metrics.with_name(metrics.stem + INPUTS_SUFFIX)


def check_metrics_replaceable(path: str | os.PathLike[str], command: str) -> None:
    """Refuse, before anything is computed, an ``--out`` or its sidecar that is not ``hcl COMMAND``'s own earlier result."""
    check_replaceable("--out", path, METRICS_OUTPUTS[command])
    check_replaceable("--out (its inputs)", inputs_path(path), INPUTS_OUTPUTS[command])


def save_metrics(path: str | os.PathLike[str], metrics: EvaluationMetrics, command: str) -> None:
    """Write ``metrics`` of ``hcl COMMAND`` atomically as one JSON object (accuracies and test size flat, the rest of the
    measurement under ``details``), and its sidecar (the file's sha256, the parameters and the inputs), both recorded as
    that evaluation's (:data:`METRICS_OUTPUTS`, :data:`INPUTS_OUTPUTS`) and written together."""
    values = {"top1": metrics.top1, "top5": metrics.top5, "test_size": metrics.test_size} | (
        {DETAILS: metrics.details} if metrics.details else {}
    )
    content = json.dumps(values, indent=2) + "\n"
    sidecar = {METRICS_SHA256: hashlib.sha256(content.encode("utf-8")).hexdigest(), PARAMS: metrics.params, INPUTS: metrics.inputs}
    with uninterrupted():
        write_output(path, content, METRICS_OUTPUTS[command])
        write_output(inputs_path(path), json.dumps(sidecar, indent=2) + "\n", INPUTS_OUTPUTS[command], "--out (its inputs)")


def read_measured_inputs(path: str | os.PathLike[str], command: str) -> dict[str, Any]:
    """The sidecar of the metrics file ``path`` that ``hcl COMMAND`` wrote: one-line InputError when it is missing, not
    an object, or records another metrics file than the one at ``path`` (written by another run, or edited since)."""
    sidecar = inputs_path(path)
    if not sidecar.is_file():
        raise InputError(f"{sidecar} not found (what {path} was measured from and with): run hcl {command} again")
    recorded = read_json(sidecar, what=f"hcl {command} metrics inputs")
    if recorded.get(METRICS_SHA256) != sha256_of(Path(path)):
        raise InputError(f"{sidecar} belongs to another {path} (its sha256 differs): run hcl {command} again")
    return recorded


def load_metrics(path: str | os.PathLike[str], command: str, check: Callable[..., EvaluationMetrics] | None = None) -> EvaluationMetrics:
    """Read a metrics file that ``hcl COMMAND`` (knn-eval or linear-eval) wrote and its sidecar, checked by ``check``
    (:func:`check_metrics`, or :func:`evaluation_metrics`): the file's own values first, then the sidecar's binding to it
    and what it records."""
    values = read_json(path, what=f"hcl {command} metrics")
    check_metrics(values, str(path), command)
    return (check or check_metrics)(values, str(path), command, read_measured_inputs(path, command))


def check_metrics(values: Mapping[str, Any], source: str, command: str, recorded: Mapping[str, Any] | None = None) -> EvaluationMetrics:
    """The metrics of ``values``, the content of the metrics file ``source`` that ``hcl COMMAND`` wrote, with the parameters
    and inputs of ``recorded`` (its sidecar, or ``{"params": ...}`` as params.yaml held them), checked: the one check of
    every reader (the report, ``hcl compare``).

    Each accuracy must be a number in [0, 1] (not a boolean, not NaN) with top-5 >= top-1, ``test_size`` an
    integer in [1, :data:`TEST_SIZE_LIMIT`], ``details`` an object (a file without it has none), the recorded ``inputs`` a
    record of sha256 (:func:`~hcl_cli.artifacts.read_inputs`), and every recorded parameter a JSON scalar; anything else
    is a one-line :class:`HclError` naming the file and the field. Other keys of ``values`` (the parameters a metrics
    file of an older hcl held) are not read.
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
    recorded = recorded or {}
    where = str(inputs_path(source)) if METRICS_SHA256 in recorded else source
    inputs = read_inputs(recorded, where)
    params = recorded.get(PARAMS, {})
    if not isinstance(params, dict):
        raise InputError(f"{where}: {PARAMS!r} must be an object (got {type(params).__name__}): run hcl {command} again")
    for key, value in params.items():
        if not isinstance(value, SCALARS) or (isinstance(value, float) and not is_finite_number(value)):
            raise InputError(
                f"{where}: parameter {key!r} must be a string, number, boolean or null (got {shown(value)}): run hcl {command} again"
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
    "senteval": ("senteval_folds", "senteval_baselines", "seed"),
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


def evaluation_metrics(
    values: Mapping[str, Any], source: str, command: str, recorded: Mapping[str, Any] | None = None, *, complete: bool = True
) -> EvaluationMetrics:
    """The one validator of an evaluation's metrics for every reader (``hcl report``, ``hcl compare``): :func:`check_metrics`
    of ``values`` with ``recorded`` (the sidecar, or the parameters params.yaml held), then each parameter of
    :data:`SETTINGS` with a value a reader can use (``k`` <= 0, a ``feature`` that is a path, a ``temperature`` <= 0 are
    refused), else a one-line HclError naming the file and the field. Each must be present when ``complete`` (the report
    computes with them; ``hcl compare`` only tabulates, also runs that predate one)."""
    metrics = check_metrics(values, source, command, recorded)
    where = str(inputs_path(source)) if METRICS_SHA256 in (recorded or {}) else source
    checks = SETTINGS[command]
    if command == "linear-eval" and metrics.params.get("protocol") in LINEAR_PROTOCOL_SETTINGS:
        checks = checks | dict.fromkeys(LINEAR_PROTOCOL_SETTINGS[metrics.params["protocol"]], PRESENT)
    for name, (check, expected) in checks.items():
        if name not in metrics.params and not complete:
            continue
        if name not in metrics.params:
            raise InputError(f"{where}: {name!r} is missing (the setting it was measured with): run hcl {command} again")
        if not check(metrics.params[name]):
            raise InputError(f"{where}: {name!r} must be {expected} (got {shown(metrics.params[name])}): run hcl {command} again")
    return metrics


def topk_accuracy(scores: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Share of rows whose true label is among the ``k`` highest class scores, for each ``k``.

    ``k`` is capped at the number of classes, so top-5 of a 3-class problem is 1.0.
    """
    ranked = scores.topk(min(max(ks), scores.shape[1]), dim=1).indices
    hits = ranked == labels.to(ranked.device)[:, None]
    return {k: int(hits[:, :k].any(dim=1).sum()) / len(labels) for k in ks}  # exact ratios, not float32 means
