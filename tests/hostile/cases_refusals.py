"""Issue 32's review: values refused where they enter (not a traceback or wrong advice later), options that a run does
not read refused or warned about, and the words of a few messages."""

from __future__ import annotations

from hcl_cli.params import default_params_yaml

from .checks import absent, all_of, exists, says, unchanged
from .harness import CPU, EMBED, EMBEDDINGS, KNN, LINEAR, PREPARED, PRETRAIN, REPORT, Case, Setup, failure, success, usage
from .setups import both, edit_json, graph_embeddings, hard_link, image_folder, prepared_graphs, relabel, tu_folder, write

GRAPH_SVM = ("linear-eval", "--protocol", "svm", "--embeddings", "ge.safetensors", "--out", "gl.json", "--svm-c-grid", "1", *CPU)
"""The SVM protocol on TOY's embeddings (:func:`~.setups.graph_embeddings`): 20 graphs a class."""
GRAPH_PRETRAIN = ("pretrain", "--data", "g", "--batch-size", "8", "--epochs", "1", "--out", "m", "--live-dir", "live", *CPU)
TU = ("prepare", "--dataset", "tu", "--path", "tu", "--name", "TOY", "--out", "g")
CARD = f"{PREPARED}/card.json"
SCL = (*PRETRAIN, "--sampler", "scl")


def card_with(**values: object) -> Setup:
    return edit_json(CARD, lambda card: card.update(values))


def encoder_with(**values: object) -> Setup:
    return edit_json("models/encoder.json", lambda sidecar: sidecar.update(values))


def over_hard_link() -> Case:
    record, same = unchanged("a.yaml", "b.yaml")
    return failure(
        "preset over a hard-linked params file",
        "preset",
        "hcl-stl10-simclr",
        "--params",
        "b.yaml",
        setup=both(lambda w: (w / "a.yaml").write_text("knn:\n  k: 5\n"), hard_link("a.yaml", "b.yaml"), record),
        check=all_of(same, says("hard links")),
    )


INTERNAL_ERRORS = [
    usage(
        "svm with more inner folds than a training fold holds",
        *GRAPH_SVM,
        "--svm-inner-folds",
        "100",
        setup=graph_embeddings,
        check=says("inner folds"),
    ),
    usage("svm with one inner fold too many", *GRAPH_SVM, "--svm-inner-folds", "19", setup=graph_embeddings, check=says("18 in an outer")),
    success("svm with as many inner folds as a training fold holds", *GRAPH_SVM, "--svm-inner-folds", "18", setup=graph_embeddings),
    usage(
        "svm with more folds than the smallest class",
        *GRAPH_SVM,
        "--svm-folds",
        "21",
        setup=graph_embeddings,
        check=says("fewer than the 21 folds"),
    ),
    usage(
        "linear-eval paper with a train label of 10",
        *LINEAR[:-4],
        "--protocol",
        "paper",
        "--optimizer",
        "adam",
        *CPU,
        setup=relabel(f"{PREPARED}/train.safetensors", 10),
    ),
    usage(
        "linear-eval paper with a train label of -5",
        *LINEAR[:-4],
        "--protocol",
        "paper",
        "--optimizer",
        "adam",
        *CPU,
        setup=relabel(f"{PREPARED}/train.safetensors", -5),
    ),
    usage("preset named by an empty string", "preset", "", check=says("unknown preset ''")),
    over_hard_link(),
]
"""What was a traceback or an internal error."""

