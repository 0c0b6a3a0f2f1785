"""``hcl pretrain`` on a small digits split: the encoder artifact, every sampler, the logs, and bad input."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

import hcl_cli.stages.pretrain as pretrain
from hcl_cli.artifacts import load_artifact
from hcl_cli.checkpoint import CheckpointStore, TrainingPosition
from hcl_cli.config import EmbedConfig, PrepareConfig, PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import HclError, UsageError
from hcl_cli.image import step
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import load_encoder
from hcl_cli.modality import modality_of
from hcl_cli.objectives.registry import SAMPLERS, supervised_samplers
from hcl_cli.provenance import describe_extent
from hcl_cli.stages import embed, prepare
from hcl_cli.training import builders, loop, memory
from hcl_cli.training.builders import build_training
from hcl_cli.training.signals import TrainingInterrupted

TINY = {"epochs": 1, "batch_size": 16, "device": "cpu"}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    """Digits prepared with a large test fraction, so that the train split is small (89 images, 5 steps of 16)."""
    return prepared_digits(0.95)


def tiny_config(digits: Path, run: Path, **changes: Any) -> PretrainConfig:
    return PretrainConfig(**{**TINY, "data": str(digits), "out": str(run / "models"), "live_dir": str(run / "dvclive"), **changes})


def logged(run: Path, metric: str) -> list[float]:
    """The per-epoch values dvclive logged for ``metric``, in step order."""
    rows = (run / "dvclive" / "plots" / "metrics" / f"{metric}.tsv").read_text().split("\n")[1:]
    return [float(row.split("\t")[1]) for row in rows if row]


@pytest.fixture(autouse=True)
def outside_any_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test in a folder that is no git or DVC repository: dvclive must not fail there."""
    monkeypatch.chdir(tmp_path)


def test_pretrain_writes_a_loadable_encoder_with_its_sidecar(digits: Path, tmp_path: Path) -> None:
    config = tiny_config(digits, tmp_path, epochs=2, eval_every=1)
    pretrain.run(config)

    model, sidecar = load_encoder(tmp_path / "models" / "encoder.safetensors")
    card = load_card(digits)
    assert sidecar.config == config.params()
    assert (sidecar.epoch, sidecar.seed, sidecar.dataset) == (2, 0, "digits")
    assert (sidecar.mean, sidecar.std) == (card.mean, card.std)
    assert (sidecar.arch, sidecar.in_channels, sidecar.image_size) == ("small_cnn", 1, 8)
    assert {"torch", "hcl"} <= sidecar.versions.keys()
    assert all(torch.isfinite(p).all() for p in model.state_dict().values())
    losses, knn = logged(tmp_path, "loss"), logged(tmp_path, "knn_top1")
    assert len(losses) == len(knn) == 2 and all(math.isfinite(v) for v in losses)
    assert all(0.0 <= v <= 1.0 for v in knn)
    assert CheckpointStore(tmp_path / "models" / "checkpoints").latest().name == "epoch-0002-step-000000.safetensors"


def weights_digest(path: Path) -> str:
    """sha256 of every tensor of an encoder's state (weights and BatchNorm's running statistics), by name."""
    model, _ = load_encoder(path)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.cpu().numpy().tobytes())
    return digest.hexdigest()


