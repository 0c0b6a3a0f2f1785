"""``hcl compare`` on a real git+DVC repository made in the test, with three ``dvc exp run``
experiments of a trivial stage that writes metrics (no training): three rows, equal to what
``dvc exp show --json`` says; unfinished experiments are listed, not tabulated; no DVC is one line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hcl_cli.errors import HclError
from hcl_cli.stages import compare

SWEEP = [("hucl", 0.5, 0.1), ("hscl", 1.0, 0.0), ("ucl", 2.0, 0.05)]
WRITE_METRICS = """\
import json, pathlib, yaml
p = yaml.safe_load(open("params.yaml"))["pretrain"]
score = {"ucl": 0.1, "hucl": 0.2, "hscl": 0.3}[p["sampler"]] + p["beta"] / 7 + p["tau_plus"]
pathlib.Path("metrics").mkdir(exist_ok=True)
json.dump({"top1": score / 2, "top5": 0.99}, open("metrics/knn.json", "w"))
json.dump({"top1": 1 - score / 3, "top5": 0.98}, open("metrics/linear.json", "w"))
"""
DVC_YAML = {
    "stages": {
        "evaluate": {
            "cmd": f"{sys.executable} write_metrics.py",
            "deps": ["write_metrics.py"],
            "params": ["pretrain"],
            "metrics": [{"metrics/knn.json": {"cache": False}}, {"metrics/linear.json": {"cache": False}}],
        }
    }
}


def git_dvc(repo: Path, *args: str) -> str:
    result = subprocess.run(list(args), cwd=repo, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def sweep_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git+DVC repository whose baseline commit has three finished experiments."""
    repo = tmp_path_factory.mktemp("sweep")
    (repo / "params.yaml").write_text(yaml.safe_dump({"pretrain": {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.1}}))
    (repo / "write_metrics.py").write_text(WRITE_METRICS)
    (repo / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML, sort_keys=False))
    git_dvc(repo, "git", "init", "-q")
    git_dvc(repo, "git", "config", "user.email", "test@example.com")
    git_dvc(repo, "git", "config", "user.name", "test")
    git_dvc(repo, "dvc", "init", "-q")
    git_dvc(repo, "dvc", "config", "core.analytics", "false")
    git_dvc(repo, "git", "add", "-A")
    git_dvc(repo, "git", "commit", "-q", "-m", "baseline")
    for sampler, beta, tau_plus in SWEEP:
        git_dvc(repo, "dvc", "exp", "run", "-q", "-S", f"pretrain.sampler={sampler}", "-S", f"pretrain.beta={beta}", "-S", f"pretrain.tau_plus={tau_plus}")
    return repo


