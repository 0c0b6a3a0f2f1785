"""The SimCLR augmentation as batched pure-torch ops on the batch's device, without host work.

SimCLR's recipe (Chen et al. 2020, App. A) as HCL trains it (Robinson et al. 2021, App. D.1, with
torchvision's transforms): RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3), RandomHorizontalFlip,
RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), RandomGrayscale(p=0.2) and, optionally,
GaussianBlur(sigma 0.1-2) with p=0.5.

:func:`draw` draws every image's parameters with the distributions of torchvision's ``get_params``
from one ``torch.rand`` on the batch's device (torch's global RNG there); the other functions
apply them as a fixed sequence of whole-batch ops: no ``.item()``, no data-dependent shape, no
Python per image, so a step that calls them stays sync-free and can be captured in a CUDA graph.
An op that an image does not get is an identity by its parameters (factor 1) or a ``torch.where``
on a per-image mask. Each op matches the ``torchvision.transforms.v2.functional`` function it
names on float images in [0, 1], to float rounding (``tests/test_augment.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
JITTER = (0.4, 0.4, 0.4, 0.1)
"""ColorJitter's brightness, contrast, saturation and hue."""
JITTER_P = 0.8
GRAYSCALE_P = 0.2
FLIP_P = 0.5
BLUR_P = 0.5
BLUR_SIGMA = (0.1, 2.0)
CROP_ATTEMPTS = 10
"""torchvision's ``RandomResizedCrop.get_params`` tries this many boxes before its centre-crop fallback."""
LUMA = (0.2989, 0.587, 0.114)
"""torchvision's ``rgb_to_grayscale`` weights of red, green and blue (ITU-R 601-2)."""
HUE = 3
"""Hue's number in ColorJitter's ``fn_idx`` (brightness 0, contrast 1 and saturation 2 are blends, hue a rotation)."""
PLACES_BEFORE_HUE, PLACES_AFTER_HUE = (0, 1, 2), (1, 2, 3)
"""The places in an image's jitter order of the blend steps before and after its one hue rotation: a place before hue
where it precedes hue, after it where it follows hue."""
DRAW_COLUMNS = (CROP_ATTEMPTS, CROP_ATTEMPTS, 4, 1, 2, 4, 4)
"""Uniform draws per image, mapped to their ranges by one ``lerp``: crop area and log aspect ratio per attempt, the
four jitter factors, the blur's sigma; then U(0, 1) for the crop offsets (y, x), the jitter's order, and the chances of
flip, jitter, grayscale and blur."""


@dataclass(frozen=True)
class SimCLRParams:
    """Every image's random parameters, as ``(B, ...)`` tensors on the batch's device."""

    corner: Tensor
    """``(B, 2)``: the crop's top and left pixel (float tensors holding integers), as ``RandomResizedCrop.get_params``."""
    box: Tensor
    """``(B, 2)``: the crop's height and width in whole pixels."""
    flip: Tensor
    """``(B,)`` bool, as are ``grayscale`` and ``blur``: whether the image gets the op."""
    factors: Tensor
    """``(B, 4)``: brightness, contrast, saturation and hue factors; ``(1, 1, 1, 0)``, the identity, where the jitter is
    not applied."""
    order: Tensor
    """``(B, 4)``: each image's permutation of the four jitter ops (ColorJitter's ``fn_idx``)."""
    grayscale: Tensor
    blur: Tensor
    sigma: Tensor
    """``(B,)``: the blur's standard deviation, as ``GaussianBlur.get_params``."""


