"""The rows of an image table (``hcl table --images``): every sampler at one shared recipe, and the papers' CIFAR-10 numbers.

Each row is a sampler with the values its paper's CIFAR-10 preset gives it (:mod:`hcl_cli.presets`): ``ucl``
(SimCLR), ``debiased`` (tau+ 0.1), ``hucl`` (beta 1, tau+ 0.1: HCL's image/main.py defaults, UnDiMix Table 1's HCL),
``scl`` and ``hscl`` (beta 1, H-SCL Table I's presets: the supervised rows with H-SCL's positives), ``ot`` (HCL-OT
Table II's NCE row, epsilon 0.5, squared cost, tau+ 0, at most 50 Sinkhorn rounds) and ``undimix`` (UnDiMix App. E: on HCL's setup). What the
presets share (architecture, batch, epochs, optimiser, augmentation) is the table's recipe (:func:`recipe`), the same
for every row, so that the rows differ in the sampler alone. Each row's papers' numbers name their own budget
(ResNet-50, 200 or 400 epochs), which is not the table's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import OT_ITERATIONS
from hcl_cli.presets import PRESETS
from hcl_cli.presets.base import simclr_setup

IMAGE_ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ucl": ("hscl-cifar10-ucl", ("hscl-cifar10-ucl", "HCL Fig. 2")),
    "debiased": ("hcl-stl10-debiased", ("HCL Fig. 2",)),
    "hucl": ("undimix-cifar10-hcl", ("hscl-cifar10-hucl", "undimix-cifar10-hcl", "HCL Fig. 2")),
    "scl": ("hscl-cifar10-scl", ("hscl-cifar10-scl",)),
    "hscl": ("hscl-cifar10-hscl-beta", ("hscl-cifar10-hscl-beta",)),
    "ot": ("hclot-cifar10-nce", ("hclot-cifar10-nce",)),
    "undimix": ("undimix-cifar10", ("undimix-cifar10", "undimix-cifar10-undimix")),
}
"""Row -> (the preset whose sampler values it runs, the presets (or figures) whose CIFAR-10 number stands beside it)."""
IMAGE_GROUPS = {"images": tuple(IMAGE_ROWS)}
FIGURE_ONLY = {
    "HCL Fig. 2": "HCL Fig. 2 (ResNet-50, 400 epochs, B 256): bars only; 'on CIFAR10 there is a slight improvement for "
    "smaller N, which disappears at larger N' (Sec. 5.1)"
}
"""The papers' CIFAR-10 results that print no number."""
SETUP_KEYS = frozenset(simclr_setup(epochs=1, batch_size=1))
"""The keys of a preset that are the recipe (HCL App. D.1's setup), not the sampler's."""
PAPER_DATASET = "cifar10"
"""The dataset name under which the papers' numbers are shown: the only one of their datasets at hand."""
ABSENT = "CIFAR-100, STL-10 and tinyImageNet: not run (not at hand here; every paper also reports them)"


@dataclass(frozen=True)
class Recipe:
    """What every row of an image table shares (HCL App. D.1 but the architecture and budget, which the table states)."""

    arch: str = "resnet18"
    batch_size: int = 512
    epochs: int = 200
    precision: str = "auto"
    eval_every: int = 5
    compile: bool = False
    """``--compile`` (CUDA): how this machine runs the step, not what it trains (a preset's machine key), so no part of
    :meth:`values`, the recipe a record holds; each run records whether it was compiled."""

    def values(self) -> dict[str, Any]:
        """The pretrain values of the recipe: HCL App. D.1's Adam 1e-3 / 1e-6, temperature 0.5, SimCLR's augmentation with
        blur, a 128-d head, at this architecture, batch and epochs."""
        shared = simclr_setup(epochs=self.epochs, batch_size=self.batch_size) | {"arch": self.arch}
        return shared | {"precision": self.precision, "eval_every": self.eval_every}

    def heading(self, precision: str) -> str:
        """``ResNet-18, B 512, bf16, 200 epochs, ...``: the recipe as the table's heading says it."""
        arch = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "small_cnn": "small CNN"}.get(self.arch, self.arch)
        return (
            f"{arch}, B {self.batch_size}, {precision}, {self.epochs} epochs, SimCLR augmentation with blur, Adam 1e-3 / "
            f"weight decay 1e-6, temperature 0.5, 128-d head (HCL App. D.1 but the architecture and budget); kNN probe every "
            f"{self.eval_every} epochs"
        )


DEVICE_ROUNDS = {"ot_iterations": OT_ITERATIONS.default}
"""What a row runs in place of its preset's value: at most the default 50 Sinkhorn rounds, not HCL-OT's preset's 1000
(POT's cap), since past 50 the device reads the stop every 50 rounds, a host sync a step (the coupling, once settled,
is the same)."""


def sampler_values(name: str) -> dict[str, Any]:
    """Row ``name``'s sampler values: its preset's pretrain values less the recipe's keys (ot's rounds: :data:`DEVICE_ROUNDS`)."""
    values = PRESETS[IMAGE_ROWS[name][0]].values["pretrain"]
    return {key: DEVICE_ROUNDS.get(key, value) for key, value in values.items() if key not in SETUP_KEYS}


def paper_numbers(name: str) -> list[str]:
    """Row ``name``'s CIFAR-10 numbers, each with the paper, table and budget it comes from."""
    out = []
    for source in IMAGE_ROWS[name][1]:
        if source in FIGURE_ONLY:
            out.append(FIGURE_ONLY[source])
            continue
        found = PRESETS[source]
        pretrain = found.values["pretrain"]
        arch = {"resnet50": "ResNet-50", "resnet18": "ResNet-18"}.get(pretrain["arch"], pretrain["arch"])
        spread = f" {found.reported}" if found.reported.startswith("±") else ""
        own = {key: value for key, value in pretrain.items() if key not in SETUP_KEYS}
        other = ", ".join(f"{key} {value}" for key, value in own.items() if sampler_values(name).get(key) != value)
        budget = f"{arch}, {pretrain['epochs']} epochs, B {pretrain['batch_size']}" + (f"; its {other}" if other else "")
        out.append(f"{found.top1}{spread} ({found.paper} {found.where}: {budget})")
    return out


def image_rows(names: list[str]) -> dict[str, dict[str, Any]]:
    """Row names and groups (``images``: every row) -> each row's sampler values, ucl first; an unknown name is a usage error."""
    out: dict[str, dict[str, Any]] = {"ucl": sampler_values("ucl")}
    for name in names:
        for item in IMAGE_GROUPS.get(name, (name,)):
            if item not in IMAGE_ROWS:
                raise UsageError(f"unknown image row {item!r}; the rows: {', '.join(IMAGE_ROWS)} (group: images)")
            out.setdefault(item, sampler_values(item))
    return out
