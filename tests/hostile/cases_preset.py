"""``hcl preset NAME`` under a stop signal (issue 41 item 5): the estimate runs before params.yaml is written, so a
signal during it stops the preset with one line and the file as it was."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from hcl_cli.params import default_params_yaml

from .harness import Case, Result
from .runs import interrupted

PRESET = ("preset", "hscl-cifar10-hscl-beta", "--params", "params.yaml")
"""A ResNet-50 preset: its estimate imports torch and times steps of seconds each on a CPU."""


def keep_params(work: Path) -> None:
    """The default params.yaml, and a copy of it to compare with afterwards."""
    (work / "params.yaml").write_text(default_params_yaml())
    shutil.copy(work / "params.yaml", work / "params.before")


def params_unchanged(work: Path, result: Result[str]) -> str | None:
    if (work / "params.yaml").read_bytes() != (work / "params.before").read_bytes():
        return "params.yaml was changed by a preset that was stopped"
    return None


CASES: list[Case] = [
    Case(
        f"{signum.name} during preset's estimate ({delay} s in)",
        PRESET,
        (128 + signum,),
        setup=keep_params,
        run=interrupted([signum], after_line="hcl preset: ", extra=delay),
        check=params_unchanged,
    )
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    for delay in (0.0, 1.5, 4.0)
]
