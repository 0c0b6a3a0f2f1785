"""A graph sweep as the README runs it: the TU archive tracked by DVC under data/raw (which the prepare stage depends on),
pushed to a DVC remote, and in a fresh clone a queued two-experiment sweep over two samplers, run by `dvc queue start`
to the end, then `hcl compare`. Queued experiments run in a copy of the repository under .dvc/tmp/exps/, which gets the
committed files and what DVC tracks: a path outside the repository, or an untracked file, would not be there."""

from __future__ import annotations

import csv
import json
import shutil
import tarfile
import time
from pathlib import Path

import pytest
from conftest import copy_pipeline
from processes import run_grouped
from test_graph_step import write_toy_tu
from test_pipeline import ROOT, run, set_params

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SWEEP_PARAMS = {
    "prepare": {"dataset": "tu", "name": "TOY", "path": "data/raw/tu.tar.gz"},
    "pretrain": {"epochs": 2, "batch_size": 16},
    "linear": {"protocol": "svm", "svm_folds": 3, "svm_inner_folds": 2, "svm_c_grid": "0.1,10"},
    "knn": {"k": 5},
    "report": {"anchors": 2},
}
QUEUE_TIMEOUT = 900


def write_archive(path: Path, work: Path, seed: int = 0) -> None:
    """A tu.tar.gz holding ``tu/TOY/TOY_*.txt``, the layout of the TU archive the README describes."""
    folder = write_toy_tu(work / "tu" / "TOY", seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname="tu/TOY")


def git(repo: Path, *args: str) -> str:
    return run(["git", "-c", "user.email=test@example.com", "-c", "user.name=test", *args], repo)


def stdout(repo: Path, *command: str) -> str:
    result = run_grouped(command, cwd=repo)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def wait_for_the_queue(clone: Path) -> None:
    deadline = time.monotonic() + QUEUE_TIMEOUT
    while any(state in (status := run(["dvc", "queue", "status"], clone)) for state in ("Queued", "Running")):
        assert time.monotonic() < deadline, status
        time.sleep(5)


def queued_sampler_sweep(clone: Path) -> dict[str, dict]:
    """Queue ``-S pretrain.sampler=ucl,hucl`` in ``clone``, run the queue to the end, and return the two experiments by name."""
    run(["dvc", "exp", "run", "--queue", "-n", "sampler", "-S", "pretrain.sampler=ucl,hucl"], clone)
    run(["dvc", "queue", "start"], clone)
    wait_for_the_queue(clone)
    (baseline,) = [entry for entry in json.loads(stdout(clone, "dvc", "exp", "show", "--json")) if entry["rev"] != "workspace"]
    finished = {group["name"]: group for group in baseline["experiments"] or []}
    assert set(finished) == {"sampler-1", "sampler-2"}, finished.keys()
    return finished


def test_a_queued_sweep_over_two_samplers_runs_to_the_end_in_a_fresh_clone(tmp_path: Path) -> None:
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    copy_pipeline(origin)
    shutil.copy(ROOT / "params.yaml", origin / "params.yaml")
    set_params(origin, SWEEP_PARAMS)
    write_archive(origin / "data" / "raw" / "tu.tar.gz", tmp_path / "work")
    git(origin, "init", "-q")
    run(["dvc", "init", "-q"], origin)
    run(["dvc", "config", "core.analytics", "false"], origin)
    run(["dvc", "remote", "add", "-d", "storage", str(tmp_path / "remote")], origin)
    run(["dvc", "add", "data/raw/tu.tar.gz"], origin)
    run(["dvc", "repro", "prepare"], origin)
    run(["dvc", "push"], origin)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "a graph pipeline, its TU archive tracked by DVC")

    git(tmp_path, "clone", "-q", str(origin), str(clone))
    run(["dvc", "pull", "data/raw/tu.tar.gz.dvc", "prepare"], clone)
    finished = queued_sampler_sweep(clone)
    samplers = set()
    for name, group in finished.items():
        assert (group["executor"] or {}).get("state") in (None, "success"), run(["dvc", "queue", "logs", name], clone)
        data = group["revs"][0]["data"]
        linear, params = data["metrics"]["metrics/linear.json"]["data"], data["params"]["params.yaml"]["data"]
        assert (params["linear"]["protocol"], linear["test_size"], params["knn"]["k"]) == ("svm", 40, 5)
        samplers.add(data["params"]["params.yaml"]["data"]["pretrain"]["sampler"])
    assert samplers == {"ucl", "hucl"}

    run(["hcl", "compare"], clone)
    with open(clone / "reports" / "compare.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((row["experiment"], row["dataset"], row["protocol"], row["sampler"]) for row in rows) == [
        ("sampler-1", "TOY", "svm", "ucl"),
        ("sampler-2", "TOY", "svm", "hucl"),
    ]

    assert json.loads(stdout(clone, "dvc", "status", "--json", "prepare")) == {}, "the clone's prepare is the committed one"
    write_archive(clone / "data" / "raw" / "tu.tar.gz", tmp_path / "other", seed=1)
    run(["dvc", "add", "data/raw/tu.tar.gz"], clone)
    assert "prepare" in json.loads(stdout(clone, "dvc", "status", "--json", "prepare")), "another archive reruns prepare"


def test_a_queued_sweep_of_a_mutag_preset_runs_in_a_fresh_clone_from_the_shipped_data(tmp_path: Path) -> None:
    """No DVC remote, no network, no ../shared: the preset reads data/raw, where MUTAG ships (data/raw/tu/MUTAG.zip)."""
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    copy_pipeline(origin)
    assert (origin / "data" / "raw" / "tu" / "MUTAG.zip").is_file()
    shutil.copy(ROOT / "params.yaml", origin / "params.yaml")
    run(["hcl", "preset", "hscl-mutag-hucl", "--no-estimate"], origin)
    set_params(origin, {key: value for key, value in SWEEP_PARAMS.items() if key != "prepare"})
    git(origin, "init", "-q")
    run(["dvc", "init", "-q"], origin)
    run(["dvc", "config", "core.analytics", "false"], origin)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "a MUTAG preset on the shipped data")

    git(tmp_path, "clone", "-q", str(origin), str(clone))
    finished = queued_sampler_sweep(clone)
    for name, group in finished.items():
        assert (group["executor"] or {}).get("state") in (None, "success"), run(["dvc", "queue", "logs", name], clone)
        data = group["revs"][0]["data"]
        assert data["params"]["params.yaml"]["data"]["prepare"] == {
            **data["params"]["params.yaml"]["data"]["prepare"],
            "name": "MUTAG",
            "path": "data/raw",
        }
        assert (
            data["params"]["params.yaml"]["data"]["linear"]["protocol"] == "svm"
            and "svm" in data["metrics"]["metrics/linear.json"]["data"]["details"]
        )
