"""The preset table against a transcription of its sources: one row per preset, with the paper's table
or section, or the official code's file and flag, that each value comes from.

Sources, as published:
- HCL, Robinson et al. ICLR 2021, App. D.1 and C.1; joshr17/HCL ``image/main.py`` (argparse
  ``--temperature`` 0.5, ``--tau_plus`` 0.1, ``--batch_size`` 256, ``--epochs`` 400, ``--anneal``
  None; ``optim.Adam(lr=1e-3, weight_decay=1e-6)``; the hard estimator's ``imp`` is not
  detached) and ``image/README.md`` (the table of pretrained models: beta, tau_plus, batch 256).
- H-SCL, Jiang et al., Sec. V-A (200 epochs, batch 512, Adam lr 0.001, gamma 0.5); rjiang03/H-SCL
  ``main/main.py`` (``--gradient_imp`` default True, ``type=bool``; ``nce_supervised_hard``
  detaches ``imp`` only when ``gradient_imp == False``, lines 64-66 at commit 3e3d883, whatever beta; ``--beta`` 1) and
  ``main/main_loss.py`` (H-UCL: ``criterion(..., 'hard')`` with ``--tau_plus`` 0, ``imp`` not detached).
- HCL-OT, Jiang et al., Sec. VII-A (400 epochs, batch 512, Adam 0.001) and Tables I-IV;
  rjiang03/HCL-OT ``main.py`` (``--temperature`` 0.5, ``--tau_plus`` 0, ``--new_cost`` False,
  ``ot.sinkhorn`` with POT's default ``numItermax=1000``; ``for epoch in range(0, epochs + 1)``).
- MoCo-v2: facebookresearch/moco ``main_moco.py`` (``--moco-k`` 65536, ``--moco-m`` 0.999, ``-a``
  resnet50, ``--lr`` 0.03, ``--momentum`` 0.9, ``--wd`` 1e-4; ``torch.optim.SGD``) and its README's v2 recipe
  (``--moco-t 0.2 --mlp --cos``; ``moco/builder.py``'s ``--mlp`` head: Linear(dim_mlp, dim_mlp), ReLU, fc); HCL App. C.1 (K 65536, 200 epochs,
  batch 128, beta 0.2, tau+ 0).
- UnDiMix, Tabassum et al., App. A (400 epochs, batch 256, Adam 1e-3, weight decay 1e-6, "for all models": its MoCo-v2
  baseline too), Tables 1-3 and App. E Table 7.
"""

from __future__ import annotations

from typing import Any

import pytest
from docs_pages import page

from hcl_cli.presets import GRAPH_PRESETS, PRESETS

HCL = {"temperature": 0.5, "lr": 1e-3, "anneal": "none", "arch": "resnet50"}
HCL_CODE = "image/main.py --temperature 0.5, --anneal None, Adam lr 1e-3"
HSCL = {"epochs": 200, "batch_size": 512, "lr": 1e-3, "temperature": 0.5, "anneal": "none", "arch": "resnet50"}
OT = {"epochs": 400, "batch_size": 512, "lr": 1e-3, "temperature": 0.5, "ot_cost": "sq", "ot_iterations": 1000, "arch": "resnet50"}
MOCO = {
    "queue_size": 65536,
    "queue_mode": "moco",
    "momentum": 0.999,
    "temperature": 0.2,
    "arch": "resnet50",
    "optimizer": "sgd",
    "lr": 0.03,
    "sgd_momentum": 0.9,
    "nesterov": False,
    "weight_decay": 1e-4,
    "lr_schedule": "cosine",
    "warmup_epochs": 0,
    "projection_dim": 128,
    "projection_hidden": 0,
    "projection_batchnorm": False,
}
UNDIMIX = {"epochs": 400, "batch_size": 256, "lr": 1e-3, "temperature": 0.5, "arch": "resnet50"}
APP_A = {"batch_size": 400, "lr": 5e-4, "optimizer": "adam", "arch": "qt-gru"}
APP_A_OPTIMIZER = {"optimizer": "adam", "lr": 1e-3, "weight_decay": 1e-6, "lr_schedule": "constant", "temperature": 0.2}
"""UnDiMix App. A's optimizer 'for all models', MoCo-v2's baseline included (with MoCo-v2's own temperature)."""
LITERAL = {"sampler": "undimix", "undimix_uncertainty": "literal", "undimix_diversity": "negative-view"}

