"""Fixtures shared by the test files: prepared digits at a chosen split, single-threaded torch, the pipeline copied into a fresh
folder, and the path Sinkhorn runs on a CPU. Under pytest-xdist (pyproject's addopts: a worker a core) each worker's torch
takes its share of the cores, so that the workers do not oversubscribe them, and the files of slow tests go out first."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import yaml

from benchmarks.common import cpu_count
from hcl_cli.config import PrepareConfig
from hcl_cli.stages import prepare

ROOT = Path(__file__).resolve().parents[1]

if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    torch.set_num_threads(max(1, cpu_count() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most ``slow`` tests first, each file's tests in their order (a stable sort): pytest-xdist hands
    out whole files in this order (pyproject's ``--no-loadscope-reorder``), so that no long file starts last and runs alone
    while the other workers wait."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])


def copy_pipeline(destination: Path) -> None:
    """What a repository needs to run the pipeline, copied into ``destination``: dvc.yaml, the ignore files, the package,
    and every dvc.yaml dependency that no stage writes (the report's reference figures, for one); params.yaml is the caller's."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values()
    written = [out for stage in stages for key in ("outs", "metrics", "plots") for out in stage.get(key, [])]
    outputs = {next(iter(out)) if isinstance(out, dict) else out for out in written}
    sources = {dep for stage in stages for dep in stage["deps"] if dep not in outputs and not dep.startswith("hcl_cli")}
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *sorted(sources)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in ("dvc.yaml", ".dvcignore", ".gitignore", *tracked):  # a folder dep (data/raw) with the files a clone has
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, destination / name)
    shutil.copytree(ROOT / "hcl_cli", destination / "hcl_cli", ignore=shutil.ignore_patterns("__pycache__"))


@pytest.fixture(scope="session")
def prepared_digits(tmp_path_factory: pytest.TempPathFactory) -> Callable[[float], Path]:
    """``prepared_digits(test_fraction)``: a prepared digits folder, made once per fraction per session.

    A large test fraction gives a small train split, hence short tiny-pretrain epochs.
    """
    folders: dict[float, Path] = {}

    def make(test_fraction: float = 0.25) -> Path:
        if test_fraction not in folders:
            folder = tmp_path_factory.mktemp("digits") / "prepared"
            prepare.run(PrepareConfig(test_fraction=test_fraction, out=str(folder)))
            folders[test_fraction] = folder
        return folders[test_fraction]

    return make


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and a 2-core machine shared with other jobs stalls on two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=["cpu-scaling", "device-log-domain"])
def sinkhorn_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each of Sinkhorn's two paths on a CPU (``hcl_cli.objectives.ot.sinkhorn_log_coupling``): the CPU's scaling rounds, and
    the device's log-domain rounds (``DEVICE_PATH_ON_CPU``)."""
    from hcl_cli.objectives import ot

    monkeypatch.setattr(ot, "DEVICE_PATH_ON_CPU", request.param == "device-log-domain")
    return request.param


@pytest.fixture
def host_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The tensors Sinkhorn's loop reads on the host (its ``bool(settled)``, ``hcl_cli.objectives.ot``), in order."""
    from hcl_cli.objectives import ot

    reads: list[object] = []
    real_bool = bool

    def counted_bool(value: object) -> bool:
        if isinstance(value, torch.Tensor):
            reads.append(value)
        return real_bool(value)

    monkeypatch.setattr(ot, "bool", counted_bool, raising=False)
    return reads
