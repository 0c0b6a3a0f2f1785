"""SIGTERM and SIGHUP stop every command as Ctrl-C does (issue 32): the clean-ups run, one line, exit 128 + the signal;
and the lock's own failures name the lock file."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hcl_cli.interrupts import STOP_SIGNALS
from hcl_cli.training.signals import Interrupted, interrupt_policy
from tests.hostile.runs import as_from_a_terminal

HOLDING = """
import sys, time
from hcl_cli.locking import locked_folder
from hcl_cli.training.signals import Interrupted, exit_with, interrupt_policy
try:
    with interrupt_policy("hcl x"):
        with locked_folder("out", "x"):
            print("ready", flush=True)
            time.sleep(30)
except Interrupted as stop:
    exit_with("hcl x", str(stop), stop.exit_code)
"""
"""A command as the command line runs it (:func:`hcl_cli.cli.main`'s handling of a stop), holding a lock until stopped."""


def start_holding(cwd: Path, ignore: int | None = None) -> subprocess.Popen[str]:
    """:data:`HOLDING` in ``cwd``, started as from a terminal with ``ignore`` ignored (as ``nohup`` starts a command with
    SIGHUP), once it holds."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDING],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal(ignore),
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


@pytest.mark.parametrize(("signum", "line"), [(signal.SIGTERM, "interrupted by SIGTERM"), (signal.SIGHUP, "interrupted by SIGHUP")])
def test_sigterm_and_sighup_stop_a_command_as_ctrl_c_does(tmp_path: Path, signum: int, line: str) -> None:
    """They killed every stage but pretrain by the signal itself: no line, and a stale lock (or a staging folder, a
    temporary file) left behind."""
    process = start_holding(tmp_path)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + signum and stderr.strip() == f"hcl x: error: {line}", stderr
    assert os.listdir(tmp_path / "out") == []


def test_sighup_stays_ignored_under_nohup(tmp_path: Path) -> None:
    process = start_holding(tmp_path, ignore=signal.SIGHUP)
    process.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130 and stderr.strip() == "hcl x: error: interrupted", stderr


def test_a_clean_up_that_fails_after_a_stop_does_not_hide_the_stop() -> None:
    """A report stopped while matplotlib imported numpy.ma said "internal error: AttributeError" from its clean-up."""
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        with pytest.raises(Interrupted) as stop:
            with interrupt_policy("hcl x"):
                try:
                    raise Interrupted(signal.SIGTERM)
                finally:
                    raise AttributeError("module 'numpy' has no attribute 'ma'")
    finally:
        for signum, handler in handlers.items():  # pytest's, in place of the policy's
            signal.signal(signum, handler)
    assert stop.value.exit_code == 143 and str(stop.value) == "interrupted by SIGTERM"


def test_a_full_disk_while_writing_the_lock_names_the_lock_file(tmp_path: Path) -> None:
    """The lock's close re-raised a nameless OSError over the error: "cannot write to standard output"."""

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8, 8))

    code = "from hcl_cli.locking import locked_folder\nwith locked_folder('out', 'pretrain'):\n    pass\n"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, preexec_fn=small_files)
    assert result.stderr.strip().splitlines()[-1] == "hcl_cli.errors.HclError: cannot write out/.hcl.lock: File too large", result.stderr
    assert os.listdir(tmp_path / "out") == []


COMPILED_FIRST_STEP = """
import signal, sys
from torch._inductor.exc import InductorError
from hcl_cli import cli
from hcl_cli.config import PretrainConfig
from hcl_cli.training.signals import TrainingInterrupted, stop_on_signals

def compiled_first_step(config):
    with stop_on_signals() as stop:
        stop.at_once = "during the first step, at once (nothing was saved)"
        try:
            signal.raise_signal(signal.SIGTERM)  # while torch.compile compiles the first step
        except TrainingInterrupted as stopped:
            stopped.args = (f"{stopped.args[0]}\\n\\nWhile executing %input_11",)  # as torch/fx/interpreter.py adds its node
            if sys.argv[2] == "wrapped":  # as torch/_inductor/compile_fx.py wraps what a compilation raised
                raise InductorError(stopped, None).with_traceback(stopped.__traceback__) from None
        raise RuntimeError("SpeculationLog diverged at index 413")  # dynamo swallowed the stop, then failed on its own

cli.STAGE_RUNNERS[PretrainConfig] = compiled_first_step
cli.main(sys.argv[1:2])
"""
"""``hcl pretrain`` whose first step, compiling, is stopped by SIGTERM: the stop comes back wrapped in Inductor's error, or
dynamo swallows it and fails with an error of its own."""


@pytest.mark.parametrize("library", ["wrapped", "swallowed"])
def test_a_stop_that_torch_compile_wrapped_or_swallowed_is_the_stop_and_not_an_internal_error(tmp_path: Path, library: str) -> None:
    """SIGTERM during ``--compile true``'s first step said ``internal error: InductorError: TrainingInterrupted: ...`` (or
    ``internal error: SpeculationLogDivergence: ...``)."""
    command = [sys.executable, "-c", COMPILED_FIRST_STEP, "pretrain", library]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 143, done.stderr
    assert done.stderr == "hcl pretrain: error: stopped by SIGTERM during the first step, at once (nothing was saved)\n"