SOURCES: dict[str, tuple[dict[str, Any], str]] = {
    # HCL, STL-10: image/README.md's table (batch 256) and image/main.py.
    "hcl-stl10-simclr": ({**HCL, "sampler": "ucl", "epochs": 400, "batch_size": 256}, f"README 'Biased' beta 0 tau_plus 0; {HCL_CODE}"),
    "hcl-stl10-debiased": (
        {**HCL, "sampler": "debiased", "tau_plus": 0.1, "epochs": 400, "batch_size": 256},
        "README 'Debiased' tau_plus 0.1",
    ),
    "hcl-stl10-hard-beta0.5": (
        {**HCL, "sampler": "hucl", "beta": 0.5, "tau_plus": 0.1, "detach_weights": False, "epochs": 400, "batch_size": 256},
        "README 'Hard' beta 0.5",
    ),
    "hcl-stl10-hard-beta1": (
        {**HCL, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.1, "detach_weights": False, "epochs": 400, "batch_size": 256},
        "README 'Hard' beta 1.0",
    ),
    "hcl-stl10-hard-beta2": (
        {**HCL, "sampler": "hucl", "beta": 2.0, "tau_plus": 0.1, "detach_weights": False, "epochs": 400, "batch_size": 256},
        "README 'Hard' beta 2.0",
    ),
    "hcl-stl10-hard-beta6": (
        {**HCL, "sampler": "hucl", "beta": 6.0, "tau_plus": 0.1, "detach_weights": False, "epochs": 400, "batch_size": 256},
        "README 'Hard' beta 6.0",
    ),
    "hcl-stl10-hard-not-debiased": (
        {**HCL, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.0, "epochs": 400, "batch_size": 256},
        "Fig. 4 (right) 'H & not D'",
    ),
    # HCL, CIFAR-100: Fig. 8's betas; tau+ 0.05 from Fig. 11's legend; batch from image/main.py.
    **{
        f"hcl-cifar100-beta{beta:g}": (
            {**HCL, "sampler": "hucl", "beta": beta, "tau_plus": 0.05, "epochs": 400, "batch_size": 256},
            "Fig. 8, Fig. 11 (tau+ 0.05)",
        )
        for beta in (0.0, 0.5, 2.0, 6.0)
    },
    # HCL, tinyImageNet: Table 1 (tau+ 0.01), App. D.1 (400 epochs).
    "hcl-tinyimagenet-simclr": ({**HCL, "sampler": "ucl", "epochs": 400, "batch_size": 256}, "Table 1"),
    "hcl-tinyimagenet-debiased": (
        {**HCL, "sampler": "debiased", "tau_plus": 0.01, "epochs": 400, "batch_size": 256},
        "Table 1 (tau+ 0.01)",
    ),
    "hcl-tinyimagenet-hard": (
        {**HCL, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.01, "epochs": 400, "batch_size": 256},
        "Table 1 (tau+ 0.01)",
    ),
    # HCL App. C.1 on the official MoCo-v2 code.
    "hcl-cifar10-mocov2": (
        {**MOCO, "sampler": "ucl", "epochs": 200, "batch_size": 128, "lr": 0.03},
        "App. C.1; main_moco.py; README v2 --moco-t 0.2",
    ),
    "hcl-cifar10-mocov2-hard": (
        {**MOCO, "sampler": "hucl", "beta": 0.2, "tau_plus": 0.0, "detach_weights": False, "epochs": 200, "batch_size": 128},
        "App. C.1 (beta 0.2, tau+ 0)",
    ),
    # H-SCL Table I: Sec. V-A; main/main.py and main/main_loss.py.
    **{
        f"hscl-{data}-{method}": (row, source)
        for data in ("stl10", "cifar10", "cifar100", "tinyimagenet")
        for method, row, source in (
            ("ucl", {**HSCL, "sampler": "ucl"}, "Sec. V-A"),
            (
                "hucl",
                {**HSCL, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.0, "detach_weights": False},
                "main_loss.py --tau_plus 0, --beta 1",
            ),
            ("scl", {**HSCL, "sampler": "scl"}, "Sec. V-A; main.py nce_supervised_easy"),
            ("hscl-beta", {**HSCL, "sampler": "hscl", "beta": 1.0, "detach_weights": False}, "main.py --beta 1, --gradient_imp True"),
            ("hscl-tau", {**HSCL, "sampler": "hscl-threshold", "threshold_start": -0.3, "threshold_end": 0.0}, "Sec. V-A grid"),
        )
    },
    # HCL-OT Tables I-IV: the table's best epsilon as main.py's --reg; Sec. VII-A.
    **{
        f"hclot-{data}-{loss}": ({**OT, "sampler": "ot", "ot_epsilon": epsilon, "objective": objective, "tau_plus": tau}, table)
        for data, loss, epsilon, objective, tau, table in (
            ("stl10", "nce", 0.3, "nce", 0.0, "Table I"),
            ("stl10", "debiased", 0.3, "nce", 0.1, "Table I"),
            ("stl10", "bcl", 0.3, "bcl", 0.0, "Table I"),
            ("cifar10", "nce", 0.5, "nce", 0.0, "Table II"),
            ("cifar10", "debiased", 0.7, "nce", 0.1, "Table II"),
            ("cifar10", "bcl", 0.7, "bcl", 0.0, "Table II"),
            ("cifar100", "nce", 0.7, "nce", 0.0, "Table III; README --reg 0.7"),
            ("cifar100", "debiased", 0.7, "nce", 0.1, "Table III"),
            ("cifar100", "bcl", 0.5, "bcl", 0.0, "Table III"),
            ("tinyimagenet", "nce", 0.5, "nce", 0.0, "Table IV"),
        )
    },
    # UnDiMix: App. A's setup; Tables 1-3 and 7.
    **{
        f"undimix-{data}-{name}": (row, source)
        for data in ("cifar10", "cifar100", "tinyimagenet")
        for name, row, source in (
            ("undimix", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "1,1,1"}, "Table 1 'UnDiMix'"),
            ("hcl", {**UNDIMIX, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.1}, "Table 1 'HCL'; image/main.py defaults"),
            (
                "moco",
                {**MOCO, **UNDIMIX, **APP_A_OPTIMIZER, "sampler": "ucl"},
                "Table 1 'MoCo'; main_moco.py, README v2; App. A's 'For all models ... Adam, 1e-3 learning rate and 1e-6 weight decay'",
            ),
            ("s", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "1,0,0"}, "Table 2 'Feature similarity'"),
            ("u", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "0,1,0"}, "Table 2 'Uncertainty'"),
            ("r", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "0,0,1"}, "Table 2 'Diversity'"),
            (
                "su",
                {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "1,1,0"},
                "Table 2 'Feature Similarity + Uncertainty'",
            ),
            ("sr", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "1,0,1"}, "Table 2 'Feature Similarity + Diversity'"),
            ("ur", {**UNDIMIX, **LITERAL, "undimix_learned": True, "undimix_weights": "0,1,1"}, "Table 2 'Uncertainty + Diversity'"),
            ("fixed", {**UNDIMIX, **LITERAL, "undimix_learned": False, "undimix_weights": "1,1,1"}, "Table 3 'UnDiMix Fixed'"),
        )
    },
    **{
        f"undimix-{data}": ({**UNDIMIX, **LITERAL, "undimix_learned": True}, "App. E, Table 7 (CE)")
        for data in ("cifar10", "cifar100", "tinyimagenet")
    },
    # Sentences: UnDiMix App. A's training ("Adam optimizer, batch size of 400, learning rate of 5x10^-4, and sequence
    # length of 30"), HCL Table 2's and UnDiMix Table 4's rows.
    "hcl-sentences-qt": ({**APP_A, "sampler": "ucl"}, "HCL Table 2 'QT (beta = 0, tau+ = 0)'; UnDiMix App. A"),
    "hcl-sentences-debiased": ({**APP_A, "sampler": "debiased", "tau_plus": 0.01}, "HCL Table 2 'Debiased (tau+ = 0.01)'"),
    "hcl-sentences-hard-beta1": ({**APP_A, "sampler": "hucl", "beta": 1.0, "tau_plus": 0.0}, "HCL Table 2 'Hard (beta = 1, tau+ = 0)'"),
    "hcl-sentences-hard-beta2": ({**APP_A, "sampler": "hucl", "beta": 2.0, "tau_plus": 0.0}, "HCL Table 2 'Hard (beta = 2, tau+ = 0)'"),
    "undimix-sentences-qt": ({**APP_A, "sampler": "ucl"}, "UnDiMix Table 4 'QT'"),
    "undimix-sentences-hcl": ({**APP_A, "sampler": "hucl"}, "UnDiMix Table 4 'HCL' (its beta and tau+ unstated)"),
    "undimix-sentences-undimix": ({**APP_A, "sampler": "undimix"}, "UnDiMix Table 4 'UnDiMix'"),
}

