"""Batched augmentations: shapes, normalisation, per-image randomness, seeding, recipes; the SimCLR ops against
torchvision's functional ops, their parameters against torchvision's ``get_params`` distributions, and no host sync."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
import torchvision.transforms as T
from scipy import stats
from torch.profiler import ProfilerActivity, profile
from torchvision.transforms.v2 import functional as TF

from benchmarks import bench_augment, common
from hcl_cli.errors import HclError, UsageError
from hcl_cli.image import simclr_augment
from hcl_cli.image.augment import RandomResizedAffine, build_augmentation, build_eval_transform, resolve_recipe

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]
# (recipe, image size, channels): the digits recipe, SimCLR on colour and on grayscale images.
SETTINGS = [("digits", 8, 1), ("simclr", 32, 3), ("simclr", 24, 1)]
JITTER_OPS = [TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue]
"""torchvision's ops in ColorJitter's ``fn_idx`` numbering."""
DRAWS = 10_000
"""Parameter draws per side in the distribution tests."""
SIGNIFICANCE = 1e-3
AUGMENT_OPS = 300
"""Pinned aten ops of one SimCLR augmentation call (B = 64, 32 px, no blur), with a margin (kornia's pipeline: about 1,800
and 4 host syncs, benchmarks/results/augment_cpu.json)."""

pytestmark = pytest.mark.usefixtures("one_thread")


def random_images(batch: int, channels: int, size: int, seed: int = 0, width: int | None = None) -> torch.Tensor:
    shape = (batch, channels, size, size if width is None else width)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def unit_images(batch: int, height: int = 32, width: int = 32, seed: int = 0) -> torch.Tensor:
    return random_images(batch, 3, height, seed, width).float() / 255


def test_resolve_recipe() -> None:
    assert resolve_recipe(8) == "digits"
    assert resolve_recipe(16) == "digits"
    assert resolve_recipe(32) == "simclr"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("recipe", "size", "channels"), SETTINGS)
def test_output_shape_dtype_and_device(recipe: str, size: int, channels: int, device: str) -> None:
    augment = build_augmentation(size, channels, [0.5] * channels, [0.25] * channels, blur=True, recipe=recipe).to(device)
    views = augment(random_images(6, channels, size).to(device))
    assert views.shape == (6, channels, size, size)
    assert views.dtype == torch.float32
    assert views.device.type == device
    assert torch.isfinite(views).all()


def test_eval_transform_normalises_with_the_dataset_statistics() -> None:
    images = random_images(64, 3, 8)
    unit = images.float() / 255
    mean = unit.mean(dim=(0, 2, 3)).tolist()
    std = unit.std(dim=(0, 2, 3)).tolist()
    normalised = build_eval_transform(mean, std)(images)
    assert normalised.dtype == torch.float32
    torch.testing.assert_close(normalised.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(normalised.std(dim=(0, 2, 3)), torch.ones(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(normalised[0, 1], (unit[0, 1] - mean[1]) / std[1])


@pytest.mark.parametrize(("recipe", "size", "channels"), SETTINGS)
def test_identical_images_get_different_views(recipe: str, size: int, channels: int) -> None:
    augment = build_augmentation(size, channels, [0.5] * channels, [0.25] * channels, blur=False, recipe=recipe)
    views = augment(random_images(1, channels, size).expand(8, -1, -1, -1))
    distinct = {tuple(view.flatten().tolist()) for view in views}
    assert len(distinct) == 8


@pytest.mark.parametrize(("recipe", "size", "channels"), SETTINGS)
def test_a_seed_fixes_the_views(recipe: str, size: int, channels: int) -> None:
    augment = build_augmentation(size, channels, [0.5] * channels, [0.25] * channels, blur=True, recipe=recipe)
    images = random_images(8, channels, size)
    torch.manual_seed(3)
    first = augment(images)
    torch.manual_seed(3)
    again = augment(images)
    torch.manual_seed(4)
    other = augment(images)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_resized_affine_at_full_scale_and_no_rotation_is_the_identity() -> None:
    images = torch.rand(4, 2, 8, 8)
    unchanged = RandomResizedAffine(8, scale=(1.0, 1.0), ratio=(1.0, 1.0), max_rotation_deg=0.0)(images)
    torch.testing.assert_close(unchanged, images)


def test_resized_affine_crops_inside_the_image() -> None:
    # Without rotation every crop lies inside the image: a constant image stays constant (no zero padding).
    crop = RandomResizedAffine(8, scale=(0.2, 0.6), ratio=(0.75, 1.333), max_rotation_deg=0.0)
    torch.testing.assert_close(crop(torch.full((16, 1, 8, 8), 0.7)), torch.full((16, 1, 8, 8), 0.7))


def test_resized_affine_zooms_in() -> None:
    # A half-width crop of a horizontal ramp covers at most half of the ramp's range
    # (less by up to a quarter pixel when the crop reaches into the image's outer half-pixel).
    ramp = torch.linspace(0, 1, 8).expand(16, 1, 8, 8)
    zoomed = RandomResizedAffine(8, scale=(0.25, 0.25), ratio=(1.0, 1.0), max_rotation_deg=0.0)(ramp)
    spans = zoomed.amax(dim=(1, 2, 3)) - zoomed.amin(dim=(1, 2, 3))
    assert ((spans > 0.5 - 0.25 / 7 - 1e-5) & (spans < 0.5 + 1e-5)).all()


# The SimCLR ops for fixed parameters against torchvision.transforms.v2.functional, image by image.


@pytest.mark.parametrize(("height", "width"), [(32, 32), (24, 32)])
def test_resized_crop_and_flip_match_torchvision(height: int, width: int) -> None:
    """resized_crop (bilinear, antialias as RandomResizedCrop) then horizontal_flip; every crop is at most the output."""
    images = unit_images(64, height, width)
    fixed = simclr_augment.constants(height, width, 3, 32, 0, images.device)
    torch.manual_seed(0)
    params = simclr_augment.draw(64, fixed)
    views = simclr_augment.resized_crop(images, params.corner, params.box, params.flip, fixed)
    for image, view, (top, left), (box_height, box_width), flip in zip(
        images, views, params.corner.int().tolist(), params.box.int().tolist(), params.flip.tolist()
    ):
        expected = TF.resized_crop(image, top, left, box_height, box_width, [32, 32], antialias=True)
        torch.testing.assert_close(view, TF.horizontal_flip(expected) if flip else expected, atol=1e-5, rtol=0)
    assert params.flip.any() and not params.flip.all()


@pytest.mark.parametrize("op", range(4), ids=[function.__name__ for function in JITTER_OPS])
def test_each_jitter_op_matches_torchvision(op: int) -> None:
    """One jitter op at a time (the other three at their identity), in random orders; with a gray image and images whose
    largest channels tie (red and green, green and blue, and blue and red, where hue wraps around)."""
    images = unit_images(32)
    images[0] = images[0, :1]
    for index, (channel, other) in enumerate(((0, 1), (1, 2), (2, 0)), start=1):
        images[index, other] = images[index, channel]
    fixed = simclr_augment.constants(32, 32, 3, 32, 0, images.device)
    generator = torch.Generator().manual_seed(op)
    factors = torch.tensor([1.0, 1.0, 1.0, 0.0]).repeat(32, 1)
    factors[:, op] = (
        torch.empty(32).uniform_(-0.5, 0.5, generator=generator) if op == simclr_augment.HUE else torch.rand(32, generator=generator) * 2
    )
    order = torch.rand(32, 4, generator=generator).argsort(dim=1)
    jittered = simclr_augment.colour_jitter(images, factors, order, fixed)
    expected = torch.stack([JITTER_OPS[op](image, factor) for image, factor in zip(images, factors[:, op].tolist())])
    torch.testing.assert_close(jittered, expected, atol=1e-5, rtol=0)


def test_colour_jitter_applies_each_images_ops_in_its_own_order() -> None:
    """ColorJitter's transform: the four ops with the image's factors, in the image's ``fn_idx`` order."""
    images = unit_images(96)
    fixed = simclr_augment.constants(32, 32, 3, 32, 0, images.device)
    torch.manual_seed(1)
    params = simclr_augment.draw(96, fixed)
    jittered = simclr_augment.colour_jitter(images, params.factors, params.order, fixed)
    for image, view, factors, order in zip(images, jittered, params.factors.tolist(), params.order.tolist()):
        for op in order:
            image = JITTER_OPS[op](image, factors[op])
        torch.testing.assert_close(view, image, atol=1e-5, rtol=0)
    assert len({tuple(order) for order in params.order.tolist()}) == 24