LATE_FAILURES = [
    usage(
        "undimix weights that underflow",
        *PRETRAIN,
        "--sampler",
        "undimix",
        "--undimix-weights",
        "0,0,1e-300",
        check=says("--undimix-weights"),
    ),
    usage(
        "undimix weights from params.yaml that underflow",
        *PRETRAIN,
        "--params",
        "p.yaml",
        setup=write("p.yaml", "pretrain:\n  sampler: undimix\n  undimix_weights: '1e-320,0,0'\n"),
        check=says("undimix_weights"),
    ),
    usage("card mean 1e308", *PRETRAIN, setup=card_with(mean=[1e308]), check=says("'mean'")),
    usage("card mean below 0", *PRETRAIN, setup=card_with(mean=[-0.5]), check=says("'mean'")),
    usage("card std 1e-320", *PRETRAIN, setup=card_with(std=[1e-320]), check=says("'std'")),
    usage("card std 0", *PRETRAIN, setup=card_with(std=[0]), check=says("'std'")),
    usage("card std 1e308", *PRETRAIN, setup=card_with(std=[1e308]), check=says("'std'")),
    usage("card mean 1e308 read by embed", *EMBED, setup=card_with(mean=[1e308]), check=all_of(says("'mean'"), absent("e.safetensors"))),
    usage(
        "card classes duplicated",
        *PRETRAIN,
        setup=card_with(classes=["0", "1", "2", "3", "4", "5", "6", "7", "8", "8"]),
        check=says("distinct"),
    ),
    usage("card classes not names", *PRETRAIN, setup=card_with(classes=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])),
    usage("encoder sidecar mean 1e308", *EMBED, setup=encoder_with(mean=[1e308]), check=all_of(says("'mean'"), absent("e.safetensors"))),
    usage("encoder sidecar std 1e-320", *EMBED, setup=encoder_with(std=[1e-320]), check=all_of(says("'std'"), absent("e.safetensors"))),
    usage("encoder sidecar std negative", *EMBED, setup=encoder_with(std=[-0.3]), check=says("'std'")),
    usage(
        "encoder sidecar mean 1e308 in the paper protocol",
        *LINEAR[:-4],
        "--protocol",
        "paper",
        "--optimizer",
        "adam",
        *CPU,
        setup=encoder_with(mean=[1e308]),
    ),
    usage("encoder sidecar mean 1e308 in the report", *REPORT, setup=encoder_with(mean=[1e308]), check=says("'mean'")),
    usage("train label 10 for scl", *SCL, setup=relabel(f"{PREPARED}/train.safetensors", 10), check=says("labels run from 0 to 10")),
    usage("train label -1 for scl", *SCL, setup=relabel(f"{PREPARED}/train.safetensors", -1), check=says("labels run from -1")),
    usage("test label 10 for embed", *EMBED, setup=relabel(f"{PREPARED}/test.safetensors", 10), check=absent("e.safetensors")),
    usage("labels up to 9 on a 2-class card", *SCL, setup=card_with(classes=["0", "1"], num_classes=2), check=says("the card's 2 classes")),
]
"""Values that passed validation and failed later, with wrong advice or a silent wrong result."""

FULL_DISK_LOCKS = [
    Case(f"disk full while writing the lock: {stage}", args, (1,), fsize_limit=8, check=says("cannot write", ".hcl.lock", "File too large"))
    for stage, args in {"pretrain": PRETRAIN, "report": REPORT}.items()
]

MEMORY = [
    failure(
        "prepare of 10,000 images at 4096 px",
        "prepare",
        "--dataset",
        "imagefolder",
        "--path",
        "imgs",
        "--image-size",
        "4096",
        "--out",
        "p",
        setup=image_folder("imgs", 5000),
        check=all_of(says("would need about", "--image-size"), absent("p")),
    ),
    success(
        "prepare of 40 images at 64 px",
        "prepare",
        "--dataset",
        "imagefolder",
        "--path",
        "imgs",
        "--image-size",
        "64",
        "--out",
        "p",
        setup=image_folder("imgs", 20),
        check=exists("p/card.json"),
    ),
]

