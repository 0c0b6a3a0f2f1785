"""Stand-in for HCL's official ``image/main.py`` (see utils.py here): ``device``, the globals ``train()`` reads, and ``train()``."""

from collections.abc import Iterable

import torch
from torch import nn

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
batch_size, epoch, epochs, temperature = 256, 1, 1, 0.5


def train(
    net: nn.Module,
    data_loader: Iterable,
    train_optimizer: torch.optim.Optimizer,
    temperature: float,
    estimator: str,
    tau_plus: float,
    beta: float,
) -> float:
    """One pass over ``data_loader`` with SimCLR's loss; the mean loss."""
    net.train()
    total_loss, total_num = 0.0, 0
    for pos_1, pos_2, _ in data_loader:
        _, out_1 = net(pos_1.to(device))
        _, out_2 = net(pos_2.to(device))
        out = torch.cat([out_1, out_2])
        logits = (out @ out.T / temperature).fill_diagonal_(float("-inf"))
        partner = torch.arange(len(out), device=device).roll(len(out_1))
        loss = nn.functional.cross_entropy(logits, partner)
        train_optimizer.zero_grad()
        loss.backward()
        train_optimizer.step()
        total_num += len(out_1)
        total_loss += loss.item() * len(out_1)
    return total_loss / total_num
