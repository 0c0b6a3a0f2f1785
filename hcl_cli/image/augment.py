"""Batched, device-side augmentations: uint8 images in, normalised float32 views out.

Every module here takes a uint8 batch ``(B, C, H, W)`` of any size on any device and returns
float32 on the same device, normalised with the dataset's per-channel mean and std. Random
parameters are drawn per image, for the whole batch at once (no per-sample Python, no host
sync), from torch's global RNG on the batch's device. ``hcl_cli.runtime.seed_everything``
therefore fixes every view, and a bitwise resume restores ``torch.get_rng_state()`` (and
``torch.cuda.get_rng_state()`` on CUDA).

Recipes:
- ``simclr``: the SimCLR augmentation (Chen et al. 2020, App. A) that HCL adopts (Robinson et al., App. D.1):
  RandomResizedCrop(scale 0.08-1), horizontal flip, ColorJitter(0.4, 0.4, 0.4, 0.1) with p = 0.8,
  grayscale with p = 0.2, optionally Gaussian blur with p = 0.5; pure torch with torchvision's
  formulas and parameter distributions (:mod:`hcl_cli.image.simclr_augment`).
- ``digits``: for 8x8 grayscale digits, where flips and colour changes would destroy the class:
  a milder random resized crop (scale 0.5-1) with a small rotation (up to 10 degrees), as one
  affine warp per image in pure torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hcl_cli.errors import HclError, UsageError
from hcl_cli.image.simclr_augment import CROP_RATIO, SimCLRAugment

RECIPES = ("simclr", "digits")
DIGITS_MAX_SIZE = 16
DIGITS_CROP_SCALE = (0.5, 1.0)
DIGITS_MAX_ROTATION_DEG = 10.0


def resolve_recipe(image_size: int) -> str:
    """``digits`` for images of 16 px or less, else ``simclr``."""
    return "digits" if image_size <= DIGITS_MAX_SIZE else "simclr"


class ToUnitFloat(nn.Module):
    """uint8 in 0..255 -> float32 in [0, 1]."""

    def forward(self, images: Tensor) -> Tensor:
        return images.float().div_(255.0)


class Normalize(nn.Module):
    """Per-channel ``(x - mean) / std`` with the dataset's statistics (on [0, 1] images)."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        if len(mean) != len(std) or any(s <= 0 for s in std):
            raise HclError(f"normalisation needs one mean and one positive std per channel (got mean={list(mean)}, std={list(std)})")
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)

    def forward(self, images: Tensor) -> Tensor:
        return (images - self.mean.to(images.device)) / self.std.to(images.device)


class RandomResizedAffine(nn.Module):
    """Random resized crop plus a small rotation, one affine warp per image, batched.

    For every image draws an area fraction ``a ~ U(scale)``, an aspect ratio ``r`` log-uniform in
    ``ratio``, a crop of width ``sqrt(a r)`` and height ``sqrt(a / r)`` (clipped to the image) at a
    uniform position inside the image, and a rotation ``U(-max_rotation, max_rotation)``; then
    resamples the crop to ``size`` (bilinear; samples past the outermost pixel centres, and corners
    that a rotation moves outside the image, take the nearest border pixel, as in a crop).
    """

    def __init__(self, size: int, scale: tuple[float, float], ratio: tuple[float, float], max_rotation_deg: float) -> None:
        super().__init__()
        self.size = size
        self.scale = scale
        self.log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        self.max_rotation = math.radians(max_rotation_deg)

    def forward(self, images: Tensor) -> Tensor:
        batch, device = images.shape[0], images.device
        draws = torch.rand(batch, 5, device=device)
        area = self.scale[0] + (self.scale[1] - self.scale[0]) * draws[:, 0]
        ratio = torch.exp(self.log_ratio[0] + (self.log_ratio[1] - self.log_ratio[0]) * draws[:, 1])
        width = torch.sqrt(area * ratio).clamp(max=1.0)
        height = torch.sqrt(area / ratio).clamp(max=1.0)
        # Crop centre in grid_sample coordinates ([-1, 1] spans the image), keeping the crop inside.
        centre_x = (1.0 - width) * (2.0 * draws[:, 2] - 1.0)
        centre_y = (1.0 - height) * (2.0 * draws[:, 3] - 1.0)
        angle = self.max_rotation * (2.0 * draws[:, 4] - 1.0)
        cos, sin = torch.cos(angle), torch.sin(angle)
        theta = torch.stack(
            [torch.stack([width * cos, -height * sin, centre_x], dim=1), torch.stack([width * sin, height * cos, centre_y], dim=1)],
            dim=1,
        )
        grid = F.affine_grid(theta, [batch, images.shape[1], self.size, self.size], align_corners=False)
        return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


def build_augmentation(
    image_size: int, channels: int, mean: Sequence[float], std: Sequence[float], *, blur: bool, recipe: str
) -> nn.Module:
    """The training augmentation: uint8 ``(B, C, H, W)`` -> float32 normalised views of ``image_size``.

    Every image of every call gets its own random parameters, so any batch size works: one call
    per view, or one call on the batch repeated once per view (the same views' distribution in
    half the dispatched ops). ``blur`` applies to the simclr recipe only (a blurred 8x8 digit is a blob).
    """
    if recipe not in RECIPES:
        raise UsageError(f"augmentation recipe must be one of {', '.join(RECIPES)} (got {recipe!r})")
    if len(mean) != channels:
        raise HclError(f"normalisation has {len(mean)} channel statistics for {channels}-channel images")
    if recipe == "digits":
        augment = RandomResizedAffine(image_size, DIGITS_CROP_SCALE, CROP_RATIO, DIGITS_MAX_ROTATION_DEG)
    else:
        augment = SimCLRAugment(image_size, channels, blur=blur)
    return nn.Sequential(ToUnitFloat(), augment, Normalize(mean, std))


def prepare_augmentation(augment: nn.Module, shape: Sequence[int], device: torch.device) -> None:
    """Make the constants that ``augment`` (:func:`build_augmentation`'s) caches for inputs of ``shape`` (C, H, W) on
    ``device`` now, outside any compiled region (:meth:`SimCLRAugment.prepare`)."""
    for module in augment.modules():
        if isinstance(module, SimCLRAugment):
            module.prepare(*shape, device)


def build_eval_transform(mean: Sequence[float], std: Sequence[float]) -> nn.Module:
    """uint8 -> normalised float32, no augmentation (for embed and evaluation)."""
    return nn.Sequential(ToUnitFloat(), Normalize(mean, std))
