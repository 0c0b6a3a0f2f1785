"""Checks of ``params.yaml`` against the stage configs: unknown groups or keys get a warning."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from hcl_cli.artifacts import first_line
from hcl_cli.config import STAGE_CONFIGS
from hcl_cli.errors import UsageError


def unknown_params(params: dict[str, object]) -> list[str]:
    """Dotted names in ``params`` that no stage reads."""
    known = {cls.group: set(cls.param_names()) for cls in STAGE_CONFIGS}
    unknown = []
    for group, values in params.items():
        if group not in known:
            unknown.append(str(group))
        elif isinstance(values, dict):
            unknown += [f"{group}.{key}" for key in values if key not in known[group]]
    return unknown


def load_params(path: str | Path) -> dict[str, object]:
    """Read params.yaml, turning a malformed file into a one-line error."""
    try:
        params = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {first_line(exc)}") from exc
    if not isinstance(params, dict):
        raise UsageError(f"{path} must be a mapping of stage groups")
    return params


def warn_unknown_params(path: str | Path = "params.yaml") -> None:
    """Warn, naming each key, when the params.yaml in the working folder has keys no stage reads."""
    if not Path(path).is_file():
        return
    for name in unknown_params(load_params(path)):
        print(f"hcl: warning: {path}: unknown key {name!r} is not read by any stage", file=sys.stderr)
