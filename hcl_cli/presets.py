"""The papers' experiments as presets: ``hcl preset`` lists them, ``hcl preset NAME`` writes one into params.yaml.

A preset is data: the values of the ``prepare``, ``pretrain`` and ``linear`` groups that one row
of a paper's table (or one point of a figure) states, with the top-1 linear readout accuracy the
paper reports for it and a note of what the paper leaves unsaid and where hcl's value comes from
instead. Every value is checked against the stage options it sets (:mod:`hcl_cli.config`).

Applying a preset writes each of its groups *whole*: the values it names, and the declared default
for every other key, so that nothing left by an earlier preset or experiment (``positives: labels``,
``max_steps``, ...) changes the run; only the keys of :data:`MACHINE_KEYS`, which say how a run
executes on this machine and not what it computes, keep their values. Every other group and
every comment stay as they are: the file is edited line by line, then read back and compared.

This module imports no torch: ``hcl preset`` stays instant.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hcl_cli.config import STAGE_CONFIGS, StageConfig
from hcl_cli.errors import HclError, UsageError
from hcl_cli.params import default_params_yaml, load_params

MACHINE_KEYS: dict[str, tuple[str, ...]] = {"pretrain": ("eval_every", "checkpoint_every", "compile", "sync_batchnorm")}
"""Keys a preset leaves as they are: monitoring, checkpoint frequency and how the encoder is compiled or
synchronised on this machine (set them for your hardware; they do not change what is trained)."""

CONFIGS: dict[str, type[StageConfig]] = {config_cls.group: config_cls for config_cls in STAGE_CONFIGS}

Values = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Preset:
    """One paper experiment: the params.yaml values it states and the linear top-1 (%) the paper reports."""

    name: str
    paper: str
    where: str
    """The table or figure that reports the number."""
    dataset: str
    top1: str
    """The linear top-1 accuracy (%) the paper reports, as it prints it."""
    values: Values
    note: str
    """What the paper does not state, and where hcl's value comes from instead."""
    reported: str = ""
    """More of what the paper reports beside ``top1`` (a spread, the baselines of the same row)."""

    def groups(self) -> dict[str, dict[str, Any]]:
        """The groups this preset writes: every parameter of each, checked, except the machine keys it does not name."""
        groups = {}
        for group, named in self.values.items():
            if group not in CONFIGS:
                raise UsageError(f"preset {self.name}: {group} is not a params.yaml group")
            config = CONFIGS[group](**named)
            kept = set(MACHINE_KEYS.get(group, ())) - set(named)
            groups[group] = {key: value for key, value in config.params().items() if key not in kept}
        return groups


# --- The settings the papers share -------------------------------------------------------------------------

DATASETS: dict[str, tuple[str, dict[str, Any], str]] = {
    "stl10": (
        "STL-10",
        {"dataset": "stl10", "image_size": 32},
        "STL-10 at 32 px: HCL's code pretrains on RandomResizedCrop(32) views with the CIFAR stem (hcl's stem at 64 px or less); "
        "its readout scores the 96-px test images, hcl's the 32-px ones.",
    ),
    "cifar10": ("CIFAR-10", {"dataset": "cifar10"}, ""),
    "cifar100": ("CIFAR-100", {"dataset": "cifar100"}, ""),
    "tinyimagenet": (
        "tinyImageNet",
        {"dataset": "imagefolder", "path": "data/raw/tiny-imagenet-200", "image_size": 64},
        "tinyImageNet as an image folder in data/raw/tiny-imagenet-200: its train/ as unpacked (the box .txt files are skipped), "
        "and a test/ of the val/ images sorted into class folders by val_annotations.txt (the papers do not say which split they test on).",
    ),
}
"""``--dataset`` key -> (name, the prepare values, a note when hcl reads it differently from the papers)."""

