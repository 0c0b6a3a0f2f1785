"""Every output owned, every artifact bound to its inputs (issue 32, items 1, 2 and 15).

An output that exists is replaced only when it is the stage's own earlier result: a user's file, whatever its name, a
symbolic link or a folder is kept, with a usage error. Inputs of different runs (a prepared folder replaced since
pretraining, another run's embeddings or metrics beside the encoder) are refused by the sha256 each artifact records
of what it was made from, with a runtime error.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from .checks import absent, all_of, exists, says, unchanged
from .harness import (
    CPU,
    EMBED,
    EMBEDDINGS,
    ENCODER,
    KNN,
    LINEAR,
    PREPARED,
    PRETRAIN,
    REPORT,
    RESUME,
    Case,
    Check,
    Result,
    Setup,
    hcl,
    success,
    usage,
)
from .setups import both, edit_json, graph_embeddings, write

CURVES = "live/plots/metrics"
"""Where :data:`~.harness.PRETRAIN`'s training log keeps its curves."""


def link(path: str, target: str) -> Setup:
    """A symbolic link at ``path`` to ``target`` (relative to the case's folder)."""

    def setup(work: Path) -> None:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).symlink_to(work / target)

    return setup


def folder(path: str) -> Setup:
    return lambda work: (work / path).mkdir(parents=True)


def foreign_safetensors(path: str) -> Setup:
    """A valid safetensors file that hcl did not write (no kind in its header, no sidecar)."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    return write(path, struct.pack("<Q", len(header)) + header + b"\x00" * 4)


def hcl_step(*args: str) -> Setup:
    """``hcl ARGS`` run in the case's folder as part of its setup."""

    def setup(work: Path) -> None:
        result = hcl(work, args)
        if result.returncode != 0:
            raise RuntimeError(f"hcl {' '.join(args)} failed: {result.stderr.strip()}")

    return setup


def refused(name: str, *args: str, setup: Setup, keep: tuple[str, ...] = ()) -> Case:
    """A usage error that leaves ``keep`` (the files in the way) as they were."""
    if not keep:
        return usage(name, *args, setup=setup)
    record, same = unchanged(*keep)
    return usage(name, *args, setup=both(setup, record), check=same)


EMBED_OUT, KNN_OUT, LINEAR_OUT, REPORT_OUT = EMBED[:-3], KNN[:-3], LINEAR[:-5], REPORT[:-1]
"""Each stage's arguments up to its ``--out``."""


def owned_cases() -> list[Case]:
    """Item 1: one ownership rule for every output file of every stage."""
    return [
        refused(
            "embed over a user's file",
            *EMBED_OUT,
            "notes.safetensors",
            *CPU,
            setup=write("notes.safetensors", "my notes\n"),
            keep=("notes.safetensors",),
        ),
        refused(
            "embed over a user's safetensors",
            *EMBED_OUT,
            "theirs.safetensors",
            *CPU,
            setup=foreign_safetensors("theirs.safetensors"),
            keep=("theirs.safetensors",),
        ),
        refused(
            "embed over a user's sidecar", *EMBED_OUT, "e.safetensors", *CPU, setup=write("e.json", '{"my": "notes"}'), keep=("e.json",)
        ),
        refused(
            "embed out a symlink", *EMBED_OUT, "link.safetensors", *CPU, setup=link("link.safetensors", EMBEDDINGS), keep=(EMBEDDINGS,)
        ),
        refused("embed out a folder", *EMBED_OUT, "dir.safetensors", *CPU, setup=folder("dir.safetensors")),
        refused(
            "knn out a symlink to its own metrics",
            *KNN_OUT,
            "link.json",
            *CPU,
            setup=link("link.json", "metrics/knn.json"),
            keep=("metrics/knn.json",),
        ),
        refused("linear out a symlink to its own metrics", *LINEAR_OUT, "link.json", *CPU, setup=link("link.json", "metrics/linear.json")),
        refused(
            "linear over a user's JSON",
            *LINEAR_OUT,
            "notes.json",
            *CPU,
            setup=write("notes.json", '{"top1": "mine"}'),
            keep=("notes.json",),
        ),
        refused(
            "report over a user's report.md",
            *REPORT_OUT,
            "mine/report.md",
            setup=write("mine/report.md", "# My report\n"),
            keep=("mine/report.md",),
        ),
        refused(
            "report out a symlink",
            *REPORT_OUT,
            "mine/report.md",
            setup=both(write("real.md", "# real\n"), link("mine/report.md", "real.md")),
            keep=("real.md",),
        ),
        refused("report out a folder", *REPORT_OUT, "mine/report.md", setup=folder("mine/report.md")),
        refused(
            "report figures a symlink", *REPORT_OUT, "mine/report.md", setup=both(folder("elsewhere"), link("mine/figures", "elsewhere"))
        ),
        refused(
            "compare over a user's table.csv", "compare", "--out", "table", setup=write("table.csv", "name,score\n"), keep=("table.csv",)
        ),
        refused("compare over a user's table.md", "compare", "--out", "table", setup=write("table.md", "# My table\n"), keep=("table.md",)),
    ]