REPORTED: dict[str, str] = {
    "hcl-stl10-hard-beta1": "87.44",
    "hcl-cifar10-mocov2": "88.08",
    "hcl-cifar10-mocov2-hard": "88.47",
    "hscl-cifar100-hscl-beta": "75.11",
    "hclot-cifar10-nce": "91.2",
    "undimix-cifar10-undimix": "93.40",
    "undimix-cifar100-hcl": "67.87",
    "undimix-tinyimagenet-moco": "40.76",
    "undimix-cifar100-ur": "70.4",
    "undimix-tinyimagenet-fixed": "49.45",
    "undimix-cifar10": "91.99",
}
"""A sample of the numbers as the tables print them."""


def test_every_preset_has_a_transcribed_source_and_no_source_lacks_a_preset() -> None:
    assert set(SOURCES) == set(PRESETS) - {preset.name for preset in GRAPH_PRESETS}  # graphs: tests/test_graph_presets.py


@pytest.mark.parametrize("name", list(SOURCES))
def test_the_preset_runs_what_its_source_states(name: str) -> None:
    transcribed, source = SOURCES[name]
    pretrain = PRESETS[name].groups()["pretrain"]
    assert {key: pretrain[key] for key in transcribed} == transcribed, source


@pytest.mark.parametrize("name", list(REPORTED))
def test_the_reported_number_is_the_table_s(name: str) -> None:
    assert PRESETS[name].top1 == REPORTED[name]


