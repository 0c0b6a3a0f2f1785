"""``hcl compare`` on a real git+DVC repository made in the test, with three ``dvc exp run``
experiments of a trivial stage that writes metrics (no training): one row per experiment plus the
workspace, equal to what ``dvc exp show --json`` says, each showing only the parameters its
sampler reads; ties within the 95% intervals are not bolded; filters; unfinished experiments are
listed, not tabulated; no DVC is one line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from processes import run_grouped

from hcl_cli.errors import HclError, UsageError
from hcl_cli.stages import compare

SWEEP = [("hucl", 0.5, 0.1), ("hscl", 1.0, 0.0), ("ucl", 2.0, 0.05)]
WRITE_METRICS = """\
import json, pathlib, yaml
p = yaml.safe_load(open("params.yaml"))["pretrain"]
score = {"ucl": 0.1, "hucl": 0.2, "hscl": 0.3}[p["sampler"]] + p["beta"] / 7 + p["tau_plus"]
pathlib.Path("metrics").mkdir(exist_ok=True)
json.dump({"top1": score / 2, "top5": 0.99, "test_size": 10000}, open("metrics/knn.json", "w"))
json.dump({"top1": 1 - score / 3, "top5": 0.98, "test_size": 10000}, open("metrics/linear.json", "w"))
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
    result = run_grouped(args, cwd=repo)
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
        git_dvc(
            repo,
            "dvc",
            "exp",
            "run",
            "-q",
            "-S",
            f"pretrain.sampler={sampler}",
            "-S",
            f"pretrain.beta={beta}",
            "-S",
            f"pretrain.tau_plus={tau_plus}",
        )
    return repo