def pretrain_cases() -> list[Case]:
    """pretrain's outputs: the encoder, the checkpoints folder and the training log."""
    record_curve, curve_same = unchanged(f"{CURVES}/loss.tsv")
    record_pointer, pointer_same = unchanged("m/checkpoints/latest.json")
    return [
        usage(
            "pretrain log over a user's loss.tsv",
            *PRETRAIN,
            setup=both(write(f"{CURVES}/loss.tsv", "my own loss\n"), record_curve),
            check=curve_same,
        ),
        usage("pretrain log over a user's knn_top1.tsv", *PRETRAIN, setup=write(f"{CURVES}/knn_top1.tsv", "1\t2\n")),
        usage(
            "pretrain log curve a symlink", *PRETRAIN, setup=both(write("mine.tsv", "step\tloss\n"), link(f"{CURVES}/loss.tsv", "mine.tsv"))
        ),
        success(
            "pretrain log keeps a user's notes beside the curves",
            *PRETRAIN,
            setup=write(f"{CURVES}/notes.txt", "mine"),
            check=all_of(exists(f"{CURVES}/notes.txt"), exists(f"{CURVES}/loss.tsv")),
        ),
        usage(
            "pretrain over a user's checkpoint pointer",
            *PRETRAIN,
            setup=both(write("m/checkpoints/latest.json", '{"mine": 1}'), record_pointer),
            check=pointer_same,
        ),
        usage(
            "pretrain over a user's file named as a checkpoint", *PRETRAIN, setup=write("m/checkpoints/epoch-0001-step-000000.json", "{}")
        ),
        success(
            "pretrain keeps a user's file in the checkpoints folder",
            *PRETRAIN,
            setup=write("m/checkpoints/epoch-notes.txt", "mine"),
            check=exists("m/checkpoints/epoch-notes.txt"),
        ),
        usage("pretrain over a user's encoder.safetensors", *PRETRAIN, setup=write("m/encoder.safetensors", "my notes\n")),
        usage("pretrain encoder a symlink", *PRETRAIN, setup=link("m/encoder.safetensors", ENCODER)),
        success("embed over its own earlier embeddings", *EMBED[:-3], EMBEDDINGS, *CPU),
        success("report over its own earlier report", *REPORT, setup=hcl_step(*REPORT)),
    ]


def replaced_prepared(work: Path) -> None:
    """``data/prepared`` prepared again with another seed: another split of the same sizes, which no count tells apart."""
    hcl_step("prepare", "--out", PREPARED, "--test-fraction", "0.9", "--seed", "1")(work)


def other_run_metrics(work: Path) -> None:
    """``metrics/knn.json`` of another encoder (seed 1) and its embeddings, beside this run's encoder and embeddings."""
    hcl_step(
        "pretrain",
        "--data",
        PREPARED,
        "--arch",
        "small_cnn",
        "--batch-size",
        "32",
        "--epochs",
        "1",
        "--seed",
        "1",
        "--out",
        "m2",
        "--live-dir",
        "l2",
        *CPU,
    )(work)
    hcl_step("embed", "--data", PREPARED, "--model", "m2/encoder.safetensors", "--out", "e2.safetensors", *CPU)(work)
    hcl_step("knn-eval", "--embeddings", "e2.safetensors", "--out", "metrics/knn.json", "--k", "5", *CPU)(work)


