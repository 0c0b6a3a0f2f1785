"""The report's parameter table: the parameters the run read, each with the value it ran with and where that is recorded.

A stage's group lists only what the run read (:meth:`~hcl_cli.config.base.StageConfig.read_params`,
derived from the declarations): the options of the data's modality (:attr:`~hcl_cli.option.Option.modality`),
the loss and sampler options of the run's sampler (:func:`~hcl_cli.objectives.registry.users_of`),
and the options that the linear readout's protocol or the prepared dataset reads
(:attr:`~hcl_cli.option.Option.read_when`). The encoder's sidecar and the metrics files' sidecars keep them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hcl_cli.config.base import load_params
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.report.escaping import code, inline
from hcl_cli.report.inputs import Recorded

NOTE = (
    "Only the parameters the run read are listed: those of its data's modality, its sampler, its dataset and its "
    "linear protocol (the encoder's sidecar and the metrics files' sidecars record them all)."
)


def parameter_section(params_file: Path, recorded: dict[str, Recorded], modality: str | None) -> str:
    """One row per parameter the run read, of every group of ``params_file`` and of every recorded stage.

    The value is the one the run recorded where there is one, else params.yaml's; a params.yaml value
    that differs from the recorded one (a change not yet reproduced) is shown beside it. Which
    parameters were read follows the same values, on ``modality``'s data (None: not known, so every
    modality's); a group no stage declares is listed whole.
    """
    declared = load_params(params_file) if params_file.is_file() else {}
    configs = {config_cls.group: config_cls for config_cls in STAGE_CONFIGS}
    rows, left_out = [], False
    for group in dict.fromkeys([*declared, *recorded]):
        planned = declared.get(group) if isinstance(declared.get(group), dict) else {}
        run = recorded.get(group)
        values = {**planned, **(run.values if run else {})}
        config_cls = configs.get(group)
        unread = set(config_cls.param_names()) - set(config_cls.read_params(values, modality)) if config_cls else set()
        left_out |= bool(unread & values.keys())
        for name in dict.fromkeys([*planned, *(run.values if run else {})]):
            if name in unread:
                continue
            if run is not None and name in run.values:
                value, source = format_value(run.values[name]), run.source
                if name in planned and planned[name] != run.values[name]:
                    value += f" (params.yaml: {format_value(planned[name])})"
            else:
                value, source = format_value(planned[name]), code(params_file, cell=True)
            rows.append(f"| {inline(group)} | {inline(name)} | {value} | {source} |")
    if not rows:
        return ""
    return "\n".join(
        ["## Parameters", "", *([NOTE, ""] if left_out else []), "| Stage | Parameter | Value | Source |", "|:--|:--|:--|:--|", *rows]
    )


def format_value(value: Any) -> str:
    """A parameter value as it reads in params.yaml (``true``, ``0.001``, ``hucl``), literal text in a table cell."""
    return inline(str(value).lower() if isinstance(value, bool) else value)
