"""``hcl preset NAME`` says what the run would cost here: its time and its peak memory on this device, and when it is
over a day or more than the memory free (issue 33: a ResNet-50 preset on a CPU printed neither, for a run of weeks)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import hcl_cli.presets
from hcl_cli.cli import main
from hcl_cli.presets import PRESETS
from hcl_cli.presets.cost import RunCost
from hcl_cli.training.memory import MemoryEstimate

GIB = 2**30
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_preset(monkeypatch: pytest.MonkeyPatch) -> str:
    """A CIFAR-10 preset with a small CNN at batch 32 for 2 epochs (3,124 steps): cheap to measure."""
    base = PRESETS["hcl-cifar100-beta0.5"]
    pretrain = {**base.values["pretrain"], "arch": "small_cnn", "batch_size": 32, "epochs": 2, "device": "cpu"}
    tiny = dataclasses.replace(base, name="tiny-cifar10", dataset="CIFAR-10", values={**base.values, "pretrain": pretrain})
    monkeypatch.setitem(hcl_cli.presets.PRESETS, tiny.name, tiny)
    return tiny.name


def preset_output(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["preset", *args])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_hcl_preset_prints_the_time_and_the_peak_memory_on_this_device(
    tiny_preset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = preset_output([tiny_preset, "--params", str(tmp_path / "params.yaml")], capsys)
    threads = torch.get_num_threads()
    assert re.search(
        rf"^cost on this machine \(cpu, {threads} CPU threads?\): about .+: 3,124 steps of \S+ s \(a step of (16|32) images timed",
        out,
        re.M,
    ), out
    peak = re.search(r"^memory: about ([\d.]+) GiB at its peak \(the training set and the model ([\d.]+) GiB", out, re.M)
    assert peak and float(peak.group(1)) >= float(peak.group(2)) >= 0.1, "the 50,000 uint8 training images alone are 0.14 GiB"
    assert "hcl preset: wrote" in out.split("cost on this machine")[1], "the estimate comes before the preset is written"


def test_no_estimate_writes_the_preset_alone(tiny_preset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = preset_output([tiny_preset, "--no-estimate", "--params", str(tmp_path / "params.yaml")], capsys)
    assert "cost on" not in out and "memory:" not in out and (tmp_path / "params.yaml").is_file()


def test_a_graph_preset_says_why_it_is_not_estimated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = preset_output(["hcl-mutag-beta1", "--params", str(tmp_path / "params.yaml")], capsys)
    assert (
        "\ncost: not estimated for graphs or sentences (it depends on the data); hcl pretrain estimates its time after its first step\n"
        in out
    )


def run_cost(seconds_per_step: float, available: float | None, memory: MemoryEstimate | None) -> RunCost:
    return RunCost(torch.device("cpu"), 2, 39_000, 256, 16, seconds_per_step * 16 / 256, memory, GIB // 4, available)


def test_a_run_over_a_day_and_over_the_free_memory_says_so() -> None:
    memory = MemoryEstimate(optimizer=GIB // 4, linear=0.1 * GIB, quadratic=0.0)
    lines = run_cost(45.0, 8 * GIB, memory).describe().splitlines()
    assert (
        lines[0]
        == "cost on this machine (cpu, 2 CPU threads): about 20.3 days: 39,000 steps of 45 s (a step of 16 images timed, scaled to 256)"
    )
    assert lines[1] == "  over a day: a GPU, fewer epochs or --max-steps make it shorter"
    assert lines[2].startswith("memory: about 26.1 GiB at its peak (the training set and the model 0.2 GiB, gradients and Adam 0.2 GiB")
    assert lines[3] == "  more than is free: hcl pretrain would refuse it (--batch-size 64 fits, or a machine with more memory)"


def test_a_short_run_that_fits_has_two_lines_and_an_unmeasurable_memory_says_why() -> None:
    memory = MemoryEstimate(optimizer=GIB // 4, linear=0.001 * GIB, quadratic=0.0)
    assert len(run_cost(0.01, 64 * GIB, memory).describe().splitlines()) == 2
    assert run_cost(0.01, None, None).describe().splitlines()[1].startswith("memory: not estimated (the loss takes gradients itself")


def test_dry_run_prints_the_changes_and_the_cost_and_leaves_the_params_file_byte_identical(
    tiny_preset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    before = params.read_bytes()
    out = preset_output([tiny_preset, "--dry-run", "--params", str(params)], capsys)
    assert params.read_bytes() == before and sorted(path.name for path in tmp_path.iterdir()) == ["params.yaml"]
    assert re.search(rf"^hcl preset: {tiny_preset} \(.*\) changes \d+ value\(s\) in ", out, re.M), out
    assert "  prepare.dataset: digits -> cifar100" in out
    assert "cost on this machine" in out and "memory: about" in out and "wrote" not in out
    assert out.endswith(f"dry run: {params} was not changed (run without --dry-run to write it)\n")


def test_the_cost_is_shown_before_the_params_file_changes(
    tiny_preset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    before = params.read_bytes()
    seen: list[bytes] = []

    def estimate(name: str) -> str:
        seen.append(params.read_bytes())
        return "cost on this machine: (measured)\n"

    monkeypatch.setattr(hcl_cli.presets, "estimate", estimate)
    out = preset_output([tiny_preset, "--params", str(params)], capsys)
    assert seen == [before], "params.yaml is unchanged while the cost is estimated"
    assert params.read_bytes() != before and out.index("cost on this machine") < out.index(f"hcl preset: wrote {tiny_preset} into")


def test_an_interrupted_estimate_leaves_the_params_file_as_it_was(tmp_path: Path) -> None:
    """Issue 41 item 5: SIGTERM, SIGHUP or Ctrl-C during the estimate stop the preset before it writes anything."""
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    before = params.read_bytes()
    for signum, delay in ((signal.SIGTERM, 0.2), (signal.SIGHUP, 1.4), (signal.SIGINT, 3.0)):
        process = subprocess.Popen(
            [sys.executable, "-m", "hcl_cli", "preset", "hscl-cifar10-hscl-beta", "--params", str(params)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)],
        )
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("hcl preset: hscl-cifar10-hscl-beta "), first
        time.sleep(delay)  # into the estimate: importing torch (where a signal once broke numpy's import), or its steps
        assert process.poll() is None, f"the preset ended (exit {process.returncode}) before {signum.name} came"
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 128 + signum and len(err.strip().splitlines()) == 1, (signum, err, first + out)
        assert params.read_bytes() == before, f"{signum.name} during the estimate changed params.yaml"
