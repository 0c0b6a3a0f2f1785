"""What a case checks beyond the exit code: each check returns what is wrong, or None."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hcl_cli.artifacts.record import RECORD_FILE

from .harness import Check, Result, Setup


def unchanged(*paths: str) -> tuple[Setup, Check]:
    """A setup that records the bytes of ``paths`` and a check that they are the same afterwards."""
    before: dict[str, bytes] = {}

    def record(work: Path) -> None:
        before.update({path: (work / path).read_bytes() for path in paths})

    def check(work: Path, result: Result[str]) -> str | None:
        changed = [path for path in paths if (work / path).read_bytes() != before[path]]
        return f"changed: {', '.join(changed)}" if changed else None

    return record, check


def says(*fragments: str) -> Check:
    """The output holds every one of ``fragments``."""

    def check(work: Path, result: Result[str]) -> str | None:
        text = result.stdout + result.stderr
        missing = [fragment for fragment in fragments if fragment not in text]
        return f"output lacks {missing}: {text.strip()[-300:]}" if missing else None

    return check


def nothing_named(pattern: str) -> Check:
    """No file matching ``pattern`` anywhere beside or under the case's folder."""

    def check(work: Path, result: Result[str]) -> str | None:
        found = [str(path) for path in work.parent.rglob(pattern)]
        return f"written outside: {found}" if found else None

    return check


def exists(path: str) -> Check:
    return lambda work, result: None if (work / path).exists() else f"{path} missing"


def absent(path: str) -> Check:
    return lambda work, result: f"{path} written" if (work / path).exists() or (work / path).is_symlink() else None


def one_status_line(work: Path, result: Result[str]) -> str | None:
    """The stage's one status line (on stderr, :mod:`hcl_cli.logs`), whatever its output's name holds; nothing on stdout."""
    lines = result.stderr.strip().splitlines()
    return None if len(lines) == 1 and not result.stdout.strip() else f"{len(lines)} stderr lines, stdout {result.stdout!r}"


def checkpoints_whole(work: Path, result: Result[str]) -> str | None:
    """No temporary file in ``m/``; every checkpoint there has its sidecar; latest.json, when there, names one of them.
    hcl's record of what it wrote there (:data:`~hcl_cli.artifacts.record.RECORD_FILE`) is no leftover."""
    folder = work / "m" / "checkpoints"
    names = sorted(os.listdir(folder)) if folder.is_dir() else []
    every = [*names, *(os.listdir(work / "m") if (work / "m").is_dir() else [])]
    hidden = [name for name in every if name.startswith(".") and name != RECORD_FILE]
    if hidden:
        return f"left behind: {hidden}"
    tensors = {name for name in names if name.endswith(".safetensors")}
    lonely = [name for name in tensors if name.removesuffix(".safetensors") + ".json" not in names]
    if lonely:
        return f"checkpoints without a sidecar: {lonely}"
    if "latest.json" in names and json.loads((folder / "latest.json").read_text())["checkpoint"] not in tensors:
        return "latest.json names a missing checkpoint"
    return None


def report_whole(work: Path, result: Result[str]) -> str | None:
    """The report and its figures are one set: both there or neither, and no staging folder left."""
    report, figures = work / "r" / "report.md", work / "r" / "figures"
    left = [path.name for path in (work / "r").iterdir() if path.name.startswith(".")] if (work / "r").is_dir() else []
    if left:
        return f"left behind: {left}"
    return None if report.exists() == figures.exists() else "the report and its figures are not one set"


def nothing_left(work: Path, result: Result[str]) -> str | None:
    """No lock, temporary file or staging folder of hcl's (``.hcl.*``) anywhere in the case's folder, and no file only
    its owner may read (a library's temporary copy)."""
    left = []
    for root, folders, files in os.walk(work):
        for name in folders + files:
            path = Path(root, name)
            if name.startswith(".hcl.") or (name in files and not path.is_symlink() and path.stat().st_mode & 0o077 == 0):
                left.append(str(path.relative_to(work)))
    return f"left behind: {sorted(left)[:5]}" if left else None


def resumed_from(work: Path, result: Result[str]) -> str | None:
    return None if "resuming from" in result.stderr else "did not resume (started from epoch 0)"


def all_of(*checks: Check) -> Check:
    """Every one of ``checks``: the first failure, or None."""

    def check(work: Path, result: Result[str]) -> str | None:
        return next((failed for failed in (each(work, result) for each in checks) if failed), None)

    return check