PAPER_LINEAR = {"protocol": "paper", "optimizer": "adam", "epochs": 100, "batch_size": 512, "lr": 1e-3, "weight_decay": 1e-6}
"""The linear evaluation of HCL's code (image/linear.py), which H-SCL, HCL-OT and UnDiMix reuse."""


def simclr_setup(*, epochs: int, batch_size: int) -> dict[str, Any]:
    """HCL App. D.1: ResNet-50, a 128-d projection, Adam at lr 1e-3 and weight decay 1e-6; from HCL's code:
    temperature 0.5 and SimCLR's augmentation with Gaussian blur (kernel 3 at 32 px, p 0.5)."""
    return {
        "arch": "resnet50",
        "projection_dim": 128,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": 1e-3,
        "weight_decay": 1e-6,
        "blur": True,
        "temperature": 0.5,
    }


def experiment(
    name: str, paper: str, where: str, dataset: str, top1: str, pretrain: Mapping[str, Any], note: str, reported: str = ""
) -> Preset:
    """A preset on ``dataset`` (a key of :data:`DATASETS`), read out with the papers' protocol."""
    title, prepare, dataset_note = DATASETS[dataset]
    values = {"prepare": prepare, "pretrain": dict(pretrain), "linear": PAPER_LINEAR}
    return Preset(name, paper, where, title, top1, values, " ".join(filter(None, [note, dataset_note])), reported)


# --- HCL (Robinson et al., ICLR 2021) ----------------------------------------------------------------------

HCL_NOTE = (
    "HCL App. D.1: ResNet-50, 128-d head, Adam lr 1e-3, weight decay 1e-6, 400 epochs. Not in the paper, from its code: "
    "batch 256, temperature 0.5, Gaussian blur, the readout (Adam, 100 epochs, batch 512, augmented train images)."
)
HCL_README = "The README of HCL's code (image/) lists this run: ResNet-50, tau+ 0.1, batch 256."
HCL_STL10 = {
    "simclr": ("Fig. 4 (right)", "80.15", {"sampler": "ucl"}, "SimCLR: beta 0, tau+ 0 (README: tau+ 0)."),
    "debiased": ("Fig. 4 (right)", "84.26", {"sampler": "debiased", "tau_plus": 0.1}, HCL_README),
    "hard-beta0.5": (
        "Fig. 4 (left), README",
        "86.38",
        {"sampler": "hucl", "beta": 0.5, "tau_plus": 0.1},
        "Fig. 4 (left) plots the sweep without numbers. " + HCL_README,
    ),
    "hard-beta1": ("Fig. 4 (right)", "87.44", {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.1}, HCL_README),
    "hard-beta2": (
        "Fig. 4 (left), README",
        "87.09",
        {"sampler": "hucl", "beta": 2.0, "tau_plus": 0.1},
        "Fig. 4 (left) plots the sweep without numbers. " + HCL_README,
    ),
    "hard-beta6": (
        "Fig. 4 (left), README",
        "83.09",
        {"sampler": "hucl", "beta": 6.0, "tau_plus": 0.1},
        "Fig. 4 (left) plots the sweep without numbers. " + HCL_README,
    ),
    "hard-not-debiased": (
        "Fig. 4 (right)",
        "84.41",
        {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.0},
        "Hard sampling without debiasing: beta 1, tau+ 0.",
    ),
}
"""STL-10 (Sec. 6.2 and the code's README): where, linear top-1, the sampler's values, and a note."""

