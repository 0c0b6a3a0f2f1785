"""One validator of an evaluation's metrics for ``hcl report`` and ``hcl compare`` (issue 41, item 6): what the report
refuses, the comparison does not tabulate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hcl_cli.errors import HclError
from hcl_cli.metrics import EvaluationMetrics, save_metrics
from hcl_cli.report.inputs import read_metric_files
from hcl_cli.stages.compare import experiment_row

KNN = {"feature": "backbone", "k": 20, "temperature": 0.1, "chunk_size": 8, "bank_chunk_size": 8}
LINEAR = {"feature": "backbone", "protocol": "fixed", "optimizer": "adam", "epochs": 1, "lr": 0.1, "weight_decay": 0.0, "seed": 0}
MEASURED = {"knn": {"top1": 0.5, "top5": 0.9, "test_size": 100}, "linear": {"top1": 0.6, "top5": 0.9, "test_size": 100}}
BAD = [
    ("knn", {"k": -5}, "'k' must be a positive integer"),
    ("knn", {"k": 0}, "'k' must be a positive integer"),
    ("knn", {"feature": "../../etc"}, "'feature' must be backbone or projection"),
    ("linear", {"feature": "a/b"}, "'feature' must be backbone or projection"),
    ("knn", {"temperature": -1}, "'temperature' must be a positive number"),
    ("knn", {"temperature": 0}, "'temperature' must be a positive number"),
]


def entry() -> dict[str, Any]:
    """A ``dvc exp show`` entry holding the two metrics files."""
    return {"data": {"metrics": {f"metrics/{name}.json": {"data": values} for name, values in MEASURED.items()}}}


def write_metric_files(folder: Path, params: dict[str, dict[str, Any]]) -> None:
    """The two metrics files of a run, and their sidecars with ``params`` (by file), as hcl writes them."""
    for name, values in MEASURED.items():
        save_metrics(folder / f"{name}.json", EvaluationMetrics(**values, params=params[name]), f"{name}-eval")


@pytest.mark.parametrize(("stage", "edit", "message"), BAD, ids=[f"{stage}-{edit}" for stage, edit, _ in BAD])
def test_compare_and_report_refuse_the_same_metrics(tmp_path: Path, stage: str, edit: dict[str, Any], message: str) -> None:
    params = {"knn": KNN, "linear": LINEAR}
    params[stage] = params[stage] | edit
    write_metric_files(tmp_path, params)
    with pytest.raises(HclError, match=message):
        read_metric_files(tmp_path)
    row = experiment_row(entry(), "exp", "main", {"pretrain": {"sampler": "hcl"}, **params})
    assert isinstance(row, str) and message in row, row


def test_valid_metrics_are_tabulated_and_reported(tmp_path: Path) -> None:
    write_metric_files(tmp_path, {"knn": KNN, "linear": LINEAR})
    assert set(read_metric_files(tmp_path)) == {"knn", "linear"}
    row = experiment_row(entry(), "exp", "main", {"pretrain": {"sampler": "hcl"}, "knn": KNN, "linear": LINEAR})
    assert not isinstance(row, str), row