def test_the_knn_probe_leaves_the_trained_encoder_bitwise_the_same(digits: Path, tmp_path: Path) -> None:
    """The probe after every epoch draws no random number (the next epoch's order and views would move), updates no
    BatchNorm statistic and leaves the model in training mode: its encoder is the unprobed run's, bit for bit."""
    digests = {}
    for eval_every in (0, 1):
        run = tmp_path / f"eval-every-{eval_every}"
        pretrain.run(tiny_config(digits, run, epochs=3, eval_every=eval_every))
        digests[eval_every] = weights_digest(run / "models" / "encoder.safetensors")
    assert len(logged(tmp_path / "eval-every-1", "knn_top1")) == 3
    assert not (tmp_path / "eval-every-0" / "dvclive" / "plots" / "metrics" / "knn_top1.tsv").exists()
    assert digests[0] == digests[1]
    summary = json.loads((tmp_path / "eval-every-1" / "dvclive" / "metrics.json").read_text())
    assert "loss" in summary and "knn_top1" not in summary, "the probe is a curve; the run's kNN figure is knn-eval's"


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_trains_one_epoch(digits: Path, tmp_path: Path, sampler: str) -> None:
    pretrain.run(tiny_config(digits, tmp_path, sampler=sampler))

    assert (tmp_path / "models" / "encoder.safetensors").is_file()
    assert math.isfinite(logged(tmp_path, "loss")[0])
    if sampler in supervised_samplers():
        for metric in ("same_label_pairs", "anchors_left_out", "assumption1_fraction", "loss_ucl", "loss_scl", "loss_hucl", "loss_hscl"):
            assert len(logged(tmp_path, metric)) == 1, metric
        # 2B views, each with at least its partner as a positive.
        assert logged(tmp_path, "same_label_pairs")[0] >= 2 * TINY["batch_size"]
        assert 0.0 <= logged(tmp_path, "assumption1_fraction")[0] <= 1.0


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_trains_over_a_momentum_queue(digits: Path, tmp_path: Path, sampler: str) -> None:
    """A queue of 64 keys, 32 per step: full after two of the five steps, then the oldest keys leave."""
    pretrain.run(tiny_config(digits, tmp_path, sampler=sampler, queue_size=64, epochs=2))

    assert (tmp_path / "models" / "encoder.safetensors").is_file()
    assert all(math.isfinite(value) for value in logged(tmp_path, "loss"))


def test_hcl_pretrain_with_a_queue_of_512_trains_hucl_on_digits(digits: Path, tmp_path: Path) -> None:
    """The command line of the issue: ``hcl pretrain --queue-size 512 --sampler hucl`` on digits; embed reads its encoder."""
    out = tmp_path / "models"
    command = ["pretrain", "--queue-size", "512", "--sampler", "hucl", "--epochs", "2", "--batch-size", "16", "--device", "cpu"]
    paths = ["--data", str(digits), "--out", str(out), "--live-dir", str(tmp_path / "dvclive")]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "hcl_cli", *command, *paths], capture_output=True, text=True, check=False, env=environment
    )
    assert result.returncode == 0, result.stderr
    assert "hcl pretrain: hucl over a queue of 512 keys (momentum 0.99) on cpu" in result.stderr
    embeddings = tmp_path / "embeddings.safetensors"
    embed.run(EmbedConfig(data=str(digits), model=str(out / "encoder.safetensors"), out=str(embeddings), device="cpu"))
    assert embeddings.is_file()


@pytest.mark.parametrize(
    "options",
    [
        {"sampler": "hucl", "positives": "labels"},
        {"sampler": "undimix", "undimix_uncertainty": "literal"},
        {"sampler": "hscl", "objective": "bcl", "anneal": "paper"},
        {"sampler": "undimix", "undimix_learned": True, "undimix_weights": "1,2,0"},
    ],
    ids=["label-positive-oracle", "undimix-literal-gradient", "hscl-bcl-annealed", "undimix-learned-weights"],
)
def test_the_paper_variants_train(digits: Path, tmp_path: Path, options: dict[str, str]) -> None:
    """The trainer hands each variant what it reads: labels for same-label positives, the head's last layer for Eq. (3)."""
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, **options))

    assert (tmp_path / "models" / "encoder.safetensors").is_file()
    assert all(math.isfinite(value) for value in logged(tmp_path, "loss"))
    if options.get("positives") == "labels":
        assert logged(tmp_path, "same_label_pairs")[0] > 2 * TINY["batch_size"], "same-label samples are positives too"
    if options.get("undimix_learned"):
        _, sidecar = load_encoder(tmp_path / "models" / "encoder.safetensors")
        logits = torch.tensor(sidecar.learned["undimix_attention"])
        start = torch.tensor([1 / 3, 2 / 3, 0.0]).log().nan_to_num(neginf=0.0)
        assert logits[2] == 0.0 and not torch.allclose(logits[:2], start[:2]), "the weights of the parts in use were learned"


