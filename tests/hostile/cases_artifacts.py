"""Artifacts missing, damaged, hand-edited or of the wrong kind: a one-line runtime error naming the file."""

from __future__ import annotations

from pathlib import Path

from .checks import absent, nothing_named, resumed_from, says
from .harness import CPU, EMBED, EMBEDDINGS, ENCODER, KNN, LIVE, PREPARED, PRETRAIN, REPORT, RESUME, Case, success, usage
from .setups import both, checkpoint_sidecar, crafted_history, edit_json, fifo, flip_byte, remove, truncate, write


def checkpoint_position_bool(work: Path) -> None:
    """The latest checkpoint's epoch recorded as ``true``."""
    edit_json(str(checkpoint_sidecar(work).relative_to(work)), lambda values: values["position"].update(epoch=True))(work)


CASES: list[Case] = [
    usage("embeddings missing", "knn-eval", "--embeddings", "nowhere.safetensors", "--out", "k.json", *CPU),
    usage("embeddings truncated", *KNN, setup=truncate(EMBEDDINGS)),
    usage("embeddings flipped byte", *KNN, setup=flip_byte(EMBEDDINGS), check=says("sha256")),
    usage("embeddings sidecar missing", *KNN, setup=remove("data/embeddings.json")),
    usage("embeddings sidecar garbage", *KNN, setup=write("data/embeddings.json", "{not json")),
    usage("embeddings schema_version true", *KNN, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=True))),
    usage("embeddings schema_version 2", *KNN, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=2))),
    usage(
        "embeddings shape with a bool",
        *KNN,
        setup=edit_json("data/embeddings.json", lambda v: v["tensors"]["train_labels"].update(shape=[True])),
    ),
    usage("embeddings of another kind", "knn-eval", "--embeddings", ENCODER, "--out", "k.json", *CPU),
    usage("embeddings a folder", "knn-eval", "--embeddings", "data", "--out", "k.json", *CPU),
    usage("embeddings a FIFO", "knn-eval", "--embeddings", "f.safetensors", "--out", "k.json", *CPU, setup=fifo("f.safetensors")),
    usage("embeddings sidecar a FIFO", *KNN, setup=both(remove("data/embeddings.json"), fifo("data/embeddings.json"))),
    usage(
        "model a FIFO", "embed", "--data", PREPARED, "--model", "f.safetensors", "--out", "e.safetensors", *CPU, setup=fifo("f.safetensors")
    ),
    usage("encoder flipped byte", *EMBED, setup=flip_byte(ENCODER)),
    usage("encoder sidecar arch unknown", *EMBED, setup=edit_json("models/encoder.json", lambda v: v.update(arch="vgg"))),
    usage("encoder sidecar image_size true", *EMBED, setup=edit_json("models/encoder.json", lambda v: v.update(image_size=True))),
    usage("card missing", *PRETRAIN, setup=remove(f"{PREPARED}/card.json")),
    usage("card schema_version true", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(schema_version=True))),
    usage("card mean a bool", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(mean=[True]))),
    usage("card num_classes a bool", *PRETRAIN, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(num_classes=True))),
    usage("card a FIFO", *PRETRAIN, setup=both(remove(f"{PREPARED}/card.json"), fifo(f"{PREPARED}/card.json"))),
    usage("split flipped byte", *PRETRAIN, setup=flip_byte(f"{PREPARED}/train.safetensors")),
    usage("data a FIFO", "pretrain", "--data", "f", "--out", "m", "--live-dir", "live", *CPU, setup=fifo("f")),
    usage("checkpoint history escapes", *RESUME, setup=crafted_history("../../escaped"), check=nothing_named("escaped*")),
    usage(
        "checkpoint history absolute",
        *RESUME,
        setup=crafted_history("/tmp/hcl-hostile-escaped"),
        check=absent("/tmp/hcl-hostile-escaped"),
    ),
    usage("checkpoint pointer escapes", *RESUME, setup=write("models/checkpoints/latest.json", '{"checkpoint": "../encoder.safetensors"}')),
    usage(  # hcl writes its pointer whole (temporary file, rename), so this one is not hcl's: its record's hash says so
        "checkpoint pointer garbage",
        *RESUME,
        setup=write("models/checkpoints/latest.json", "[]"),
        check=says("latest.json exists and is not the checkpoint pointer hcl wrote there (changed since"),
    ),
    usage("checkpoint position a bool", *RESUME, setup=checkpoint_position_bool),
    success("latest.json deleted resumes", *RESUME, setup=remove("models/checkpoints/latest.json"), check=resumed_from),
    usage("report metrics top1 above 1", *REPORT, setup=edit_json("metrics/knn.json", lambda v: v.update(top1=1.5))),
    usage("report metrics test_size a bool", *REPORT, setup=edit_json("metrics/knn.json", lambda v: v.update(test_size=True))),
    usage(
        "report training log a FIFO",
        *REPORT,
        setup=both(remove(f"{LIVE}/plots/metrics/loss.tsv"), fifo(f"{LIVE}/plots/metrics/loss.tsv")),
    ),
    usage(
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
    usage("report --model a FIFO", *REPORT[:4], "f.safetensors", *REPORT[5:], setup=fifo("f.safetensors")),
    usage("report --data a file", *REPORT[:1], "--data", "file", *REPORT[3:], setup=write("file", "x")),
    usage("report --embeddings a folder", *REPORT[:6], "data", *REPORT[7:]),
]
