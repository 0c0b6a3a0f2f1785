"""Hostile inputs and faults: full disks, outputs over other artifacts, crafted checkpoints, FIFOs, Ctrl-C, odd names."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import torch

from hcl_cli.artifacts import (
    RECORD_FILE,
    atomic_path,
    check_replaceable,
    load_artifact,
    read_json,
    save_artifact,
    tensor_output,
    write_text,
)
from hcl_cli.checkpoint import POINTER_FILE, CheckpointStore
from hcl_cli.config import EmbedConfig, PretrainConfig
from hcl_cli.embeddings import EMBEDDINGS_OUTPUT
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.history import read_history
from hcl_cli.metrics import METRICS_OUTPUTS, EvaluationMetrics, save_metrics
from hcl_cli.stages import embed, pretrain
from hcl_cli.training.log import PLOTS_FOLDER, TrainingLog


def limit_file_size(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: files may not grow past ``limit`` bytes, and a write past it fails with EFBIG instead of killing."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def hcl(*args: str, cwd: Path, limit: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from hcl_cli.cli import main; main()", *args]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit_file_size(limit) if limit else None
    )


def test_a_full_disk_names_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """A tensor file past the disk's room is one line naming the file, and leaves no temporary (hcl's nor safetensors')."""
    script = (
        "import torch\nfrom hcl_cli.artifacts import save_artifact\n"
        f"save_artifact({str(tmp_path / 'x.safetensors')!r}, {{'a': torch.zeros(4096)}}, 'embeddings')\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom hcl_cli.errors import HclError\ntry:\n    exec(sys.argv[1])\nexcept HclError as e:\n    print('HclError:', e)\n",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_file_size(1000),
    )
    assert result.stdout.strip() == f"HclError: cannot write {tmp_path / 'x.safetensors'}: File too large", result.stderr
    assert os.listdir(tmp_path) == []


def one_error_line(stderr: str) -> bool:
    """Whether stderr ends in one error line, after only the stage's status lines (``hcl prepare: reading digits``)."""
    lines = stderr.strip().splitlines()
    return bool(lines) and all(": error: " not in line for line in lines[:-1]) and ": error: " in lines[-1]


