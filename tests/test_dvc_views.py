"""DVC's three views of the default pipeline read at a glance (issue 40, item 1): ``dvc metrics show`` fits 100
columns (the metrics files hold what was measured; their parameters and hashes lie in sidecars DVC does not tabulate),
``dvc plots show`` renders every curve the run wrote without a warning, for the default sampler and for H-SCL's, and the
sweep view of docs/usage.md (``dvc exp show --only-changed``, less the columns it drops) shows every column at 120.

The digits data shipped in data/, at the tiny settings of tests/test_pipeline.py.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from processes import run_grouped
from test_pipeline import ROOT, run, set_params, tiny_pipeline

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # minutes: two pipelines and a sweep, run with the e2e set

SWEEP_VIEW = [
    *["dvc", "exp", "show", "--only-changed", "--no-pager", "--keep", "pretrain.sampler"],
    *["--drop", "Created|Executor|State|.*/[^:]*$|.*:top5$|step|planned_steps"],
]
"""The sweep view the README and docs/usage.md give: the changed columns and the sampler, less the dependencies' hashes, the
time, the runner and the training log's step counts."""


def view(cmd: list[str], cwd: Path, columns: int) -> tuple[str, str]:
    """stdout and stderr of a DVC view on a terminal ``columns`` wide (as rich lays out its tables)."""
    env = os.environ | {"COLUMNS": str(columns), "OMP_NUM_THREADS": "1"}
    result = run_grouped(cmd, cwd=cwd, env=env)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout, result.stderr


def width(text: str) -> int:
    return max(len(line.rstrip()) for line in text.splitlines())


def check_plots(repo: Path) -> None:
    """``dvc plots show`` warns of nothing, and renders one plot per curve of the training log."""
    out, err = view(["dvc", "plots", "show"], repo, 100)
    assert "failed" not in (out + err).lower() and "warning" not in (out + err).lower(), out + err
    shown = json.loads(view(["dvc", "plots", "show", "--json"], repo, 100)[0])
    assert "errors" not in shown, shown["errors"]
    curves = {path.relative_to(repo).as_posix() for path in (repo / "dvclive" / "pretrain" / "plots" / "metrics").glob("*.tsv")}
    assert set(shown["data"]) == curves and all(shown["data"].values()), shown["data"].keys()


def test_the_three_views_of_the_default_pipeline_read_at_a_glance(tmp_path: Path) -> None:
    repo = tiny_pipeline(tmp_path)
    run(["dvc", "repro"], repo)

    table, err = view(["dvc", "metrics", "show"], repo, 200)
    assert width(table) <= 100 and not err, table
    assert "inputs" not in table and "sha256" not in table and "temperature" not in table, "no hash, no parameter"
    assert json.loads((repo / "metrics" / "knn.json").read_text()).keys() == {"top1", "top5", "test_size"}
    check_plots(repo)

    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "dvc_plots/\n")
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the digits run"], repo)
    run(["dvc", "exp", "run", "--queue", "-n", "sweep", "-S", "pretrain.sampler=hucl", "-S", "pretrain.beta=0.5,2"], repo)
    run(["dvc", "exp", "run", "--run-all"], repo)
    sweep, err = view(SWEEP_VIEW, repo, 120)
    assert "…" not in sweep and width(sweep) <= 120, sweep
    for column in (
        "Experiment",
        "pretrain.sampler",
        "pretrain.beta",
        "metrics/knn.json:top1",
        "metrics/linear.json:top1",
        "sweep-1",
        "sweep-2",
    ):
        assert column in sweep, sweep
    assert "hucl" in sweep, sweep
    for document in ("README.md", "docs/usage.md"):
        text = (ROOT / document).read_text().replace(" \\\n  ", " ")  # a command continued on the next line
        assert shlex.join(SWEEP_VIEW).replace(" --no-pager", "") in text, f"{document} gives the sweep view"

    set_params(repo, {"pretrain": {"sampler": "hscl", "eval_every": 1}})
    run(["dvc", "repro"], repo)
    curves = {path.stem for path in (repo / "dvclive" / "pretrain" / "plots" / "metrics").glob("*.tsv")}
    assert {"loss", "knn_top1", "assumption1_fraction", "loss_ucl", "loss_scl", "loss_hucl", "loss_hscl"} <= curves, curves
    check_plots(repo)
