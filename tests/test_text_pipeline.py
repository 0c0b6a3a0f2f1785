"""examples/text/dvc.yaml, the sentences pipeline as DVC resolves it: the sampler (params.yaml's pretrain group) feeds
pretraining and every task's embed and readout; a task's stages read nothing of another task's, so switching a task in
tasks.yaml reruns only its prepare, embed and readout (and the report that lists the tasks). The folder is a DVC project
of its own, invisible to the default pipeline's, and each stage's code deps are its import closure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dvc.repo import Repo
from test_config import imported_files
from test_pipeline import set_params
from test_readme_blocks import fresh_clone
from test_run_cache import dvc, git

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "text"


def stages() -> dict[str, tuple[set[str], set[str], set[str]]]:
    """Each stage of the pipeline by name: its deps, its params files' groups (``FILE:GROUP``) and its outs."""
    with Repo(str(PIPELINE)) as repo:
        found = {}
        for stage in repo.index.stages:
            deps = {str(dep.def_path) for dep in stage.deps if not hasattr(dep, "params")}
            params = {f"{dep.def_path}:{name}" for dep in stage.deps if hasattr(dep, "params") for name in dep.params}
            found[stage.name] = (deps, params, {str(out.def_path) for out in stage.outs})
        return found


def downstream(graph: dict[str, tuple[set[str], set[str], set[str]]], start: set[str]) -> set[str]:
    """The stages that (transitively) read an out of ``start``'s stages, and ``start`` itself."""
    reached = set(start)
    while True:
        outs = {out for name in reached for out in graph[name][2]}
        more = {
            name
            for name, (deps, _, _) in graph.items()
            if any(dep == out or dep.startswith(out + "/") or out.startswith(dep + "/") for dep in deps for out in outs)
        }
        if more <= reached:
            return reached
        reached |= more


def test_the_sampler_reruns_pretraining_and_what_follows_and_a_task_only_its_own_stages() -> None:
    graph = stages()
    tasks = yaml.safe_load((PIPELINE / "tasks.yaml").read_text())["tasks"]
    assert {f"{stage}@{task}" for stage in ("prepare-task", "embed", "readout") for task in tasks} <= set(graph)
    reading_pretrain = {name for name, (_, params, _) in graph.items() if "params.yaml:pretrain" in params}
    assert reading_pretrain == {"pretrain"}
    assert downstream(graph, {"pretrain"}) == {
        "pretrain",
        "report",
        *(f"{stage}@{task}" for stage in ("embed", "readout") for task in tasks),
    }
    for task in tasks:
        assert downstream(graph, {f"prepare-task@{task}"}) == {f"prepare-task@{task}", f"embed@{task}", f"readout@{task}", "report"}
    assert not any("tasks.yaml" in dep for deps, _, _ in graph.values() for dep in deps), "the task list is the stages, no file they read"


def test_the_default_pipeline_sees_none_of_the_sentence_stages() -> None:
    with Repo(str(ROOT)) as repo:
        assert not [stage for stage in repo.index.stages if PIPELINE in Path(stage.path).parents or Path(stage.path).parent == PIPELINE]
    assert (PIPELINE / ".dvc" / "config").is_file(), "examples/text is its own DVC project (dvc init --subdir)"


STAGE_MODULES = {
    "prepare-corpus": "prepare",
    "pretrain": "pretrain",
    "prepare-task": "prepare",
    "embed": "embed",
    "readout": "linear_eval",
    "report": "report",
}


@pytest.mark.parametrize("stage", STAGE_MODULES)
def test_each_stage_depends_on_exactly_the_code_it_imports(stage: str) -> None:
    declared = yaml.safe_load((PIPELINE / "dvc.yaml").read_text())["stages"][stage]
    deps = (declared.get("do") or declared)["deps"]
    code = {dep.removeprefix("../../") for dep in deps if dep.startswith("../../hcl_cli")}
    assert all(dep.endswith(".py") for dep in code), "files, not folders: a folder outside the project counts its __pycache__"
    expected = imported_files(STAGE_MODULES[stage])
    assert code == expected, f"{stage}: add {sorted(expected - code)}, drop {sorted(code - expected)}"


def ran(log: str) -> set[str]:
    return set(re.findall(r"Running stage '([\w@-]+)'", log))


def restored(log: str) -> set[str]:
    return set(re.findall(r"Stage '([\w@-]+)' is cached - skipping run", log))


@pytest.mark.e2e
def test_in_a_fresh_clone_a_switch_back_is_restored_and_a_sweep_is_compared(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    text = clone / "examples" / "text"
    tasks = yaml.safe_load((text / "tasks.yaml").read_text())["tasks"]
    trained = {"pretrain", "report", *(f"{stage}@{task}" for stage in ("embed", "readout") for task in tasks)}
    assert ran(dvc(text, "repro")) == trained | {"prepare-corpus", *(f"prepare-task@{task}" for task in tasks)}
    assert "Data and pipelines are up to date." in dvc(text, "status")
    assert "examples/text" not in dvc(clone, "status"), "the default pipeline lists none of the sentence stages"
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "the sentence run")
    set_params(text, {"pretrain": {"sampler": "ucl"}})
    assert ran(dvc(text, "repro")) == trained
    git(clone, "checkout", "examples/text/params.yaml")
    log = dvc(text, "repro")
    assert restored(log) == trained and not ran(log), log
    dvc(text, "exp", "run", "--queue", "-n", "qt", "-S", "pretrain.sampler=ucl,debiased")
    log = dvc(text, "exp", "run", "--run-all")
    assert "No file hash info found" not in log, log
    result = subprocess.run([sys.executable, "-m", "hcl_cli", "compare"], cwd=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    table = (text / "reports" / "compare.md").read_text()
    assert f"| Sampler | {' | '.join(tasks)} |" in table
    assert {"qt-1", "qt-2", "workspace"} <= set(re.findall(r"^\| ([\w-]+) \| text \| senteval \|", table, re.M)), table
