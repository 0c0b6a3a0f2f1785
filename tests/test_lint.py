"""The linter and the formatter see every module of the package (a too-broad exclude once hid hcl_cli/stages/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_ruff_check_sees_every_module_of_the_package() -> None:
    listed = subprocess.run([RUFF, "check", "--show-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    seen = {Path(line).resolve() for line in listed.splitlines() if line.endswith(".py")}
    package = {path.resolve() for path in (ROOT / "hcl_cli").rglob("*.py")}
    assert any(path.parent.name == "stages" for path in package)
    missing = sorted(str(path.relative_to(ROOT)) for path in package - seen)
    assert not missing, f"ruff check skips {missing}"


def test_ruff_format_excludes_nothing_of_its_own() -> None:
    """`ruff format` walks the files `ruff check` walks unless [tool.ruff.format] adds an exclude of its own."""
    tomllib = pytest.importorskip("tomllib")
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert "exclude" not in ruff.get("format", {}) and "exclude" not in ruff.get("lint", {})
