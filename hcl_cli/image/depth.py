"""A decoded image's pixels as 8-bit RGB, whatever the depth Pillow opened it with (``prepare`` of an image folder)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from hcl_cli.errors import InputError

WIDE_MODES = {"I;16": 65535, "I;16L": 65535, "I;16B": 65535, "I;16N": 65535, "I": 65535}
"""Pillow's modes of one channel wider than 8 bits, by the largest value of their depth: 16-bit PNG and TIFF greyscale
opens as ``I;16`` (``I;16B`` big-endian) or, in older Pillow, ``I`` (32-bit integers holding the 16-bit values)."""


def as_rgb(image: Image.Image, name: str) -> Image.Image:
    """``image`` as 8-bit RGB, a wide greyscale (:data:`WIDE_MODES`) scaled by its bit depth rather than saturated at
    255 (``convert`` would clip every 16-bit value above 255); floating-point pixels (mode ``F``), which have no depth
    to scale by, and ``I`` values beyond 16 bits are a one-line InputError (exit 2)."""
    if image.mode == "F":
        raise InputError(f"{name}: floating-point pixels (mode F) have no bit depth to scale by; save it as an 8- or 16-bit image")
    if image.mode not in WIDE_MODES:
        return image.convert("RGB")
    pixels = np.asarray(image).astype(np.float64)
    top = WIDE_MODES[image.mode]
    if pixels.size and (pixels.min() < 0 or pixels.max() > top):
        raise InputError(
            f"{name}: {image.mode} pixels from {pixels.min():.0f} to {pixels.max():.0f} lie beyond 16 bits; save it as an 8- or 16-bit image"
        )
    return Image.fromarray(np.rint(pixels * (255.0 / top)).astype(np.uint8), mode="L").convert("RGB")
