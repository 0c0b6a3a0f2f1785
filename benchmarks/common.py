"""What every benchmark result records (the machine, the device, torch, the date and the command), and timing helpers."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def environment(device: str | torch.device = "cpu") -> dict[str, Any]:
    """Machine, device name, library versions, date and the command line of this run."""
    device = torch.device(device)
    processor = platform.processor() or platform.machine()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else processor
    return {
        "machine": {"node": platform.node(), "processor": processor, "cpus": _cpu_count(), "system": platform.platform()},
        "device": {"type": device.type, "name": name},
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
    }


def write_result(name: str, payload: dict[str, Any], device: str | torch.device = "cpu") -> Path:
    """Write ``results/NAME.json`` with the environment first, then the payload; return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**environment(device), **payload}, indent=2) + "\n")
    print(f"wrote {path}")
    return path


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA runs asynchronously), so a timer reads the real time."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