@pytest.fixture(scope="module")
def compared(sweep_repo: Path) -> Path:
    out = sweep_repo / "reports" / "compare"
    result = subprocess.run([sys.executable, "-m", "hcl_cli", "compare", "--out", str(out)], cwd=sweep_repo, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def shown(sweep_repo: Path) -> dict[str, dict[str, Any]]:
    """Each experiment's params and top-1s as ``dvc exp show --json`` gives them, by name."""
    entries = json.loads(git_dvc(sweep_repo, "dvc", "exp", "show", "--json"))
    experiments = {}
    for baseline in entries:
        for group in baseline.get("experiments") or []:
            data = group["revs"][0]["data"]
            metrics = data["metrics"]
            experiments[group["name"]] = {
                **data["params"]["params.yaml"]["data"]["pretrain"],
                "knn_top1": metrics["metrics/knn.json"]["data"]["top1"],
                "linear_top1": metrics["metrics/linear.json"]["data"]["top1"],
            }
    return experiments


@pytest.mark.slow
def test_csv_has_one_row_per_experiment_equal_to_dvc_exp_show(shown: dict[str, dict[str, Any]], compared: Path) -> None:
    with open(compared.with_suffix(".csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 and {row["experiment"] for row in rows} == set(shown)
    for row in rows:
        expected = shown[row["experiment"]]
        assert row["sampler"] == expected["sampler"]
        assert float(row["beta"]) == expected["beta"] and float(row["tau_plus"]) == expected["tau_plus"]
        assert float(row["knn_top1"]) == expected["knn_top1"] and float(row["linear_top1"]) == expected["linear_top1"]
    assert [row["sampler"] for row in rows] == ["hscl", "hucl", "ucl"], "rows are sorted by sampler, beta, tau_plus"
    for column in ("knn_top1", "linear_top1"):
        best = max(float(row[column]) for row in rows)
        assert [row[f"{column}_best"] for row in rows] == [str(int(float(row[column]) == best)) for row in rows]


@pytest.mark.slow
def test_markdown_table_marks_the_best_of_each_column(shown: dict[str, dict[str, Any]], compared: Path) -> None:
    lines = [line for line in compared.with_suffix(".md").read_text().splitlines() if line.startswith("| ") and not line.startswith("| Experiment")]
    assert len(lines) == 3
    best_knn = max(values["knn_top1"] for values in shown.values())
    best_linear = max(values["linear_top1"] for values in shown.values())
    for line in lines:
        name, sampler, beta, tau_plus, knn, linear = (cell.strip() for cell in line.strip("|").split("|"))
        expected = shown[name]
        assert (sampler, float(beta), float(tau_plus)) == (expected["sampler"], expected["beta"], expected["tau_plus"])
        assert knn == (f"**{expected['knn_top1']:.4f}**" if expected["knn_top1"] == best_knn else f"{expected['knn_top1']:.4f}")
        assert linear == (f"**{expected['linear_top1']:.4f}**" if expected["linear_top1"] == best_linear else f"{expected['linear_top1']:.4f}")


def finished(name: str, beta: float, knn: float, state: str | None = "success") -> dict[str, Any]:
    """One experiment group in the shape of ``dvc exp show --json`` (dvc 3)."""
    data = {
        "params": {"params.yaml": {"data": {"pretrain": {"sampler": "hucl", "beta": beta, "tau_plus": 0.1}}}},
        "metrics": {"metrics/knn.json": {"data": {"top1": knn}}, "metrics/linear.json": {"data": {"top1": 0.5}}},
    }
    executor = None if state is None else {"state": state}
    return {"name": name, "executor": executor, "revs": [{"rev": "a" * 40, "name": name, "data": data, "error": None}]}


def test_unfinished_and_failed_experiments_are_listed_not_tabulated() -> None:
    failed = finished("broken", 3.0, 0.9)
    failed["revs"][0]["error"] = {"msg": "Experiment run failed", "type": ""}
    no_metrics = finished("partial", 4.0, 0.9)
    no_metrics["revs"][0]["data"]["metrics"]["metrics/linear.json"] = {"error": {"type": "FileNotFoundError", "msg": "..."}}
    entries = [
        {"rev": "workspace", "name": None, "data": {}, "error": None, "experiments": None},
        {
            "rev": "b" * 40,
            "name": "main",
            "data": {},
            "error": None,
            "experiments": [finished("done", 1.0, 0.7), finished("direct", 2.0, 0.8, state=None), finished("waiting", 5.0, 0.0, state="queued"), failed, no_metrics],
        },
    ]
    rows, skipped = compare.parse_experiments(entries)
    assert [(row.name, row.beta, row.knn_top1, row.baseline) for row in rows] == [("done", 1.0, 0.7, "main"), ("direct", 2.0, 0.8, "main")]
    assert skipped == ["waiting: queued", "broken: failed", "partial: no top1 in metrics/linear.json"]


def test_outside_a_dvc_repository_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HclError, match=r"^dvc exp show failed: you are not inside of a DVC repository") as error:
        compare.run(str(tmp_path / "compare"))
    assert "\n" not in str(error.value)
    assert not list(tmp_path.iterdir()), "nothing is written"


def test_without_dvc_installed_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HclError, match=r"^dvc is not installed \(hcl compare reads `dvc exp show --json`\)$"):
        compare.run(str(tmp_path / "compare"))