def test_every_stage_on_a_full_disk_exits_1_naming_the_file(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    data = prepared_digits(0.95)
    common = ("--device", "cpu")
    model = tmp_path / "m" / "encoder.safetensors"  # the inputs, made in this process: the runs below are the command line's
    pretrain.run(
        PretrainConfig(
            data=str(data), out=str(model.parent), live_dir=str(tmp_path / "live"), epochs=1, batch_size=32, arch="small_cnn", device="cpu"
        )
    )
    embed.run(EmbedConfig(data=str(data), model=str(model), out=str(tmp_path / "e.safetensors"), device="cpu"))
    runs = {
        "prepare": ("prepare", "--out", "p"),
        "pretrain": (
            "pretrain",
            "--data",
            str(data),
            "--out",
            "m2",
            "--live-dir",
            "live2",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--arch",
            "small_cnn",
            *common,
        ),
        "embed": ("embed", "--data", str(data), "--model", "m/encoder.safetensors", "--out", "e2.safetensors", *common),
        "knn-eval": ("knn-eval", "--embeddings", "e.safetensors", "--out", "knn.json", "--k", "5", *common),
        "linear-eval": ("linear-eval", "--embeddings", "e.safetensors", "--out", "linear.json", "--epochs", "2", *common),
    }
    for stage, args in runs.items():
        result = hcl(*args, cwd=tmp_path, limit=64)
        assert result.returncode == 1, (stage, result.stderr)
        assert f"hcl {stage}: error: cannot write " in result.stderr and "File too large" in result.stderr, (stage, result.stderr)
        assert "internal error" not in result.stderr and one_error_line(result.stderr), (stage, result.stderr)
    assert not any(name.startswith(".hcl.") for name in os.listdir(tmp_path)), "no temporary file is left"


def test_outputs_never_replace_an_artifact_of_another_kind(tmp_path: Path) -> None:
    save_artifact(tmp_path / "encoder.safetensors", {"w": torch.zeros(2)}, "encoder")
    (tmp_path / "card.json").write_text(json.dumps({"schema_version": 1, "name": "digits"}))
    (tmp_path / "metrics.json").write_text(json.dumps({"loss": 1.0, "step": 0}))
    (tmp_path / "theirs.json").write_text(json.dumps({"top1": 0.5, "top5": 0.9, "test_size": 10}))
    save_metrics(tmp_path / "knn.json", EvaluationMetrics(0.5, 0.9, 10, {"k": 5}), "knn-eval")
    (tmp_path / "notes.json").write_text("my notes")
    for name, found in [
        ("encoder.json", f"the sidecar of {tmp_path / 'encoder.safetensors'}"),
        ("card.json", "a file hcl has no record of writing"),
        ("metrics.json", "a file hcl has no record of writing"),
        ("notes.json", "a file hcl has no record of writing"),
        ("theirs.json", "a file hcl has no record of writing"),
    ]:
        with pytest.raises(UsageError, match=f"--out {tmp_path / name} exists and is {found}"):
            check_replaceable("--out", tmp_path / name, METRICS_OUTPUTS["knn-eval"])
    with pytest.raises(UsageError, match="exists and is hcl's kNN metrics, not its linear metrics"):
        check_replaceable("--out", tmp_path / "knn.json", METRICS_OUTPUTS["linear-eval"])
    with pytest.raises(UsageError, match="exists and is an hcl 'encoder' artifact"):
        check_replaceable("--out", tmp_path / "encoder.safetensors", EMBEDDINGS_OUTPUT)
    check_replaceable("--out", tmp_path / "knn.json", METRICS_OUTPUTS["knn-eval"])  # its own earlier result
    check_replaceable("--out", tmp_path / "new.json", METRICS_OUTPUTS["knn-eval"])
    check_replaceable("--out", tmp_path / "encoder.safetensors", tensor_output("encoder", ("encoder",)))


def test_linear_eval_refuses_to_write_over_the_encoder_sidecar(tmp_path: Path) -> None:
    save_artifact(tmp_path / "encoder.safetensors", {"w": torch.zeros(2)}, "encoder")
    before = (tmp_path / "encoder.json").read_bytes()
    result = hcl("linear-eval", "--protocol", "fixed", "--embeddings", "e.safetensors", "--out", "encoder.json", cwd=tmp_path)
    assert result.returncode == 2 and "is the sidecar of" in result.stderr, result.stderr
    assert (tmp_path / "encoder.json").read_bytes() == before


def test_pretrain_refuses_outputs_that_would_replace_a_users_or_another_stages_file(
    prepared_digits: Callable[[float], Path], tmp_path: Path
) -> None:
    data = str(prepared_digits(0.95))
    save_artifact(tmp_path / "m" / "encoder.safetensors", {"w": torch.zeros(2)}, "embeddings")
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "metrics.json").write_text(json.dumps({"top1": 0.5, "details": {"k": 20}}))
    args = ("pretrain", "--data", data, "--batch-size", "32", "--arch", "small_cnn", "--device", "cpu", "--epochs", "1")
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    result = hcl(*args, "--out", "m", "--live-dir", "ok", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--out m/encoder.safetensors exists and is an hcl 'embeddings' artifact" in result.stderr
    result = hcl(*args, "--out", "ok", "--live-dir", "live", cwd=tmp_path)
    assert result.returncode == 2 and "--live-dir live/metrics.json exists and is a file hcl has no record of writing" in result.stderr, (
        result.stderr
    )
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    save_artifact(tmp_path / "m" / "encoder.safetensors", {"w": torch.zeros(2)}, "graph encoder")  # pretrain's own output
    (tmp_path / "live" / "metrics.json").unlink()
    result = hcl(*args, "--out", "m", "--live-dir", "live", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "m" / "encoder.json").read_text())["kind"] == "encoder"


