"""The documentation's code blocks that say they run offline do, in order, in a fresh clone; the quick start leaves one new file.

A block marked ``<!-- offline -->`` on the line before it runs as written (bash, or Python for a
``python`` block) in a clone of this working tree: the files a commit of it would hold (tracked
and untracked, less what is deleted or what git ignores), committed in a new repository, with the
clone's ``hcl_cli`` first on ``PYTHONPATH``. The README's blocks run first, then those of the
pages of docs/ in the order of mkdocs.yml's nav. Two stand-ins, no more: ``pip`` is a no-op (the
environment is installed already), and where the clone holds no MUTAG under ``data/raw`` (the
repository ships it), a synthetic one in the TU layout (``data/raw/MUTAG/MUTAG_A.txt``, ...; 188
graphs, as MUTAG has) is written before the first block that prepares a TU dataset. After the
quick start's block, ``git status --porcelain`` lists ``dvc.lock`` alone, as the README says.
Minutes: the quick start, a graph run, a sweep of three on digits, a hand run and one experiment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_pages import pages
from processes import run_grouped
from test_graph_step import write_toy_tu

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^<!-- offline -->\n```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NO_PIP = 'pip() { echo "(pip $1: the environment is installed already)"; }\n'
TU_RAW = "data/raw"
BLOCK_SECONDS = 3600


def offline_blocks() -> list[tuple[str, str]]:
    """The blocks marked offline of the README, then of each docs page, in order: (language, code)."""
    return [block for path in pages() for block in BLOCK.findall(path.read_text(encoding="utf-8"))]


def git(folder: Path, *args: str, stdin: str | None = None, ok: tuple[int, ...] = (0,)) -> str:
    """git's output; an exit code outside ``ok`` fails the test with git's message."""
    result = subprocess.run(["git", *args], cwd=folder, input=stdin, capture_output=True, text=True, check=False)
    assert result.returncode in ok, f"git {' '.join(args)}: exit {result.returncode}: {result.stderr}"
    return result.stdout


def fresh_clone(destination: Path) -> Path:
    """What a commit of this working tree would hold, committed in a new repository at ``destination``; an untracked
    ``dvc.lock`` (the record of a ``dvc repro`` run here, which the README says a clone does not hold) left out."""
    tracked = set(git(ROOT, "ls-files", "-z", "--cached").split("\0"))
    listed = [name for name in git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0") if name]
    listed = [name for name in listed if name != "dvc.lock" or name in tracked]
    ignored = set(git(ROOT, "check-ignore", "--no-index", "-z", "--stdin", stdin="\0".join(listed), ok=(0, 1)).split("\0"))
    for name in listed:
        source, target = ROOT / name, destination / name
        if name in ignored or not os.path.lexists(source):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)
    git(destination, "init", "-q")
    git(destination, "add", "-A")
    git(destination, "commit", "-q", "-m", "a fresh clone")
    return destination


def ships_mutag(clone: Path) -> bool:
    """Whether the clone holds MUTAG under data/raw (as a folder of its files or an archive), as the README says."""
    return any((clone / TU_RAW).rglob("MUTAG*"))


def write_tu_stand_in(clone: Path) -> None:
    """The stand-in for MUTAG where the clone does not ship it: a MUTAG-sized synthetic dataset in the TU layout, where
    ``hcl prepare --dataset tu --name MUTAG`` reads by default."""
    write_toy_tu(clone / TU_RAW / "MUTAG", name="MUTAG", graphs=188)


def run_block(clone: Path, language: str, code: str, env: dict[str, str]) -> None:
    command = ["bash", "-eo", "pipefail", "-c", NO_PIP + code] if language == "bash" else [sys.executable, "-c", code]
    result = run_grouped(command, cwd=clone, env=env, timeout=BLOCK_SECONDS)
    assert result.returncode == 0, (
        f"README block failed (exit {result.returncode}):\n{code}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    unhashed = [line for line in (result.stdout + result.stderr).splitlines() if "No file hash info found" in line]
    assert not unhashed, f"DVC warned of outputs without a hash:\n{code}\n" + "\n".join(unhashed)


def test_the_readme_marks_the_quick_start_the_sweep_the_graph_run_and_the_loss_example() -> None:
    blocks = offline_blocks()
    assert all(language in ("bash", "python") for language, _ in blocks)
    assert "dvc repro && cat reports/report.md" in blocks[0][1], "the quick start comes first"
    for needed in ("hcl compare --sampler hucl", "hcl prepare --dataset tu", "HardNegativeLoss("):
        assert any(needed in code for _, code in blocks), needed
    (sweep,) = [code for _, code in blocks if "dvc exp run --queue" in code]
    assert sweep.index("git add dvc.lock && git commit") < sweep.index("dvc exp run --queue"), (
        "a queued experiment starts from the last commit: without the run's dvc.lock DVC warns for every output"
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_the_offline_blocks_run_in_order_in_a_fresh_clone(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "hcl")
    identity = {"GIT_AUTHOR_NAME": "readme", "GIT_AUTHOR_EMAIL": "readme@example.com"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "readme", "GIT_COMMITTER_EMAIL": "readme@example.com"}
    env["PYTHONPATH"] = os.pathsep.join([str(clone), *filter(None, [os.environ.get("PYTHONPATH")])])
    for index, (language, code) in enumerate(offline_blocks()):
        if "--dataset tu" in code and not ships_mutag(clone):
            write_tu_stand_in(clone)
        run_block(clone, language, code, env)
        if index == 0:
            assert git(clone, "status", "--porcelain") == "?? dvc.lock\n", "the quick start leaves dvc.lock, and nothing else"
            assert "## " in (clone / "reports" / "report.md").read_text()
