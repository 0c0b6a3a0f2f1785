"""HCL (Robinson et al., ICLR 2021): STL-10 (Fig. 4 and the code's README), CIFAR-100 (Fig. 8),
tinyImageNet (Table 1) and the MoCo-v2 runs of App. C.1 (Fig. 6)."""

from __future__ import annotations

from hcl_cli.presets.base import MOCO_NOTE, MOCO_V2, Preset, experiment, simclr_setup

HCL_NOTE = (
    "HCL App. D.1: ResNet-50, 128-d head, Adam lr 1e-3, weight decay 1e-6, 400 epochs. Not in the paper, from its code "
    "(image/main.py): batch 256 (--batch_size), temperature 0.5 (--temperature), no beta annealing (--anneal None), weights "
    "not detached; image/utils.py: Gaussian blur; image/linear.py: the readout (Adam, 100 epochs, batch 512, augmented train images)."
)
HCL_README = "image/README.md's table of pretrained models lists this run: ResNet-50, batch 256, with these beta and tau+."
HCL_STL10 = {
    "simclr": ("Fig. 4 (right)", "80.15", {"sampler": "ucl"}, "SimCLR: the README's 'Biased' row, beta 0, tau+ 0. " + HCL_README),
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
        "Hard sampling without debiasing (Fig. 4 right, 'H & not D'): beta 1, tau+ 0.",
    ),
}
"""STL-10: where, linear top-1, the sampler's values, and a note."""

HCL_PRESETS: list[Preset] = (
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
            f"{HCL_NOTE} Table 1: tau+ 0.01, hard beta 1; the paper gives no batch size for tinyImageNet (256, the code's default).",
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
            {**simclr_setup(epochs=200, batch_size=128), **MOCO_V2, **sampler},
            f"HCL App. C.1: 'the official MoCo-v2 code' with a queue of 65536, 200 epochs, batch 128{hard}. {MOCO_NOTE}",
        )
        for method, top1, sampler, hard in (
            ("mocov2", "88.08", {"sampler": "ucl"}, ""),
            ("mocov2-hard", "88.47", {"sampler": "hucl", "beta": 0.2, "tau_plus": 0.0}, ", hard negatives beta 0.2, tau+ 0 over the queue"),
        )
    ]
)
