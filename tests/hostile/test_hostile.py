"""Every case of every ``cases_*`` module of this package, one parametrized test each, against the installed ``hcl``.

Slow (the whole set takes many minutes): marked ``hostile`` and ``slow``, and left out of a plain
``pytest`` run by pyproject.toml's ``-m "not hostile"``; ``pytest -m hostile`` runs it
(``-k NAME`` picks cases by name). The tiny pipeline is built once per session; each case runs in
its own copy of it. The table's shape is checked in every run.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from pathlib import Path

import pytest

from .harness import Case, build_pipeline, run_case

MINIMUM_CASES = 300
"""The suite's size at issue 32: the cases of issue 31's table and of issue 32's review."""


def all_cases() -> list[Case]:
    """The ``CASES`` of every module of this package whose name starts with ``cases_``, in name order."""
    names = sorted(info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)]) if info.name.startswith("cases_"))
    return [case for name in names for case in importlib.import_module(f"{__package__}.{name}").CASES]


CASES = all_cases()


def test_case_table() -> None:
    """Every case has a name of its own and at least one right exit code, and there are as many as the issue asks."""
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), sorted({name for name in names if names.count(name) > 1})
    assert all(case.expect for case in CASES)
    assert len(CASES) >= MINIMUM_CASES


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny digits pipeline (:func:`~.harness.build_pipeline`), built once."""
    base = tmp_path_factory.mktemp("hostile") / "base"
    base.mkdir()
    build_pipeline(base)
    return base


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", CASES, ids=[case.name.encode("unicode_escape").decode() for case in CASES])
def test_hostile(case: Case, pipeline: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(pipeline, work, symlinks=True)
    assert run_case(case, work) == "pass"
    shutil.rmtree(work)  # kept when the case fails, to look into
