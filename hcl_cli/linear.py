"""Linear readout on frozen features, the evaluation protocol of HCL (Sec. 6), H-SCL (Sec. 6) and UnDiMix.

Features are standardised with the train split's mean and standard deviation. A linear classifier
``W x + b`` is trained full-batch on the train split by minimising the multinomial logistic loss with
an L2 penalty on ``W``::

    L(W, b) = mean_i cross_entropy(W x_i + b, y_i) + (weight_decay / 2) * ||W||_F^2

with L-BFGS (strong Wolfe line search; the problem is convex, so any start reaches the same
classifier) or Adam. Initialisation is seeded and there is no sampling, so two runs give the
same classifier.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from hcl_cli.errors import HclError
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
        solver: torch.optim.Optimizer = torch.optim.LBFGS(classifier.parameters(), lr=lr, max_iter=epochs, history_size=20, line_search_fn="strong_wolfe")
    else:
        solver = torch.optim.Adam(classifier.parameters(), lr=lr)
    progress = tqdm(desc=f"linear readout ({optimizer})", unit="eval", disable=None)

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
    classifier = fit_linear_classifier(train_x, train_y, num_classes, optimizer=optimizer, epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed)
    with torch.no_grad():
        scores = classifier(test_x)
    if not scores.isfinite().all():
        raise HclError(f"linear readout diverged to non-finite scores ({optimizer}, lr {lr}); lower --lr or raise --weight-decay")
    return scores