UNREAD_OPTIONS = [
    success(
        "prepare tu with an image size",
        *TU,
        "--image-size",
        "32",
        setup=tu_folder("tu"),
        check=says("warning: image_size = 32 is not read with dataset tu"),
    ),
    success(
        "prepare digits with a TU name", "prepare", "--out", "p", "--name", "PTC_MR", check=says("warning: name = 'PTC_MR' is not read")
    ),
    success(
        "prepare digits with a path", "prepare", "--out", "p", "--path", "elsewhere", check=says("warning: path = 'elsewhere' is not read")
    ),
    usage("pretrain bf16 on graphs", *GRAPH_PRETRAIN, "--precision", "bf16", setup=prepared_graphs, check=says("--precision")),
    usage(
        "pretrain sync-batchnorm on graphs",
        *GRAPH_PRETRAIN,
        "--sync-batchnorm",
        "true",
        setup=prepared_graphs,
        check=says("--sync-batchnorm"),
    ),
    usage("pretrain compile on graphs", *GRAPH_PRETRAIN, "--compile", "true", setup=prepared_graphs, check=says("--compile")),
    usage(
        "pretrain bf16 on graphs from params.yaml",
        *GRAPH_PRETRAIN,
        "--params",
        "p.yaml",
        setup=both(prepared_graphs, write("p.yaml", "pretrain:\n  precision: bf16\n")),
        check=says("precision"),
    ),
    usage(  # issue 54: these ran with exit 0 and no word
        "pretrain adam with nesterov",
        *PRETRAIN,
        "--optimizer",
        "adam",
        "--nesterov",
        "true",
        check=all_of(says("--nesterov (pretrain.nesterov) true is read only with --optimizer sgd or lars"), absent("m")),
    ),
    usage("pretrain sgd with a lars eta", *PRETRAIN, "--optimizer", "sgd", "--lars-eta", "0.01", check=says("--lars-eta")),
    usage(
        "pretrain adam with an sgd momentum from params.yaml",
        *PRETRAIN,
        "--params",
        "p.yaml",
        setup=write("p.yaml", "pretrain:\n  optimizer: adam\n  sgd_momentum: 0.5\n"),
        check=says("--sgd-momentum (pretrain.sgd_momentum) 0.5"),
    ),
    usage("pretrain anneal steps without an anneal", *PRETRAIN, "--anneal-steps", "3", check=says("--anneal none")),
    success(
        "pretrain sgd from a whole params group at its defaults",
        *PRETRAIN,
        "--params",
        "p.yaml",
        "--optimizer",
        "sgd",
        "--lr",
        "0.03",
        setup=lambda work: (work / "p.yaml").write_text(default_params_yaml()),
        check=exists("m/encoder.safetensors"),
    ),
    success(
        "pretrain sync-batchnorm in one process",
        *PRETRAIN,
        "--sync-batchnorm",
        "true",
        check=says("warning: sync_batchnorm = true is not read in a single process"),
    ),
    success(
        "linear-eval svm with L-BFGS epochs",
        *LINEAR[:-4],
        "--protocol",
        "svm",
        "--epochs",
        "7",
        *CPU,
        check=says("warning: epochs = 7 is not read with protocol svm"),
    ),
    success(
        "linear-eval fixed with svm folds",
        *LINEAR,
        "--svm-folds",
        "5",
        check=says("warning: svm_folds = 5 is not read with protocol fixed"),
    ),
]
"""Options a run does not read: refused on the other modality, as pretrain refuses them; warned about otherwise."""

WORDING = [
    usage(
        "prepare tu with a test fraction too large",
        *TU,
        "--test-fraction",
        "0.99",
        setup=tu_folder("tu"),
        check=says("test graphs", "one graph per class"),
    ),
    usage(
        "embed an embeddings file as the encoder",
        "embed",
        "--data",
        PREPARED,
        "--model",
        EMBEDDINGS,
        "--out",
        "e.safetensors",
        *CPU,
        check=says("an encoder"),
    ),
]

ODD_VALUES = [
    *(
        usage(
            f"{stage} --out a folder name ending in /",
            *args[:index],
            "newdir/",
            *args[index + 1 :],
            check=all_of(says("must name a file"), absent("newdir")),
        )
        for stage, args, index in (("knn-eval", KNN, 6), ("linear-eval", LINEAR, 4), ("embed", EMBED, 6), ("report", REPORT, 12))
    ),
    usage("knn-eval --out a folder name ending in /.", *KNN[:6], "newdir/.", *CPU, check=absent("newdir")),
    usage("knn-eval --out ..", *KNN[:6], "..", *CPU),
    usage("svm C of 1e-320", *LINEAR[:-4], "--protocol", "svm", "--svm-c-grid", "1e-320", *CPU, check=says("--svm-c-grid")),
    usage("svm C of 0", *LINEAR[:-4], "--protocol", "svm", "--svm-c-grid", "1,0", *CPU, check=says("--svm-c-grid")),
    *(
        usage(f"{args[0]} {option} {value if len(value) < 13 else f'of {len(value)} digits'}", *args, option, value, check=says(option))
        for args, option, value in (
            (PRETRAIN, "--epochs", "1_0"),
            (PRETRAIN, "--lr", "1_0e-3"),
            (KNN, "--k", "1_0"),
            (KNN, "--k", "\u0661\u0660"),
            (LINEAR, "--epochs", "0x10"),
            (EMBED, "--batch-size", "+ 5"),
            (KNN, "--k", "9" * 5000),
            (KNN, "--temperature", "9" * 5000),
        )
    ),
]
"""Odd spellings: a folder where a file is meant, a subnormal C, numbers that Python's int() reads and a params file does not."""

CASES: list[Case] = [*INTERNAL_ERRORS, *LATE_FAILURES, *FULL_DISK_LOCKS, *MEMORY, *UNREAD_OPTIONS, *WORDING, *ODD_VALUES]
