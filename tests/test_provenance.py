"""The run record's git state: dirty only when tracked code or params differ, naming those files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hcl_cli.provenance import now, occasion_record

DVC_YAML = """stages:
  knn-eval:
    cmd: hcl knn-eval
    deps: [code.py]
    metrics:
      - metrics/knn.json:
          cache: false
  pretrain:
    cmd: hcl pretrain
    outs:
      - dvclive/pretrain/plots:
          cache: false
"""


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed repository with code, params, a pipeline, its lock file and two tracked DVC outputs."""
    files = {
        "code.py": "x = 1\n",
        "params.yaml": "pretrain:\n  beta: 1.0\n",
        "dvc.yaml": DVC_YAML,
        "dvc.lock": "schema: '2.0'\n",
        "metrics/knn.json": '{"top1": 0.9444}\n',
        "dvclive/pretrain/plots/metrics/loss.tsv": "step\tloss\n0\t1.0\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_dvc_outputs_and_lock_do_not_make_a_run_dirty(clone: Path) -> None:
    (clone / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (clone / "metrics/knn.json").write_text('{"top1": 0.9467}\n')
    (clone / "dvclive/pretrain/plots/metrics/loss.tsv").write_text("step\tloss\n0\t0.9\n")
    record = occasion_record(now())
    assert not record["git_commit"].endswith("+dirty")
    assert record["git_changed"] == []


def test_changed_code_or_params_make_a_run_dirty_and_are_named(clone: Path) -> None:
    (clone / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (clone / "code.py").write_text("x = 2\n")
    (clone / "params.yaml").write_text("pretrain:\n  beta: 2.0\n")
    record = occasion_record(now())
    assert record["git_commit"].endswith("+dirty")
    assert record["git_changed"] == ["code.py", "params.yaml"]


def test_outside_a_repository_there_is_no_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    record = occasion_record(now())
    assert record["git_commit"] is None and record["git_changed"] is None


def test_a_verification_record_another_part_rewrote_does_not_make_a_verify_run_dirty(clone: Path) -> None:
    """Parts of one verification run side by side in one checkout rewrite ``verify_*.json``: a part started after that is
    still clean, while any other changed file keeps it dirty."""
    from hcl_cli.provenance import run_identity
    from hcl_cli.tables.verify import is_record

    (clone / "results").mkdir()
    (clone / "results" / "verify_x.json").write_text("{}\n")
    (clone / "results" / "x.json").write_text("{}\n")
    git(clone, "add", ".")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "records")
    (clone / "results" / "verify_x.json").write_text('{"rows": []}\n')
    assert run_identity(written=is_record)["dirty"] is False and run_identity()["changed"] == ["results/verify_x.json"]
    (clone / "results" / "x.json").write_text('{"datasets": {}}\n')
    assert run_identity(written=is_record)["changed"] == ["results/x.json"]
