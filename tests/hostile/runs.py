"""Runs that are more than one plain ``hcl`` call: signals sent mid-run, kills, held locks, two runs at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hcl_cli.interrupts import STOP_SIGNALS

from .harness import TIMEOUT, Result, Runner, hcl, hcl_command


def as_from_a_terminal(ignored: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: every stop signal at its default action, as a terminal starts a command, except ``ignored``
    (as ``nohup`` starts it with SIGHUP). The suite's own dispositions (under nohup, in the background) are not inherited."""

    def start() -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN if signum == ignored else signal.SIG_DFL)

    return start


def interrupted(signals: Sequence[int], after_line: str = "hcl pretrain: ", extra: float = 0.0, gap: float = 0.3) -> Runner:
    """Start ``hcl`` and send ``signals`` once its stdout/stderr shows ``after_line`` (each ``gap`` seconds apart)."""

    def run(work: Path, args: Sequence[str]) -> Result[str]:
        process = subprocess.Popen(
            [hcl_command(), *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=as_from_a_terminal()
        )
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(after_line):
                time.sleep(extra)
                for signum in signals:
                    process.send_signal(signum)
                    time.sleep(gap)
                break
        try:
            rest, _ = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            rest, _ = process.communicate()
            return subprocess.CompletedProcess(args, -1, "", "hang after the signal")
        text = "".join(lines) + rest
        errors = "\n".join(line for line in text.splitlines() if "error" in line.lower() or "Traceback" in line)
        return subprocess.CompletedProcess(args, process.returncode, text, errors)

    return run


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (its ``SigCgt`` mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(mask, 16) >> (signum - 1) & 1)


def signalled(signum: int, when: str | None = None, extra: float = 0.0, patience: float = 4.0, nohup: bool = False) -> Runner:
    """Start ``hcl`` and send it ``signum`` once it handles the stop signals (its SIGTERM handler is in place, or
    ``patience`` seconds have passed) and, when ``when`` is a glob, a path matching it exists in the case's folder
    (a staging folder: the stage is writing), then ``extra`` seconds more; then wait for its answer. With ``nohup``
    the process starts with ``signum`` ignored, as ``nohup`` starts it with SIGHUP."""

    def run(work: Path, args: Sequence[str]) -> Result[str]:
        process = subprocess.Popen(
            [hcl_command(), *args],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_from_a_terminal(signum if nohup else None),
        )
        started = time.monotonic()
        while process.poll() is None and time.monotonic() - started < TIMEOUT:
            ready = catches(process.pid, signal.SIGTERM) or time.monotonic() - started > patience
            if ready and (when is None or any(work.glob(when))):
                break
            time.sleep(0.01)
        time.sleep(extra)
        process.send_signal(signum)
        try:
            out, err = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return subprocess.CompletedProcess(args, -1, "", "hang after the signal")
        return subprocess.CompletedProcess(args, process.returncode, out, err)

    return run


def killed_then_resumed(work: Path, args: Sequence[str]) -> Result[str]:
    """kill -9 a pretrain after its first checkpoint, then ``--resume`` it: the second run must finish."""
    process = subprocess.Popen(
        [hcl_command(), *args, "--epochs", "4", "--checkpoint-every", "1"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not (work / "m/checkpoints/latest.json").exists() and process.poll() is None:
        time.sleep(0.05)
    process.kill()
    process.wait()
    return hcl(work, [*args, "--epochs", "4", "--checkpoint-every", "1", "--resume"])


def while_locked(work: Path, args: Sequence[str]) -> Result[str]:
    """Run ``hcl`` while another process holds the output folder's lock."""
    hold = "import sys, time\nfrom hcl_cli.locking import locked_folder\nwith locked_folder(sys.argv[1], 'pretrain'):\n    print('held', flush=True)\n    time.sleep(60)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, "m"], cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        return hcl(work, args)
    finally:
        holder.kill()
        holder.wait()


def two_at_once(work: Path, args: Sequence[str]) -> Result[str]:
    """Two identical runs started together; the answer is the second one's, and they must not both write."""
    first = subprocess.Popen([hcl_command(), *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = hcl(work, args)
    out, err = first.communicate(timeout=TIMEOUT)
    codes = sorted([first.returncode, second.returncode])
    return subprocess.CompletedProcess(args, codes[-1] if codes[0] == 0 else codes[0], out + second.stdout, err + second.stderr)


def then_again(run: Runner) -> Runner:
    """``run``, then the same command once more, plainly: the answer is the second run's (a rerun after a stop must work
    and clean up what the first one left)."""

    def again(work: Path, args: Sequence[str]) -> Result[str]:
        run(work, args)
        return hcl(work, args)

    return again