@dataclass(frozen=True)
class Constants:
    """The tensors the ops read, made once per input shape, output size and device by :func:`constants`."""

    draw_low: Tensor
    draw_high: Tensor
    """``(sum(DRAW_COLUMNS),)``: the ranges the uniform draws are mapped to."""
    chances: Tensor
    """``(4,)``: the probabilities of flip, jitter, grayscale and blur."""
    identity_factors: Tensor
    smallest_box: Tensor
    extent: Tensor
    """``(2,)``: the input's height and width, in pixels."""
    extent_plus_one: Tensor
    fallback_box: Tensor
    fallback_corner: Tensor
    origin: Tensor
    """``(2,)``: the input's top-left edge in ``grid_sample``'s normalised coordinates (align_corners False), -1."""
    pixel: Tensor
    """``(2,)``: one input pixel's height and width in normalised coordinates."""
    half_pixel: Tensor
    flip_axes: Tensor
    """``(2,)``: which axes a horizontal flip reverses (x, not y)."""
    centres: Tensor
    """``(size,)``: the output pixels' centres as fractions of the crop, ``(j + 1/2) / size``."""
    grid_is_x: Tensor
    step_places: Tensor
    """``(6,)``: the places in the jitter order of the blend steps, :data:`PLACES_BEFORE_HUE` then :data:`PLACES_AFTER_HUE`."""
    step_before_hue: Tensor
    blend_weights: Tensor
    """``(4, 2)``: each jitter op's blend target, by ``fn_idx``: weights of the sum of the output's grayscale (its mean,
    for contrast) and of the grayscale (saturation); black (brightness) is neither, and hue is no blend."""
    luma: Tensor
    next_channel: Tensor
    channel_after_next: Tensor
    sextant_offsets: Tensor
    """``(1, 3, 1, 1)``: the hue, in sextants, where red, green or blue is the largest channel (6, 2, 4: 0 mod 6 for red)."""
    hsv_channels: Tensor
    blur_exponents: Tensor
    """``(k,)``: ``-x**2`` over torchvision's ``_get_gaussian_kernel1d`` points: the kernel is the softmax of
    ``-x**2 / sigma**2``."""
    channel_eye: Tensor
    zero: Tensor
    """0-dim, as ``tiny``, ``one``, ``four`` and ``six``: numbers an op reads as tensors (no scalar conversion per call)."""
    tiny: Tensor
    one: Tensor
    four: Tensor
    six: Tensor