HCL_PRESETS = (
    [
        experiment(
            f"hcl-stl10-{method}",
            "HCL",
            where,
            "stl10",
            top1,
            {**simclr_setup(epochs=400, batch_size=256), **sampler},
            f"{HCL_NOTE} {note}",
        )
        for method, (where, top1, sampler, note) in HCL_STL10.items()
    ]
    + [
        experiment(
            f"hcl-cifar100-beta{beta:g}",
            "HCL",
            "Fig. 8",
            "cifar100",
            top1,
            {**simclr_setup(epochs=400, batch_size=256), "sampler": "hucl", "beta": beta, "tau_plus": 0.05},
            f"{HCL_NOTE} Fig. 8 gives 'acc' without naming the readout (linear assumed) and no tau+: 0.05, the value of the CIFAR-100 "
            "curves of Fig. 11. beta 0 is the debiased objective.",
        )
        for beta, top1 in ((0.0, "67.73"), (0.5, "69.61"), (2.0, "67.68"), (6.0, "65.54"))
    ]
    + [
        experiment(
            f"hcl-tinyimagenet-{method}",
            "HCL",
            "Table 1",
            "tinyimagenet",
            top1,
            {**simclr_setup(epochs=400, batch_size=256), **sampler},
            f"{HCL_NOTE} Table 1: tau+ 0.01, hard beta 1; the paper gives no batch size for tinyImageNet (256, its largest).",
        )
        for method, top1, sampler in (
            ("simclr", "53.4", {"sampler": "ucl"}),
            ("debiased", "53.7", {"sampler": "debiased", "tau_plus": 0.01}),
            ("hard", "57.0", {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.01}),
        )
    ]
    + [
        experiment(
            f"hcl-cifar10-{method}",
            "HCL",
            "App. C.1, Fig. 6",
            "cifar10",
            top1,
            {
                **simclr_setup(epochs=200, batch_size=128),
                "arch": "resnet18",
                "temperature": 0.2,
                "queue_size": 65536,
                "momentum": 0.99,
                **sampler,
            },
            "HCL App. C.1: MoCo-v2 with a queue of 65536 negatives, 200 epochs, batch 128. Not in the paper, from MoCo-v2's "
            "CIFAR setting: ResNet-18 with the CIFAR stem, temperature 0.2, momentum 0.99; hcl's projection head and Adam stand in "
            "for MoCo-v2's MLP head and SGD.",
        )
        for method, top1, sampler in (
            ("mocov2", "88.08", {"sampler": "ucl"}),
            ("mocov2-hard", "88.47", {"sampler": "hucl", "beta": 0.2, "tau_plus": 0.0}),
        )
    ]
)

# --- H-SCL (Jiang et al.), Table I -------------------------------------------------------------------------

HSCL_NOTE = (
    "H-SCL Sec. V-A: ResNet-50, 128-d head, 200 epochs, batch 512, Adam lr 1e-3, weight decay 1e-6, temperature 0.5; "
    "augmentations 'crop, flip, color-jitter, and Gaussian noise' (read as SimCLR's with Gaussian blur). The readout is only "
    "'a linear classifier' (HCL's code protocol here). The table gives the best of a grid without the chosen values"
)
HSCL_METHODS = {
    "ucl": ({"sampler": "ucl"}, "."),
    "hucl": (
        {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.1, "detach_weights": True},
        ": H-UCL's beta and tau+ are not stated (1 and 0.1, HCL's); the weights are detached as H-SCL's code does.",
    ),
    "scl": ({"sampler": "scl"}, "."),
    "hscl-beta": (
        {"sampler": "hscl", "beta": 1.0, "detach_weights": True},
        ": beta from {0.1, 0.5, 1, 2, 5} (1 here, as in Figs. 4-5; sweep with dvc exp run -S pretrain.beta=0.1,0.5,1,2,5); "
        "M = 2B - 2 for the paper's 'batch size minus 2'; the weights are detached as H-SCL's code does.",
    ),
    "hscl-tau": (
        {"sampler": "hscl-threshold", "threshold_start": -0.3, "threshold_end": 0.0},
        ": threshold start from {-0.5, -0.3, -0.1} and end from {-0.1, 0, 0.1} (-0.3 and 0 here); tau = exp(l / gamma) is "
        "the cosine threshold l of Eq. (4).",
    ),
}
HSCL_TABLE = {
    "stl10": {
        "ucl": "64.36 ± 0.92",
        "hucl": "67.82 ± 1.41",
        "scl": "68.28 ± 0.92",
        "hscl-beta": "72.52 ± 1.94",
        "hscl-tau": "71.02 ± 2.03",
    },
    "cifar10": {"ucl": "89.16", "hucl": "90.35", "scl": "93.46", "hscl-beta": "93.98", "hscl-tau": "92.95"},
    "cifar100": {"ucl": "64.02", "hucl": "67.77", "scl": "71.68", "hscl-beta": "75.11", "hscl-tau": "72.97"},
    "tinyimagenet": {"ucl": "53.40", "hucl": "56.22", "scl": "62.06", "hscl-beta": "65.39", "hscl-tau": "63.84"},
}
"""Table I: linear top-1 (%) per dataset and method; STL-10 as mean ± std over five runs."""
HSCL_STL10_NOTE = (
    "STL-10: mean and std of five runs on the labelled split ('labeled STL10 is a small dataset'); hcl's ucl and hucl "
    "also pretrain on the unlabeled split, the supervised samplers on the labelled one only."
)

