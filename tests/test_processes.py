"""An interrupted test leaves no process of the command it ran: Ctrl-C on ``pytest`` left its ``dvc repro`` running (issue 54)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import FrameType

import pytest
from test_pipeline import run


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead and not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_an_interrupted_helper_kills_what_its_command_started(tmp_path: Path) -> None:
    """``tests/test_pipeline.py``'s helper runs ``dvc repro``, which runs the stages: a Ctrl-C (here a timer's
    KeyboardInterrupt) while it waits kills the command and every process it started, not the command alone."""
    started = tmp_path / "started"
    command = ["bash", "-c", f"sleep 300 & echo $! > {started}; wait"]  # as dvc repro waits on a stage

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(command, tmp_path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    stage = int(started.read_text())
    deadline = time.monotonic() + 10
    while alive(stage) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not alive(stage), "the command's child outlived the interrupted test"
    finally:
        if alive(stage):
            os.kill(stage, signal.SIGKILL)