def test_resnet18_pretrains_on_cifar_shaped_images_with_the_simclr_recipe(tmp_path: Path) -> None:
    """The CPU smoke run: ResNet-18 (CIFAR stem) and the batched SimCLR augmentation on a
    tiny test-made image folder of 32x32 RGB images (two classes), one epoch."""
    generator = np.random.default_rng(0)
    for split, count in (("train", 16), ("test", 4)):
        for label in ("cat", "dog"):
            folder = tmp_path / "images" / split / label
            folder.mkdir(parents=True)
            for index in range(count):
                Image.fromarray(generator.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{index}.png")
    data = tmp_path / "prepared"
    prepare.run(PrepareConfig(dataset="imagefolder", path=str(tmp_path / "images"), out=str(data)))

    pretrain.run(tiny_config(data, tmp_path, arch="auto", batch_size=8, sampler="hscl"))

    model, sidecar = load_encoder(tmp_path / "models" / "encoder.safetensors")
    assert (sidecar.arch, sidecar.in_channels, sidecar.image_size, model.feature_dim) == ("resnet18", 3, 32, 512)
    assert math.isfinite(logged(tmp_path, "loss")[0])


def test_the_training_log_is_plain_files_even_in_a_git_repository_without_commits(
    digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No dvclive (the GPU images have none) and no Git or DVC hooks: the log is written in dvclive's layout by hcl."""
    monkeypatch.setitem(sys.modules, "dvclive", None)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    pretrain.run(tiny_config(digits, tmp_path, epochs=2))

    assert len(logged(tmp_path, "loss")) == 2
    assert json.loads((tmp_path / "dvclive" / "metrics.json").read_text())["step"] == 1
    assert not (tmp_path / ".dvc").exists()


def test_a_batch_larger_than_the_dataset_is_a_usage_error(digits: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--batch-size 4096 is larger than the 89 training images"):
        pretrain.run(tiny_config(digits, tmp_path, batch_size=4096))
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_a_non_finite_step_stops_with_the_last_good_checkpoint_and_no_encoder(
    digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The third step's loss (or its gradient) is NaN: the run stops before the update, writes no encoder."""
    real_loss, calls = step.sampler_loss, []

    def poisoned_loss(z1: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
        calls.append(1)
        loss, stats = real_loss(z1, *args, **kwargs)
        if len(calls) == 3 and where == "loss":
            loss = loss * math.nan
        if len(calls) == 3 and where == "gradient":
            z1.register_hook(lambda grad: grad * math.nan)
        return loss, stats

    monkeypatch.setattr(step, "sampler_loss", poisoned_loss)
    monkeypatch.setenv("HCL_SKIP_MEMORY_CHECK", "1")  # the memory check's measuring steps would call the loss too
    with pytest.raises(
        HclError, match=rf"non-finite {where} at epoch 1, step 3 .*last good checkpoint: .*epoch-0000-step-000002\.safetensors"
    ) as error:
        pretrain.run(tiny_config(digits, tmp_path, checkpoint_every=2))

    assert "\n" not in str(error.value)
    assert not (tmp_path / "models" / "encoder.safetensors").exists()
    tensors, _ = load_artifact(tmp_path / "models" / "checkpoints" / "epoch-0000-step-000002.safetensors", "checkpoint", {})
    assert all(torch.isfinite(t.float()).all() for t in tensors.values())


def test_with_reads_every_four_steps_a_non_finite_step_is_named_at_the_next_read(
    digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on an accelerator: the step makes no host sync, the loop reads at steps 2 (a checkpoint) and 4. The third step's
    NaN skips its update on the device and stops the run at the read after it, naming step 3 and the checkpoint of step 2."""
    real_loss, calls = step.sampler_loss, []

    def poisoned_loss(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
        calls.append(1)
        loss, stats = real_loss(*args, **kwargs)
        return (loss * math.nan if len(calls) == 3 else loss), stats

    monkeypatch.setattr(step, "sampler_loss", poisoned_loss)
    monkeypatch.setattr(loop, "read_interval", lambda device: 4)
    monkeypatch.setenv("HCL_SKIP_MEMORY_CHECK", "1")
    with pytest.raises(HclError, match=r"non-finite loss at epoch 1, step 3 .*last good checkpoint: .*epoch-0000-step-000002\.safetensors"):
        pretrain.run(tiny_config(digits, tmp_path, checkpoint_every=2))
    assert len(calls) == 4, "the fourth step ran before the read that found the third"
    assert not (tmp_path / "models" / "encoder.safetensors").exists()


def test_how_often_the_loop_reads_changes_nothing_it_writes(digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads every step (a CPU) and every third step (5 steps an epoch, a checkpoint mid-interval): the same log, the
    same last checkpoint and encoder, bitwise."""
    outputs = []
    for every in (1, 3):
        monkeypatch.setattr(loop, "read_interval", lambda device, every=every: every)
        run = tmp_path / f"every{every}"
        pretrain.run(tiny_config(digits, run, epochs=2, checkpoint_every=4, sampler="hscl"))
        tensors, _ = load_artifact(run / "models" / "encoder.safetensors", "encoder", {})
        latest = CheckpointStore(run / "models" / "checkpoints").latest()
        assert latest is not None
        checkpoint, _ = load_artifact(latest, "checkpoint", {})
        outputs.append((logged(run, "loss"), logged(run, "same_label_pairs"), tensors, checkpoint))
    (losses, pairs, encoder, checkpoint), (other_losses, other_pairs, other_encoder, other_checkpoint) = outputs
    assert losses == other_losses and pairs == other_pairs
    assert all(torch.equal(encoder[name], other_encoder[name]) for name in encoder)
    assert all(torch.equal(checkpoint[name], other_checkpoint[name]) for name in checkpoint)


def test_resume_with_other_parameters_is_a_usage_error(digits: Path, tmp_path: Path) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=2))
    with pytest.raises(UsageError, match=r"--resume: .* other settings \(sampler 'hucl' -> 'ucl'\); only --epochs may grow"):
        pretrain.run(tiny_config(digits, tmp_path, sampler="ucl", epochs=2, resume=True))
    with pytest.raises(UsageError, match=r"--resume: .* has done 2 epochs, more than --epochs 1"):
        pretrain.run(tiny_config(digits, tmp_path, epochs=1, resume=True))


def test_restart_on_change_trains_afresh_like_a_run_without_resume(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What dvc.yaml relies on: a changed parameter with --resume --restart-on-change is a new run."""
    pretrain.run(tiny_config(digits, tmp_path / "fresh", sampler="ucl"))
    pretrain.run(tiny_config(digits, tmp_path / "rerun"))
    pretrain.run(tiny_config(digits, tmp_path / "rerun", sampler="ucl", resume=True, restart_on_change=True))

    assert "other settings (sampler 'hucl' -> 'ucl'): starting over" in capsys.readouterr().err
    fresh, _ = load_artifact(tmp_path / "fresh" / "models" / "encoder.safetensors", "encoder", {})
    rerun, _ = load_artifact(tmp_path / "rerun" / "models" / "encoder.safetensors", "encoder", {})
    assert all(torch.equal(rerun[name], tensor) for name, tensor in fresh.items())


def test_restart_on_change_retrains_a_finished_run_and_logs_every_epoch(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `dvc repro` after a code change (or --force) relies on: the finished run is not a no-op."""
    pretrain.run(tiny_config(digits, tmp_path, epochs=2))
    first, _ = load_artifact(tmp_path / "models" / "encoder.safetensors", "encoder", {})
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, resume=True, restart_on_change=True))

    assert "is a finished run of 2 epochs: starting over" in capsys.readouterr().err
    again, _ = load_artifact(tmp_path / "models" / "encoder.safetensors", "encoder", {})
    assert all(torch.equal(again[name], tensor) for name, tensor in first.items())
    assert len(logged(tmp_path, "loss")) == 2


def test_resume_of_a_finished_run_by_hand_rewrites_the_same_encoder(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=2))
    first, _ = load_artifact(tmp_path / "models" / "encoder.safetensors", "encoder", {})
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, resume=True))

    assert "resuming from" in capsys.readouterr().err
    again, _ = load_artifact(tmp_path / "models" / "encoder.safetensors", "encoder", {})
    assert all(torch.equal(again[name], tensor) for name, tensor in first.items())


