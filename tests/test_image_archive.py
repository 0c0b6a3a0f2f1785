"""``hcl prepare --dataset imagefolder --path ARCHIVE``: an image folder read from a tar archive, safely.

It said "not found" for a .tar.gz that exists, where ``--dataset tu`` takes archives. The archive
gives what its extracted folder gives; a member named outside the archive, a link, an oversized
image or an archive of the wrong layout is one line on stderr, and nothing is written.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import hcl_cli.image.archive as archive
from hcl_cli.cli import main
from hcl_cli.config import PrepareConfig
from hcl_cli.errors import HclError
from hcl_cli.image.card import load_card
from hcl_cli.image.prepared import load_split
from hcl_cli.stages import prepare

CLASSES = ("ant", "moth")


def image_folder(root: Path) -> Path:
    """train/ and test/ with two class folders of 6x5 PNGs (a nested folder in one class), seeded."""
    rng = np.random.default_rng(7)
    for split, count in (("train", 3), ("test", 2)):
        for name in CLASSES:
            for index in range(count):
                path = root / split / name / ("deep" if index == 2 else "") / f"{index:02d}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)).save(path)
    return root


def tar_of(folder: Path, archive_path: Path, top: str) -> Path:
    with tarfile.open(archive_path, "w:gz") as tar:
        tar.add(folder, arcname=top)
    return archive_path


def prepared(path: Path, out: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    prepare.run(PrepareConfig(dataset="imagefolder", path=str(path), out=str(out)))
    return {split: load_split(out, split) for split in ("train", "test")}


@pytest.mark.parametrize("top", ["cifar10-jpeg", "."], ids=["in-a-top-folder", "at-the-top"])
def test_an_archive_gives_what_its_folder_gives(tmp_path: Path, top: str) -> None:
    folder = image_folder(tmp_path / "images")
    from_folder = prepared(folder, tmp_path / "from-folder")
    from_archive = prepared(tar_of(folder, tmp_path / "images.tar.gz", top), tmp_path / "from-archive")
    for split, (images, labels) in from_folder.items():
        assert torch.equal(from_archive[split][0], images) and torch.equal(from_archive[split][1], labels)
    card = load_card(tmp_path / "from-archive")
    assert card.classes == list(CLASSES) and card.counts == {"train": 6, "test": 4}
    assert card.source == f"image archive {tmp_path / 'images.tar.gz'}"
    assert card.mean == load_card(tmp_path / "from-folder").mean


def member(tar: tarfile.TarFile, name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, target: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, len(data), target
    tar.addfile(info, io.BytesIO(data) if data else None)


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    return buffer.getvalue()


def hostile_archive(path: Path, extra: tuple[str, bytes, bytes, str]) -> Path:
    """A valid two-class archive plus one ``extra`` member (name, data, type, link target)."""
    with tarfile.open(path, "w:gz") as tar:
        for split in ("train", "test"):
            for name in CLASSES:
                member(tar, f"{split}/{name}/0.png", png())
        member(tar, *extra)
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("../evil.png", png(), tarfile.REGTYPE, ""), "a member named outside the archive's folder"),
        (("/etc/evil.png", png(), tarfile.REGTYPE, ""), "a member named outside the archive's folder"),
        (("train/ant/link.png", b"", tarfile.SYMTYPE, "/etc/passwd"), "a link or special member"),
        (("train/ant/hard.png", b"", tarfile.LNKTYPE, "train/ant/0.png"), "a link or special member"),
        (("test/moth/fifo", b"", tarfile.FIFOTYPE, ""), "a link or special member"),
        (("train/ant/0.png", png(), tarfile.REGTYPE, ""), "the archive holds this file twice"),
        (("other/train/ant/1.png", png(), tarfile.REGTYPE, ""), "holds train/ or test/ in more than one place"),
    ],
    ids=["dot-dot", "absolute", "symlink", "hard-link", "fifo", "twice", "two-roots"],
)
def test_an_unsafe_archive_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, extra: tuple[str, bytes, bytes, str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = hostile_archive(tmp_path / "images.tar.gz", extra)
    with pytest.raises(SystemExit) as exit_info:
        main(["prepare", "--dataset", "imagefolder", "--path", str(path), "--out", "prepared"])
    lines = capsys.readouterr().err.splitlines()
    errors = [line for line in lines if ": error: " in line]  # after prepare's status line (reading ...)
    assert exit_info.value.code == 2 and errors == lines[-1:] and message in errors[0], lines
    assert not (tmp_path / "prepared").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["images.tar.gz"]


def test_an_oversized_image_member_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_IMAGE_BYTES", 64)
    path = hostile_archive(tmp_path / "images.tar.gz", ("train/ant/big.png", bytes(65), tarfile.REGTYPE, ""))
    with pytest.raises(HclError, match=r"train/ant/0.png: \d+ bytes, more than the 0 MiB an image file may have"):
        archive.read_image_archive(path)


def test_an_archive_without_the_layout_says_what_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "flat.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        member(tar, "images/0.png", png())
    with pytest.raises(HclError, match=r"no train/ or test/ folder at its top or in a top folder"):
        archive.read_image_archive(path)
