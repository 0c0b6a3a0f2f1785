"""The papers' experiments as presets: ``hcl preset`` lists them, ``hcl preset NAME`` writes one into params.yaml.

A preset is data: the values of the ``prepare``, ``pretrain`` and ``linear`` groups (and for graphs
``knn``) that one row of a paper's table (or one point of a figure) states, with the top-1 linear readout accuracy the
paper reports for it and a note of what the paper leaves unsaid and where hcl's value comes from
instead (the official code, by file and flag). Every value is checked against the stage options
it sets (:mod:`hcl_cli.config`); ``tests/test_preset_sources.py`` holds the table against a
transcription of the sources. One module per paper family holds the table data
(:mod:`~hcl_cli.presets.hcl`, :mod:`~hcl_cli.presets.jiang`, :mod:`~hcl_cli.presets.undimix`, and the graph
tables in :mod:`~hcl_cli.presets.graphs`, held against their tables in ``tests/test_graph_presets.py``);
:mod:`~hcl_cli.presets.writer` writes a preset into a params file.

The listing and the writing import no torch: ``hcl preset`` stays instant. ``hcl preset NAME`` then
estimates the run's time and memory on this machine (:mod:`~hcl_cli.presets.cost`, imported on first
use: torch, and a few timed steps of the preset's model).
"""

from __future__ import annotations

from pathlib import Path

from hcl_cli.errors import UsageError
from hcl_cli.presets import writer
from hcl_cli.presets.base import CONFIGS, MACHINE_KEYS, PAPER_LINEAR, Preset
from hcl_cli.presets.graphs import GRAPH_PRESETS
from hcl_cli.presets.hcl import HCL_PRESETS
from hcl_cli.presets.jiang import HSCL_PRESETS, OT_PRESETS
from hcl_cli.presets.undimix import UNDIMIX_PRESETS

__all__ = [
    "CONFIGS",
    "GRAPH_PRESETS",
    "MACHINE_KEYS",
    "PAPER_LINEAR",
    "PRESETS",
    "Preset",
    "apply",
    "estimate",
    "listing",
    "lookup",
    "rows",
]

PRESETS: dict[str, Preset] = {preset.name: preset for preset in HCL_PRESETS + HSCL_PRESETS + OT_PRESETS + UNDIMIX_PRESETS + GRAPH_PRESETS}
"""Every preset by name, in the order ``hcl preset`` lists them."""

COLUMNS = ("name", "paper", "table / figure", "dataset", "top-1 (%)")


def rows() -> list[tuple[str, ...]]:
    """One row per preset: name, paper, where, dataset, and the number the paper reports."""
    return [(p.name, p.paper, p.where, p.dataset, p.top1 + (f" ({p.reported})" if p.reported else "")) for p in PRESETS.values()]


def listing(markdown: bool = False) -> str:
    """The presets as an aligned table (or a Markdown one)."""
    table = [COLUMNS, *rows()]
    if markdown:
        return "\n".join("| " + " | ".join(row) + " |" for row in [table[0], ("---",) * len(COLUMNS), *table[1:]]) + "\n"
    widths = [max(len(row[column]) for row in table) for column in range(len(COLUMNS) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in table]
    footer = (
        "hcl preset NAME writes the preset's prepare, pretrain and linear groups (graphs: and knn) into params.yaml; "
        "then dvc repro (or dvc exp run)."
    )
    return "\n".join([*lines, "", footer]) + "\n"


def lookup(name: str) -> Preset:
    """The preset called ``name``, or a one-line usage error listing them all."""
    if name not in PRESETS:
        raise UsageError(f"unknown preset {name!r}; the presets are: {', '.join(PRESETS)}")
    return PRESETS[name]


def apply(name: str, path: Path) -> str:
    """Write preset ``name`` into the params file ``path`` (the defaults when it is missing); return the report to print."""
    return writer.apply(lookup(name), path)


def estimate(name: str) -> str:
    """What preset ``name``'s pretraining would cost on this machine, as lines to print (:mod:`~hcl_cli.presets.cost`)."""
    from hcl_cli.presets.cost import estimate_cost

    cost = estimate_cost(lookup(name))
    if cost is None:
        return "cost: not estimated for graphs (it depends on the graphs); hcl pretrain estimates its time after its first step\n"
    return cost.describe()
