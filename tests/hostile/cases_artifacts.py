"""Artifacts missing, damaged, hand-edited or of the wrong kind: a one-line runtime error naming the file."""

from __future__ import annotations

from pathlib import Path

from .checks import absent, nothing_named, resumed_from, says
from .harness import CPU, EMBED, EMBEDDINGS, ENCODER, KNN, LIVE, PREPARED, PRETRAIN, REPORT, RESUME, Case, failure, success, usage
from .setups import both, checkpoint_sidecar, crafted_history, edit_json, fifo, flip_byte, remove, truncate, write


def checkpoint_position_bool(work: Path) -> None:
    """The latest checkpoint's epoch recorded as ``true``."""
    edit_json(str(checkpoint_sidecar(work).relative_to(work)), lambda values: values["position"].update(epoch=True))(work)


CASES: list[Case] = [
    failure("embeddings missing", "knn-eval", "--embeddings", "nowhere.safetensors", "--out", "k.json", *CPU),
    failure("embeddings truncated", *KNN, setup=truncate(EMBEDDINGS)),
    failure("embeddings flipped byte", *KNN, setup=flip_byte(EMBEDDINGS), check=says("sha256")),
    failure("embeddings sidecar missing", *KNN, setup=remove("data/embeddings.json")),
    failure("embeddings sidecar garbage", *KNN, setup=write("data/embeddings.json", "{not json")),
    failure("embeddings schema_version true", *KNN, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=True))),
    failure("embeddings schema_version 2", *KNN, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=2))),
    failure(
        "embeddings shape with a bool",
        *KNN,
        setup=edit_json("data/embeddings.json", lambda v: v["tensors"]["train_labels"].update(shape=[True])),
    ),
    failure("embeddings of another kind", "knn-eval", "--embeddings", ENCODER, "--out", "k.json", *CPU),
    failure("embeddings a folder", "knn-eval", "--embeddings", "data", "--out", "k.json", *CPU),
    failure("embeddings a FIFO", "knn-eval", "--embeddings", "f.safetensors", "--out", "k.json", *CPU, setup=fifo("f.safetensors")),
    failure("embeddings sidecar a FIFO", *KNN, setup=both(remove("data/embeddings.json"), fifo("data/embeddings.json"))),
    failure(
        "model a FIFO", "embed", "--data", PREPARED, "--model", "f.safetensors", "--out", "e.safetensors", *CPU, setup=fifo("f.safetensors")
    ),
    failure("encoder flipped byte", *EMBED, setup=flip_byte(ENCODER)),
    failure("encoder sidecar arch unknown", *EMBED, setup=edit_json("models/encoder.json", lambda v: v.update(arch="vgg"))),
    failure("encoder sidecar image_size true", *EMBED, setup=edit_json("models/encoder.json", lambda v: v.update(image_size=True))),
    failure("card missing", *PRETRAIN, setup=remove(f"{PREPARED}/card.json")),
    failure("card schema_version true", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(schema_version=True))),
    failure("card mean a bool", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(mean=[True]))),
    failure("card num_classes a bool", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(num_classes=True))),
    failure("card a FIFO", *PRETRAIN, setup=both(remove(f"{PREPARED}/card.json"), fifo(f"{PREPARED}/card.json"))),
    failure("split flipped byte", *PRETRAIN, setup=flip_byte(f"{PREPARED}/train.safetensors")),
    failure("data a FIFO", "pretrain", "--data", "f", "--out", "m", "--live-dir", "live", *CPU, setup=fifo("f")),
    failure("checkpoint history escapes", *RESUME, setup=crafted_history("../../escaped"), check=nothing_named("escaped*")),
    failure(
        "checkpoint history absolute",
        *RESUME,
        setup=crafted_history("/tmp/hcl-hostile-escaped"),
        check=absent("/tmp/hcl-hostile-escaped"),
    ),
    failure(
        "checkpoint pointer escapes", *RESUME, setup=write("models/checkpoints/latest.json", '{"checkpoint": "../encoder.safetensors"}')
    ),
    usage(  # hcl writes its pointer whole (temporary file, rename), so this one is not hcl's: the ownership rule
        "checkpoint pointer garbage",
        *RESUME,
        setup=write("models/checkpoints/latest.json", "[]"),
        check=says("latest.json exists and is a file hcl has no record of writing"),
    ),
    failure("checkpoint position a bool", *RESUME, setup=checkpoint_position_bool),
    success("latest.json deleted resumes", *RESUME, setup=remove("models/checkpoints/latest.json"), check=resumed_from),
    failure("report metrics top1 above 1", *REPORT, setup=edit_json("metrics/knn.json", lambda v: v.update(top1=1.5))),
    failure("report metrics test_size a bool", *REPORT, setup=edit_json("metrics/knn.json", lambda v: v.update(test_size=True))),
    failure(
        "report training log a FIFO",
        *REPORT,
        setup=both(remove(f"{LIVE}/plots/metrics/loss.tsv"), fifo(f"{LIVE}/plots/metrics/loss.tsv")),
    ),
    failure(
        "report --plots the dvclive folder, loss.tsv a FIFO",
        *REPORT[:10],
        "dvclive",
        *REPORT[11:],
        setup=both(remove(f"{LIVE}/plots/metrics/loss.tsv"), fifo(f"{LIVE}/plots/metrics/loss.tsv")),
    ),
    success(
        "report --plots pretrain's live dir draws the loss",
        *REPORT,
        check=lambda w, r: None if (w / "r/figures/loss.png").is_file() else "no loss.png",
    ),
    failure("report --model a FIFO", *REPORT[:4], "f.safetensors", *REPORT[5:], setup=fifo("f.safetensors")),
    failure("report --data a file", *REPORT[:1], "--data", "file", *REPORT[3:], setup=write("file", "x")),
    failure("report --embeddings a folder", *REPORT[:6], "data", *REPORT[7:]),
]