def test_the_notes_name_what_the_code_does_beyond_the_paper() -> None:
    assert "401 epochs for --epochs 400" in PRESETS["hclot-cifar10-nce"].note
    assert (
        "--gradient_imp defaults to True" in PRESETS["hscl-cifar10-hscl-beta"].note
        and "type=bool" in PRESETS["hscl-cifar10-hscl-beta"].note
    )
    assert "--tau_plus 0" in PRESETS["hscl-stl10-hucl"].note
    for name in ("hcl-cifar10-mocov2", "undimix-cifar10-moco"):
        assert "--moco-m" in PRESETS[name].note and "--moco-t 0.2" in PRESETS[name].note and "T 0.1, m 0.99, K 4096" in PRESETS[name].note
    for name in ("undimix-cifar10-undimix", "undimix-cifar100-su", "undimix-tinyimagenet-fixed"):
        assert "Un-Mix" in PRESETS[name].note


def test_the_docs_deviations_table_names_what_the_presets_run_differently() -> None:
    readme = page("deviations")
    table = readme[readme.index("| what | the paper or its code | `hcl` | why |") :].split("\n\n")[0]
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table.splitlines()[2:]}
    assert "(0.4914, 0.4822, 0.4465)" in rows["input normalisation"] and "(0.2023, 0.1994, 0.2010)" in rows["input normalisation"]
    assert "`type=bool`" in rows["H-SCL weight gradient"] and "gradient_imp == False" in rows["H-SCL weight gradient"]
    assert "401 epochs" in rows["HCL-OT epochs"]
    assert "Un-Mix" in rows["UnDiMix base"] and "once per epoch" in rows["MoCo-v2 cosine schedule"]
    assert "0 at step 0" in rows["learning-rate warm-up"] and "one step ahead" in rows["learning-rate warm-up"]
    assert "MoCo-v2 optimiser and head" not in rows, "the MoCo-v2 presets run MoCo-v2's SGD, schedule and head"
    assert {
        "MoCo-v2 BatchNorm shuffle",
        "samplers on MoCo-v2",
        "UnDiMix weights in the loss",
        "batch size of H-SCL and HCL-OT",
    } <= rows.keys()
