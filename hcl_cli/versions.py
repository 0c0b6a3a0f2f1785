"""The torch / torchvision pair, checked before a stage runs.

torchvision is built against one torch minor version (torch 2.N goes with torchvision 0.N+15:
2.14 with 0.29, 2.13 with 0.28, as torchvision's compatibility table lists them); another pair
fails deep inside, e.g. ``operator torchvision::nms does not exist`` at import. Read from the
installed packages' metadata, so the check imports neither library and costs milliseconds.
``constraints.txt`` pins the pair (and every other version) the README's figures came from.
"""

from __future__ import annotations

import re
from importlib import metadata

from hcl_cli.errors import HclError

TORCHVISION_OFFSET = 15
"""torchvision 0.(N + 15) is built for torch 2.N."""
FIX = "pip install -c constraints.txt torch torchvision (the pair the README's figures came from)"


def minor(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a version string (``2.14.1+cpu`` -> (2, 14)); None when it is not one."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def torch_pair_problem(torch_version: str | None, torchvision_version: str | None) -> str | None:
    """What is wrong with this installed pair, in one line naming both versions and the fix; None when it works."""
    if torch_version is None or torchvision_version is None:
        missing = "torch" if torch_version is None else "torchvision"
        return f"{missing} is not installed: {FIX}"
    torch_minor, vision_minor = minor(torch_version), minor(torchvision_version)
    if torch_minor is None or vision_minor is None or torch_minor[0] != 2:
        return None
    wanted = torch_minor[1] + TORCHVISION_OFFSET
    if vision_minor == (0, wanted):
        return None
    return f"torch {torch_version} and torchvision {torchvision_version} do not work together (torch 2.{torch_minor[1]} needs torchvision 0.{wanted}): {FIX}"


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check_torch_pair() -> None:
    """A one-line :class:`HclError` when the installed torch and torchvision do not work together."""
    problem = torch_pair_problem(installed("torch"), installed("torchvision"))
    if problem is not None:
        raise HclError(problem)
