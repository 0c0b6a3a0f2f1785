"""The train/test split every modality's ``prepare`` makes: the size check shared by images and graphs."""

from __future__ import annotations

import math

from hcl_cli.errors import UsageError


def check_split_sizes(count: int, num_classes: int, test_fraction: float, noun: str) -> None:
    """A stratified split of ``count`` samples (``noun``: image, graph) needs each split to hold at least one per class;
    a UsageError names the counts."""
    test = math.ceil(test_fraction * count)  # as scikit-learn's train_test_split rounds
    train = count - test
    if min(train, test) < num_classes:
        lowest, highest = math.ceil(num_classes / count * 1e4) / 1e4, math.floor((1 - num_classes / count) * 1e4) / 1e4
        raise UsageError(
            f"--test-fraction {test_fraction} leaves {train} train and {test} test {noun}s of {count}, but each split needs "
            f"at least one {noun} per class ({num_classes} classes): use a value between {lowest:.4f} and {highest:.4f}"
        )
