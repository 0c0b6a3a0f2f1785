"""Where and when a run happened: time, machine, device and the git commit of the working folder.

What a run did on its device (:func:`run_record`) goes into its declared outputs; when, on which host and from which
commit (:func:`occasion_record`) into a record beside them that DVC does not track, so that a rerun's outputs are byte
for byte the same.

A run is *dirty* only when what it ran differs from its commit: a tracked file changed that is
not one DVC writes. ``dvc.lock`` and the outputs dvc.yaml declares (``outs``, ``metrics``,
``plots``; some are tracked in git, like ``metrics/*.json``) change whenever the pipeline runs,
so a fresh clone's ``dvc repro`` on an unchanged commit is not called dirty; the files that do
differ are recorded by name.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import torch
import yaml

from hcl_cli import __version__
from hcl_cli.versions import installed

DVC_WRITES = ("dvc.lock",)
"""Files DVC itself rewrites on every run, beside the outputs dvc.yaml declares."""


def pipeline_outputs(root: Path) -> list[str]:
    """The paths (relative to ``root``) that ``root/dvc.yaml``'s stages declare as outs, metrics or plots, and dvc.lock.

    Empty when there is no dvc.yaml (or it cannot be read): then every changed file counts.
    """
    try:
        stages = (yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages") or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
        return []
    outputs = list(DVC_WRITES)
    for stage in stages.values():
        if not isinstance(stage, dict):
            continue
        for kind in ("outs", "metrics", "plots"):
            for entry in stage.get(kind) or []:
                outputs.extend([entry] if isinstance(entry, str) else list(entry) if isinstance(entry, dict) else [])
    return outputs


def is_output(path: str, outputs: list[str]) -> bool:
    """Whether ``path`` is one of ``outputs`` or lies inside one of them (a declared folder)."""
    parts = PurePosixPath(path).parts
    return any(parts[: len(PurePosixPath(output).parts)] == PurePosixPath(output).parts for output in outputs)


def changed_files() -> list[str] | None:
    """Tracked files of the working folder's git repository that differ from HEAD, less those DVC writes; None outside a repository."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False, timeout=10)
        status = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=no"], capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if top.returncode != 0 or status.returncode != 0:
        return None
    outputs = pipeline_outputs(Path(top.stdout.strip()))
    entries = status.stdout.split("\0")
    changed: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename or copy: the original path follows as its own entry
            index += 1
        path = entry[3:]
        if not is_output(path, outputs):
            changed.append(path)
    return sorted(changed)


def git_head() -> str | None:
    """The commit checked out in the working folder's git repository; None outside one."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() if head.returncode == 0 else None


def code_state() -> dict[str, Any]:
    """The code a run runs: ``git_commit``, the commit with ``+dirty`` when tracked code or params differ from it (None
    outside a git repository), and ``git_changed``, those files (DVC's outputs left out)."""
    head, changed = git_head(), changed_files()
    return {"git_commit": None if head is None else head + ("+dirty" if changed else ""), "git_changed": changed}


def run_record(device: torch.device, steps: int, planned_steps: int) -> dict[str, Any]:
    """What a run did, as a function of its inputs on one machine: its device and ``steps`` of its ``planned_steps``.

    ``steps`` < ``planned_steps``: ``--max-steps`` stopped the run early (see :func:`describe_extent`). No time, host or
    commit: the encoder's sidecar is a declared DVC output, and a rerun must write it byte for byte the same, or DVC reruns
    everything downstream (:func:`occasion_record` keeps those, apart).
    """
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {"device": {"type": device.type, "name": name}, "steps": steps, "planned_steps": planned_steps}


def occasion_record(started: datetime.datetime) -> dict[str, Any]:
    """When, where and from which code a run that started at ``started`` ran, ending now: ``started``, ``finished``,
    ``seconds``, ``host``, ``git_commit`` (with ``+dirty`` when tracked code or params differ from it) and ``git_changed``
    (those files, DVC's outputs left out; None outside a git repository). Kept out of every declared output."""
    finished = now()
    return {
        "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "seconds": round((finished - started).total_seconds(), 1),
        "host": platform.node(),
        **code_state(),
    }


def occasion_path(artifact: Path) -> Path:
    """Where :func:`occasion_record` of the run that wrote ``artifact`` (``NAME.safetensors``) lies: ``NAME.run.json``."""
    return artifact.with_name(f"{artifact.stem}.run.json")


def describe_extent(record: dict[str, Any] | None, epochs: int | None) -> str:
    """How far a run went, from its run record: ``60 epochs``, or ``stopped at step 120 of 300 (--max-steps)``."""
    steps, planned = (record or {}).get("steps"), (record or {}).get("planned_steps")
    if isinstance(steps, int) and isinstance(planned, int) and steps < planned:
        return f"stopped at step {steps} of {planned} (--max-steps)"
    return f"{epochs if epochs is not None else '?'} epochs"


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


RUN_LIBRARIES = ("torch", "numpy", "scipy", "scikit-learn")
"""The libraries whose versions every table run records (a change of any may move its numbers)."""


def run_identity(written: Callable[[str], bool] = lambda path: False) -> dict[str, Any]:
    """What made one run, for a results file's run records: the commit, whether tracked code differed from it (``dirty``,
    the files named in ``changed``, less those that ``written`` says the runs write themselves), the versions of Python,
    hcl and :data:`RUN_LIBRARIES`, and the machine (no path): its CPU model and :func:`float_kernels`."""
    head, changed = git_head(), changed_files()
    changed = None if changed is None else [path for path in changed if not written(path)]
    return {
        "commit": head,
        "dirty": None if changed is None else bool(changed),
        "changed": changed,
        "versions": {"python": platform.python_version(), "hcl": __version__, **{name: installed(name) for name in RUN_LIBRARIES}},
        "machine": {
            "node": platform.node(),
            "processor": platform.processor() or platform.machine(),
            "cpu_model": cpu_model(),
            "float_kernels": float_kernels(),
            "system": platform.system(),
        },
    }


def float_kernels() -> dict[str, Any]:
    """What chooses the float kernels a CPU run computes with, beside the CPU model: the instruction set torch dispatches to
    (``AVX512``, ``AVX2``, ``DEFAULT``), its intra-op threads (a reduction's order) and whether oneDNN is on."""
    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "mkldnn": torch.backends.mkldnn.is_available() and bool(torch.backends.mkldnn.enabled),
    }


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; None where there is none), e.g. ``Intel(R) Xeon(R) Processor``:
    the same code and seed can train to other numbers on another CPU (its float kernels differ)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), None)
    except OSError:
        return None


def portable(argument: str, root: Path) -> str:
    """A command-line argument without the machine's absolute paths, for a results file: a path under ``root`` relative to
    it, any other absolute path (``--work /tmp/x``, ``--prepare path=/data/y``) as ``<name>`` of its last part."""

    def one(path: str) -> str:
        if not os.path.isabs(path):
            return path
        resolved = Path(path).resolve()
        return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else f"<{resolved.name}>"

    key, equals, value = argument.rpartition("=")
    return f"{key}{equals}{one(value)}" if equals else one(argument)
