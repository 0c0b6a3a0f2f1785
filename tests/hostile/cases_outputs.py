"""Outputs over inputs and over any artifact a stage reads, full disks, and odd output names."""

from __future__ import annotations

import shutil

from .checks import all_of, exists, one_status_line, says, unchanged
from .harness import (
    CPU,
    EMBED,
    EMBEDDINGS,
    ENCODER,
    KNN,
    LINEAR,
    LIVE,
    PREPARED,
    PRETRAIN,
    REPORT,
    TINY_PRETRAIN,
    Case,
    success,
    usage,
)
from .setups import both, write


def over_inputs() -> list[Case]:
    """Each a usage error that leaves the file it would have overwritten as it was."""
    record_encoder_json, encoder_json_same = unchanged("models/encoder.json")
    record_encoder, encoder_same = unchanged(ENCODER)
    record_log, log_same = unchanged(f"{LIVE}/metrics.json")
    record_notes, notes_same = unchanged("notes.json")
    record_link_target, link_target_same = unchanged("models/encoder.json")
    copies = both(
        lambda w: shutil.copy(w / ENCODER, w / "models/other.safetensors"),
        lambda w: shutil.copy(w / "models/encoder.json", w / "models/other.json"),
    )
    record_other, other_same = unchanged("models/other.safetensors", "models/other.json")
    embeddings_as_encoder = both(
        lambda w: (w / "m").mkdir(),
        lambda w: shutil.copy(w / EMBEDDINGS, w / "m/encoder.safetensors"),
        lambda w: shutil.copy(w / "data/embeddings.json", w / "m/encoder.json"),
    )
    record_named_encoder, named_encoder_same = unchanged("m/encoder.safetensors", "m/encoder.json")
    record_user_log, user_log_same = unchanged("live/metrics.json")
    knn_into = ("knn-eval", "--embeddings", EMBEDDINGS, "--out")
    return [
        usage(
            "linear fixed over encoder.json",
            *LINEAR[:-4],
            "--out",
            "models/encoder.json",
            *CPU,
            setup=record_encoder_json,
            check=encoder_json_same,
        ),
        usage("knn over the encoder tensors", *knn_into, ENCODER, *CPU, setup=record_encoder, check=encoder_same),
        usage("knn over its embeddings", *knn_into, EMBEDDINGS, *CPU),
        usage("knn over the embeddings sidecar", *knn_into, "data/embeddings.json", *CPU),
        usage("knn into the prepared folder", *knn_into, f"{PREPARED}/card.json", *CPU),
        usage("knn over the training log", *knn_into, f"{LIVE}/metrics.json", *CPU, setup=record_log, check=log_same),
        usage("knn over the checkpoint pointer", *knn_into, "models/checkpoints/latest.json", *CPU),
        usage(
            "knn over a user's file",
            *KNN[:-3],
            "notes.json",
            *CPU,
            setup=both(write("notes.json", "my notes"), record_notes),
            check=notes_same,
        ),
        usage("knn over params.yaml", *KNN[:-3], "params.yaml", *CPU, setup=write("params.yaml", "knn:\n  k: 5\n")),
        usage("knn out /dev/null", *KNN[:-3], "/dev/null", *CPU),
        usage(
            "knn out a symlink to encoder.json",
            *KNN[:-3],
            "link.json",
            *CPU,
            setup=both(lambda w: (w / "link.json").symlink_to(w / "models/encoder.json"), record_link_target),
            check=link_target_same,
        ),
        success("knn over its own earlier metrics", *KNN[:-3], "metrics/knn.json", *CPU),
        usage("embed over the encoder", "embed", "--data", PREPARED, "--model", ENCODER, "--out", ENCODER, *CPU),
        usage(
            "embed over another encoder",
            *EMBED[:-3],
            "models/other.safetensors",
            *CPU,
            setup=both(copies, record_other),
            check=other_same,
        ),
        usage("embed into the prepared folder", *EMBED[:-3], f"{PREPARED}/x.safetensors", *CPU),
        usage("pretrain into the prepared folder", *TINY_PRETRAIN, "--out", PREPARED, "--live-dir", "live"),
        usage("pretrain log into the prepared folder", *TINY_PRETRAIN, "--out", "m", "--live-dir", f"{PREPARED}/live"),
        usage(
            "pretrain over embeddings named encoder",
            *PRETRAIN,
            setup=both(embeddings_as_encoder, record_named_encoder),
            check=named_encoder_same,
        ),
        usage(
            "pretrain log over a user's metrics.json",
            *PRETRAIN,
            setup=both(write("live/metrics.json", '{"top1": 0.5, "note": "mine"}'), record_user_log),
            check=user_log_same,
        ),
        usage(
            "pretrain log over the knn metrics",
            *TINY_PRETRAIN,
            "--out",
            "m",
            "--live-dir",
            "metrics",
            setup=lambda w: shutil.copy(w / "metrics/knn.json", w / "metrics/metrics.json"),
        ),
        usage("prepare over the models folder", "prepare", "--out", "models", check=exists(ENCODER)),
        usage(
            "prepare over a folder with a user's file",
            "prepare",
            "--out",
            PREPARED,
            setup=write(f"{PREPARED}/notes.txt", "mine"),
            check=exists(f"{PREPARED}/notes.txt"),
        ),
        usage("prepare over a file", "prepare", "--out", "file", setup=write("file", "x")),
        usage("prepare over a symlink", "prepare", "--out", "link", setup=lambda w: (w / "link").symlink_to(w / PREPARED)),
        usage("prepare out dot", "prepare", "--out", "."),
        success(
            "pretrain out and live-dir one folder",
            *TINY_PRETRAIN,
            "--out",
            "x",
            "--live-dir",
            "x",
            check=all_of(exists("x/encoder.safetensors"), exists("x/metrics.json")),
        ),
        success("prepare again over its own folder", "prepare", "--out", PREPARED),
    ]


FULL_DISK = {
    "prepare": ("prepare", "--out", "p"),
    "pretrain": PRETRAIN,
    "embed": EMBED,
    "knn-eval": KNN,
    "linear-eval": LINEAR,
    "report": REPORT,
}
"""Every stage, run with a file-size limit of 64 bytes: it must name the file it could not write."""

CASES: list[Case] = [
    *over_inputs(),
    *(
        Case(f"disk full: {stage}", args, (1,), fsize_limit=64, check=says("cannot write", "File too large"))
        for stage, args in FULL_DISK.items()
    ),
    Case("params > /dev/full", ("params",), (1,), stdout="/dev/full"),
    success("out name with a newline", *KNN[:-3], "a\nhcl knn-eval: wrote metrics/knn.json: top-1 1.0000", *CPU, check=one_status_line),
    success("out name with an escape sequence", *KNN[:-3], "b\x1b[2J.json", *CPU, check=one_status_line),
    success("out deep in new folders", *KNN[:-3], "a/b/c/d/k.json", *CPU),
    success("out name with spaces and quotes", *KNN[:-3], 'it\'s a "test".json', *CPU),
]