HSCL_PRESETS = [
    experiment(
        f"hscl-{dataset}-{method}",
        "H-SCL",
        "Table I",
        dataset,
        number.partition(" ± ")[0],
        {**simclr_setup(epochs=200, batch_size=512), **HSCL_METHODS[method][0]},
        HSCL_NOTE + HSCL_METHODS[method][1] + (f" {HSCL_STL10_NOTE}" if dataset == "stl10" else ""),
        number.partition(" ")[2],
    )
    for dataset, row in HSCL_TABLE.items()
    for method, number in row.items()
]

# --- HCL-OT (Jiang et al., IJCNN 2023), Tables I-IV ----------------------------------------------------------

OT_NOTE = (
    "HCL-OT Sec. VII-A: HCL's ResNet-50 and 128-d head, 400 epochs, batch 512, Adam lr 1e-3, weight decay 1e-6, every other "
    "hyper-parameter as in HCL's code (temperature 0.5, blur, readout). epsilon is the table's best, read as the code's reg "
    "(ot_epsilon; the official README runs --reg 0.7 for CIFAR-100); squared Euclidean cost (the exp cost of Sec. VII-C "
    "is only in Fig. 1); at most 1000 Sinkhorn iterations, as POT's ot.sinkhorn that the code calls (hcl's stop early at convergence)."
)
OT_LOSSES = {
    "nce": ({"objective": "nce", "tau_plus": 0.0}, "NCE, Eq. (8): no debiasing (tau+ 0, the code's default)."),
    "debiased": (
        {"objective": "nce", "tau_plus": 0.1},
        "Debiased NCE: tau+ from {0.01, 0.05, 0.1, 0.5}, the best not reported (0.1 here, HCL's).",
    ),
    "bcl": ({"objective": "bcl", "tau_plus": 0.0}, "BCL, Eq. (9): no debiasing."),
}
OT_TABLES = {
    ("stl10", "Table I"): {
        "nce": ("85.0", 0.3, "SimCLR 80.2, HCL 84.4"),
        "debiased": ("87.5", 0.3, "SimCLR 84.3, HCL 87.4"),
        "bcl": ("82.8", 0.3, "HCL 83.0"),
    },
    ("cifar10", "Table II"): {
        "nce": ("91.2", 0.5, "SimCLR 91.0, HCL 91.4"),
        "debiased": ("91.8", 0.7, "SimCLR 91.2, HCL 92.1"),
        "bcl": ("90.8", 0.7, "HCL 90.2"),
    },
    ("cifar100", "Table III"): {
        "nce": ("69.1", 0.7, "SimCLR 66.6, HCL 69.2"),
        "debiased": ("69.5", 0.7, "SimCLR 67.5, HCL 69.3"),
        "bcl": ("67.3", 0.5, "HCL 64.8"),
    },
    ("tinyimagenet", "Table IV"): {"nce": ("56.3", 0.5, "SimCLR 53.4, HCL 56.1")},
}
"""Entropic OT top-1 (%), its best epsilon, and the other columns of the row (SimCLR has no BCL entry)."""

