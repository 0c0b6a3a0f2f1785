"""UnDiMix (Tabassum et al.): Tables 1-3 (Sec. 4.1) and App. E's Table 7.

Every UnDiMix preset reads the paper as written: the uncertainty of Eq. (3) literally
(``undimix_uncertainty: literal``), the diversity of Eq. (4) over the negative's view, x~_j'
(``undimix_diversity: negative-view``), and the parts mixed by a convex combination, learned
(``undimix_learned``, by descent on the loss: see :mod:`hcl_cli.objectives.undimix`) unless the
row is Table 3's fixed-weights variant.
"""

from __future__ import annotations

from hcl_cli.presets.base import MOCO_NOTE, MOCO_V2_METHOD, Preset, experiment, simclr_setup

UNDIMIX_SETUP = (
    "UnDiMix App. A: HCL's setup 'for all models', ResNet-50, 128-d head, Adam lr 1e-3, weight decay 1e-6, 400 epochs, batch 256."
)
UNDIMIX_READING = (
    "Eq. (3) literally (undimix_uncertainty literal: the gradient of every last-layer parameter through every embedding), "
    "Eq. (4) over the negative's view as written, the parts min-max normalised and mixed convexly. Not stated: temperature "
    "(0.5, HCL's), the readout beyond 100 epochs (HCL's code protocol), how the learned weights are learned (by descent on the "
    "loss here, which shrinks the similarity weight)."
)
UNMIX = (
    "Not as the paper: 'our method is implemented on top of Un-Mix' (App. A), whose image mixing hcl does not have; these presets "
    "run UnDiMix on HCL's SimCLR setup as App. E does, so the paper's number includes Un-Mix's gain."
)

NOT_EXPRESSED: dict[str, str] = {
    "Table 1: SwAV, i-Mix, Patch-Based NS, Mochi, Un-Mix": "methods hcl does not implement (clustering, input mixing, patch or mixed negatives)",
    "Tables 1-3: UnDiMix on Un-Mix": "Un-Mix's image mixing is not in hcl; the presets run UnDiMix on HCL's setup (App. E's setting)",
}
"""The rows of UnDiMix's image tables that no preset runs, and why."""

UNDIMIX = {"sampler": "undimix", "undimix_uncertainty": "literal", "undimix_diversity": "negative-view"}
TABLE1 = {
    "cifar10": {"undimix": "93.40", "hcl": "91.19", "moco": "87.88"},
    "cifar100": {"undimix": "71.60", "hcl": "67.87", "moco": "59.96"},
    "tinyimagenet": {"undimix": "49.87", "hcl": "45.62", "moco": "40.76"},
}
"""Table 1: linear top-1 (%), mean of 10 trials, of the rows hcl can run."""
TABLE1_SPREAD = {
    "cifar10": {"undimix": "0.06", "hcl": "0.03", "moco": "0.18"},
    "cifar100": {"undimix": "0.13", "hcl": "0.09", "moco": "0.20"},
    "tinyimagenet": {"undimix": "0.10", "hcl": "0.07", "moco": "0.40"},
}
TABLE1_METHODS = {
    "undimix": ({**UNDIMIX, "undimix_learned": True, "undimix_weights": "1,1,1"}, f"{UNDIMIX_READING} {UNMIX}"),
    "hcl": (
        {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.1},
        "The HCL baseline; its beta and tau+ are not stated (1 and 0.1, HCL's image/main.py defaults).",
    ),
    "moco": (
        {"sampler": "ucl", **MOCO_V2_METHOD},
        "The MoCo-v2 baseline on App. A's setup, which it gives 'for all models': Adam, lr 1e-3, weight decay 1e-6, no "
        f"schedule, 400 epochs, batch 256, in place of main_moco.py's SGD recipe below. {MOCO_NOTE}",
    ),
}
TABLE2 = {
    "s": ("1,0,0", "Feature similarity", ("92.7", "70.1", "47.7"), ("0.07", "0.10", "0.10")),
    "u": ("0,1,0", "Uncertainty", ("92.9", "70.5", "48.6"), ("0.08", "0.15", "0.07")),
    "r": ("0,0,1", "Diversity", ("93.0", "70.2", "49.0"), ("0.05", "0.12", "0.10")),
    "su": ("1,1,0", "Feature Similarity + Uncertainty", ("93.1", "70.6", "49.5"), ("0.08", "0.14", "0.05")),
    "sr": ("1,0,1", "Feature Similarity + Diversity", ("93.1", "70.4", "49.5"), ("0.07", "0.02", "0.10")),
    "ur": ("0,1,1", "Uncertainty + Diversity", ("93.0", "70.4", "49.6"), ("0.06", "0.10", "0.08")),
}
"""Table 2: the components (similarity, uncertainty, diversity weights), the row's name, top-1 and std per dataset
(CIFAR-10, CIFAR-100, tinyImageNet); its 'All (UnDiMix)' row is Table 1's."""
TABLE3_FIXED = {"cifar10": ("93.16", "0.08"), "cifar100": ("71.07", "0.09"), "tinyimagenet": ("49.45", "0.12")}
"""Table 3: UnDiMix with fixed equal weights; its 'Learned' row is Table 1's."""
DATASET_ORDER = ("cifar10", "cifar100", "tinyimagenet")
SETUP = simclr_setup(epochs=400, batch_size=256)