def test_a_parameter_the_sampler_ignores_gets_a_warning_before_training(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, sampler="ucl", beta=2.0, tau_plus=0.1))
    err = capsys.readouterr().err
    assert "warning: beta = 2.0 is not read by the ucl sampler (used by hucl, hscl)" in err
    assert "tau_plus" not in err, "tau_plus is at its default"


def test_max_steps_stops_mid_epoch_with_a_checkpoint_and_the_encoder_and_resumes_to_the_full_run(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """89 images, batches of 16: 5 steps per epoch. --max-steps 7 stops in epoch 2 after its second step."""
    pretrain.run(tiny_config(digits, tmp_path / "full", epochs=2))
    pretrain.run(tiny_config(digits, tmp_path / "cut", epochs=2, max_steps=7))
    out = capsys.readouterr().err
    assert "2 epochs of 5 steps of 16, stopping at --max-steps 7: 7 steps" in out
    assert (tmp_path / "cut" / "models" / "encoder.safetensors").is_file()
    assert CheckpointStore(tmp_path / "cut" / "models" / "checkpoints").latest().name == "epoch-0001-step-000002.safetensors"
    assert len(logged(tmp_path / "cut", "loss")) == 2, "the cut epoch is logged too"

    pretrain.run(tiny_config(digits, tmp_path / "cut", epochs=2, max_steps=0, resume=True))
    full, _ = load_artifact(tmp_path / "full" / "models" / "encoder.safetensors", "encoder", {})
    resumed, _ = load_artifact(tmp_path / "cut" / "models" / "encoder.safetensors", "encoder", {})
    assert all(torch.equal(resumed[name], tensor) for name, tensor in full.items())
    assert logged(tmp_path / "cut", "loss") == logged(tmp_path / "full", "loss")


def test_the_startup_line_and_the_eta_say_what_runs(digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=3))
    captured = capsys.readouterr()
    assert "hcl pretrain: hucl on cpu, small_cnn, digits (89 images of 1x8x8), 3 epochs of 5 steps of 16: 15 steps" in captured.err
    assert re.search(r"hcl pretrain: \S+ s per step: about \d+ s to go", captured.err)


