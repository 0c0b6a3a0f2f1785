"""The papers' experiments as presets: ``hcl preset`` lists them, ``hcl preset NAME`` writes one into params.yaml.

A preset is data: the values of the ``prepare``, ``pretrain`` and ``linear`` groups (and for graphs
``knn``) that one row of a paper's table (or one point of a figure) states, with the top-1 linear readout accuracy the
paper reports for it and a note of what the paper leaves unsaid and where hcl's value comes from
instead (the official code, by file and flag). Every value is checked against the stage options
it sets (:mod:`hcl_cli.config`); ``tests/test_preset_sources.py`` holds the table against a
transcription of the sources. One module per paper family holds the table data
(:mod:`~hcl_cli.presets.hcl`, :mod:`~hcl_cli.presets.jiang`, :mod:`~hcl_cli.presets.undimix`, and the graph
tables in :mod:`~hcl_cli.presets.graphs`, held against their tables in ``tests/test_graph_presets.py``, and the sentence
tables in :mod:`~hcl_cli.presets.sentences`);
:mod:`~hcl_cli.presets.writer` writes a preset into a params file.

The listing and the writing import no torch: ``hcl preset`` stays instant. ``hcl preset NAME`` plans
the edit, estimates the run's time and memory on this machine (:mod:`~hcl_cli.presets.cost`, imported
on first use: torch, and a few timed steps of the preset's model), and only then writes the file, so
that the cost is seen (and an interruption lands) before params.yaml changes; ``--dry-run`` stops
before writing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from hcl_cli.errors import UsageError
from hcl_cli.interrupts import uninterrupted
from hcl_cli.logs import prose
from hcl_cli.presets import writer
from hcl_cli.presets.base import CONFIGS, MACHINE_KEYS, PAPER_LINEAR, Preset
from hcl_cli.presets.graphs import GRAPH_PRESETS
from hcl_cli.presets.hcl import HCL_PRESETS
from hcl_cli.presets.jiang import HSCL_PRESETS, OT_PRESETS
from hcl_cli.presets.sentences import SENTENCE_PRESETS
from hcl_cli.presets.undimix import UNDIMIX_PRESETS

__all__ = [
    "CONFIGS",
    "GRAPH_PRESETS",
    "MACHINE_KEYS",
    "PAPER_LINEAR",
    "PRESETS",
    "SENTENCE_PRESETS",
    "Preset",
    "apply",
    "estimate",
    "listing",
    "look_then_write",
    "lookup",
    "plan",
    "rows",
]

PRESETS: dict[str, Preset] = {
    preset.name: preset for preset in HCL_PRESETS + HSCL_PRESETS + OT_PRESETS + UNDIMIX_PRESETS + GRAPH_PRESETS + SENTENCE_PRESETS
}
"""Every preset by name, in the order ``hcl preset`` lists them."""

COLUMNS = ("name", "paper", "table / figure", "dataset", "top-1 (%)")


def rows() -> list[tuple[str, ...]]:
    """One row per preset: name, paper, where, dataset, and the number the paper reports."""
    return [(p.name, p.paper, p.where, p.dataset, p.top1 + (f" ({p.reported})" if p.reported else "")) for p in PRESETS.values()]


def listing(markdown: bool = False) -> str:
    """The presets grouped by paper and table, one aligned line each (or the whole list as one Markdown table)."""
    table = [COLUMNS, *rows()]
    if markdown:
        return "\n".join("| " + " | ".join(row) + " |" for row in [table[0], ("---",) * len(COLUMNS), *table[1:]]) + "\n"
    groups: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for row in table[1:]:
        groups.setdefault((row[1], row[2]), []).append(row)
    name_width, dataset_width = (max(len(row[column]) for row in table[1:]) for column in (0, 3))
    lines = []
    for (paper, where), members in groups.items():
        lines += ["", f"{paper}, {where}:"]
        lines += [f"  {name.ljust(name_width)}  {dataset.ljust(dataset_width)}  {top1}" for name, _, _, dataset, top1 in members]
    footer = prose(
        "hcl preset NAME --dry-run shows what the preset would change and cost; hcl preset NAME writes its prepare, pretrain and "
        "linear groups (graphs: and knn) into params.yaml; then dvc repro (or dvc exp run)."
    )
    header = f"{len(table) - 1} presets by paper and table: name, dataset, the paper's top-1 (%)"
    return "\n".join([header, *lines, "", footer]) + "\n"


def lookup(name: str) -> Preset:
    """The preset called ``name``, or a one-line usage error naming the three nearest names."""
    if name not in PRESETS:
        nearest = difflib.get_close_matches(name, PRESETS, n=3, cutoff=0.0)
        raise UsageError(f"unknown preset {name!r}; the nearest are {', '.join(nearest)} (hcl preset lists all {len(PRESETS)})")
    return PRESETS[name]


def plan(name: str, path: Path) -> writer.Plan:
    """What writing preset ``name`` into the params file ``path`` would change (nothing is written yet)."""
    return writer.plan(lookup(name), path)


def apply(name: str, path: Path) -> str:
    """Write preset ``name`` into the params file ``path`` (the defaults when it is missing); return the report to print."""
    return writer.apply(lookup(name), path)


def look_then_write(name: str, path: Path, *, say: Callable[[str], None], estimated: bool, dry_run: bool) -> None:
    """``hcl preset NAME``: ``say`` the values it changes and (``estimated``) the run's cost, then write the params file
    unless ``dry_run``; a stop signal before the write leaves the file as it was."""
    planned = plan(name, path)
    say(planned.describe())
    if estimated:
        say(estimate(name))
    if dry_run:
        say(f"dry run: {path} was not changed (run without --dry-run to write it)\n")
        return
    say(writer.write(planned))


def estimate(name: str) -> str:
    """What preset ``name``'s pretraining would cost on this machine, as lines to print (:mod:`~hcl_cli.presets.cost`)."""
    with uninterrupted():  # a stop signal inside a half-done import of torch (or numpy) can be swallowed or leave it broken
        from hcl_cli.presets.cost import estimate_cost

    cost = estimate_cost(lookup(name))
    if cost is None:
        return (
            "cost: not estimated for graphs or sentences (it depends on the data); hcl pretrain estimates its time after its first step\n"
        )
    return cost.describe()
