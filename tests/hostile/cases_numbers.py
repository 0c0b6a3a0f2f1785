"""Numbers at every edge, non-finite spellings, unknown names and choices: each a usage error naming the option."""

from __future__ import annotations

from .checks import nothing_named, says
from .harness import EMBED, HUGE, KNN, LINEAR, PRETRAIN, Case, usage
from .setups import write

NUMBERS = {
    "knn-eval": (
        KNN,
        {
            "--k": ["0", "-1", "abc", HUGE, "1.5"],
            "--temperature": ["0", "-1", "nan", "inf", "5e-324", "1e308"],
            "--chunk-size": ["0", HUGE],
        },
    ),
    "pretrain": (
        PRETRAIN,
        {
            "--epochs": ["0", "-3", HUGE, "two"],
            "--batch-size": ["0", "1", HUGE],
            "--lr": ["0", "-1", "nan", "1e308", "5e-324"],
            "--temperature": ["0", "5e-324", "1e308"],
            "--beta": ["-1", "nan", "1e308"],
            "--tau-plus": ["1", "-0.1"],
            "--ot-epsilon": ["0", "5e-324"],
            "--seed": ["-1", str(2**32), HUGE],
            "--projection-dim": ["0"],
            "--queue-size": ["-1", HUGE],
            "--momentum": ["2", "-0.5"],
            "--anneal-steps": ["0"],
            "--max-steps": ["-1"],
        },
    ),
    "linear-eval": (LINEAR, {"--epochs": ["0", HUGE], "--lr": ["0", "1e308", "5e-324"], "--weight-decay": ["2000", "-1"]}),
    "prepare": (("prepare", "--out", "p"), {"--test-fraction": ["0", "1", "1.5", "nan"], "--image-size": ["-1"], "--seed": [HUGE]}),
    "embed": (EMBED, {"--batch-size": ["0", HUGE]}),
}
"""Out-of-range or unreadable values, by stage and option."""

NON_FINITE = (
    ("--beta", "inf"),
    ("--beta", "-inf"),
    ("--temperature", "Infinity"),
    ("--temperature", "1e-400"),
    ("--momentum", "nan"),
    ("--ot-kappa", "inf"),
    ("--threshold-start", "NaN"),
    ("--undimix-weights", "nan"),
    ("--epochs", "1e3"),
    ("--max-steps", "0x10"),
    ("--gin-layers", HUGE),
)
"""Pretrain options given a non-finite or oddly spelt number."""

CASES: list[Case] = [
    *(
        usage(f"{stage} {option} {value[:12]}", *base, option, value, check=says(option))
        for stage, (base, options) in NUMBERS.items()
        for option, values in options.items()
        for value in values
    ),
    usage("unknown sampler", *PRETRAIN, "--sampler", "nope", check=says("nope")),
    usage("unknown arch", *PRETRAIN, "--arch", "vgg", check=says("vgg")),
    usage("unknown feature", *KNN, "--feature", "pixels"),
    usage("unknown protocol", *LINEAR, "--protocol", "magic"),
    usage("unknown optimizer", *LINEAR, "--optimizer", "adamw2"),
    usage("unknown dataset", "prepare", "--dataset", "mnist2", "--out", "p"),
    usage("unknown option", *KNN, "--nope", "1"),
    usage("unknown command", "train"),
    usage("bool option with a word", *PRETRAIN, "--clip", "maybe"),
    usage("compare unknown sampler", "compare", "--sampler", "nope", check=says("nope", "hucl")),
    usage("compare unknown where key", "compare", "--where", "pretrain.betta=1", check=says("betta", "beta")),
    usage("compare unknown where group", "compare", "--where", "pretrian.beta=1", check=says("pretrain")),
    usage("compare where without =", "compare", "--where", "pretrain.beta"),
    usage("compare out with trailing slash", "compare", "--out", "reports/", check=nothing_named(".md")),
    usage("compare out an existing folder", "compare", "--out", "data", check=nothing_named(".md")),
    *(usage(f"pretrain {option} {value[:12]}", *PRETRAIN, option, value, check=says(option)) for option, value in NON_FINITE),
    usage("prepare --test-fraction inf", "prepare", "--out", "p", "--test-fraction", "inf"),
    usage("linear-eval --weight-decay nan", *LINEAR, "--weight-decay", "nan"),
    usage("params.yaml .inf", *PRETRAIN, "--params", "p.yaml", setup=write("p.yaml", "pretrain:\n  beta: .inf\n"), check=says("beta")),
    usage("params.yaml .nan", *KNN, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  temperature: .nan\n"), check=says("temperature")),
]