def test_an_emptied_metrics_file_does_not_stop_a_resume(digits: Path, tmp_path: Path) -> None:
    """A kill while the log was written once left metrics.json empty; the log is rebuilt from the checkpoint."""
    pretrain.run(tiny_config(digits, tmp_path, epochs=3))
    (tmp_path / "dvclive" / "metrics.json").write_text("")
    pretrain.run(tiny_config(digits, tmp_path, epochs=4, resume=True))
    assert len(logged(tmp_path, "loss")) == 4
    assert json.loads((tmp_path / "dvclive" / "metrics.json").read_text())["step"] == 3


def test_an_unwritable_output_folder_fails_before_training(digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setitem(builders.TRAINING_BUILDERS, "image", lambda *args: pytest.fail("training was set up"))
    with pytest.raises(UsageError, match=r"a-file/models/encoder.safetensors lies under a file, not a folder"):
        pretrain.run(tiny_config(digits, tmp_path / "a-file"))


def test_a_run_stopped_by_max_steps_says_so_and_its_sidecar_records_how_far_it_went(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretrain.run(tiny_config(digits, tmp_path, epochs=2, max_steps=7))
    assert "(small_cnn, hucl, stopped at step 7 of 10 (--max-steps), 7 steps)" in capsys.readouterr().err
    _, sidecar = load_encoder(tmp_path / "models" / "encoder.safetensors")
    assert (sidecar.run["steps"], sidecar.run["planned_steps"]) == (7, 10)
    assert describe_extent(sidecar.run, sidecar.epoch) == "stopped at step 7 of 10 (--max-steps)"
    assert describe_extent({"steps": 10, "planned_steps": 10}, 2) == "2 epochs"


def test_without_a_terminal_a_plain_progress_line_says_where_the_run_is(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under dvc repro (stderr is no terminal, so there is no progress bar) a line every PROGRESS_SECONDS."""
    monkeypatch.setattr(loop, "PROGRESS_SECONDS", 0.0)
    pretrain.run(tiny_config(digits, tmp_path, epochs=2))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hcl pretrain: step ")]
    assert len(lines) == 10
    assert re.fullmatch(r"hcl pretrain: step 1 of 10 \(10%\), epoch 1 of 2, loss \d+\.\d{4}, \S+ s per step, about \d+ s to go", lines[0])
    assert re.fullmatch(r"hcl pretrain: step 10 of 10 \(100%\), epoch 2 of 2, loss \d+\.\d{4}, \S+ s per step, about 0 s to go", lines[-1])


def test_the_eta_comes_after_the_first_step_and_follows_the_median_of_recent_steps(capsys: pytest.CaptureFixture[str]) -> None:
    """A slow first step (100 s), then 1 s per step, then 2 s: the first estimate is the first step's pace, the one printed
    after CORRECTION_STEPS steps the median's (the first step outvoted), and the rate follows the recent steps."""
    now = [0.0]
    clock = loop.RunClock(total_steps=1000, epochs=10, steps_per_epoch=100, device=torch.device("cpu"), plain=False, timer=lambda: now[0])
    estimates = []
    for done in range(1, 41):
        now[0] += 100.0 if done == 1 else (1.0 if done <= 20 else 2.0)
        estimates.append(clock.step_done(done, 1.0))
    printed = capsys.readouterr().err.splitlines()
    assert estimates[0] == loop.format_duration(100.0 * 999)
    assert printed[0].startswith("hcl pretrain: 100 s per step: about 27.8 h to go at the first step's pace")
    assert printed[1].startswith("hcl pretrain: hint: over a day on a CPU; for a quick run try --arch small_cnn")
    assert printed[2] == f"hcl pretrain: 1 s per step: about {loop.format_duration(990)} to go (the median of the last 10 steps)"
    assert len(printed) == 3, "the corrected estimate is printed once"
    assert estimates[-1] == loop.format_duration(2.0 * 960), "the rate follows the last RECENT_STEPS steps"


def test_a_compiled_first_step_does_not_feed_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    """The estimate after a compiled first step said "about 75 min to go": the compilation is no step's time (issue 54)."""
    now = [0.0]
    clock = loop.RunClock(
        total_steps=1000, epochs=10, steps_per_epoch=100, device=torch.device("cpu"), plain=False, timer=lambda: now[0], compiling=True
    )
    now[0] += 300.0
    assert clock.step_done(1, 1.0) == "after the next step"
    now[0] += 1.0
    assert clock.step_done(2, 1.0) == loop.format_duration(1.0 * 998)
    assert capsys.readouterr().err.splitlines()[0].startswith(f"hcl pretrain: 1 s per step: about {loop.format_duration(998)} to go")


def test_steps_read_in_a_group_count_its_mean_time() -> None:
    """On an accelerator the loop reads its steps' results every few steps: each counts the group's mean."""
    now = [0.0]
    clock = loop.RunClock(total_steps=100, epochs=1, steps_per_epoch=100, device=torch.device("cuda"), plain=False, timer=lambda: now[0])
    now[0] = 5.0
    assert clock.step_done(1, 1.0) == loop.format_duration(5.0 * 99)
    now[0] += 20 * 0.5
    assert clock.step_done(21, 1.0, steps=20) == loop.format_duration(0.5 * 79)


def test_ctrl_c_during_the_first_step_stops_at_once(digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first step can take minutes (a ResNet-50 on a CPU) and has nothing to save: Ctrl-C does not wait for its end."""
    real_loss, calls = step.sampler_loss, []

    def interrupting_loss(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        signal.raise_signal(signal.SIGINT)
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(step, "sampler_loss", interrupting_loss)
    monkeypatch.setenv("HCL_SKIP_MEMORY_CHECK", "1")  # the memory check's measuring steps would call the loss too
    with pytest.raises(TrainingInterrupted, match=r"stopped by SIGINT during the first step, at once \(nothing was saved\)") as error:
        pretrain.run(tiny_config(digits, tmp_path))
    assert error.value.exit_code == 130
    assert calls == [1], "the step's backward and update did not run"
    assert CheckpointStore(tmp_path / "models" / "checkpoints").latest() is None
    assert not (tmp_path / "dvclive" / "metrics.json").exists(), "a metrics.json of {} beside 'nothing was saved' (issue 54)"


def test_a_run_that_will_not_fit_in_memory_is_refused_before_its_first_step(
    digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate (gradients, Adam, the step measured at three small batches) against the device's free memory."""
    config = tiny_config(digits, tmp_path, batch_size=64)
    needed = estimated_bytes(config)
    calls = []
    monkeypatch.setattr(step, "sampler_loss", lambda *args, real=step.sampler_loss, **kwargs: calls.append(1) or real(*args, **kwargs))
    monkeypatch.setattr(memory, "available_bytes", lambda device: int(needed * 0.9))
    with pytest.raises(
        HclError, match=r"training would need about \d+\.\d GiB more at its first step .*: try --batch-size (16|32) \(about"
    ):
        pretrain.run(config)
    assert len(calls) == 3, "only the three measuring steps ran"
    assert not (tmp_path / "models" / "encoder.safetensors").exists()

    monkeypatch.setattr(memory, "available_bytes", lambda device: int(needed * 1.1))
    pretrain.run(config)
    assert (tmp_path / "models" / "encoder.safetensors").is_file()


def estimated_bytes(config: PretrainConfig) -> float:
    """The memory check's estimate for ``config``'s step."""
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    card = load_card(config.data)
    model, training_step = build_training(modality_of(config.data), config, card, context)
    images, labels = modality_of(config.data).load_samples(config.data, ["train"])
    return memory.estimate_step_memory(training_step, images, labels, config.loss_options(0), torch.device("cpu")).total(config.batch_size)


def test_the_memory_estimate_grows_with_the_batch_and_the_model() -> None:
    estimate = memory.MemoryEstimate(optimizer=3 * 2**30, linear=2**20, quadratic=16.0)
    assert estimate.total(512) == 3 * 2**30 + 512 * 2**20 + 16 * 512**2
    assert estimate.largest_batch(3 * 2**30 + 300 * 2**20) == 256
    assert estimate.largest_batch(2**30) == 0
    with pytest.raises(HclError, match=r"but the cpu has 3\.5 GiB free: try --batch-size 256 .*, or a GPU \(--device cuda\)"):
        memory.check_memory(estimate, 1024, torch.device("cpu"), int(3.5 * 2**30))
    memory.check_memory(estimate, 256, torch.device("cpu"), int(3.5 * 2**30))


def test_the_stop_message_numbers_epochs_as_the_training_log_does() -> None:
    assert loop.describe_position(TrainingPosition(3, 0), 10, 40) == "after epoch 3 of 10, log step 2"
    assert loop.describe_position(TrainingPosition(3, 12), 10, 40) == "in epoch 4 of 10 (log step 3), at step 12 of 40"
