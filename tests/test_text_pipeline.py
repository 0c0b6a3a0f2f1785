"""examples/text/dvc.yaml, the sentences pipeline as DVC resolves it: the sampler (params.yaml's pretrain group) feeds
pretraining and every task's embed and readout; a task's stages read nothing of another task's, so switching a task in
tasks.yaml reruns only its prepare, embed and readout (and the report that lists the tasks)."""

from __future__ import annotations

from pathlib import Path

import yaml
from dvc.repo import Repo

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "examples" / "text"


def stages() -> dict[str, tuple[set[str], set[str], set[str]]]:
    """Each stage of the pipeline by name: its deps, its params files' groups (``FILE:GROUP``) and its outs."""
    with Repo(str(ROOT)) as repo:
        found = {}
        for stage in repo.index.stages:
            if Path(stage.path).parent != PIPELINE:
                continue
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
