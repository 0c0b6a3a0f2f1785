"""Batched augmentations: shapes, normalisation, per-image randomness, seeding, recipes."""

from __future__ import annotations

import sys

import pytest
import torch

from hcl_cli.augment import RandomResizedAffine, build_augmentation, build_eval_transform, resolve_recipe
from hcl_cli.errors import HclError, UsageError

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]
# (recipe, image size, channels): the digits recipe, SimCLR on colour and on grayscale images.
SETTINGS = [("digits", 8, 1), ("simclr", 32, 3), ("simclr", 24, 1)]


def random_images(batch: int, channels: int, size: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (batch, channels, size, size), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


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


def test_simclr_recipe_uses_torchvision_colour_jitter_semantics() -> None:
    import kornia.augmentation as K

    ops = build_augmentation(32, 3, [0.5] * 3, [0.25] * 3, blur=True, recipe="simclr")[1]
    kinds = [type(op) for op in ops]
    assert kinds == [K.RandomResizedCrop, K.RandomHorizontalFlip, K.ColorJitter, K.RandomGrayscale, K.RandomGaussianBlur]
    crop, _, jitter, grayscale, _ = ops
    assert crop._param_generator.scale == (0.08, 1.0)
    assert crop.flags["cropping_mode"] == "resample"  # one batched warp, not a Python loop over images
    assert jitter.p == 0.8 and (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue) == (0.4, 0.4, 0.4, 0.1)
    assert grayscale.p == 0.2


def test_digits_recipe_needs_no_kornia(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kornia", None)
    monkeypatch.setitem(sys.modules, "kornia.augmentation", None)
    views = build_augmentation(8, 1, [0.5], [0.25], blur=False, recipe="digits")(random_images(2, 1, 8))
    assert views.shape == (2, 1, 8, 8)
    with pytest.raises(HclError, match="needs kornia"):
        build_augmentation(32, 3, [0.5] * 3, [0.25] * 3, blur=False, recipe="simclr")


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match="recipe"):
        build_augmentation(8, 1, [0.5], [0.25], blur=False, recipe="autoaugment")
    with pytest.raises(HclError, match="3-channel"):
        build_augmentation(32, 3, [0.5], [0.25], blur=False, recipe="simclr")
    with pytest.raises(HclError, match="positive std"):
        build_eval_transform([0.5], [0.0])
