"""The first hour (issue 39): a README that fits a page, a documentation site that builds, and an install whose pins
agree with the Python it claims."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from docs_pages import DOCS, ROOT, nav_pages
from packaging.specifiers import SpecifierSet

README_TEST_COMMAND = "pip install -e '.[test]' -c constraints.txt && pytest"


def test_the_readme_fits_a_page_and_points_only_into_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250 and max(len(line) for line in readme.splitlines()) <= 120
    assert all("../shared" not in path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *nav_pages()])
    for target in re.findall(r"\]\((?!https?:)([^)#]+)", readme):
        assert (ROOT / target).exists(), f"the README links to {target}, which is not in the repository"


def test_the_readme_installs_in_a_virtual_environment_with_the_torch_build_named() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme[readme.index("## Install") : readme.index("## Quick start: images")]
    assert "python3 -m venv" in install and "--index-url https://download.pytorch.org/whl/cpu" in install
    assert "CPU only" in install and "CUDA" in install and "1.4 GB" in install and "6.2 GB" in install


def test_every_page_is_in_the_nav_and_ci_builds_the_site_strictly() -> None:
    assert sorted(nav_pages()) == sorted(DOCS.glob("*.md"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert README_TEST_COMMAND in (ROOT / "README.md").read_text(encoding="utf-8") and README_TEST_COMMAND in ci
    assert "mkdocs build --strict" in ci


@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="mkdocs is in the docs extra: pip install -e '.[docs]' -c constraints.txt")
def test_the_site_builds_and_a_broken_link_fails_it(tmp_path: Path) -> None:
    build = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    broken = tmp_path / "broken"
    shutil.copytree(DOCS, broken / "docs", symlinks=True)
    shutil.copy(ROOT / "ARCHITECTURE.md", broken / "ARCHITECTURE.md")
    shutil.copy(ROOT / "mkdocs.yml", broken / "mkdocs.yml")
    with open(broken / "docs" / "usage.md", "a", encoding="utf-8") as page:
        page.write("\nSee [the presets](presets.md#no-such-section).\n")
    failed = subprocess.run(
        ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site2")], cwd=broken, capture_output=True, text=True
    )
    assert failed.returncode != 0 and "no-such-section" in failed.stderr


def test_requires_python_admits_no_python_that_a_pinned_version_lacks() -> None:
    """constraints.txt's numpy 2.4.6 and scipy 1.17.1 need Python 3.11: pyproject.toml may not claim an older one."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    oldest = re.fullmatch(r">=\s*(3\.\d+)", requires.strip())
    assert oldest, f"requires-python {requires!r} names its oldest Python"
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line and not line.startswith("#")
    )
    checked = []
    for name, version in pins.items():
        try:
            installed = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if installed["Version"].split("+")[0] != version or not installed["Requires-Python"]:
            continue
        checked.append(name)
        assert SpecifierSet(installed["Requires-Python"]).contains(f"{oldest.group(1)}.0"), (
            f"{name}=={version} needs Python {installed['Requires-Python']}, but pyproject.toml claims {requires}"
        )
    assert {"numpy", "scipy"} <= set(checked)
