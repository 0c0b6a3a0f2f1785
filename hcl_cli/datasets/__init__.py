"""Datasets: the image sources ``hcl prepare`` decodes, and the prepared folder every later stage reads.

- :mod:`~hcl_cli.datasets.images`: scikit-learn's digits, CIFAR-10/100 and STL-10 through
  torchvision, and a user's ``train/`` + ``test/`` tree of class folders, decoded once;
- :mod:`~hcl_cli.datasets.card`: the prepared folder's ``card.json`` (:class:`DatasetCard`), one
  writer and one validating reader;
- :mod:`~hcl_cli.datasets.prepared`: its split files, read back checked against the card.

The names below are importable from ``hcl_cli.datasets``.
"""

from hcl_cli.datasets.card import CARD_FILE, SPLITS, DatasetCard, load_card, save_card
from hcl_cli.datasets.images import SourceDataset, load_source
from hcl_cli.datasets.prepared import SPLIT_KIND, SPLIT_TENSORS, load_split

__all__ = [
    "CARD_FILE",
    "SPLITS",
    "SPLIT_KIND",
    "SPLIT_TENSORS",
    "DatasetCard",
    "SourceDataset",
    "load_card",
    "load_source",
    "load_split",
    "save_card",
]