def test_a_history_name_from_a_checkpoint_never_leaves_the_log_folder(tmp_path: Path) -> None:
    for name in ("../../x", "a/b", "..", "", "Loss\n", 3):
        with pytest.raises(HclError, match="is not a metric name hcl writes"):
            read_history([{"epoch": 0, name: 1.0}], "ckpt: loop_state.history")
        with pytest.raises(HclError, match="is not a metric name hcl writes"):
            TrainingLog(tmp_path / "live").write([{"epoch": 0, name: 1.0}])  # type: ignore[dict-item]
    assert not (tmp_path / "x").exists() and not (tmp_path / "live" / PLOTS_FOLDER).exists()
    with pytest.raises(HclError, match=r"\[1\]\.epoch must be a non-negative integer"):
        read_history([{"epoch": 0, "loss": 1.0}, {"epoch": True, "loss": 1.0}], "ckpt")
    assert read_history([{"epoch": 0, "loss": 1.0, "loss_hscl": 2.0}], "ckpt") == [{"epoch": 0, "loss": 1.0, "loss_hscl": 2.0}]


def test_a_crafted_checkpoint_history_is_refused_on_resume(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    data = str(prepared_digits(0.95))
    args = ("pretrain", "--data", data, "--out", "m", "--live-dir", "live", "--batch-size", "32", "--arch", "small_cnn", "--device", "cpu")
    assert hcl(*args, "--epochs", "1", cwd=tmp_path).returncode == 0
    store = CheckpointStore(tmp_path / "m" / "checkpoints")
    sidecar = store.latest().with_suffix(".json")  # type: ignore[union-attr]
    values = json.loads(sidecar.read_text())
    values["loop_state"]["history"] = [{"epoch": 0, "../../escaped": 1.0}]
    sidecar.write_text(json.dumps(values))
    result = hcl(*args, "--epochs", "2", "--resume", cwd=tmp_path)
    assert result.returncode == 2 and "'../../escaped' is not a metric name hcl writes" in result.stderr, result.stderr
    assert not list(tmp_path.rglob("escaped*"))


def test_a_deleted_pointer_resumes_from_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    save_artifact(folder / "epoch-0001-step-000000.safetensors", {"rng.torch": torch.zeros(1, dtype=torch.uint8)}, "checkpoint")
    save_artifact(folder / "epoch-0002-step-000000.safetensors", {"rng.torch": torch.zeros(1, dtype=torch.uint8)}, "checkpoint")
    store = CheckpointStore(folder)
    assert not (folder / POINTER_FILE).exists()
    assert store.latest() == folder / "epoch-0002-step-000000.safetensors"
    (folder / "epoch-0002-step-000000.safetensors").write_bytes(b"half a write")
    assert store.latest() == folder / "epoch-0001-step-000000.safetensors", "an incomplete pair is passed over"
    (folder / "epoch-0001-step-000000.json").write_text("{}")
    with pytest.raises(HclError, match=f"{folder} has no {POINTER_FILE} and none of its checkpoints is complete"):
        store.latest()


def test_a_first_checkpoint_killed_mid_write_leaves_nothing_to_resume(tmp_path: Path) -> None:
    """A single incomplete checkpoint is the first save cut short: there is nothing to resume, so the run starts over."""
    folder = tmp_path / "checkpoints"
    save_artifact(folder / "epoch-0000-step-000003.safetensors", {"rng.torch": torch.zeros(1, dtype=torch.uint8)}, "checkpoint")
    (folder / "epoch-0000-step-000003.json").unlink()
    assert CheckpointStore(folder).latest() is None


def test_booleans_are_not_integers_in_any_artifact_field(tmp_path: Path) -> None:
    save_artifact(tmp_path / "e.safetensors", {"a": torch.zeros(1, 2)}, "embeddings")
    values = json.loads((tmp_path / "e.json").read_text())
    for field, value in (("schema_version", True), ("tensors", {"a": {"dtype": "float32", "shape": [True, 2]}})):
        (tmp_path / "e.json").write_text(json.dumps({**values, field: value}))
        with pytest.raises(HclError):
            load_artifact(tmp_path / "e.safetensors", "embeddings", {})
    from hcl_cli.image.card import load_card

    card = {"schema_version": True, "name": "d", "classes": ["a", "b"], "num_classes": 2, "counts": {"train": 1, "test": 1}}
    card |= {"image_shape": [1, 2, 2], "mean": [0.5], "std": [0.2]}
    (tmp_path / "card.json").write_text(json.dumps(card))
    with pytest.raises(HclError, match="schema version True is not supported"):
        load_card(tmp_path)
    (tmp_path / "card.json").write_text(json.dumps({**card, "schema_version": 1, "mean": [True]}))
    with pytest.raises(HclError, match="'mean' must be a list of 1 numbers"):
        load_card(tmp_path)


def test_a_fifo_where_a_file_is_expected_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(HclError, match="is not a regular file"):
        read_json(tmp_path / "fifo", what="metrics")
    started = time.monotonic()
    params = hcl("knn-eval", "--params", "fifo", "--out", "k.json", cwd=tmp_path, timeout=60)
    embeddings = hcl("knn-eval", "--embeddings", "fifo", "--out", "k.json", cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 50
    assert params.returncode == 2 and "not a regular file" in params.stderr, params.stderr
    assert embeddings.returncode == 2 and "internal error" not in embeddings.stderr, embeddings.stderr


HOOKED_HCL = """
import atexit, contextlib, sys, threading
hooks = set(sys.argv[1].split(","))
released = threading.Semaphore(0)
threading.Thread(target=lambda: [released.release() for _ in sys.stdin], daemon=True).start()

def hook(name):
    # say NAME on stdout, then wait for a line on stdin (polling, so that a signal's handler runs meanwhile)
    print("HOOK", name, flush=True)
    while not released.acquire(timeout=0.01):
        pass

import hcl_cli.artifacts.tensors as tensors
import hcl_cli.training.loop as loop
import hcl_cli.training.signals as signals
if "first" in hooks:  # inside the first step of training (before it ends)
    add = loop.EpochTotals.add
    def first_add(self, result, add=add):
        if not getattr(loop, "_hooked", False):
            loop._hooked = True
            hook("first")
        return add(self, result)
    loop.EpochTotals.add = first_add
if "step" in hooks:  # after each step
    step_done = loop.RunClock.step_done
    loop.RunClock.step_done = lambda self, *args: (hook("step"), step_done(self, *args))[1]
if "save" in hooks:  # a checkpoint's sidecar, after its tensor file is in place
    write_json = tensors.write_json
    tensors.write_json = lambda path, obj: (hook("save") if "checkpoints" in str(path) else None, write_json(path, obj))[1]
if "exit" in hooks:  # an exit handler registered once the command runs, as torch's are
    policy = signals.interrupt_policy
    @contextlib.contextmanager
    def hooked_policy(prog):
        with policy(prog):
            atexit.register(hook, "exit")
            yield
    signals.interrupt_policy = hooked_policy
from hcl_cli.cli import main
main(sys.argv[2:])
"""


@dataclass
class Hooked:
    returncode: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "error:" in line]


def run_hooked(plan: list[tuple[str, int, bool]], *args: str, cwd: Path) -> Hooked:
    """Run ``hcl ARGS`` with the hooks that ``plan`` names; at the hooks in turn that ``plan`` lists (``(name, signals, held)``),
    send that many SIGINTs and then let the process go on. Event-driven: a hook waits for its answer, and after each signal
    that is not held (its hook is not inside a write) the test waits until the process has said something on stderr or ended."""
    hooks = ",".join(sorted({name for name, _, _ in plan}))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", HOOKED_HCL, hooks, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stderr: list[str] = []
    said = threading.Event()

    def pump(stream: IO[str]) -> None:
        for line in stream:
            stderr.append(line)
            said.set()
        said.set()

    reader = threading.Thread(target=pump, args=(process.stderr,), daemon=True)
    reader.start()
    stdout, pending = [], list(plan)
    for line in process.stdout:
        stdout.append(line)
        if not line.startswith("HOOK "):
            continue
        if pending and pending[0][0] == line.split()[1]:
            _, signals, held = pending.pop(0)
            for _ in range(signals):
                said.clear()
                process.send_signal(signal.SIGINT)
                if not held:
                    assert said.wait(120), "no answer to SIGINT in 120 s"
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write("go\n")
            process.stdin.flush()
    process.wait(120)
    reader.join(120)
    assert not pending, f"hooks never reached: {pending}; stderr: {''.join(stderr)}"
    return Hooked(process.returncode, "".join(stdout), "".join(stderr))


def test_ctrl_c_while_the_process_shuts_down_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """A Ctrl-C after the run's last line (exit handlers still running) prints no traceback."""
    result = run_hooked([("exit", 1, False)], "params", cwd=tmp_path)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "hcl params: error: interrupted"


def assert_checkpoints_whole(folder: Path) -> None:
    """No temporary file; every checkpoint has its sidecar, bound to it by sha256; latest.json, when there, names one."""
    names = sorted(os.listdir(folder)) if folder.exists() else []
    assert not [name for name in names if name.startswith(".") and name != RECORD_FILE], names
    tensors = [name for name in names if name.endswith(".safetensors")]
    for name in tensors:
        load_artifact(folder / name, "checkpoint", {})
    if (folder / POINTER_FILE).exists():
        assert read_json(folder / POINTER_FILE)["checkpoint"] in tensors


TWICE = {
    # a second Ctrl-C while the checkpoint the first one asked for is being written: the save ends whole, then one line
    "during the checkpoint save": ([("step", 1, False), ("save", 1, True), ("exit", 0, False)], "interrupted"),
    # a second Ctrl-C while the process exits after the stop's line: nothing more is printed
    "during the exit": ([("step", 1, False), ("exit", 1, False)], "stopped by SIGINT (in epoch 1"),
    # the first Ctrl-C in the first step stops at once; a second one while the process exits
    "in the first step, then during the exit": ([("first", 1, False), ("exit", 1, False)], "stopped by SIGINT during the first step"),
    # a second Ctrl-C before the save the first one asked for: at once, nothing saved
    "before the save": ([("step", 2, False)], "interrupted"),
    # both during a save, then one more while the process exits (two signals that come before either is handled arrive
    # as one, which stops the run with a checkpoint: either line is right)
    "both during a save": ([("save", 2, True), ("exit", 1, False)], ""),
}


@pytest.mark.parametrize("moment", list(TWICE))
def test_ctrl_c_twice_during_pretrain_is_one_line_exit_130_and_whole_files(
    prepared_digits: Callable[[float], Path], tmp_path: Path, moment: str
) -> None:
    """However the two Ctrl-Cs fall, pretrain exits 130 with exactly one error line, no traceback, and whole checkpoints."""
    plan, line = TWICE[moment]
    data = str(prepared_digits(0.95))
    args = ("pretrain", "--data", data, "--arch", "small_cnn", "--batch-size", "16", "--epochs", "3", "--device", "cpu")
    result = run_hooked(plan, *args, "--out", "m", "--live-dir", "live", cwd=tmp_path)
    assert result.returncode == 130, result.stderr
    assert len(result.error_lines) == 1 and line in result.error_lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert_checkpoints_whole(tmp_path / "m" / "checkpoints")
    assert not [name for name in os.listdir(tmp_path / "live") if name.startswith(".")]


def test_a_second_ctrl_c_exits_at_once_with_one_line(tmp_path: Path) -> None:
    """The first Ctrl-C starts the clean-up; a second one during it ends the process with one line."""
    code = (
        "import sys, time\nfrom hcl_cli.training.signals import interrupt_policy\nwith interrupt_policy('hcl x'):\n"
        "    try:\n        print('ready', flush=True)\n        time.sleep(30)\n    finally:\n        print('cleaning', flush=True)\n        time.sleep(30)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGINT)
    assert process.stdout.readline().strip() == "cleaning"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130 and stderr.strip() == "hcl x: error: interrupted", stderr


def test_a_name_with_a_newline_cannot_forge_a_line(tmp_path: Path) -> None:
    forged = "p\nhcl prepare: wrote data/prepared: digits"
    assert shown(forged) == "p\\nhcl prepare: wrote data/prepared: digits"
    result = hcl("prepare", "--out", forged, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()  # reading, writing, wrote
    assert len(lines) == 3 and "p\\nhcl prepare" in lines[-1]
    assert not any(line.startswith("hcl prepare: wrote data/prepared") for line in lines), "no forged line"


def test_atomic_writes_clean_up_on_a_full_disk_and_on_a_writers_own_error(tmp_path: Path) -> None:
    class Boom(RuntimeError):
        pass

    with pytest.raises(HclError, match=r"cannot write .*x\.txt: No space left on device"):
        with atomic_path(tmp_path / "x.txt"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(Boom):
        with atomic_path(tmp_path / "x.txt"):
            raise Boom("not a write failure")
    write_text(tmp_path / "y.txt", "ok")
    assert sorted(os.listdir(tmp_path)) == ["y.txt"]


def test_a_fifo_in_place_of_a_training_log_is_refused_by_the_report(tmp_path: Path) -> None:
    from hcl_cli.report.figures import training_figures

    os.mkfifo(tmp_path / "loss.tsv")
    with pytest.raises(HclError, match="loss.tsv is not a regular file"):
        training_figures(tmp_path)


def test_report_reads_the_curves_whether_plots_is_the_dvclive_folder_or_pretrains_live_dir(tmp_path: Path) -> None:
    """``--plots dvclive/pretrain`` (pretrain's --live-dir) is read, not silently found empty (nor a FIFO in it skipped)."""
    from hcl_cli.report.figures import pretrain_logs, training_figures

    TrainingLog(tmp_path / "dvclive" / "pretrain").write([{"epoch": 0, "loss": 1.0}, {"epoch": 1, "loss": 0.5}])
    for plots in (tmp_path / "dvclive", tmp_path / "dvclive" / "pretrain"):
        assert pretrain_logs(plots) == tmp_path / "dvclive" / "pretrain" / PLOTS_FOLDER
        assert len(training_figures(pretrain_logs(plots))) == 1
    loss = tmp_path / "dvclive" / "pretrain" / PLOTS_FOLDER / "loss.tsv"
    loss.unlink()
    os.mkfifo(loss)
    with pytest.raises(HclError, match="loss.tsv is not a regular file"):
        training_figures(pretrain_logs(tmp_path / "dvclive" / "pretrain"))


def test_report_refuses_an_input_of_the_wrong_kind_rather_than_leaving_it_out(tmp_path: Path) -> None:
    from hcl_cli.stages.report import check_kind

    os.mkfifo(tmp_path / "encoder.safetensors")
    (tmp_path / "file").write_text("x")
    with pytest.raises(HclError, match=r"--model .*encoder.safetensors is not a regular file"):
        check_kind("--model", tmp_path / "encoder.safetensors", folder=False)
    with pytest.raises(HclError, match=r"--embeddings .* is not a regular file"):
        check_kind("--embeddings", tmp_path, folder=False)
    with pytest.raises(HclError, match=r"--data .*file is not a folder"):
        check_kind("--data", tmp_path / "file", folder=True)
    check_kind("--model", tmp_path / "missing.safetensors", folder=False)  # absent: the report goes without it


def test_image_options_on_graphs_are_refused_not_ignored() -> None:
    from hcl_cli.config.pretrain import PretrainConfig

    with pytest.raises(UsageError, match=r"--blur \(pretrain.blur\) true is for images and does nothing on g's graphs"):
        PretrainConfig(blur=True).check_modality("graph", "g's graphs")
    with pytest.raises(UsageError, match=r"--projection-dim \(pretrain.projection_dim\) 64 is for images"):
        PretrainConfig(projection_dim=64).check_modality("graph", "g's graphs")
    PretrainConfig(gin_layers=5).check_modality("graph", "g's graphs")
    PretrainConfig(blur=True).check_modality("image", "d's images")


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1e11 bytes"),
    ],
)
def test_an_allocation_too_large_is_a_one_line_failure_not_an_internal_error(
    error: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hcl_cli import cli
    from hcl_cli.config.prepare import PrepareConfig

    def allocate(config: PrepareConfig) -> None:
        raise error

    monkeypatch.setitem(cli.STAGE_RUNNERS, PrepareConfig, allocate)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["prepare", "--out", "p"])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and err.count("\n") == 1, err
    assert err.startswith("hcl prepare: error: out of memory") and "internal error" not in err


def test_a_tu_node_label_of_two_billion_is_a_one_line_failure(tmp_path: Path) -> None:
    """One-hot node labels of a TU file with a huge label ask for ~128 GB: exit 1 with one line, never an internal error."""
    folder = tmp_path / "tu"
    folder.mkdir()
    files = {
        "A": "1, 2\n2, 1\n3, 4\n4, 3\n",
        "graph_indicator": "1\n1\n2\n2\n",
        "graph_labels": "1\n2\n",
        "node_labels": "0\n1\n0\n2000000000\n",
    }
    for kind, text in files.items():
        (folder / f"TOY_{kind}.txt").write_text(text)
    result = hcl("prepare", "--dataset", "tu", "--path", str(folder), "--name", "TOY", "--out", "p", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert one_error_line(result.stderr) and "internal error" not in result.stderr, result.stderr
    assert not (tmp_path / "p").exists()


def test_a_truncated_checkpoint_under_dvcs_resume_says_how_to_go_on(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    """Issue 41, item 9: dvc.yaml's ``--resume --restart-on-change`` on a truncated checkpoint names the way forward."""
    data = str(prepared_digits(0.95))
    args = ("pretrain", "--data", data, "--out", "m", "--live-dir", "live", "--batch-size", "32", "--arch", "small_cnn", "--device", "cpu")
    assert hcl(*args, "--epochs", "1", cwd=tmp_path).returncode == 0
    checkpoint = CheckpointStore(tmp_path / "m" / "checkpoints").latest()
    assert checkpoint is not None
    whole = checkpoint.read_bytes()
    for cut, says in (
        (100, "is not the checkpoint hcl wrote there (damaged, or changed since"),
        (len(whole) - 8, "to go on, move m/checkpoints aside"),
    ):
        checkpoint.write_bytes(whole[:cut])
        result = hcl(*args, "--epochs", "2", "--resume", "--restart-on-change", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        assert says in result.stderr and ("move it away" in result.stderr or "start over" in result.stderr), result.stderr
    (tmp_path / "m" / "checkpoints").rename(tmp_path / "aside")
    assert hcl(*args, "--epochs", "2", "--resume", "--restart-on-change", cwd=tmp_path).returncode == 0, "moved aside, it starts over"


def test_a_deleted_working_directory_is_one_line_of_hcl(tmp_path: Path) -> None:
    """Issue 41, item 10: checked before any stage imports torch, which would die in its import with no line of hcl's."""
    gone = tmp_path / "gone"
    script = (  # as the console script starts: no "" (the working directory) on sys.path
        f"import os, sys; sys.path[:] = [p for p in sys.path if p]; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
        "from hcl_cli.cli import main; main(sys.argv[1:])"
    )
    for args in (("knn-eval", "--embeddings", "e.safetensors"), ("pretrain", "--epochs", "1"), ("report",)):
        gone.mkdir()
        result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            f"hcl {args[0]}: error: the working directory cannot be read (No such file or directory; deleted?): "
            "cd to a folder that exists and run again"
        ), result.stderr
