"""Graph data (malformed TU folders and archives, links and special files, huge values) and one modality's options on the other."""

from __future__ import annotations

import os

from .checks import absent, all_of, exists, nothing_named, says
from .harness import CPU, HUGE, LINEAR, PRETRAIN, Case, failure, success, usage
from .setups import both, fifo, prepared_graphs, tu_archive, tu_files, tu_folder, tu_special, write

TU = ("prepare", "--dataset", "tu", "--path", "tu", "--name", "TOY", "--out", "g")
"""Prepare TOY (:func:`~.setups.tu_files`) from the folder ``tu`` into ``g``."""
GRAPH_PRETRAIN = ("pretrain", "--data", "g", "--batch-size", "8", "--epochs", "1", "--out", "m", "--live-dir", "live", *CPU)


def node_labels_with(value: str) -> str:
    return tu_files()["node_labels"].replace("3\n", f"{value}\n", 1)


def at_path(path: str) -> tuple[str, ...]:
    """:data:`TU` reading ``--path path``."""
    return (*TU[:4], path, *TU[5:])


def named(name: str) -> tuple[str, ...]:
    """:data:`TU` with ``--name name``."""
    return (*TU[:6], name, *TU[7:])


ARCHIVE_OF_TOY = {f"TOY/TOY_{kind}.txt": text for kind, text in tu_files().items()}

CASES: list[Case] = [
    success("tu: a valid folder", *TU, setup=tu_folder("tu"), check=exists("g/card.json")),
    success(
        "tu: the folder through a symbolic link",
        *at_path("tu-link"),
        setup=both(tu_folder("tu"), lambda w: (w / "tu-link").symlink_to(w / "tu")),
    ),
    usage("tu: graph_indicator missing", *TU, setup=tu_folder("tu", graph_indicator=None), check=absent("g")),
    usage("tu: A a FIFO", *TU, setup=tu_special("tu", "A", os.mkfifo), check=absent("g")),
    usage("tu: A a link to /dev/zero", *TU, setup=tu_special("tu", "A", lambda p: p.symlink_to("/dev/zero")), check=absent("g")),
    usage(
        "tu: A a link to a user's file",
        *TU,
        setup=both(write("secret.txt", "1, 2\n"), tu_special("tu", "A", lambda p: p.symlink_to(p.parents[1] / "secret.txt"))),
    ),
    usage("tu: A a folder", *TU, setup=tu_special("tu", "A", lambda p: p.mkdir())),
    usage(  # issue 54: a 0-byte A file was taken silently as graphs without edges
        "tu: A empty (no edge at all)",
        *TU,
        setup=tu_folder("tu", A=""),
        check=all_of(says("TOY_A.txt is empty: it lists no edge"), absent("g")),
    ),
    usage("tu: A binary", *TU, setup=tu_folder("tu", A="\x00\xff\xfe" * 50)),
    usage("tu: A not UTF-8", *TU, setup=lambda w: (tu_folder("tu")(w), (w / "tu/TOY_A.txt").write_bytes(b"1, 2\n\xff\xfe, 1\n"))),
    usage("tu: node id of 300 digits", *TU, setup=tu_folder("tu", A=tu_files()["A"] + f"1, {HUGE}\n")),
    usage("tu: node id 2^63", *TU, setup=tu_folder("tu", A=tu_files()["A"] + f"1, {2**63}\n")),
    usage("tu: node id negative", *TU, setup=tu_folder("tu", A=tu_files()["A"] + "1, -2\n")),
    failure("tu: node label of two billion", *TU, setup=tu_folder("tu", node_labels=node_labels_with("2000000000"))),
    failure("tu: node label of minus two billion", *TU, setup=tu_folder("tu", node_labels=node_labels_with("-2000000000"))),
    usage(
        "tu: graph label of 300 digits", *TU, setup=tu_folder("tu", graph_labels=tu_files()["graph_labels"].replace("1\n", f"{HUGE}\n", 1))
    ),
    usage("tu: node attribute 1e400", *TU, setup=tu_folder("tu", node_attributes="1e400\n" * 200)),
    usage("tu: graph ids decrease", *TU, setup=tu_folder("tu", graph_indicator="2\n1\n" + tu_files()["graph_indicator"])),
    success(
        "tu: CRLF line ends and a last blank line",
        *TU,
        setup=tu_folder("tu", graph_labels=tu_files()["graph_labels"].replace("\n", "\r\n") + "\n"),
    ),
    usage("tu: name with a slash", *named("../TOY"), setup=tu_folder("tu")),
    usage("tu: name empty", *named(""), setup=tu_folder("tu")),
    usage("tu: path missing", *at_path("nowhere")),
    usage("tu: path a FIFO", *at_path("fifo"), setup=fifo("fifo")),
    usage("tu: archive not gzip", *at_path("tu.tar.gz"), setup=write("tu.tar.gz", "not an archive")),
    usage(
        "tu: archive member a symbolic link",
        *at_path("tu.tar.gz"),
        setup=tu_archive(
            "tu.tar.gz", {**{k: v for k, v in ARCHIVE_OF_TOY.items() if not k.endswith("_A.txt")}, "TOY/TOY_A.txt": "->/etc/passwd"}
        ),
    ),
    success(
        "tu: archive member escaping with ../ is not read or written",
        *at_path("tu.tar.gz"),
        setup=tu_archive("tu.tar.gz", {**ARCHIVE_OF_TOY, "../../escaped.txt": "x"}),
        check=nothing_named("escaped*"),
    ),
    usage(  # the ownership rule: a folder holding a file hcl did not write is kept
        "tu: prepare over a folder with a user's file",
        *TU,
        setup=both(tu_folder("tu"), write("g/notes.txt", "mine")),
        check=exists("g/notes.txt"),
    ),
    usage("graph option on images", *PRETRAIN, "--gin-layers", "5", check=says("--gin-layers")),
    usage(
        "graph option on images from params.yaml",
        *PRETRAIN,
        "--params",
        "p.yaml",
        setup=write("p.yaml", "pretrain:\n  graph_weights: official\n"),
        check=says("graph_weights"),
    ),
    success("graph options at their defaults on images", *PRETRAIN, "--gin-layers", "3", "--gin-hidden", "32"),
    usage("image option on graphs", *GRAPH_PRETRAIN, "--blur", "true", setup=prepared_graphs, check=says("--blur")),
    usage(
        "image option on graphs from params.yaml",
        *GRAPH_PRETRAIN,
        "--params",
        "p.yaml",
        setup=both(prepared_graphs, write("p.yaml", "pretrain:\n  projection_dim: 64\n")),
        check=says("projection_dim"),
    ),
    usage("a queue on graphs", *GRAPH_PRETRAIN, "--queue-size", "16", setup=prepared_graphs),
    usage("jsd on images", *PRETRAIN, "--objective", "jsd"),
    usage("small_cnn on graphs", *GRAPH_PRETRAIN, "--arch", "small_cnn", setup=prepared_graphs),
    success("svm protocol on image embeddings", *LINEAR[:-4], "--protocol", "svm", "--svm-repeats", "1", *CPU, check=says("samples")),
]
