"""One validator of an evaluation's metrics for ``hcl report`` and ``hcl compare`` (issue 41, item 6): what the report
refuses, the comparison does not tabulate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hcl_cli.artifacts import write_json
from hcl_cli.errors import HclError
from hcl_cli.report.inputs import read_metric_files
from hcl_cli.stages.compare import experiment_row

KNN = {
    "top1": 0.5,
    "top5": 0.9,
    "test_size": 100,
    "feature": "backbone",
    "k": 20,
    "temperature": 0.1,
    "chunk_size": 8,
    "bank_chunk_size": 8,
}
LINEAR = {"top1": 0.6, "top5": 0.9, "test_size": 100, "feature": "backbone", "protocol": "fixed"}
LINEAR |= {"optimizer": "adam", "epochs": 1, "lr": 0.1, "weight_decay": 0.0, "seed": 0}
BAD = [
    ("knn", {"k": -5}, "'k' must be a positive integer"),
    ("knn", {"k": 0}, "'k' must be a positive integer"),
    ("knn", {"feature": "../../etc"}, "'feature' must be backbone or projection"),
    ("linear", {"feature": "a/b"}, "'feature' must be backbone or projection"),
    ("knn", {"temperature": -1}, "'temperature' must be a positive number"),
    ("knn", {"temperature": 0}, "'temperature' must be a positive number"),
]


def entry(knn: dict[str, Any], linear: dict[str, Any]) -> dict[str, Any]:
    """A ``dvc exp show`` entry holding the two metrics files."""
    return {"data": {"metrics": {"metrics/knn.json": {"data": knn}, "metrics/linear.json": {"data": linear}}}}


@pytest.mark.parametrize(("stage", "edit", "message"), BAD, ids=[f"{stage}-{edit}" for stage, edit, _ in BAD])
def test_compare_and_report_refuse_the_same_metrics(tmp_path: Path, stage: str, edit: dict[str, Any], message: str) -> None:
    files = {"knn": KNN, "linear": LINEAR}
    files[stage] = files[stage] | edit
    for name, values in files.items():
        write_json(tmp_path / f"{name}.json", values)
    with pytest.raises(HclError, match=message):
        read_metric_files(tmp_path)
    row = experiment_row(entry(files["knn"], files["linear"]), "exp", "main", {"pretrain": {"sampler": "hcl"}})
    assert isinstance(row, str) and message in row, row


def test_valid_metrics_are_tabulated_and_reported(tmp_path: Path) -> None:
    write_json(tmp_path / "knn.json", KNN)
    write_json(tmp_path / "linear.json", LINEAR)
    assert set(read_metric_files(tmp_path)) == {"knn", "linear"}
    row = experiment_row(entry(KNN, LINEAR), "exp", "main", {"pretrain": {"sampler": "hcl"}})
    assert not isinstance(row, str), row