def records(path: str, key: str, roles: set[str]) -> Check:
    """The JSON at ``path`` records under ``key`` (dotted) exactly ``roles``."""

    def check(work: Path, result: Result[str]) -> str | None:
        values = json.loads((work / path).read_text())
        for part in key.split("."):
            values = values.get(part, {})
        return None if set(values) == roles else f"{path}: {key} records {sorted(values)}"

    return check


REPORT_GRAPHS = (*REPORT[:6], "ge.safetensors", *REPORT[7:])
"""The report of the digits run with TOY's graph embeddings (:func:`~.setups.graph_embeddings`)."""


def bound_cases() -> list[Case]:
    """Items 2 and 15: artifacts bound to their inputs."""
    paper = (
        "linear-eval",
        "--protocol",
        "paper",
        "--optimizer",
        "adam",
        "--data",
        PREPARED,
        "--model",
        ENCODER,
        "--out",
        "l.json",
        "--epochs",
        "1",
        *CPU,
    )
    differ = says("is not the prepared dataset that --model models/encoder.safetensors was made from")
    return [
        success(
            "the encoder records its prepared split files",
            *KNN,
            check=records("models/encoder.json", "inputs.prepared", {"train.safetensors", "test.safetensors"}),
        ),
        success(
            "the embeddings record the encoder and the split files", *EMBED, check=records("e.json", "inputs", {"encoder", "prepared"})
        ),
        success(
            "the kNN metrics record their embeddings and encoder", *KNN, check=records("k.inputs.json", "inputs", {"embeddings", "encoder"})
        ),
        success(
            "the paper protocol records the encoder and the split files",
            *paper,
            check=records("l.inputs.json", "inputs", {"encoder", "prepared"}),
        ),
        usage(
            "embed over a prepared folder replaced since pretraining",
            *EMBED,
            setup=replaced_prepared,
            check=all_of(differ, absent("e.safetensors")),
        ),
        usage("paper protocol on a prepared folder replaced since pretraining", *paper, setup=replaced_prepared, check=differ),
        usage(
            "report on a prepared folder replaced since pretraining", *REPORT, setup=replaced_prepared, check=all_of(differ, absent("r"))
        ),
        usage(
            "resume over a prepared folder replaced since pretraining", *RESUME, setup=replaced_prepared, check=says("--resume", "prepared")
        ),
        usage(
            "report with graph embeddings beside a digits run",
            *REPORT_GRAPHS,
            setup=graph_embeddings,
            check=all_of(says("that --embeddings ge.safetensors was made from"), absent("r")),
        ),
        usage(
            "report with another encoder's metrics",
            *REPORT,
            setup=other_run_metrics,
            check=all_of(says("is not the embeddings that metrics/knn.inputs.json was made from"), absent("r")),
        ),
        usage(
            "report with metrics of other embeddings (edited record)",
            *REPORT,
            setup=edit_json("metrics/linear.inputs.json", lambda v: v.update(inputs={"embeddings": "0" * 64})),
        ),
        usage(
            "knn on embeddings whose encoder trained on other data",
            *KNN,
            setup=edit_json("data/embeddings.json", lambda v: v["encoder"]["inputs"]["prepared"].update({"train.safetensors": "0" * 64})),
            check=says("is not the prepared dataset that its encoder was made from"),
        ),
        usage(
            "knn on embeddings recording a malformed input", *KNN, setup=edit_json("data/embeddings.json", lambda v: v.update(inputs=[1]))
        ),
        usage(
            "embed with an encoder recording a malformed input",
            *EMBED,
            setup=edit_json("models/encoder.json", lambda v: v.update(inputs={"x": 1})),
        ),
    ]


CASES: list[Case] = [*owned_cases(), *pretrain_cases(), *bound_cases()]
