"""What a case does to its copy of the pipeline before ``hcl`` runs: files written, edited, damaged or replaced."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import Setup, hcl


def write(path: str, content: str | bytes) -> Setup:
    """Write ``content`` at ``path`` (its folders made)."""

    def setup(work: Path) -> None:
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def fifo(path: str) -> Setup:
    """A FIFO at ``path``, whose reading would wait forever."""

    def setup(work: Path) -> None:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(work / path)

    return setup


def edit_json(path: str, change: Callable[[dict[str, Any]], None]) -> Setup:
    """The JSON object at ``path`` changed in place by ``change``."""

    def setup(work: Path) -> None:
        values = json.loads((work / path).read_text())
        change(values)
        (work / path).write_text(json.dumps(values))

    return setup


def flip_byte(path: str) -> Setup:
    """The last byte of ``path`` inverted."""

    def setup(work: Path) -> None:
        data = bytearray((work / path).read_bytes())
        data[-1] ^= 0xFF
        (work / path).write_bytes(bytes(data))

    return setup


def truncate(path: str) -> Setup:
    """``path`` cut to half its length."""

    def setup(work: Path) -> None:
        data = (work / path).read_bytes()
        (work / path).write_bytes(data[: len(data) // 2])

    return setup


def remove(path: str) -> Setup:
    return lambda work: (work / path).unlink()


def both(*setups: Setup) -> Setup:
    """Every one of ``setups``, in order."""

    def setup(work: Path) -> None:
        for step in setups:
            step(work)

    return setup


def checkpoint_sidecar(work: Path) -> Path:
    """The sidecar of the checkpoint ``models/checkpoints/latest.json`` names."""
    pointer = json.loads((work / "models/checkpoints/latest.json").read_text())["checkpoint"]
    return (work / "models/checkpoints" / pointer).with_suffix(".json")


def crafted_history(name: str) -> Setup:
    """The latest checkpoint's training history holding one metric called ``name``."""

    def setup(work: Path) -> None:
        sidecar = checkpoint_sidecar(work)
        values = json.loads(sidecar.read_text())
        values["loop_state"]["history"] = [{"epoch": 0, name: 1.0}]
        sidecar.write_text(json.dumps(values))

    return setup


def tu_files(graphs: int = 40) -> dict[str, str]:
    """A valid TU dataset named TOY: ``graphs`` paths of 3 to 6 nodes, node labels 0..3, graph labels -1 and 1 in turn."""
    edges, indicator, node_labels, node = [], [], [], 1
    for graph in range(1, graphs + 1):
        size = 3 + graph % 4
        edges += [pair for i in range(node, node + size - 1) for pair in (f"{i}, {i + 1}", f"{i + 1}, {i}")]
        indicator += [str(graph)] * size
        node_labels += [str((node + i) % 4) for i in range(size)]
        node += size
    labels = ["-1" if graph % 2 else "1" for graph in range(graphs)]
    return {
        kind: "\n".join(lines) + "\n"
        for kind, lines in (("A", edges), ("graph_indicator", indicator), ("graph_labels", labels), ("node_labels", node_labels))
    }


def tu_folder(folder: str, **changes: str | None) -> Setup:
    """Write TOY's files into ``folder``; a change replaces a file's text (None leaves the file out)."""

    def setup(work: Path) -> None:
        (work / folder).mkdir(parents=True, exist_ok=True)
        for kind, text in {**tu_files(), **changes}.items():
            if text is not None:
                (work / folder / f"TOY_{kind}.txt").write_text(text)

    return setup


def tu_special(folder: str, kind: str, make: Callable[[Path], None]) -> Setup:
    """TOY in ``folder`` with ``kind``'s file made by ``make`` (a FIFO, a symbolic link, a folder)."""
    return both(tu_folder(folder, **{kind: None}), lambda work: make(work / folder / f"TOY_{kind}.txt"))


def tu_archive(path: str, members: dict[str, bytes | str]) -> Setup:
    """A .tar.gz at ``path`` whose members are ``name: content``; a str content starting with '->' is a symbolic link."""

    def setup(work: Path) -> None:
        with tarfile.open(work / path, "w:gz") as tar:
            for name, content in members.items():
                info = tarfile.TarInfo(name)
                if isinstance(content, str) and content.startswith("->"):
                    info.type, info.linkname = tarfile.SYMTYPE, content[2:]
                    tar.addfile(info)
                    continue
                data = content.encode() if isinstance(content, str) else content
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    return setup


def prepared_graphs(work: Path) -> None:
    """TOY prepared as graphs in ``g`` (for options that graphs do not read)."""
    tu_folder("tu")(work)
    result = hcl(work, ("prepare", "--dataset", "tu", "--path", "tu", "--name", "TOY", "--out", "g"))
    if result.returncode != 0:
        raise RuntimeError(f"preparing TOY failed: {result.stderr.strip()}")


def graph_embeddings(work: Path) -> None:
    """TOY prepared in ``g`` (:func:`prepared_graphs`), a one-epoch GIN in ``gm`` and its embeddings ``ge.safetensors``."""
    prepared_graphs(work)
    for step in (
        ("pretrain", "--data", "g", "--batch-size", "8", "--epochs", "1", "--out", "gm", "--live-dir", "glive", "--device", "cpu"),
        ("embed", "--data", "g", "--model", "gm/encoder.safetensors", "--out", "ge.safetensors", "--device", "cpu"),
    ):
        result = hcl(work, step)
        if result.returncode != 0:
            raise RuntimeError(f"hcl {' '.join(step)} failed: {result.stderr.strip()}")


def relabel(path: str, label: int) -> Setup:
    """The prepared split ``path`` with its first label replaced by ``label``, rewritten as a whole artifact (its sha256
    recorded), as a hand edit that knew the format would leave it."""

    def setup(work: Path) -> None:
        from hcl_cli.artifacts import load_artifact, save_artifact

        tensors, sidecar = load_artifact(work / path, sidecar_kind(work / path), {})
        tensors["labels"][0] = label
        save_artifact(work / path, tensors, sidecar["kind"], {key: sidecar[key] for key in ("dataset", "split", "versions")})

    return setup


def sidecar_kind(path: Path) -> str:
    return json.loads(path.with_suffix(".json").read_text())["kind"]


def image_folder(root: str, per_split: int) -> Setup:
    """An image folder ``root/{train,test}/{a,b}/`` of ``per_split`` one-pixel PNGs per split (half in each class)."""

    def setup(work: Path) -> None:
        from PIL import Image

        pixel = io.BytesIO()
        Image.new("RGB", (1, 1)).save(pixel, format="PNG")
        for split in ("train", "test"):
            for index in range(per_split):
                folder = work / root / split / "ab"[index % 2]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{index}.png").write_bytes(pixel.getvalue())

    return setup


def hard_link(path: str, link: str) -> Setup:
    return lambda work: os.link(work / path, work / link)
