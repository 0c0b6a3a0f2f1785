"""Resumable training (issue 6): kill and resume bit for bit, SIGTERM, and kills in the middle of a save.

Must show 1: ``hcl pretrain`` killed with SIGKILL in the middle of an epoch, then resumed, ends
with weights bitwise equal to an uninterrupted run (CPU, fixed seed). Must show 3: a process
killed at random moments while it saves checkpoints always leaves the previous checkpoint intact,
and the next save and load work.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import hcl_cli.stages.pretrain as pretrain
from hcl_cli.artifacts import load_artifact
from hcl_cli.checkpoint import CheckpointStore, TrainingPosition
from hcl_cli.training.signals import TrainingInterrupted
from hcl_cli.config import PretrainConfig, option_name

ROOT = Path(__file__).resolve().parents[1]
RUN = {"epochs": 3, "batch_size": 16, "checkpoint_every": 3, "sampler": "hucl", "device": "cpu"}
KILLS = 20


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    """Digits prepared with a large test fraction: 179 train images, 11 steps of 16 per epoch."""
    return prepared_digits(0.9)


def config_for(digits: Path, run: Path, **changes: Any) -> PretrainConfig:
    return PretrainConfig(**{**RUN, "data": str(digits), "out": str(run / "models"), "live_dir": str(run / "dvclive"), **changes})


def encoder_tensors(run: Path) -> dict[str, torch.Tensor]:
    return load_artifact(run / "models" / "encoder.safetensors", "encoder", {})[0]


@pytest.fixture(scope="module")
def uninterrupted(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The final weights of the run without any interruption."""
    run = tmp_path_factory.mktemp("uninterrupted")
    pretrain.run(config_for(digits, run))
    return encoder_tensors(run)


