"""Two runs never write into one output folder: the second exits 1 naming the folder and the holder."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hcl_cli.config import PretrainConfig
from hcl_cli.errors import HclError
from hcl_cli.locking import LOCK_FILE, locked_folder
from hcl_cli.stages import pretrain

HOLD = "import sys, time\nfrom hcl_cli.locking import locked_folder\nwith locked_folder(sys.argv[1], 'pretrain'):\n    print('held', flush=True)\n    time.sleep(60)\n"


def test_a_held_folder_is_refused_with_its_holder_and_released_after(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "out")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(HclError, match=rf"{tmp_path / 'out'} is in use by another run \(hcl pretrain, pid {holder.pid}\)"):
            with locked_folder(tmp_path / "out", "embed"):
                pass
    finally:
        holder.terminate()
        holder.wait()
    with locked_folder(tmp_path / "out", "pretrain"):
        pass
    assert not (tmp_path / "out" / LOCK_FILE).exists(), "the lock file goes with the run"


def test_one_process_holds_a_folder_once_for_two_outputs(tmp_path: Path) -> None:
    """Nested holds of one folder (by another spelling too) share the lock; it goes when the outer one ends."""
    with locked_folder(tmp_path / "out", "pretrain"), locked_folder(tmp_path / "out" / ".." / "out", "pretrain"):
        assert (tmp_path / "out" / LOCK_FILE).exists()
    assert not (tmp_path / "out" / LOCK_FILE).exists()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "out")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held", "the folder is free again"
    finally:
        holder.kill()
        holder.wait()


def test_pretrain_with_the_log_in_its_output_folder(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    """``--out X --live-dir X``: the encoder, the checkpoints and the training log share X (no "in use by" itself)."""
    config = PretrainConfig(
        data=str(prepared_digits(0.95)),
        out=str(tmp_path / "x"),
        live_dir=str(tmp_path / "x"),
        epochs=1,
        batch_size=32,
        device="cpu",
        arch="small_cnn",
    )
    pretrain.run(config)
    assert {"encoder.safetensors", "encoder.json", "metrics.json", "checkpoints", "plots"} <= {p.name for p in (tmp_path / "x").iterdir()}
    assert not (tmp_path / "x" / LOCK_FILE).exists()


def test_a_second_pretrain_into_the_same_folder_exits_before_training(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "models")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        config = PretrainConfig(
            data=str(prepared_digits(0.95)),
            out=str(tmp_path / "models"),
            live_dir=str(tmp_path / "live"),
            epochs=1,
            batch_size=16,
            device="cpu",
        )
        with pytest.raises(HclError, match=rf"in use by another run \(hcl pretrain, pid {holder.pid}\)"):
            pretrain.run(config)
        assert not (tmp_path / "models" / "checkpoints").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_run_does_not_block_the_next(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    assert (tmp_path / LOCK_FILE).exists(), "kill -9 leaves the file"
    with locked_folder(tmp_path, "pretrain"):
        pass
