"""Resumable training: kill and resume bit for bit, SIGTERM, and kills in the middle of a save.

``hcl pretrain`` killed with SIGKILL in the middle of an epoch (or 20 times, anywhere, inside log
and checkpoint writes too), then resumed, ends with weights bitwise equal to an uninterrupted run
(CPU, fixed seed) and one log row per epoch. A process killed at random moments while it saves
checkpoints always leaves the previous checkpoint intact, and the next save and load work.
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
from hcl_cli.artifacts import RECORD_FILE, load_artifact, stale_siblings
from hcl_cli.checkpoint import CHECKPOINT_FILE, CHECKPOINT_TEMPORARY, CheckpointStore, TrainingPosition
from hcl_cli.config import PretrainConfig
from hcl_cli.image import step
from hcl_cli.objectives.schedules import learning_rate_at
from hcl_cli.training.loop import interrupted
from hcl_cli.training.signals import StopRequest, TrainingInterrupted

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


def command_line(config: PretrainConfig) -> list[str]:
    """``config`` as the options of ``hcl pretrain`` (valued booleans as ``true``/``false``, runtime flags when set)."""
    values = {**config.params(), **{option.name: getattr(config, option.name) for option in config.declared_options() if option.runtime}}
    options = []
    for option in config.declared_options():
        value = values[option.name]
        if option.runtime and isinstance(value, bool):
            options += [option.flag] if value else []
        else:
            options.append(f"{option.flag}={str(value).lower() if isinstance(value, bool) else value}")
    return options


def start_pretrain(config: PretrainConfig, cwd: Path) -> subprocess.Popen[str]:
    """``python -m hcl_cli pretrain`` with ``config``'s options, as a user would start it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "hcl_cli", "pretrain", *command_line(config)]
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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

    assert re.search(r"resuming from \S+ \(epoch 2, step \d+\)", capsys.readouterr().err), (
        "the resumed checkpoint is not in the middle of epoch 2"
    )
    assert_bitwise_equal(encoder_tensors(tmp_path), uninterrupted)


