"""Images wider than 8 bits keep their depth (issue 41, item 2): every one-channel mode Pillow opens beyond 8 bits is
scaled by its bit depth, or refused in one line, never saturated at 255 in silence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hcl_cli.errors import UsageError
from hcl_cli.image.data import load_image_folder


def image_folder(root: Path, mode: str, values: dict[str, float], suffix: str) -> Path:
    """``root/{train,test}/CLASS/i.SUFFIX``: two images per class and split, every pixel of class CLASS ``values[CLASS]``."""
    for split in ("train", "test"):
        for name, value in values.items():
            (root / split / name).mkdir(parents=True)
            for index in range(2):
                pixels = np.full((6, 6), value)
                if mode == "I;16B":
                    image = Image.frombytes(mode, (6, 6), pixels.astype(">u2").tobytes())
                elif mode == "I;16":
                    image = Image.frombytes(mode, (6, 6), pixels.astype("<u2").tobytes())
                else:
                    image = Image.fromarray(pixels.astype(np.float32 if mode == "F" else np.int32), mode=mode)
                image.save(root / split / name / f"{index}.{suffix}")
    return root


@pytest.mark.parametrize(("mode", "suffix"), [("I;16", "png"), ("I;16B", "tiff"), ("I", "tiff")])
def test_wide_greyscale_is_scaled_by_its_bit_depth(tmp_path: Path, mode: str, suffix: str) -> None:
    folder = image_folder(tmp_path, mode, {"a": 32768, "b": 16384}, suffix)
    with Image.open(next((folder / "train" / "a").iterdir())) as opened:
        assert opened.mode == mode, "the file opens in the mode under test"
    source = load_image_folder(folder)
    images, labels = source.splits["train"]
    assert str(images.dtype) == "torch.uint8" and tuple(images.shape[1:]) == (3, 6, 6)
    for label, expected in ((0, 128), (1, 64)):
        assert (images[labels == label] == expected).all(), (mode, images[labels == label].unique())


def test_floating_point_pixels_are_refused_in_one_line(tmp_path: Path) -> None:
    folder = image_folder(tmp_path, "F", {"a": 0.5, "b": 0.25}, "tiff")
    with pytest.raises(UsageError, match=r"0\.tiff: floating-point pixels \(mode F\) have no bit depth to scale by") as raised:
        load_image_folder(folder)
    assert "\n" not in str(raised.value)


def test_integer_pixels_beyond_16_bits_are_refused_in_one_line(tmp_path: Path) -> None:
    folder = image_folder(tmp_path, "I", {"a": 70000, "b": 1}, "tiff")
    with pytest.raises(UsageError, match="I pixels from 70000 to 70000 lie beyond 16 bits"):
        load_image_folder(folder)