UNDIMIX_PRESETS: list[Preset] = (
    [
        experiment(
            f"undimix-{dataset}-{method}",
            "UnDiMix",
            "Table 1",
            dataset,
            row[method],
            {**SETUP, **TABLE1_METHODS[method][0]},
            f"{UNDIMIX_SETUP} {TABLE1_METHODS[method][1]}",
            f"± {TABLE1_SPREAD[dataset][method]}",
        )
        for dataset, row in TABLE1.items()
        for method in row
    ]
    + [
        experiment(
            f"undimix-{dataset}-{part}",
            "UnDiMix",
            "Table 2",
            dataset,
            top1[index],
            {**SETUP, **UNDIMIX, "undimix_learned": True, "undimix_weights": weights},
            f"{UNDIMIX_SETUP} Table 2's '{name}' row: the other parts weighted 0, the kept ones learned. {UNDIMIX_READING} {UNMIX}",
            f"± {spread[index]}",
        )
        for index, dataset in enumerate(DATASET_ORDER)
        for part, (weights, name, top1, spread) in TABLE2.items()
    ]
    + [
        experiment(
            f"undimix-{dataset}-fixed",
            "UnDiMix",
            "Table 3",
            dataset,
            top1,
            {**SETUP, **UNDIMIX, "undimix_learned": False, "undimix_weights": "1,1,1"},
            f"{UNDIMIX_SETUP} Table 3's 'UnDiMix Fixed': equal fixed weights. {UNDIMIX_READING} {UNMIX}",
            f"± {spread}",
        )
        for dataset, (top1, spread) in TABLE3_FIXED.items()
    ]
    + [
        experiment(
            f"undimix-{dataset}",
            "UnDiMix",
            "App. E, Table 7",
            dataset,
            top1,
            {**SETUP, **UNDIMIX, "undimix_learned": True, "undimix_weights": "1,1,1"},
            f"{UNDIMIX_SETUP} App. E: UnDiMix on HCL without Un-Mix's image mixing, uncertainty from the pseudo-labelling "
            f"cross-entropy (the CE row). {UNDIMIX_READING} Table 7's other row, uncertainty from NT-Xent gradients: {nt_xent}.",
        )
        for dataset, top1, nt_xent in (("cifar10", "91.99", "91.95"), ("cifar100", "69.43", "69.27"), ("tinyimagenet", "48.12", "47.29"))
    ]
)