def test_grayscale_matches_torchvision() -> None:
    images = unit_images(8)
    gray = simclr_augment.grayscale(images, simclr_augment.constants(32, 32, 3, 32, 0, images.device))
    torch.testing.assert_close(gray, TF.rgb_to_grayscale(images, num_output_channels=1), atol=1e-6, rtol=0)


def test_gaussian_blur_matches_torchvision() -> None:
    """gaussian_blur with SimCLR's kernel at 32 px (3) and a larger one, each image with its own sigma."""
    images = unit_images(16)
    sigma = torch.linspace(0.1, 2.0, 16)
    for size, kernel in ((32, 3), (64, 7)):
        fixed = simclr_augment.constants(32, 32, 3, size, kernel, images.device)
        blurred = simclr_augment.gaussian_blur(images, sigma, fixed)
        expected = torch.stack([TF.gaussian_blur(image, [kernel, kernel], [s, s]) for image, s in zip(images, sigma.tolist())])
        torch.testing.assert_close(blurred, expected, atol=1e-5, rtol=0)


def test_the_recipe_is_torchvisions_pipeline_with_the_drawn_parameters() -> None:
    """The module: crop, flip, jitter, grayscale and blur in torchvision's order, each image with its drawn parameters."""
    images = unit_images(32)
    augment = simclr_augment.SimCLRAugment(32, 3, blur=True)
    torch.manual_seed(2)
    views = augment(images)
    torch.manual_seed(2)
    params = simclr_augment.draw(32, simclr_augment.constants(32, 32, 3, 32, augment.kernel_size, images.device))
    for index, (image, view) in enumerate(zip(images, views)):
        (top, left), (box_height, box_width) = params.corner[index].int().tolist(), params.box[index].int().tolist()
        image = TF.resized_crop(image, top, left, box_height, box_width, [32, 32], antialias=True)
        image = TF.horizontal_flip(image) if params.flip[index] else image
        if params.factors[index, simclr_augment.HUE] != 0:
            for op in params.order[index].tolist():
                image = JITTER_OPS[op](image, params.factors[index, op].item())
        image = TF.rgb_to_grayscale(image, num_output_channels=3) if params.grayscale[index] else image
        sigma = params.sigma[index].item()
        image = TF.gaussian_blur(image, [augment.kernel_size] * 2, [sigma, sigma]) if params.blur[index] else image
        torch.testing.assert_close(view, image, atol=1e-5, rtol=0)
    for applied in (params.flip, params.factors[:, simclr_augment.HUE] != 0, params.grayscale, params.blur):
        assert applied.any() and not applied.all()