class SimCLRAugment(nn.Module):
    """SimCLR's random ops on float ``(B, C, H, W)`` images in [0, 1], resampled to ``size`` x ``size``.

    Colour jitter and grayscale need three channels and are left out for grayscale images. The
    crop is drawn in the input's pixels. ``hcl`` feeds images of the training size, so a crop is
    never larger than the output and bilinear resampling equals torchvision's resize, antialiased
    or not; for an input larger than ``size``, a crop larger than the output is subsampled
    bilinearly, without torchvision's antialias filter (aliasing where torchvision would smooth).
    """

    def __init__(self, size: int, channels: int, *, blur: bool) -> None:
        super().__init__()
        self.size, self.colour = size, channels == 3
        # SimCLR: a kernel about 10% of the image side, odd; none without blur.
        self.kernel_size = max(3, int(0.1 * size) // 2 * 2 + 1) if blur else 0
        # The constants of each input shape and device seen, made by the first call (not in the steps after it).
        self.made: dict[tuple[int, int, int, torch.device], Constants] = {}

    def prepare(self, channels: int, height: int, width: int, device: torch.device) -> None:
        """Make the constants of inputs of this shape on ``device`` now, as the first call would. ``--compile`` calls it
        before the step is compiled: made inside the compiled step, they would be outputs of one CUDA-graph replay
        that the next replay overwrites while the cache still holds them."""
        device = torch.empty(0, device=device).device  # "cuda" as tensors name it: "cuda:0"
        key = (height, width, channels, device)
        if key not in self.made:
            self.made[key] = constants(height, width, channels, self.size, self.kernel_size, device)

    def forward(self, images: Tensor) -> Tensor:
        """Crop and flip, then (colour images) colour jitter and grayscale, then (with blur) blur: torchvision's order."""
        batch, channels, height, width = images.shape
        key = (height, width, channels, images.device)
        if key not in self.made:
            self.prepare(channels, height, width, images.device)
        fixed = self.made[key]
        params = draw(batch, fixed)
        views = resized_crop(images, params.corner, params.box, params.flip, fixed)
        if self.colour:
            views = colour_jitter(views, params.factors, params.order, fixed)
            views = torch.where(params.grayscale.view(-1, 1, 1, 1), grayscale(views, fixed), views)
        if self.kernel_size:
            views = torch.where(params.blur.view(-1, 1, 1, 1), gaussian_blur(views, params.sigma, fixed), views)
        return views


def constants(height: int, width: int, channels: int, size: int, kernel_size: int, device: torch.device) -> Constants:
    """The ops' tensors for ``height`` x ``width`` inputs resampled to ``size`` (``kernel_size`` 0: no blur), on ``device``."""

    def tensor(values: object, dtype: torch.dtype = torch.float32) -> Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    # ColorJitter's ranges: [max(0, 1 - s), 1 + s] for brightness, contrast and saturation; [-h, h] for hue.
    jitter_low = [max(0.0, 1.0 - strength) for strength in JITTER[:HUE]] + [-JITTER[HUE]]
    jitter_high = [1.0 + strength for strength in JITTER[:HUE]] + [JITTER[HUE]]
    area, log_ratio, unit = height * width, (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])), sum(DRAW_COLUMNS[4:])
    low = [CROP_SCALE[0] * area] * CROP_ATTEMPTS + [log_ratio[0]] * CROP_ATTEMPTS + jitter_low + [BLUR_SIGMA[0]] + [0.0] * unit
    high = [CROP_SCALE[1] * area] * CROP_ATTEMPTS + [log_ratio[1]] * CROP_ATTEMPTS + jitter_high + [BLUR_SIGMA[1]] + [1.0] * unit
    fallback = fallback_box(height, width)
    limit = (kernel_size - 1) / (2.0 * math.sqrt(2.0))
    return Constants(
        draw_low=tensor(low),
        draw_high=tensor(high),
        chances=tensor([FLIP_P, JITTER_P, GRAYSCALE_P, BLUR_P]),
        identity_factors=tensor([1.0, 1.0, 1.0, 0.0]),
        smallest_box=tensor([1.0, 1.0]),
        extent=tensor([height, width]),
        extent_plus_one=tensor([height + 1, width + 1]),
        fallback_box=tensor(fallback),
        fallback_corner=tensor([(height - fallback[0]) // 2, (width - fallback[1]) // 2]),
        origin=tensor([-1.0, -1.0]),
        pixel=tensor([2.0 / height, 2.0 / width]),
        half_pixel=tensor([1.0 / height, 1.0 / width]),
        flip_axes=tensor([False, True], torch.bool),
        centres=(torch.arange(size, dtype=torch.float32, device=device) + 0.5) / size,
        grid_is_x=tensor([True, False], torch.bool),
        step_places=tensor(PLACES_BEFORE_HUE + PLACES_AFTER_HUE, torch.long),
        step_before_hue=tensor([True] * len(PLACES_BEFORE_HUE) + [False] * len(PLACES_AFTER_HUE), torch.bool),
        blend_weights=tensor([[0.0, 0.0], [1.0 / size**2, 0.0], [0.0, 1.0], [0.0, 0.0]]),
        luma=tensor(LUMA).view(1, 3, 1, 1),
        next_channel=tensor([1, 2, 0], torch.long),
        channel_after_next=tensor([2, 0, 1], torch.long),
        sextant_offsets=tensor([6.0, 2.0, 4.0]).view(1, 3, 1, 1),
        hsv_channels=tensor([5.0, 3.0, 1.0]).view(1, 3, 1, 1),
        blur_exponents=-torch.linspace(-limit, limit, kernel_size, device=device).square(),
        channel_eye=torch.eye(channels, device=device).view(1, channels, channels, 1, 1),
        zero=tensor(0.0),
        tiny=tensor(torch.finfo(torch.float32).tiny),
        one=tensor(1.0),
        four=tensor(4.0),
        six=tensor(6.0),
    )


def fallback_box(height: int, width: int) -> tuple[int, int]:
    """torchvision's centre-crop fallback: the whole image, clipped to the ratio range."""
    if width / height < CROP_RATIO[0]:
        return round(width / CROP_RATIO[0]), width
    if width / height > CROP_RATIO[1]:
        return height, round(height * CROP_RATIO[1])
    return height, width


def draw(batch: int, fixed: Constants) -> SimCLRParams:
    """Every image's parameters from one ``torch.rand`` on the constants' device, with torchvision's distributions:
    ``RandomResizedCrop.get_params`` (all :data:`CROP_ATTEMPTS` attempts at once, each image's first box that fits,
    sides rounded half to even as Python's ``round``, at a uniform integer offset; else the centre-crop fallback),
    ColorJitter's ``get_params`` (its factors, and ``randperm(4)`` per image as the argsort of four uniforms),
    ``GaussianBlur.get_params``, and ``rand < p`` for each ``p``."""
    uniforms = torch.rand(batch, len(fixed.draw_low), device=fixed.draw_low.device)
    area, log_ratio, factors, sigma, offset, order, chance = torch.lerp(fixed.draw_low, fixed.draw_high, uniforms).split(DRAW_COLUMNS, 1)
    aspect = log_ratio.exp()
    sizes = torch.stack([area / aspect, area * aspect], dim=2).sqrt_().round_()
    fits = (sizes == torch.clamp(sizes, fixed.smallest_box, fixed.extent)).all(dim=2)
    first = fits.to(torch.uint8).argmax(dim=1).view(batch, 1, 1)
    found = fits.any(dim=1, keepdim=True)
    box = torch.where(found, sizes.gather(1, first.expand(batch, 1, 2)).view(batch, 2), fixed.fallback_box)
    # torch.randint(0, n + 1) as floor(u (n + 1)); float32 u < 1 keeps it at most n.
    corner = torch.where(found, offset.mul(fixed.extent_plus_one - box).floor_(), fixed.fallback_corner)
    flip, jitter, grayscale, blur = (chance < fixed.chances).unbind(dim=1)
    return SimCLRParams(
        corner,
        box,
        flip,
        factors=torch.where(jitter.unsqueeze(1), factors, fixed.identity_factors),
        order=order.argsort(dim=1),
        grayscale=grayscale,
        blur=blur,
        sigma=sigma.view(batch),
    )


def resized_crop(images: Tensor, corner: Tensor, box: Tensor, flip: Tensor, fixed: Constants) -> Tensor:
    """v2.functional ``resized_crop(image, top, left, height, width, [size, size])`` (bilinear), then
    ``horizontal_flip`` where ``flip``: one batched ``grid_sample`` over a separable grid.

    torch's bilinear resize (align_corners False) reads output pixel ``j`` at ``start + (j + 1/2) length / size - 1/2``,
    clamped to the crop's first and last pixel centres: in ``grid_sample``'s normalised coordinates, the crop's edges
    interpolated at the output's centres, clamped half a pixel inside them. A flipped view swaps the left and right edges.
    """
    batch, size = len(images), len(fixed.centres)
    start = torch.addcmul(fixed.origin, corner, fixed.pixel)
    end = torch.addcmul(start, box, fixed.pixel)
    swapped = flip.unsqueeze(1) & fixed.flip_axes
    first, last = torch.where(swapped, end, start).unsqueeze(2), torch.where(swapped, start, end).unsqueeze(2)
    along = torch.lerp(first, last, fixed.centres).clamp_((start + fixed.half_pixel).unsqueeze(2), (end - fixed.half_pixel).unsqueeze(2))
    grid = torch.where(fixed.grid_is_x, along[:, 1].view(batch, 1, size, 1), along[:, 0].view(batch, size, 1, 1))
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


def grayscale(images: Tensor, fixed: Constants) -> Tensor:
    """v2.functional ``rgb_to_grayscale`` with one output channel (``(B, 1, H, W)``; broadcast it for three)."""
    return (images * fixed.luma).sum(dim=1, keepdim=True)


def colour_jitter(images: Tensor, factors: Tensor, order: Tensor, fixed: Constants) -> Tensor:
    """ColorJitter's transform with per-image factors and per-image op order (its ``fn_idx``).

    Brightness, contrast and saturation are v2.functional's ``adjust_brightness``, ``adjust_contrast`` and
    ``adjust_saturation``: each blends the image with a target (black, the mean of its grayscale, its grayscale) by
    its factor and clamps to [0, 1]. ``adjust_hue`` runs once per image, between two passes of blend steps
    (:data:`PLACES_BEFORE_HUE`, :data:`PLACES_AFTER_HUE`): a step applies the op at its place in the image's order
    where that place is on its side of hue, and factor 1 (an exact identity) elsewhere, so every image gets its four
    ops in its order from a fixed sequence of whole-batch ops.
    """
    batch = len(images)
    hue_place = order.argsort(dim=1)[:, HUE:]
    step_ops = order.index_select(1, fixed.step_places)
    active = torch.where(fixed.step_before_hue, fixed.step_places < hue_place, fixed.step_places > hue_place)
    step_factors = torch.where(active, factors.gather(1, step_ops), fixed.one)
    steps = torch.cat([step_factors.unsqueeze(2), fixed.blend_weights[step_ops]], dim=2).view(batch, -1, 1, 1, 1).unbind(dim=1)
    for step in range(len(PLACES_BEFORE_HUE)):
        images = blend(images, *steps[3 * step : 3 * step + 3], fixed)
    hue_factor = factors[:, HUE].view(batch, 1, 1, 1)
    images = torch.where(hue_factor != fixed.zero, adjust_hue(images, hue_factor, fixed), images)
    for step in range(len(PLACES_BEFORE_HUE), len(fixed.step_places)):
        images = blend(images, *steps[3 * step : 3 * step + 3], fixed)
    return images


def blend(images: Tensor, factor: Tensor, mean_weight: Tensor, gray_weight: Tensor, fixed: Constants) -> Tensor:
    """v2.functional's ``_blend(image, target, factor)``, clamped to [0, 1], for ``(B, 1, 1, 1)`` parameters: the
    target is the grayscale's sum times ``mean_weight`` plus the grayscale times ``gray_weight``."""
    gray = grayscale(images, fixed)
    target = torch.addcmul(gray.sum(dim=(2, 3), keepdim=True) * mean_weight, gray, gray_weight)
    return torch.lerp(target, images, factor).clamp_(fixed.zero, fixed.one)


def adjust_hue(images: Tensor, hue_factor: Tensor, fixed: Constants) -> Tensor:
    """v2.functional ``adjust_hue`` for a ``(B, 1, 1, 1)`` factor: the hue turned by ``hue_factor`` (a fraction of the
    circle), saturation and value kept.

    torchvision's ``_rgb_to_hsv`` hue in sextants, from the largest channel ``c``: ``2 c + (next - after next) / chroma``
    (mod 6); where channels tie for the largest, their sextants agree mod 6, so the largest of the largest channels'
    sextants, each shifted into [1, 7], is the hue (red's shifted by 6). ``_hsv_to_rgb`` in closed form: channel ``n``
    (5 red, 3 green, 1 blue) is ``max - chroma * clamp(min(k, 4 - k), 0, 1)`` with ``k = (n + 6 hue) mod 6``.
    """
    largest, smallest = images.amax(dim=1, keepdim=True), images.amin(dim=1, keepdim=True)
    chroma = largest - smallest
    differences = images.index_select(1, fixed.next_channel) - images.index_select(1, fixed.channel_after_next)
    sextant = (differences / chroma.clamp(min=fixed.tiny)).add_(fixed.sextant_offsets)
    sextant = torch.where(images == largest, sextant, fixed.zero).amax(dim=1, keepdim=True)
    k = torch.remainder((sextant + fixed.hsv_channels).add_(hue_factor, alpha=6.0), fixed.six)
    return torch.addcmul(largest, chroma, torch.minimum(k, fixed.four - k).clamp_(fixed.zero, fixed.one), value=-1.0)


def gaussian_blur(images: Tensor, sigma: Tensor, fixed: Constants) -> Tensor:
    """v2.functional ``gaussian_blur(image, [k, k], [sigma, sigma])`` with a per-image ``sigma``: torchvision's kernel
    (``_get_gaussian_kernel1d``) along rows, then along columns (its 2D kernel is their outer product), of the
    reflect-padded images, as two grouped convolutions of the whole batch (one group per image)."""
    batch, channels, height, width = images.shape
    kernel = torch.softmax(fixed.blur_exponents / (sigma * sigma).unsqueeze(1), dim=1)
    size = kernel.shape[1]
    rows = (kernel.view(batch, 1, 1, 1, size) * fixed.channel_eye).view(batch * channels, channels, 1, size)
    padded = F.pad(images.reshape(1, batch * channels, height, width), (size // 2,) * 4, mode="reflect")
    blurred = F.conv2d(F.conv2d(padded, rows, groups=batch), rows.view(batch * channels, channels, size, 1), groups=batch)
    return blurred.view(batch, channels, height, width)
