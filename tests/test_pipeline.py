"""End to end: the real ``dvc repro`` in a temporary git+DVC repository, at a tiny setting.

The caching contract: changing the sampler reruns pretrain and everything downstream but not
prepare; changing knn.k reruns only knn-eval and report; editing any file a stage imports marks
that stage changed. No parameter value ever reaches a shell.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import copy_pipeline
from processes import run_grouped

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "pretrain": {"epochs": 2, "batch_size": 64, "eval_every": 2},  # the kNN probe at the last epoch, as the default's at 60 of 60
    "linear": {"epochs": 20},
    "knn": {"k": 10},
    "report": {"anchors": 2},
}

pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path) -> str:
    result = run_grouped(cmd, cwd=cwd)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def set_params(repo: Path, changes: dict[str, dict[str, object]]) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for group, values in changes.items():
        params[group].update(values)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def repro(repo: Path) -> set[str]:
    """Run ``dvc repro``; return the stages it ran (not the ones it skipped)."""
    output = run(["dvc", "repro"], repo)
    return set(re.findall(r"Running stage '([\w-]+)'", output))


def tiny_pipeline(path: Path) -> Path:
    """The pipeline in a fresh git+DVC repository at ``path``, at the tiny settings."""
    copy_pipeline(path)
    shutil.copy(ROOT / "params.yaml", path / "params.yaml")
    run(["git", "init", "-q"], path)
    run(["dvc", "init", "-q"], path)
    run(["dvc", "config", "core.analytics", "false"], path)
    set_params(path, TINY)
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_pipeline(tmp_path_factory.mktemp("pipeline"))


def test_full_repro_writes_every_artifact(repo: Path) -> None:
    ran = repro(repo)
    assert ran == {"prepare", "pretrain", "embed", "linear-eval", "knn-eval", "report"}
    for name in ("knn", "linear"):
        metrics = json.loads((repo / "metrics" / f"{name}.json").read_text())
        assert 0.0 <= metrics["top1"] <= metrics["top5"] <= 1.0
    report = (repo / "reports" / "report.md").read_text()
    assert (repo / "dvclive" / "pretrain" / "plots" / "metrics" / "knn_top1.tsv").is_file(), "the probe's curve"
    assert (repo / "reports" / "figures" / "knn_top1.png").is_file()
    assert f"{json.loads((repo / 'metrics' / 'knn.json').read_text())['top1']:.4f}" in report
    assert repro(repo) == set(), "a second repro with nothing changed runs nothing"


def test_sampler_change_reruns_downstream_but_not_prepare(repo: Path) -> None:
    set_params(repo, {"pretrain": {"sampler": "ucl"}})
    assert repro(repo) == {"pretrain", "embed", "linear-eval", "knn-eval", "report"}


def test_knn_k_change_reruns_only_knn_and_report(repo: Path) -> None:
    set_params(repo, {"knn": {"k": 5}})
    assert repro(repo) == {"knn-eval", "report"}


def changed_stages(repo: Path) -> set[str]:
    """The stages ``dvc status`` reports as changed."""
    return set(json.loads(run(["dvc", "status", "--json"], repo) or "{}"))


def test_appending_a_comment_to_any_imported_file_marks_its_stages_changed(repo: Path) -> None:
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    code_deps = {dep for stage in stages.values() for dep in stage["deps"] if dep.startswith("hcl_cli")}
    files = sorted({p for dep in code_deps for p in ([repo / dep] if dep.endswith(".py") else (repo / dep).glob("*.py"))})
    assert changed_stages(repo) == set()
    for path in files[:: max(1, len(files) // 8)] + [repo / "hcl_cli" / "objectives" / "hcl.py", repo / "hcl_cli" / "training" / "log.py"]:
        original = path.read_text()
        path.write_text(original + "# a comment\n")
        try:
            dep = path.relative_to(repo).as_posix()
            expected = {name for name, stage in stages.items() if any(dep == d or dep.startswith(d + "/") for d in stage["deps"])}
            assert expected and changed_stages(repo) >= expected, dep
        finally:
            path.write_text(original)
    assert changed_stages(repo) == set()


def test_no_parameter_value_reaches_a_shell(repo: Path) -> None:
    """A report title with shell syntax and quotes arrives verbatim; a sampler with a command in it is refused."""
    title = 'x $(touch PWNED) "quoted" `touch PWNED2` y'
    repro(repo)
    set_params(repo, {"report": {"title": title}})
    assert repro(repo) == {"report"}
    assert title in (repo / "reports" / "report.md").read_text()
    set_params(repo, {"pretrain": {"sampler": "hucl; echo hi > injected; true"}})
    result = run_grouped(["dvc", "repro"], cwd=repo)
    assert result.returncode != 0
    assert "pretrain.sampler must be one of" in result.stdout + result.stderr
    assert not {"PWNED", "PWNED2", "injected"} & {p.name for p in repo.iterdir()}
    set_params(repo, {"pretrain": {"sampler": "ucl"}})


def test_a_stage_run_by_hand_leaves_git_and_dvc_status_clean(repo: Path) -> None:
    """The README's first hand run, in a repository whose pipeline is up to date: its outputs go under runs/."""
    repro(repo)
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "pipeline"], repo)
    run(["hcl", "pretrain", "--sampler", "hscl", "--beta", "1", "--epochs", "1", "--device", "cpu"], repo)
    assert (repo / "runs" / "models" / "encoder.safetensors").is_file()
    assert run(["git", "status", "--porcelain"], repo).strip() == ""
    assert changed_stages(repo) == set()


def test_editing_a_knn_help_text_changes_only_knn_eval_and_the_report(repo: Path) -> None:
    """The whole pipeline's dvc status after ``dvc repro``: a knn-eval option's help edited marks knn-eval and the report
    changed, the report because it reads the declarations to list only the parameters a run read
    (hcl_cli/report/parameters.py); prepare, pretrain, embed and linear-eval stay cached. A help text of the front end
    (cli.py) marks none. (On this module's pipeline, last: its edits are undone after.)"""
    repro(repo)
    assert changed_stages(repo) == set()
    cli, knn = repo / "hcl_cli" / "cli.py", repo / "hcl_cli" / "config" / "knn.py"
    originals = {path: path.read_text() for path in (cli, knn)}
    try:
        cli.write_text(originals[cli].replace('DEBUG_HELP = "Show', 'DEBUG_HELP = "Print'))
        assert cli.read_text() != originals[cli]
        assert changed_stages(repo) == set(), "the command line's front end is no stage's dependency"
        knn.write_text(originals[knn].replace('"Neighbours that vote, at most', '"Nearest neighbours that vote, at most'))
        assert knn.read_text() != originals[knn]
        assert changed_stages(repo) == {"knn-eval", "report"}
    finally:
        for path, text in originals.items():
            path.write_text(text)