# The drawn parameters against draws from torchvision's own get_params.


def same_distribution(ours: Sequence[object], theirs: Sequence[object]) -> float:
    """The chi-square test's p-value that two samples of categories come from one distribution (categories seen fewer
    than 10 times in all pooled into one)."""
    counts = [Counter(ours), Counter(theirs)]
    frequent = [key for key in counts[0].keys() | counts[1].keys() if counts[0][key] + counts[1][key] >= 10]
    table = [[count[key] for key in frequent] + [sum(count.values()) - sum(count[key] for key in frequent)] for count in counts]
    table = [row for row in zip(*table) if sum(row) > 0]
    return stats.chi2_contingency(list(zip(*table))).pvalue


@pytest.fixture(scope="module")
def drawn() -> simclr_augment.SimCLRParams:
    torch.manual_seed(0)
    return simclr_augment.draw(DRAWS, simclr_augment.constants(32, 32, 3, 32, 3, torch.device("cpu")))


def test_crop_boxes_follow_torchvisions_get_params(drawn: simclr_augment.SimCLRParams) -> None:
    torch.manual_seed(1)
    image = torch.zeros(3, 32, 32)
    theirs = [T.RandomResizedCrop.get_params(image, list(simclr_augment.CROP_SCALE), list(simclr_augment.CROP_RATIO)) for _ in range(DRAWS)]
    ours = [(*corner, *box) for corner, box in zip(drawn.corner.int().tolist(), drawn.box.int().tolist())]
    for part in (slice(0, 1), slice(1, 2), slice(2, 4)):  # top, left, (height, width)
        assert same_distribution([box[part] for box in ours], [box[part] for box in theirs]) > SIGNIFICANCE


def test_crop_falls_back_to_torchvisions_centre_crop() -> None:
    """With areas no attempt can fit (scale 4), every image gets torchvision's fallback, on a wide image too."""
    for height, width in ((32, 32), (20, 40), (40, 20)):
        fixed = simclr_augment.constants(height, width, 3, 32, 0, torch.device("cpu"))
        areas = slice(0, simclr_augment.CROP_ATTEMPTS)
        low, high = fixed.draw_low.clone(), fixed.draw_high.clone()
        low[areas], high[areas] = 4.0 * height * width, 4.0 * height * width
        params = simclr_augment.draw(8, dataclasses.replace(fixed, draw_low=low, draw_high=high))
        top, left, box_height, box_width = T.RandomResizedCrop.get_params(torch.zeros(3, height, width), [4.0, 4.0], [3 / 4, 4 / 3])
        assert params.corner.tolist() == [[top, left]] * 8
        assert params.box.tolist() == [[box_height, box_width]] * 8


