"""The rows of the papers' graph tables: each a graph preset's ``pretrain`` values and the numbers the papers print.

Methods: ``ucl`` (UCL = InfoGraph), ``hucl`` (H-UCL = HCL), ``scl``, ``hscl`` (H-SCL(beta)),
``ot-eps0.05`` ... ``ot-eps1`` (HCL-OT), ``hucl-beta2``, ``hucl-beta10``, ``hscl-beta2``,
``hscl-beta10`` (the rest of the tables' beta grid), ``fig3-beta0`` ... ``fig3-beta10`` (HCL Fig. 3,
lr 0.001), each with ``@official`` for HCL's graph-code reading where the readings differ (the
samplers debiased and hucl), ``fig7-infograph``, ``fig7-hcl`` and ``fig7-undimix`` (UnDiMix Fig. 7, its presets' values,
official where the reading matters). Groups: ``table2`` (H-SCL Table II: ucl hucl hucl@official scl hscl),
``table5`` (HCL-OT Table V: ucl hucl hucl@official and the four ot), ``betas``, ``fig3`` (HCL Fig. 3), ``fig7`` (UnDiMix
Fig. 7: fig7-infograph, fig3-beta1@official, which is Fig. 7's HCL row, so that the Fig. 3 runs serve it, and fig7-undimix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hcl_cli.errors import UsageError
from hcl_cli.presets import graphs as presets

OFFICIAL = "@official"
GROUPS: dict[str, tuple[str, ...]] = {
    "table2": ("ucl", "hucl", "hucl@official", "scl", "hscl"),
    "table5": ("ucl", "hucl", "hucl@official", "ot-eps0.05", "ot-eps0.1", "ot-eps0.5", "ot-eps1"),
    "betas": ("hucl-beta2", "hucl-beta2@official", "hucl-beta10", "hucl-beta10@official", "hscl-beta2", "hscl-beta10"),
    "fig3": tuple(f"fig3-beta{beta:g}{reading}" for beta in presets.FIG3_BETAS for reading in ("", OFFICIAL)),
    "fig7": ("fig7-infograph", "fig3-beta1@official", "fig7-undimix"),
}


@dataclass(frozen=True)
class Method:
    """One row of a table on one dataset: the pretrain values and the numbers the papers print for it."""

    name: str
    pretrain: dict[str, Any]
    paper: dict[str, str] = field(default_factory=dict)
    """Table -> the accuracy (%) it prints for this row (a string as printed)."""


def preset_values(name: str) -> dict[str, Any]:
    """The pretrain values of preset ``name`` (as written, before defaults)."""
    (preset,) = [p for p in presets.GRAPH_PRESETS if p.name == name]
    return dict(preset.values["pretrain"])


def preset_number(name: str) -> str:
    (preset,) = [p for p in presets.GRAPH_PRESETS if p.name == name]
    return preset.top1 + (f" ({preset.reported})" if preset.reported else "")


def method(dataset: str, name: str) -> Method:
    """The method ``name`` (module docstring) on ``dataset`` (a key of :data:`~hcl_cli.presets.graphs.TU_DATASETS`)."""
    base, official, reading = name.removesuffix(OFFICIAL), name.endswith(OFFICIAL), {"graph_weights": "official"}
    table2, table5, fig3 = "H-SCL Table II", "HCL-OT Table V", "HCL Fig. 3"
    in_tables = dataset in presets.HSCL_TABLE["ucl"]
    if base.startswith("fig7-"):
        if dataset not in presets.FIG7_DATASETS or base.removeprefix("fig7-") not in presets.FIG7_METHODS:
            raise UsageError(f"UnDiMix Fig. 7 has no {name} on {dataset} (its rows: fig7-infograph, fig7-hcl, fig7-undimix)")
        preset = f"undimix-{dataset}-{base.removeprefix('fig7-')}"
        values, paper = preset_values(preset), {"UnDiMix Fig. 7": preset_number(preset)}
    elif base.startswith("fig3-beta"):
        if dataset not in presets.FIG3_DATASETS:
            raise UsageError(f"HCL Fig. 3 has no {dataset}")
        preset = f"hcl-{dataset}-{base.removeprefix('fig3-')}"
        values, paper = preset_values(preset), {fig3: preset_number(preset)}
    elif base == "ucl" and not in_tables:
        values, paper = {**presets.infograph(lr=1e-2, weight_decay=0.0), "sampler": "ucl"}, {}  # InfoGraph as the tables train it
    elif not in_tables:
        raise UsageError(f"H-SCL Table II and HCL-OT Table V have no {dataset} (their datasets: {', '.join(presets.HSCL_TABLE['ucl'])})")
    elif base in ("ucl", "hucl"):
        values = preset_values(f"hscl-{dataset}-{base}")
        paper = {table2: presets.HSCL_TABLE[base][dataset], table5: presets.OT_TABLE["infograph" if base == "ucl" else "hcl"][dataset]}
    elif base in ("scl", "hscl"):
        values, paper = preset_values(f"hscl-{dataset}-{base}"), {table2: presets.HSCL_TABLE[base][dataset]}
    elif base in presets.OT_EPSILONS:
        values, paper = preset_values(f"hclot-{dataset}-{base}"), {table5: presets.OT_TABLE[base][dataset]}
    elif base.startswith(("hucl-beta", "hscl-beta")):
        sampler, _, beta = base.partition("-beta")
        values = {**preset_values(f"hscl-{dataset}-{sampler}"), "beta": float(beta)}
        paper = {table2: presets.HSCL_TABLE[sampler][dataset] + " (the best beta of 1, 2, 10)"}
    else:
        raise UsageError(f"unknown method {name!r}; the methods: {', '.join(sorted({m for g in GROUPS.values() for m in g}))}")
    if official:
        if values["sampler"] not in ("hucl", "debiased"):
            raise UsageError(f"{name}: the readings differ only for hucl and debiased")
        values |= reading
    return Method(name, values, paper)


def expand(names: list[str]) -> list[str]:
    """Method names and groups -> method names, first mention first, ot last."""
    out: list[str] = []
    for name in names:
        for item in GROUPS.get(name, (name,)):
            if item not in out:
                out.append(item)
    return sorted(out, key=lambda m: m.startswith("ot-"))
