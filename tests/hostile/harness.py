"""What a hostile case is, how it runs against the installed ``hcl``, and how its answer is judged.

Every case starts from a copy of one tiny digits pipeline (:func:`build_pipeline`: prepare, a
one-epoch small-CNN pretrain, embed, knn-eval, linear-eval) and runs ``hcl`` in it. The answer is
right when the exit code is one of the case's (0 success, 1 runtime error, 2 usage error, 128 + N
a signal N; never death by the signal itself), a failure prints exactly one ``error:`` line on
stderr with no traceback and no "internal error", and the case's own check holds (a file left
unchanged, nothing written outside, nothing left behind).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 120.0
"""Seconds an ``hcl`` run may take before it counts as a hang."""
HUGE = "9" * 300
ENCODER = "models/encoder.safetensors"
EMBEDDINGS = "data/embeddings.safetensors"
PREPARED = "data/prepared"
LIVE = "dvclive/pretrain"
CPU = ("--device", "cpu")
TINY_PRETRAIN = ("pretrain", "--data", PREPARED, "--arch", "small_cnn", "--batch-size", "32", "--epochs", "1", *CPU)
PRETRAIN = (*TINY_PRETRAIN, "--out", "m", "--live-dir", "live")
RESUME = (*TINY_PRETRAIN, "--out", "models", "--live-dir", LIVE, "--epochs", "2", "--resume")
KNN = ("knn-eval", "--embeddings", EMBEDDINGS, "--k", "5", "--out", "k.json", *CPU)
LINEAR = ("linear-eval", "--embeddings", EMBEDDINGS, "--out", "l.json", "--epochs", "2", *CPU)
EMBED = ("embed", "--data", PREPARED, "--model", ENCODER, "--out", "e.safetensors", *CPU)
REPORT = (
    "report",
    "--data",
    PREPARED,
    "--model",
    ENCODER,
    "--embeddings",
    EMBEDDINGS,
    "--metrics",
    "metrics",
    "--plots",
    LIVE,
    "--out",
    "r/report.md",
)

Result = subprocess.CompletedProcess
Setup = Callable[[Path], None]
Check = Callable[[Path, "Result[str]"], str | None]
Runner = Callable[[Path, Sequence[str]], "Result[str]"]


@dataclass(frozen=True)
class Case:
    """One hostile input: the ``hcl`` arguments, the exit codes that are right, and what else must hold.

    ``setup`` prepares the copy of the pipeline, ``run`` replaces the plain run (signals, concurrency),
    ``fsize_limit`` caps the size of a file ``hcl`` writes (a full disk), ``stdout`` sends standard
    output to a file (``/dev/full``), and ``check`` says what is wrong beyond the exit code, or None.
    """

    name: str
    args: Sequence[str]
    expect: tuple[int, ...]
    setup: Setup | None = None
    check: Check | None = None
    run: Runner | None = None
    fsize_limit: int | None = None
    stdout: str | None = None


def usage(name: str, *args: str, **details: object) -> Case:
    """A case whose right answer is a usage error (exit 2)."""
    return Case(name, args, (2,), **details)  # type: ignore[arg-type]


def failure(name: str, *args: str, **details: object) -> Case:
    """A case whose right answer is a runtime error (exit 1)."""
    return Case(name, args, (1,), **details)  # type: ignore[arg-type]


def success(name: str, *args: str, **details: object) -> Case:
    """A case whose right answer is success (exit 0)."""
    return Case(name, args, (0,), **details)  # type: ignore[arg-type]


def hcl_command() -> str:
    """The ``hcl`` under test: the command ``HCL_UNDER_TEST`` names (another version, to compare), else the one on ``PATH``."""
    return os.environ.get("HCL_UNDER_TEST") or shutil.which("hcl") or "hcl"


def hcl(
    work: Path, args: Sequence[str], *, fsize_limit: int | None = None, stdout_path: str | None = None, timeout: float = TIMEOUT
) -> Result[str]:
    """Run ``hcl`` in ``work``; a run past ``timeout`` counts as a hang (exit code -1)."""

    def limit() -> None:
        if fsize_limit is not None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE  # noqa: SIM115 - closed below
    try:
        return subprocess.run(
            [hcl_command(), *args], cwd=work, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout, preexec_fn=limit
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", f"hang: no answer in {timeout:.0f} s")
    finally:
        if stdout_path:
            out.close()  # type: ignore[union-attr]


def run_case(case: Case, work: Path) -> str:
    """Set up and run ``case`` in ``work`` (a copy of the pipeline); ``pass``, or what was wrong."""
    if case.setup is not None:
        case.setup(work)
    if case.run is not None:
        result = case.run(work, case.args)
    else:
        result = hcl(work, case.args, fsize_limit=case.fsize_limit, stdout_path=case.stdout)
    return verdict(case, result, work)


def verdict(case: Case, result: Result[str], work: Path) -> str:
    """``pass``, or why not."""
    if result.returncode not in case.expect:
        last = (result.stderr.strip().splitlines() or [""])[-1][:300]
        return f"exit {result.returncode}, expected {'/'.join(map(str, case.expect))}: {last}"
    stderr = result.stderr
    if "Traceback" in stderr or "internal error" in stderr:
        return f"traceback or internal error: {stderr.strip()[-300:]}"
    if result.returncode != 0:
        error_lines = [line for line in stderr.splitlines() if "error:" in line]
        if len(error_lines) != 1:
            return f"{len(error_lines)} error lines on stderr: {stderr.strip()[-300:]}"
    if case.check is not None:
        failed = case.check(work, result)
        if failed:
            return failed
    return "pass"


def build_pipeline(base: Path) -> None:
    """The tiny digits pipeline every case starts from, in ``base``."""
    steps = [
        ("prepare", "--out", PREPARED, "--test-fraction", "0.9"),
        (*TINY_PRETRAIN, "--out", "models", "--live-dir", LIVE),
        ("embed", "--data", PREPARED, "--model", ENCODER, "--out", EMBEDDINGS, *CPU),
        ("knn-eval", "--embeddings", EMBEDDINGS, "--out", "metrics/knn.json", "--k", "5", *CPU),
        ("linear-eval", "--embeddings", EMBEDDINGS, "--out", "metrics/linear.json", "--epochs", "5", *CPU),
    ]
    for step in steps:
        result = hcl(base, step)
        if result.returncode != 0:
            raise RuntimeError(f"setting up the pipeline failed: hcl {' '.join(step)}: {result.stderr.strip()}")