OT_PRESETS = [
    experiment(
        f"hclot-{dataset}-{loss}",
        "HCL-OT",
        table,
        dataset,
        top1,
        {
            **simclr_setup(epochs=400, batch_size=512),
            "sampler": "ot",
            "ot_epsilon": epsilon,
            "ot_cost": "sq",
            "ot_iterations": 1000,
            **OT_LOSSES[loss][0],
        },
        f"{OT_NOTE} {OT_LOSSES[loss][1]}",
        f"epsilon {epsilon}; {others}",
    )
    for (dataset, table), rows in OT_TABLES.items()
    for loss, (top1, epsilon, others) in rows.items()
]

# --- UnDiMix (Tabassum et al.), App. E Table 7 ---------------------------------------------------------------

UNDIMIX_NOTE = (
    "UnDiMix App. A: HCL's setup, ResNet-50, 128-d head, Adam lr 1e-3, weight decay 1e-6, 400 epochs, batch 256; App. E: "
    "on HCL without Un-Mix's image mixing, uncertainty from the pseudo-labelling cross-entropy (the CE row). Not stated: "
    "temperature (0.5, HCL's), learned or fixed weights (learned, the paper's method), the parts' normalisation (hcl's "
    "min-max reading), the gradient's parameters (hcl's default: BADGE's closed form, which the paper cites; "
    "undimix_uncertainty autograd is Eq. (3) literally), the readout beyond 100 epochs (HCL's code protocol)."
)

UNDIMIX_PRESETS = [
    experiment(
        f"undimix-{dataset}",
        "UnDiMix",
        "App. E, Table 7",
        dataset,
        top1,
        {**simclr_setup(epochs=400, batch_size=256), "sampler": "undimix", "undimix_learned": True, "undimix_weights": "1,1,1"},
        f"{UNDIMIX_NOTE} Table 7's other row, uncertainty from NT-Xent gradients: {nt_xent}.",
    )
    for dataset, top1, nt_xent in (("cifar10", "91.99", "91.95"), ("cifar100", "69.43", "69.27"), ("tinyimagenet", "48.12", "47.29"))
]

PRESETS: dict[str, Preset] = {preset.name: preset for preset in HCL_PRESETS + HSCL_PRESETS + OT_PRESETS + UNDIMIX_PRESETS}
"""Every preset by name, in the order ``hcl preset`` lists them."""


# --- Listing and applying ----------------------------------------------------------------------------------

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
    footer = "hcl preset NAME writes the preset's prepare, pretrain and linear groups into params.yaml; then dvc repro (or dvc exp run)."
    return "\n".join([*lines, "", footer]) + "\n"


def lookup(name: str) -> Preset:
    """The preset called ``name``, or a one-line usage error listing them all."""
    if name not in PRESETS:
        raise UsageError(f"unknown preset {name!r}; the presets are: {', '.join(PRESETS)}")
    return PRESETS[name]


def apply(name: str, path: Path) -> str:
    """Write preset ``name`` into the params file ``path`` (the defaults when it is missing); return the report to print."""
    preset = lookup(name)
    groups = preset.groups()
    text = path.read_text(encoding="utf-8") if path.exists() else default_params_yaml()
    before = load_params(path) if path.exists() else yaml.safe_load(text)
    edited = edit_groups(text, groups, before)
    after = yaml.safe_load(edited)
    expected = {**before, **{group: {**(before.get(group) or {}), **values} for group, values in groups.items()}}
    if after != expected:
        raise HclError(f"{path}: could not edit it in place (a group is not a plain block of 'key: value' lines); nothing written")
    write_atomically(path, edited)
    changes = []
    for group, values in groups.items():
        old = before.get(group) or {}
        changes += [
            f"  {group}.{key}: {value_text(key, old, '(unset)')} -> {value_text(key, values)}"
            for key in values
            if old.get(key, changes) != values[key]
        ]
    where = f"{preset.paper} {preset.where}, {preset.dataset}: top-1 {preset.top1}%"
    lines = [f"hcl preset: wrote {name} ({where}) into {path}: {len(changes)} value(s) changed", *changes, f"note: {preset.note}"]
    return "\n".join([*lines, "then: dvc repro (or dvc exp run)"]) + "\n"


