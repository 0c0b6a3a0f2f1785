"""Stand-in for HCL's official ``image/model.py`` (see utils.py here): ``Model(feature_dim)`` giving (feature, projection)."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    """A small CNN and a projection head, both outputs L2-normalised as the official model's are."""

    def __init__(self, feature_dim: int = 128) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.g = nn.Linear(8, feature_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feature = self.f(x)
        return F.normalize(feature, dim=-1), F.normalize(self.g(feature), dim=-1)