def start_pretrain(config: PretrainConfig, cwd: Path) -> subprocess.Popen[str]:
    """``python -m hcl_cli pretrain`` with ``config``'s options (its flags are all off), as a user would start it."""
    options = [f"{option_name(name)}={value}" for name, value in vars(config).items() if not isinstance(value, bool)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "hcl_cli", "pretrain", *options], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_checkpoint(store: CheckpointStore, process: subprocess.Popen[str], reached: TrainingPosition) -> None:
    """Poll until the newest checkpoint is at ``reached`` or later, mid-epoch (the process must still run)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, f"pretrain ended before it could be interrupted:\n{process.communicate()[1]}"
        latest = store.latest()
        if latest is not None:
            epoch, step = map(int, re.fullmatch(r"epoch-(\d+)-step-(\d+)\.safetensors", latest.name).groups())
            if (epoch, step) >= (reached.epoch, reached.step) and step > 0:
                return
        time.sleep(0.005)
    pytest.fail("no checkpoint appeared within 120 s")


def assert_bitwise_equal(found: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert found.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(found[name], tensor), f"{name} differs from the uninterrupted run"


def test_sigkill_in_the_middle_of_an_epoch_then_resume_is_bitwise_equal(
    digits: Path, uninterrupted: dict[str, torch.Tensor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_for(digits, tmp_path)
    process = start_pretrain(config, tmp_path)
    wait_for_checkpoint(CheckpointStore(tmp_path / "models" / "checkpoints"), process, TrainingPosition(1, 3))
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert not (tmp_path / "models" / "encoder.safetensors").exists()

    pretrain.run(config_for(digits, tmp_path, resume=True))

    assert re.search(r"resuming from \S+ \(epoch 2, step \d+\)", capsys.readouterr().out), "the resumed checkpoint is not in the middle of epoch 2"
    assert_bitwise_equal(encoder_tensors(tmp_path), uninterrupted)


def test_sigterm_saves_a_checkpoint_exits_143_and_the_resumed_run_is_bitwise_equal(
    digits: Path, uninterrupted: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    config = config_for(digits, tmp_path)
    store = CheckpointStore(tmp_path / "models" / "checkpoints")
    process = start_pretrain(config, tmp_path)
    wait_for_checkpoint(store, process, TrainingPosition(0, 3))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate()

    assert process.returncode == 128 + signal.SIGTERM
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("hcl pretrain: error: stopped by SIGTERM")
    assert f"checkpoint saved to {store.latest()}" in message
    assert not (tmp_path / "models" / "encoder.safetensors").exists()

    pretrain.run(config_for(digits, tmp_path, resume=True))
    assert_bitwise_equal(encoder_tensors(tmp_path), uninterrupted)


def test_more_epochs_continue_a_finished_run_bitwise(digits: Path, uninterrupted: dict[str, torch.Tensor], tmp_path: Path) -> None:
    """``--epochs`` is the one parameter a resume may change: 2 epochs, then resumed to 3, equal 3 at once."""
    pretrain.run(config_for(digits, tmp_path, epochs=2))
    pretrain.run(config_for(digits, tmp_path, resume=True))
    assert_bitwise_equal(encoder_tensors(tmp_path), uninterrupted)


def test_sigint_stops_at_the_step_boundary_with_a_checkpoint(digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during the second step: the step completes, a checkpoint is saved there, exit code 130."""
    real_loss, calls = pretrain.contrastive_loss, []

    def interrupting_loss(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(pretrain, "contrastive_loss", interrupting_loss)
    handler_before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background
    with pytest.raises(TrainingInterrupted, match=r"stopped by SIGINT \(epoch 1, step 2\); checkpoint saved to .*epoch-0000-step-000002\.safetensors") as error:
        pretrain.run(config_for(digits, tmp_path, checkpoint_every=0))
    assert error.value.exit_code == 130
    assert len(calls) == 2
    assert signal.getsignal(signal.SIGINT) is handler_before, "the handler is put back"
    assert not (tmp_path / "models" / "encoder.safetensors").exists()


def save_numbered(store: CheckpointStore, model: nn.Module, number: int) -> None:
    """Save checkpoint ``number`` of ``model`` with every weight set to ``number``."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(number)
    store.save(model, torch.optim.Adam(model.parameters()), TrainingPosition(number, 0), {"number": number}, {"run": "fault-test"})


def save_forever(folder: Path, first: int) -> None:
    """Save checkpoints first, first + 1, ... until killed."""
    torch.set_num_threads(1)
    model, store = nn.Linear(128, 128), CheckpointStore(folder)
    for number in range(first, first + 1_000_000):
        save_numbered(store, model, number)


def load_newest(folder: Path) -> int:
    """Load the newest checkpoint; check that its weights are those its sidecar's position promises."""
    model = nn.Linear(128, 128)
    checkpoint = CheckpointStore(folder).load(model, torch.optim.Adam(model.parameters()), {"run": "fault-test"}, epochs=10**9)
    assert checkpoint is not None
    number = checkpoint.position.epoch
    assert checkpoint.loop_state == {"number": number}
    assert all(torch.equal(p, torch.full_like(p, number)) for p in model.parameters())
    return number


def test_kills_in_the_middle_of_a_save_leave_the_previous_checkpoint_intact(tmp_path: Path) -> None:
    """Issue 6, Must show 3: 20 SIGKILLs at random moments of a process that keeps saving."""
    folder = tmp_path / "checkpoints"
    fork = multiprocessing.get_context("fork")
    randomness = random.Random(0)
    newest, interrupted_saves = 0, 0
    for _ in range(KILLS):
        child = fork.Process(target=save_forever, args=(folder, newest + 1))
        child.start()
        time.sleep(randomness.uniform(0.05, 0.3))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        number = load_newest(folder)
        assert number >= max(newest, 1), f"checkpoint {newest} was lost"
        newest = number
        complete = {"latest.json", f"{TrainingPosition(number, 0).name}.safetensors", f"{TrainingPosition(number, 0).name}.json"}
        interrupted_saves += any(path.name not in complete for path in folder.iterdir())
    assert interrupted_saves >= KILLS // 2, f"only {interrupted_saves} of {KILLS} kills landed in the middle of a save"

    save_numbered(CheckpointStore(folder), nn.Linear(128, 128), newest + 1)
    assert load_newest(folder) == newest + 1
    stem = TrainingPosition(newest + 1, 0).name
    assert sorted(p.name for p in folder.iterdir()) == [f"{stem}.json", f"{stem}.safetensors", "latest.json"]
