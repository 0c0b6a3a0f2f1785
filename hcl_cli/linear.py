"""Linear readout on frozen features, the evaluation protocol of HCL (Sec. 6), H-SCL (Sec. 6) and UnDiMix.

Features are standardised with the train split's mean and standard deviation. A linear classifier
``W x + b`` is trained full-batch on the train split by minimising the multinomial logistic loss with
an L2 penalty on ``W``::

    L(W, b) = mean_i cross_entropy(W x_i + b, y_i) + (weight_decay / 2) * ||W||_F^2

with L-BFGS (strong Wolfe line search; the problem is convex, so any start reaches the same
classifier) or Adam. Initialisation is seeded and there is no sampling, so two runs give the
same classifier. This is the quick readout (``linear-eval`` protocol ``fixed``).

:func:`augmented_readout` is the papers' protocol (``paper``): the ``linear.py`` of HCL's official
code, which H-SCL, HCL-OT and UnDiMix reuse. Every epoch the train images are shuffled, augmented
afresh with the pretraining augmentation and passed through the frozen encoder; a linear layer on
the raw (not standardised) features is trained on minibatches with Adam, whose ``weight_decay``
applies to the weight and the bias; the test images are read without augmentation. Shuffling,
augmentation and initialisation are seeded, so a seed fixes the classifier.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from hcl_cli.errors import HclError
from hcl_cli.logs import bars_disabled
from hcl_cli.runtime import seed_everything


def standardise(train_x: torch.Tensor, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Centre and scale both splits with the train split's statistics; constant features are only centred."""
    mean = train_x.mean(dim=0)
    std = train_x.std(dim=0, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    return (train_x - mean) / std, (test_x - mean) / std


def fit_linear_classifier(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    num_classes: int,
    *,
    optimizer: str,
    epochs: int,
    lr: float,
    weight_decay: float,
    seed: int,
) -> nn.Linear:
    """Train ``nn.Linear(D, num_classes)`` on ``(train_x, train_y)``, full batch, on ``train_x.device``.

    ``epochs`` is the L-BFGS iteration budget, or the number of Adam steps. L-BFGS keeps 20 curvature
    pairs (SciPy keeps 10), so its memory stays at 40 times the classifier's size.
    """
    seed_everything(seed)
    classifier = nn.Linear(train_x.shape[1], num_classes).to(train_x.device)
    if optimizer == "lbfgs":
        solver: torch.optim.Optimizer = torch.optim.LBFGS(
            classifier.parameters(), lr=lr, max_iter=epochs, history_size=20, line_search_fn="strong_wolfe"
        )
    else:
        solver = torch.optim.Adam(classifier.parameters(), lr=lr)
    progress = tqdm(desc=f"linear readout ({optimizer})", unit="eval", disable=bars_disabled())

    def closure() -> torch.Tensor:
        solver.zero_grad()
        loss = F.cross_entropy(classifier(train_x), train_y) + 0.5 * weight_decay * classifier.weight.pow(2).sum()
        loss.backward()
        progress.update()
        return loss

    with progress:
        if optimizer == "lbfgs":
            solver.step(closure)  # one call runs up to `epochs` iterations, each with its line search
        else:
            for _ in range(epochs):
                solver.step(closure)
    return classifier


def linear_readout(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    num_classes: int,
    *,
    optimizer: str,
    epochs: int,
    lr: float,
    weight_decay: float,
    seed: int,
) -> torch.Tensor:
    """Class scores (Q, num_classes) of ``test_x`` from a linear classifier fitted on standardised train features."""
    train_x, test_x = standardise(train_x.float(), test_x.float())
    classifier = fit_linear_classifier(
        train_x, train_y, num_classes, optimizer=optimizer, epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed
    )
    with torch.no_grad():
        return checked_scores(classifier(test_x), optimizer, lr)


def checked_scores(scores: torch.Tensor, optimizer: str, lr: float) -> torch.Tensor:
    """``scores``, or a one-line error when the readout diverged to non-finite ones."""
    if not scores.isfinite().all():
        raise HclError(f"linear readout diverged to non-finite scores ({optimizer}, lr {lr}); lower --lr or raise --weight-decay")
    return scores


Encoder = Callable[[torch.Tensor], torch.Tensor]
"""The frozen encoder as the readout sees it: a normalised float batch -> its features (no gradient)."""


def augmented_readout(
    encoder: Encoder,
    augment: nn.Module,
    transform: nn.Module,
    train: tuple[torch.Tensor, torch.Tensor],
    test_images: torch.Tensor,
    num_classes: int,
    *,
    feature_dim: int,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    augment_seed: int | None = None,
) -> torch.Tensor:
    """Class scores (Q, num_classes) of uint8 ``test_images`` from a linear layer trained on augmented views.

    ``train`` is ``(uint8 images (N, C, H, W), labels (N,))``; ``augment`` and ``transform`` turn a
    uint8 batch into normalised views (the pretraining augmentation, and none); ``encoder`` maps them
    to ``feature_dim`` features. The classifier is ``nn.Linear(feature_dim, num_classes)``, trained
    ``epochs`` times over the train split in shuffled minibatches of ``batch_size`` (the last one
    smaller) with ``Adam(lr, weight_decay)`` on the cross-entropy, as the papers' code. Everything
    runs on the device of ``train``'s images. ``seed`` fixes the initialisation and the shuffling,
    and the augmentations' draws unless ``augment_seed`` is given.
    """
    images, labels = train
    device = images.device
    seed_everything(seed)
    classifier = nn.Linear(feature_dim, num_classes).to(device)
    optimizer = torch.optim.Adam(classifier.parameters(), lr=lr, weight_decay=weight_decay)
    shuffling = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed if augment_seed is None else augment_seed)  # the augmentations draw from the global RNG
    for _ in tqdm(range(epochs), desc="linear readout (paper)", unit="epoch", disable=bars_disabled()):
        order = torch.randperm(len(images), generator=shuffling).to(device)
        for batch in order.split(batch_size):
            with torch.no_grad():
                features = encoder(augment(images[batch])).float()
            loss = F.cross_entropy(classifier(features), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        scores = torch.cat([classifier(encoder(transform(chunk.to(device))).float()) for chunk in test_images.split(batch_size)])
    return checked_scores(scores, "adam", lr)
