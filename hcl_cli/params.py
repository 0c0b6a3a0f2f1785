"""params.yaml: a stage's group read (as DVC reads the file, :func:`~hcl_cli.config.base.load_params`) and checked, and
the default file written from the declarations."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from hcl_cli.config.base import StageConfig, load_params
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.errors import UsageError
from hcl_cli.logs import LOG
from hcl_cli.objectives.registry import sampler_options, users_label

HEADER = """\
# Parameters of the pipeline, one group per stage. Each dvc.yaml stage runs
# `hcl <stage> --params params.yaml`, which reads its own group; `hcl <stage> --help` explains
# every key. Written by `hcl params` from the options' declarations (hcl_cli/config/ and
# hcl_cli/objectives/registry.py): `hcl params > params.yaml` restores these defaults.
"""


def read_group(path: Path, config_cls: type[StageConfig]) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``config_cls.group`` group of the params file ``path``: its raw values, and where each came from
    (``params.yaml: pretrain.beta``, for messages); the values are checked once, by the stage's configuration.

    The file is read as DVC reads it (YAML 1.2; a key given twice, a second group included, refused), so the
    stage runs with the values DVC records. A key the stage does not know is a usage error (with the nearest
    known name); a group that no stage reads gets a warning, since other tools may keep their parameters in
    the same file.
    """
    params = load_params(path)
    for group in params:
        if group not in {cls.group for cls in STAGE_CONFIGS}:
            LOG.warning(f"hcl: warning: {path}: group {group!r} is not read by any stage")
    group = params.get(config_cls.group) or {}
    if not isinstance(group, dict):
        raise UsageError(f"{path}: {config_cls.group} must be a mapping of parameters")
    names = config_cls.param_names()
    for key in group:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{path}: {config_cls.group}.{key} is not a parameter of hcl {config_cls.command}{hint}")
    return dict(group), {key: f"{path}: {config_cls.group}.{key}" for key in group}


def stage_params(path: Path, config_cls: type[StageConfig]) -> dict[str, Any]:
    """The ``config_cls.group`` group of ``path`` (:func:`read_group`), each value checked against its declaration."""
    group, where = read_group(path, config_cls)
    options = {option.name: option for option in config_cls.declared_options()}
    return {key: options[key].check(value, where=where[key]) for key, value in group.items()}


def sampler_options_markdown() -> str:
    """The docs' table of the loss and sampler options (docs/samplers.md): flag, default, the samplers that read it, meaning."""
    rows = ["| option (`hcl pretrain --...`, `pretrain.*`) | default | used by | meaning |", "| --- | --- | --- | --- |"]
    for option in sampler_options():
        choices = f" One of {', '.join(f'`{choice}`' for choice in option.choices)}." if option.choices else ""
        default = yaml.safe_dump(option.default, default_style=None).splitlines()[0].strip("'")
        meaning = f"{option.help}{option.read_sentence}{choices}".replace("|", "\\|")
        rows.append(f"| `{option.flag}` | `{default}` | {users_label(option.name).removeprefix('used by ')} | {meaning} |")
    return "\n".join(rows) + "\n"


def default_params_yaml() -> str:
    """The default params.yaml: every group and key at its declared default, with a short comment."""
    lines = [HEADER]
    for config_cls in STAGE_CONFIGS:
        lines.append(f"{config_cls.group}:")
        for option in config_cls.declared_options():
            if option.runtime:
                continue
            value = yaml.safe_dump({option.name: option.default}, default_flow_style=True, width=1000).strip()[1:-1]
            comment = " | ".join(option.choices) if option.choices else ""
            if config_cls is PretrainConfig and option.name in PretrainConfig().sampler_options:
                comment = "; ".join(filter(None, [comment, users_label(option.name)]))
            lines.append(f"  {value:<29} {'# ' + comment if comment else ''}".rstrip())
        lines.append("")
    return "\n".join(lines)
