"""Fixtures shared by the test files: prepared digits at a chosen split, and single-threaded torch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from hcl_cli.config import PrepareConfig
from hcl_cli.stages import prepare


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
