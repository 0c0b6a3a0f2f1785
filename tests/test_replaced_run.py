"""A run started without ``--resume`` over an unfinished run's checkpoint says so, in one line, before replacing it.

A hand run replaced the checkpoint of an earlier interrupted hand run in ``runs/models`` without a word.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_pretrain import tiny_config

from hcl_cli.stages import pretrain

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    """89 train images: 5 steps of 16 per epoch."""
    return prepared_digits(0.95)


def notes(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("hcl pretrain: note:")]


def test_an_unfinished_run_of_other_parameters_is_named_before_it_is_replaced(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=7, beta=1.0))
    notes(capsys)
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=1, beta=2.0))
    checkpoint = tmp_path / "models" / "checkpoints" / "epoch-0001-step-000002.safetensors"
    assert notes(capsys) == [
        f"hcl pretrain: note: starting over without --resume: {checkpoint} is an unfinished run (epoch 2, step 2 of 2 epochs) "
        "of other settings (beta 1.0 -> 2.0)"
    ]


def test_an_unfinished_run_of_the_same_parameters_says_resume_continues_it(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=3))
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=3))
    assert [line.endswith("of these settings (--resume continues it)") for line in notes(capsys)] == [True]


def test_a_finished_run_or_a_resumed_one_is_replaced_without_a_note(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, max_steps=0))
    pretrain.run(tiny_config(digits, tmp_path, beta=2.0))
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=3, beta=2.0))
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, beta=2.0, resume=True))
    assert notes(capsys) == []