GROUP_LINE = re.compile(r"^(?P<key>[^\s#][^:]*):(?P<rest>[^#]*)(#.*)?$")
KEY_LINE = re.compile(r"^(?P<indent>[ \t]+)(?P<key>[A-Za-z_][\w-]*):(?P<value>.*?)(?P<comment>[ \t]+#.*)?$")


def entry_text(key: str, value: Any) -> str:
    """``key: value`` as ``hcl params`` spells it (``weight_decay: 1.0e-06``, ``undimix_weights: '1,1,1'``)."""
    return yaml.safe_dump({key: value}, default_flow_style=True, width=1000).strip()[1:-1]


def value_text(key: str, values: Mapping[str, Any], missing: str = "") -> str:
    """``values[key]`` as params.yaml spells it, or ``missing``."""
    return entry_text(key, values[key]).partition(": ")[2] if key in values else missing


def edit_groups(text: str, groups: Mapping[str, Mapping[str, Any]], before: Mapping[str, Any]) -> str:
    """``text`` (whose values are ``before``) with every key of ``groups`` set, line by line: comments, order,
    other lines and the lines of unchanged values kept. A group written inline (``linear: {epochs: 3}``)
    becomes a block of its values and the new ones."""
    lines = text.splitlines()
    defaults = default_lines()

    def new_lines(group: str, values: Mapping[str, Any]) -> list[str]:
        return [set_value(defaults[group].get(key, f"  {key}: null"), value) for key, value in values.items()]

    for group, values in groups.items():
        old = before.get(group) or {}
        header = next((i for i, line in enumerate(lines) if (m := GROUP_LINE.match(line)) and m["key"].strip() == group), None)
        if header is None:
            lines += ["", f"{group}:", *new_lines(group, values)]
        elif GROUP_LINE.match(lines[header])["rest"].strip():
            lines[header : header + 1] = [f"{group}:", *new_lines(group, {**old, **values})]
        else:
            end = next((i for i in range(header + 1, len(lines)) if GROUP_LINE.match(lines[i])), len(lines))
            where = {m["key"]: i for i in range(header + 1, end) if (m := KEY_LINE.match(lines[i]))}
            for key in where.keys() & values.keys():
                if old.get(key, where) != values[key]:
                    lines[where[key]] = set_value(lines[where[key]], values[key])
            last = max(where.values(), default=header)
            lines[last + 1 : last + 1] = new_lines(group, {key: value for key, value in values.items() if key not in where})
    return "\n".join(lines) + "\n"


def set_value(line: str, value: Any) -> str:
    """The ``key: value`` line ``line`` with ``value``, its comment kept at its column (one space further at least)."""
    match = KEY_LINE.match(line)
    assert match is not None, line
    head = match["indent"] + entry_text(match["key"], value)
    comment = match["comment"]
    return f"{head} ".ljust(len(line) - len(comment.lstrip())) + comment.lstrip() if comment else head


def default_lines() -> dict[str, dict[str, str]]:
    """The lines of ``hcl params``' file, by group and key (how a key missing from a file is written)."""
    found: dict[str, dict[str, str]] = {}
    group = ""
    for line in default_params_yaml().splitlines():
        if match := GROUP_LINE.match(line):
            group = match["key"]
            found[group] = {}
        elif match := KEY_LINE.match(line):
            found[group][match["key"]] = line
    return found


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a sibling temporary file, keeping its mode."""
    temporary = path.with_name(f".{path.name}.preset-{os.getpid()}")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise HclError(f"cannot write {path}: {exc.strerror or exc}") from None