def compare_rows(repo: Path, *options: str) -> list[dict[str, str]]:
    """Run ``hcl compare`` with ``options`` in ``repo``; the CSV rows it wrote."""
    out = repo / "reports" / "compare"
    result = subprocess.run(
        [sys.executable, "-m", "hcl_cli", "compare", "--out", str(out), *options], cwd=repo, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    with open(out.with_suffix(".csv"), newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def shown(sweep_repo: Path) -> dict[str, dict[str, Any]]:
    """Each experiment's params and top-1s as ``dvc exp show --json`` gives them, by name (the workspace too)."""
    entries = json.loads(git_dvc(sweep_repo, "dvc", "exp", "show", "--json"))
    experiments = {}
    for baseline in entries:
        groups = [{"name": "workspace", "revs": [baseline]}] if baseline["rev"] == "workspace" else baseline.get("experiments") or []
        for group in groups:
            data = group["revs"][0]["data"]
            metrics = data["metrics"]
            experiments[group["name"]] = {
                **data["params"]["params.yaml"]["data"]["pretrain"],
                "knn_top1": metrics["metrics/knn.json"]["data"]["top1"],
                "linear_top1": metrics["metrics/linear.json"]["data"]["top1"],
            }
    return experiments


@pytest.mark.slow
def test_csv_has_one_row_per_experiment_and_the_workspace_equal_to_dvc_exp_show(sweep_repo: Path, shown: dict[str, dict[str, Any]]) -> None:
    rows = compare_rows(sweep_repo)
    assert len(rows) == 4 and {row["experiment"] for row in rows} == set(shown) and rows[0]["experiment"] == "workspace"
    for row in rows:
        expected = shown[row["experiment"]]
        assert row["sampler"] == expected["sampler"]
        assert row["beta"] == ("" if expected["sampler"] == "ucl" else str(expected["beta"])), "ucl reads no beta"
        assert row["tau_plus"] == (str(expected["tau_plus"]) if expected["sampler"] == "hucl" else ""), "only hucl here reads tau_plus"
        assert float(row["knn_top1"]) == expected["knn_top1"] and float(row["linear_top1"]) == expected["linear_top1"]
        assert float(row["knn_low"]) < expected["knn_top1"] < float(row["knn_high"])


@pytest.mark.slow
def test_only_a_winner_beyond_the_intervals_is_bold(sweep_repo: Path, shown: dict[str, dict[str, Any]]) -> None:
    rows = compare_rows(sweep_repo)
    # kNN: hscl 0.2214 and ucl 0.2179 on 10,000 test images are within each other's intervals: no winner.
    assert [row["knn_best"] for row in rows] == ["0"] * 4
    # linear: hucl 0.8762 beats the next (0.8548) beyond the intervals.
    assert [row["experiment"] for row in rows if row["linear_best"] == "1"] == [
        name for name, values in shown.items() if values["sampler"] == "hucl"
    ]
    table = (sweep_repo / "reports" / "compare.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| Experiment"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == [
        "Experiment",
        "Dataset",
        "Protocol",
        "Sampler",
        "beta",
        "kNN top-1",
        "Linear top-1",
    ], "only beta varies among the rows that read it"
    assert sum(line.count("**") for line in table.splitlines() if line.startswith("| ")) == 2


@pytest.mark.slow
def test_filters_by_sampler_parameter_and_name(sweep_repo: Path, shown: dict[str, dict[str, Any]]) -> None:
    assert {row["sampler"] for row in compare_rows(sweep_repo, "--sampler", "hucl", "--sampler", "hscl")} == {"hucl", "hscl"}
    assert [row["sampler"] for row in compare_rows(sweep_repo, "--where", "pretrain.beta=1")] == ["hscl"]
    hucl = next(name for name, values in shown.items() if values["sampler"] == "hucl")
    assert [row["experiment"] for row in compare_rows(sweep_repo, "--name", hucl[:-1] + "*")] == [hucl]


def finished(name: str, beta: float, knn: float, state: str | None = "success") -> dict[str, Any]:
    """One experiment group in the shape of ``dvc exp show --json`` (dvc 3)."""
    data = {
        "params": {"params.yaml": {"data": {"pretrain": {"sampler": "hucl", "beta": beta, "tau_plus": 0.1}}}},
        "metrics": {
            "metrics/knn.json": {"data": {"top1": knn, "top5": 1.0, "test_size": 100}},
            "metrics/linear.json": {"data": {"top1": 0.5, "top5": 1.0, "test_size": 100}},
        },
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
            "experiments": [
                finished("done", 1.0, 0.7),
                finished("direct", 2.0, 0.8, state=None),
                finished("waiting", 5.0, 0.0, state="queued"),
                failed,
                no_metrics,
            ],
        },
    ]
    rows, skipped = compare.parse_experiments(entries)
    assert [(row.name, row.pretrain["beta"], row.accuracy["knn"].top1, row.baseline) for row in rows] == [
        ("done", 1.0, 0.7, "main"),
        ("direct", 2.0, 0.8, "main"),
    ]
    assert skipped == ["waiting: queued", "broken: failed", "partial: no top1 in metrics/linear.json"]


def test_outside_a_dvc_repository_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HclError, match=r"^dvc exp show failed: you are not inside of a DVC repository") as error:
        compare.run(str(tmp_path / "compare"), compare.Selection())
    assert "\n" not in str(error.value)
    assert not list(tmp_path.iterdir()), "nothing is written"


def test_without_dvc_installed_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HclError, match=r"^dvc is not installed \(hcl compare reads `dvc exp show --json`\)$"):
        compare.run(str(tmp_path / "compare"), compare.Selection())


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (compare.Selection(samplers=("nope",)), r"--sampler 'nope' is not a sampler \(one of ucl, .*hucl"),
        (compare.Selection(where=("pretrain.betta=1",)), r"'betta' is not a parameter of pretrain \(one of .*beta"),
        (compare.Selection(where=("pretrian.beta=1",)), r"'pretrian' is not a params.yaml group \(one of prepare, pretrain"),
    ],
)
def test_an_unknown_sampler_or_where_key_is_a_usage_error_naming_the_known_ones(
    selection: compare.Selection, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # refused before dvc runs: dvc is not even needed
    with pytest.raises(UsageError, match=message):
        compare.run(str(tmp_path / "compare"), selection)


@pytest.mark.parametrize("out", ["reports/", "reports", ".", "reports/.."])
def test_an_out_that_names_a_folder_writes_no_dot_md(out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    with pytest.raises(UsageError, match=r"is a folder: give a prefix, e\.g\. .*compare"):
        compare.run(out, compare.Selection())
    assert not list(tmp_path.rglob("*.md")) and not list(tmp_path.rglob("*.csv"))


def graph_experiment(name: str, sampler: str, knn: float, svm: float, std: float, **pretrain: Any) -> dict[str, Any]:
    """A finished MUTAG experiment in ``dvc exp show --json``'s shape: kNN on the 47 test graphs, the SVM over 10 folds of 188."""
    pretrain = {"sampler": sampler, "beta": 1.0, **pretrain}
    data = {
        "params": {
            "params.yaml": {
                "data": {
                    "prepare": {"dataset": "tu", "name": "MUTAG"},
                    "pretrain": pretrain,
                    "knn": {"k": 20},
                    "linear": {"protocol": "svm"},
                }
            }
        },
        "metrics": {
            "metrics/knn.json": {"data": {"top1": knn, "top5": 1.0, "test_size": 47}},
            "metrics/linear.json": {
                "data": {"top1": svm, "top5": 1.0, "test_size": 188, "details": {"svm": {"std": std, "folds": 10, "repeats": 1}}}
            },
        },
    }
    return {"name": name, "executor": {"state": "success"}, "revs": [{"rev": "c" * 40, "name": name, "data": data, "error": None}]}


def stale_workspace_sweep() -> list[dict[str, Any]]:
    """``hcl preset hscl-mutag-ucl`` then a queued sweep over two samplers: the workspace's params.yaml says MUTAG, but its
    metrics are still the digits run's (450 test images), as dvc.lock records."""
    workspace = {
        "params": {
            "params.yaml": {
                "data": {
                    "prepare": {"dataset": "tu", "name": "MUTAG"},
                    "pretrain": {"sampler": "ucl", "beta": 1.0},
                    "linear": {"protocol": "svm"},
                }
            }
        },
        "metrics": {
            "metrics/knn.json": {"data": {"top1": 0.9467, "top5": 1.0, "test_size": 450}},
            "metrics/linear.json": {"data": {"top1": 0.9911, "top5": 1.0, "test_size": 450}},
        },
    }
    experiments = [
        graph_experiment("dural-wean", "ucl", 0.83, 0.8679, 0.0193),
        graph_experiment("owing-cors", "hucl", 0.85, 0.8805, 0.0216),
    ]
    return [
        {"rev": "workspace", "name": None, "data": workspace, "error": None, "experiments": None},
        {"rev": "d" * 40, "name": "main", "data": {}, "error": None, "experiments": experiments},
    ]


DIGITS_LOCK = {
    "stages": {
        "prepare": {"params": {"params.yaml": {"prepare": {"dataset": "digits", "name": "MUTAG"}}}},
        "linear-eval": {"params": {"params.yaml": {"linear": {"protocol": "fixed"}}}},
    }
}


@pytest.fixture
def stale_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(DIGITS_LOCK))
    monkeypatch.setattr(compare, "dvc_exp_show", stale_workspace_sweep)
    return tmp_path


def test_a_workspace_of_another_dataset_is_not_tabulated_beside_the_sweep(stale_sweep: Path) -> None:
    compare.run("compare", compare.Selection())
    table = (stale_sweep / "compare.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "Experiment" not in line]
    assert [row.split(" | ")[:4] for row in rows] == [["| owing-cors", "MUTAG", "svm", "hucl"], ["| dural-wean", "MUTAG", "svm", "ucl"]]
    assert "workspace: dataset digits, not MUTAG" in table and not any("**" in row for row in rows), "the stale digits row is not shown"
    with open(stale_sweep / "compare.csv", newline="") as handle:
        assert {row["dataset"] for row in csv.DictReader(handle)} == {"MUTAG"}


def test_cross_validated_rows_carry_their_fold_spread_not_a_wilson_interval(stale_sweep: Path) -> None:
    compare.run("compare", compare.Selection())
    table = (stale_sweep / "compare.md").read_text()
    assert "0.8805 ± 0.022 (10 folds)" in table and "0.8679 ± 0.019 (10 folds)" in table
    assert "cross-validates over every sample: the mean over its folds ± their standard deviation" in " ".join(table.split())
    with open(stale_sweep / "compare.csv", newline="") as handle:
        hucl = next(row for row in csv.DictReader(handle) if row["sampler"] == "hucl")
    assert (float(hucl["linear_low"]), float(hucl["linear_high"]), hucl["linear_folds"]) == pytest.approx((0.8589, 0.9021, "10"))
    assert hucl["protocol"] == "svm" and hucl["knn_folds"] == ""


def test_the_dataset_can_be_chosen_and_an_unknown_one_is_named(stale_sweep: Path) -> None:
    compare.run("digits", compare.Selection(dataset="digits"))
    rows = [line for line in (stale_sweep / "digits.md").read_text().splitlines() if line.startswith("| workspace")]
    assert len(rows) == 1 and "| digits | fixed |" in rows[0]
    with pytest.raises(UsageError, match=r"--dataset 'PTC_MR': no experiment .* \(theirs: MUTAG, digits\)"):
        compare.run("ptc", compare.Selection(dataset="PTC_MR"))


def test_a_name_pattern_that_matches_nothing_says_so_and_lists_the_names(stale_sweep: Path) -> None:
    with pytest.raises(
        HclError, match=r"^--name 'exp-\*' matches no finished experiment; dvc exp show lists workspace, dural-wean, owing-cors"
    ) as error:
        compare.run("compare", compare.Selection(name="exp-*"))
    assert "dvc exp run` first" not in str(error.value) and not (stale_sweep / "compare.md").exists()


def test_the_table_is_printed_on_the_terminal_as_it_is_written(stale_sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare.run("compare", compare.Selection())
    captured = capsys.readouterr()
    table = (stale_sweep / "compare.md").read_text()
    assert captured.out == table.rstrip("\n") + "\n\n" and "| owing-cors | MUTAG | svm | hucl" in captured.out, "the result on stdout"
    assert captured.err.splitlines()[-1] == "hcl compare: 2 experiments -> compare.md, compare.csv", "the status line on stderr"


def test_a_graph_run_that_read_every_label_is_marked_transductive_and_an_inductive_one_inductive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inductive = graph_experiment("tame-owl", "scl", 0.84, 0.8421, 0.0, label_protocol="inductive")
    inductive["revs"][0]["data"]["metrics"]["metrics/linear.json"]["data"] |= {
        "test_size": 47,
        "details": {"svm": {"label_protocol": "inductive"}},
    }
    experiments = [
        graph_experiment("old-scl", "scl", 0.86, 0.8823, 0.0193),  # recorded before label_protocol: it read every graph's label
        graph_experiment("new-scl", "scl", 0.86, 0.8823, 0.0193, label_protocol="transductive"),
        graph_experiment("pos-ucl", "ucl", 0.85, 0.8700, 0.0190, positives="labels", label_protocol="transductive"),
        graph_experiment("ssl-ucl", "ucl", 0.83, 0.8679, 0.0193, label_protocol="transductive"),  # reads no label
        inductive,
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        compare, "dvc_exp_show", lambda: [{"rev": "d" * 40, "name": "main", "data": {}, "error": None, "experiments": experiments}]
    )
    compare.run("compare", compare.Selection())
    lines = [line for line in (tmp_path / "compare.md").read_text().splitlines() if line.startswith("| ")][1:]  # the rows
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in lines}
    protocols = {name: cells[2] for name, cells in rows.items() if len(cells) > 2}
    assert protocols == {
        "old-scl": "svm, transductive: the encoder saw the test labels",
        "new-scl": "svm, transductive: the encoder saw the test labels",
        "pos-ucl": "svm, transductive: the encoder saw the test labels",
        "ssl-ucl": "svm",
        "tame-owl": "svm, inductive",
    }
    assert "0.8421 (0.7" in rows["tame-owl"][-1], "the inductive SVM scored the 47 test graphs: a Wilson interval"
    with open(tmp_path / "compare.csv", newline="") as handle:
        labels = {row["experiment"]: row["pretraining_labels"] for row in csv.DictReader(handle)}
    assert labels == {
        **dict.fromkeys(("old-scl", "new-scl", "pos-ucl"), "transductive: the encoder saw the test labels"),
        "ssl-ucl": "",
        "tame-owl": "inductive",
    }


def sentence_experiment(name: str, sampler: str, mr: float, mrpc: float) -> dict[str, Any]:
    """A finished sentence experiment (examples/text) in ``dvc exp show --json``'s shape: one metrics file per SentEval task."""
    senteval = {"protocol": "senteval", "senteval_folds": 10}
    data = {
        "params": {"params.yaml": {"data": {"prepare": {"dataset": "text"}, "pretrain": {"sampler": sampler}, "linear": senteval}}},
        "metrics": {
            "metrics/senteval-MRPC.json": {"data": {"top1": mrpc, "top5": 1.0, "test_size": 1725}},
            "metrics/senteval-MR.json": {"data": {"top1": mr, "top5": 1.0, "test_size": 10662}},
        },
    }
    return {"name": name, "executor": {"state": "success"}, "revs": [{"rev": "e" * 40, "name": name, "data": data, "error": None}]}


def test_a_sentence_sweep_has_a_column_per_task_in_senteval_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    experiments = [sentence_experiment("qt-1", "ucl", 0.60, 0.68), sentence_experiment("qt-2", "hucl", 0.70, 0.69)]
    monkeypatch.setattr(
        compare, "dvc_exp_show", lambda: [{"rev": "f" * 40, "name": "main", "data": {}, "error": None, "experiments": experiments}]
    )
    compare.run("compare", compare.Selection())
    table = (tmp_path / "compare.md").read_text()
    assert "| Experiment | Dataset | Protocol | Sampler | MR | MRPC |" in table
    assert "| qt-2 | text | senteval | hucl | **0.7000 (0.691-0.709)** | 0.6900 (0.668-0.711) |" in table, table
    with open(tmp_path / "compare.csv", newline="") as handle:
        assert {"MR_top1", "MRPC_top1", "MR_best"} <= set(next(csv.reader(handle)))