def test_jitter_parameters_follow_torchvisions_get_params(drawn: simclr_augment.SimCLRParams) -> None:
    torch.manual_seed(1)
    ranges = [[1 - strength, 1 + strength] for strength in simclr_augment.JITTER[:3]] + [
        [-simclr_augment.JITTER[3], simclr_augment.JITTER[3]]
    ]
    theirs = [T.ColorJitter.get_params(*ranges) for _ in range(DRAWS)]
    jittered = drawn.factors[:, simclr_augment.HUE] != 0
    for op in range(4):
        their_factors = [params[1 + op] for params in theirs]
        assert stats.ks_2samp(drawn.factors[jittered, op].numpy(), their_factors).pvalue > SIGNIFICANCE
    orders = [tuple(order) for order in drawn.order.tolist()]
    assert same_distribution(orders, [tuple(params[0].tolist()) for params in theirs]) > SIGNIFICANCE


def test_blur_sigma_follows_torchvisions_get_params(drawn: simclr_augment.SimCLRParams) -> None:
    torch.manual_seed(1)
    theirs = [T.GaussianBlur.get_params(*simclr_augment.BLUR_SIGMA) for _ in range(DRAWS)]
    assert stats.ks_2samp(drawn.sigma.numpy(), theirs).pvalue > SIGNIFICANCE


@pytest.mark.parametrize(
    ("name", "chance"),
    [
        ("flip", simclr_augment.FLIP_P),
        ("jitter", simclr_augment.JITTER_P),
        ("grayscale", simclr_augment.GRAYSCALE_P),
        ("blur", simclr_augment.BLUR_P),
    ],
)
def test_each_op_is_applied_with_its_probability(drawn: simclr_augment.SimCLRParams, name: str, chance: float) -> None:
    applied = drawn.factors[:, simclr_augment.HUE] != 0 if name == "jitter" else getattr(drawn, name)
    assert stats.binomtest(int(applied.sum()), DRAWS, chance).pvalue > SIGNIFICANCE


# Host work.


def profiled_aten_ops(run: Callable[[], object]) -> Counter[str]:
    run()
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        run()
    return Counter({event.key: event.count for event in profiled.key_averages() if event.key.startswith("aten::")})


@pytest.mark.parametrize("blur", [False, True])
def test_the_simclr_augmentation_makes_no_host_sync_and_few_ops(blur: bool) -> None:
    augment = build_augmentation(32, 3, [0.5] * 3, [0.25] * 3, blur=blur, recipe="simclr")
    images = random_images(64, 3, 32)
    ops = profiled_aten_ops(lambda: augment(images))
    assert ops["aten::_local_scalar_dense"] == 0 and ops["aten::nonzero"] == 0
    if not blur:
        assert sum(ops.values()) <= AUGMENT_OPS


def test_the_benchmark_runs_its_smallest_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/bench_augment.py on a few images, in this process, writing into a temporary results folder."""
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    argv = ["--device", "cpu", "--images", "64", "--batch-size", "32", "--workers", "0", "--repeats", "1"]
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_augment.py", *argv])
    bench_augment.main()
    result = json.loads((tmp_path / "augment_cpu.json").read_text())
    assert result["host_work_per_call"]["batched"]["syncs"] == 0
    assert result["results"]["batched"]["images_per_s"] > 0


def test_the_simclr_recipe_needs_no_kornia(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kornia", None)
    monkeypatch.setitem(sys.modules, "kornia.augmentation", None)
    views = build_augmentation(32, 3, [0.5] * 3, [0.25] * 3, blur=True, recipe="simclr")(random_images(2, 3, 32))
    assert views.shape == (2, 3, 32, 32)


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match="recipe"):
        build_augmentation(8, 1, [0.5], [0.25], blur=False, recipe="autoaugment")
    with pytest.raises(HclError, match="3-channel"):
        build_augmentation(32, 3, [0.5], [0.25], blur=False, recipe="simclr")
    with pytest.raises(HclError, match="positive std"):
        build_eval_transform([0.5], [0.0])