def final_checkpoint(run: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the run's last checkpoint: model, key encoder and queue, optimizer, random states."""
    latest = CheckpointStore(run / "models" / "checkpoints").latest()
    assert latest is not None
    return load_artifact(latest, "checkpoint", {})[0]


def killed_and_resumed(digits: Path, tmp_path: Path, **changes: Any) -> tuple[Path, Path]:
    """The folders of an uninterrupted run with ``changes``, and of one SIGKILLed in epoch 2 (step 3) and resumed."""
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    pretrain.run(config_for(digits, reference, **changes))
    process = start_pretrain(config_for(digits, killed, **changes), tmp_path)
    wait_for_checkpoint(CheckpointStore(killed / "models" / "checkpoints"), process, TrainingPosition(1, 3))
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL and not (killed / "models" / "encoder.safetensors").exists()
    pretrain.run(config_for(digits, killed, resume=True, **changes))
    return reference, killed


@pytest.mark.parametrize(("mode", "keys_per_step"), [("batch", 32), ("moco", 16)])
def test_sigkill_with_a_momentum_queue_then_resume_is_bitwise_equal(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, keys_per_step: int
) -> None:
    """The key encoder and the queue are part of the checkpoint: killed mid-epoch with a full queue of
    64 keys, the resumed run ends with the encoder, the key encoder, the queue and the optimizer
    of the uninterrupted run, bit for bit; in either queue mode (moco enqueues one view's keys per image)."""
    queue = {"queue_size": 64, "momentum": 0.9, "queue_mode": mode}
    reference, killed = killed_and_resumed(digits, tmp_path, **queue)

    assert re.search(r"over a queue of 64 keys .*resuming from \S+ \(epoch 2, step \d+\)", capsys.readouterr().err)
    assert_bitwise_equal(encoder_tensors(killed), encoder_tensors(reference))
    checkpoint = final_checkpoint(reference)
    assert {"model.queue.keys", "model.queue.count"} <= checkpoint.keys() and checkpoint[
        "model.queue.count"
    ].item() == 3 * 11 * keys_per_step
    assert_bitwise_equal(final_checkpoint(killed), checkpoint)


@pytest.mark.parametrize("optimizer", ["sgd", "lars"])
def test_a_warmed_up_cosine_schedule_killed_after_an_epoch_resumes_bitwise(digits: Path, tmp_path: Path, optimizer: str) -> None:
    """The schedule's place is the step's place in the run and the momenta are the optimizer's state: a run of
    ``--lr-schedule cosine --warmup-epochs 1`` killed after its first epoch (in the second) and resumed ends with the
    weights, the momenta and the last learning rate of the uninterrupted run, bit for bit."""
    schedule = {"optimizer": optimizer, "lr": 0.05, "weight_decay": 1e-4, "lr_schedule": "cosine", "warmup_epochs": 1}
    reference, killed = killed_and_resumed(digits, tmp_path, **schedule)
    assert_bitwise_equal(encoder_tensors(killed), encoder_tensors(reference))
    checkpoint = final_checkpoint(reference)
    assert any(name.endswith(".momentum_buffer") for name in checkpoint)
    assert_bitwise_equal(final_checkpoint(killed), checkpoint)
    latest = [CheckpointStore(run / "models" / "checkpoints").latest() for run in (reference, killed)]
    groups = [load_artifact(path, "checkpoint", {})[1]["optimizer"]["param_groups"] for path in latest if path is not None]
    assert groups[0] == groups[1] and groups[0][0]["lr"] == pytest.approx(learning_rate_at(0.05, 32, 33, 11, "cosine"), rel=1e-6)


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
    real_loss, calls = step.sampler_loss, []

    def interrupting_loss(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(step, "sampler_loss", interrupting_loss)
    monkeypatch.setenv("HCL_SKIP_MEMORY_CHECK", "1")  # the memory check's measuring steps would call the loss too
    handler_before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background
    with pytest.raises(
        TrainingInterrupted,
        match=r"stopped by SIGINT \(in epoch 1 of 3 \(log step 0\), at step 2 of 11\); checkpoint saved to .*epoch-0000-step-000002\.safetensors",
    ) as error:
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
    """20 SIGKILLs at random moments of a process that keeps saving."""
    folder = tmp_path / "checkpoints"
    fork = multiprocessing.get_context("fork")
    randomness = random.Random(0)
    save_numbered(CheckpointStore(folder), nn.Linear(128, 128), 1)  # a checkpoint to keep, and torch.optim warmed before the forks
    newest, interrupted_saves = 1, 0
    for _ in range(KILLS):
        child = fork.Process(target=save_forever, args=(folder, newest + 1))
        child.start()
        time.sleep(randomness.uniform(0.05, 0.3))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        number = load_newest(folder)
        assert number >= newest, f"checkpoint {newest} was lost"
        newest = number
        complete = {
            "latest.json",
            RECORD_FILE,
            f"{TrainingPosition(number, 0).name}.safetensors",
            f"{TrainingPosition(number, 0).name}.json",
        }
        left = [path.name for path in folder.iterdir() if path.name not in complete]
        interrupted_saves += bool(left)
        record_temporaries = {path.name for path in stale_siblings(folder / RECORD_FILE, include_live=True)}  # the next save's
        removable = [
            name for name in left if CHECKPOINT_FILE.fullmatch(name) or CHECKPOINT_TEMPORARY.fullmatch(name) or name in record_temporaries
        ]
        assert removable == left, f"a kill left files no save removes: {left}"
    assert interrupted_saves >= KILLS // 2, f"only {interrupted_saves} of {KILLS} kills landed in the middle of a save"

    save_numbered(CheckpointStore(folder), nn.Linear(128, 128), newest + 1)
    assert load_newest(folder) == newest + 1
    stem = TrainingPosition(newest + 1, 0).name
    assert sorted(p.name for p in folder.iterdir()) == sorted([RECORD_FILE, f"{stem}.json", f"{stem}.safetensors", "latest.json"])


def writes_in_progress(run: Path) -> list[Path]:
    """Hidden files of a write in progress (or left by a killed one) in the run's output folders."""
    folders = (run / "models", run / "models" / "checkpoints", run / "dvclive", run / "dvclive" / "plots" / "metrics")
    return [
        path for folder in folders if folder.is_dir() for path in folder.iterdir() if path.name.startswith(".") and path.name != ".hcl.lock"
    ]


def pretrain_into(config: PretrainConfig, stderr: int) -> None:
    """``hcl pretrain``'s run of ``config`` in a forked process, its status lines written to the file descriptor ``stderr``."""
    torch.set_num_threads(1)
    sys.stderr = os.fdopen(stderr, "w", buffering=1)
    pretrain.run(config)


def fork_pretrain(config: PretrainConfig) -> tuple[multiprocessing.process.BaseProcess, Any]:
    """The run of ``config`` forked from this process (torch and hcl already imported: no interpreter's start-up), and its
    standard error, line by line."""
    read, write = os.pipe()
    process = multiprocessing.get_context("fork").Process(target=pretrain_into, args=(config, write))
    process.start()
    os.close(write)
    return process, os.fdopen(read)


def test_pretrain_killed_anywhere_twenty_times_resumes_to_the_uninterrupted_run_and_log(digits: Path, tmp_path: Path) -> None:
    """SIGKILL ``hcl pretrain`` 20 times, every other time the moment a checkpoint or log write is under
    way, resuming after each: every resume works, the encoder equals an uninterrupted run's bit for
    bit, and the log holds exactly one row per epoch. Each run is forked from this process rather than started as a new
    interpreter (the kill lands in the run either way; the command line's own exits are tested on ``start_pretrain``)."""
    run_settings = {"epochs": 12, "checkpoint_every": 1}
    reference = tmp_path / "reference"
    pretrain.run(config_for(digits, reference, **run_settings))
    config = config_for(digits, tmp_path / "killed", resume=True, **run_settings)
    randomness = random.Random(0)
    kills, kills_in_writes = 0, 0
    while kills < KILLS:
        process, stderr = fork_pretrain(config)
        with stderr:
            started = stderr.readline()  # the status lines are on stderr (hcl_cli/logs.py)
            assert started.startswith("hcl pretrain: hucl on cpu"), f"pretrain did not start: {started}{stderr.read()}"
            if kills % 2:
                deadline = time.monotonic() + 30
                while not writes_in_progress(tmp_path / "killed") and process.is_alive() and time.monotonic() < deadline:
                    pass
                kills_in_writes += bool(writes_in_progress(tmp_path / "killed"))
            else:
                time.sleep(randomness.uniform(0.0, 0.4))
            assert process.pid is not None
            os.kill(process.pid, signal.SIGKILL)
            process.join()
            assert process.exitcode in (-signal.SIGKILL, 0), stderr.read()
        assert process.exitcode == -signal.SIGKILL, f"the run finished after {kills} kills: make it longer"
        kills += 1

    pretrain.run(config)
    assert kills_in_writes >= KILLS // 4, f"only {kills_in_writes} kills landed inside a write"
    assert_bitwise_equal(encoder_tensors(tmp_path / "killed"), encoder_tensors(reference))
    for run in (reference, tmp_path / "killed"):
        rows = (run / "dvclive" / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
        assert [row.split("\t")[0] for row in rows] == ["step", *map(str, range(12))]
    assert (tmp_path / "killed" / "dvclive" / "plots" / "metrics" / "loss.tsv").read_text() == (
        reference / "dvclive" / "plots" / "metrics" / "loss.tsv"
    ).read_text()


@pytest.mark.parametrize(("under_dvc", "hint"), [(False, "rerun with --resume to continue"), (True, "run dvc repro again to continue")])
def test_the_stop_message_says_how_to_continue(under_dvc: bool, hint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """By hand the run continues with --resume; under dvc repro, whose command already resumes, with dvc repro."""
    if under_dvc:
        monkeypatch.setenv("DVC_STAGE", "pretrain")
    else:
        monkeypatch.delenv("DVC_STAGE", raising=False)
    stop = StopRequest()
    stop.signum = signal.SIGINT
    error = interrupted(stop, TrainingPosition(1, 3), Path("models/checkpoints/epoch-0001-step-000003.safetensors"), 3, 11)
    assert str(error).endswith(hint) and error.exit_code == 130
