"""Where and when a run happened: time, machine, device and the git commit of the working folder."""

from __future__ import annotations

import datetime
import platform
import subprocess
from typing import Any

import torch


def git_commit() -> str | None:
    """The commit of the git repository in the working folder, ``+dirty`` when it has changes; None outside one."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False, timeout=10)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def run_record(device: torch.device, started: datetime.datetime) -> dict[str, Any]:
    """The provenance of a run that started at ``started`` on ``device`` and ends now."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {
        "started": started.isoformat(timespec="seconds"),
        "finished": now().isoformat(timespec="seconds"),
        "device": {"type": device.type, "name": name},
        "host": platform.node(),
        "git_commit": git_commit(),
    }


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
