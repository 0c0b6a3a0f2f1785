"""The torch / torchvision pair is checked before a stage runs, with one line naming both versions and the fix."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hcl_cli import versions
from hcl_cli.versions import torch_pair_problem

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("torch", "torchvision"), [("2.14.1", "0.29.1"), ("2.14.1+cpu", "0.29.1+cpu"), ("2.11.0", "0.26.0")])
def test_pairs_built_for_each_other_pass(torch: str, torchvision: str) -> None:
    assert torch_pair_problem(torch, torchvision) is None


def test_a_mismatched_pair_names_both_versions_and_the_fix() -> None:
    problem = torch_pair_problem("2.13.0+cpu", "0.29.1")
    assert problem == (
        "torch 2.13.0+cpu and torchvision 0.29.1 do not work together (torch 2.13 needs torchvision 0.28): "
        "pip install -c constraints.txt torch torchvision (the pair the README's figures came from)"
    )
    assert torch_pair_problem("2.14.1", None) is not None and "torchvision is not installed" in torch_pair_problem("2.14.1", None)


def test_a_stage_refuses_to_start_with_a_mismatched_pair(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hcl_cli.cli import main

    monkeypatch.setattr(versions, "installed", lambda package: {"torch": "2.13.0", "torchvision": "0.29.1"}[package])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["knn-eval"])
    assert exit_.value.code == 1
    assert re.fullmatch(r"hcl knn-eval: error: torch 2\.13\.0 and torchvision 0\.29\.1 do not work together .*\n", capsys.readouterr().err)


def test_the_installed_pair_is_the_one_constraints_txt_pins() -> None:
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line and not line.startswith("#")
    )
    assert torch_pair_problem(pins["torch"], pins["torchvision"]) is None
    assert subprocess.run([sys.executable, "-c", "import hcl_cli.versions as v; v.check_torch_pair()"], check=False).returncode == 0
