"""Stand-in for HCL's official ``image/utils.py`` in the device check's smoke run: the two names its harness reads.

Not the official code (which never enters this repository): only its interface, so that
``benchmarks/official_hcl_image.py`` runs end to end on a CPU in tests/test_benchmarks.py.
"""

from typing import Any

import torch
import torchvision
from PIL import Image
from torchvision import transforms

train_transform = transforms.Compose([transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(), transforms.ToTensor()])


class CIFAR10Pair(torchvision.datasets.CIFAR10):
    """CIFAR-10 giving two augmented views of an image and its label."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, Any]:
        image = Image.fromarray(self.data[index])
        return self.transform(image), self.transform(image), self.targets[index]
