"""What every preset shares: the :class:`Preset` record, the datasets, the papers' readout and training setups.

The official code each setup comes from, cited by file and flag in the values' notes and transcribed
in ``tests/test_preset_sources.py``:

- HCL (joshr17/HCL) ``image/main.py``: argparse ``--temperature`` 0.5, ``--tau_plus`` 0.1,
  ``--batch_size`` 256, ``--epochs`` 400, ``--beta`` 1.0, ``--anneal`` None; ``optim.Adam(lr=1e-3,
  weight_decay=1e-6)``; ``image/linear.py``: Adam lr 1e-3, weight decay 1e-6, ``--epochs`` 100,
  ``--batch_size`` 512; ``image/utils.py``: ``GaussianBlur(kernel_size=int(0.1 * 32))``.
- facebookresearch/moco ``main_moco.py``: ``--moco-k`` 65536, ``--moco-m`` 0.999; its README's
  MoCo-v2 recipe ``--moco-t 0.2 --mlp --aug-plus --cos``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hcl_cli.config.base import StageConfig
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.errors import UsageError

MACHINE_KEYS: dict[str, tuple[str, ...]] = {"pretrain": ("eval_every", "checkpoint_every", "compile", "sync_batchnorm")}
"""Keys a preset leaves as they are: monitoring, checkpoint frequency and how the encoder is compiled or
synchronised on this machine (set them for your hardware; they do not change what is trained)."""

CONFIGS: dict[str, type[StageConfig]] = {config_cls.group: config_cls for config_cls in STAGE_CONFIGS}

Values = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Preset:
    """One paper experiment: the params.yaml values it states and the linear top-1 (%) the paper reports."""

    name: str
    paper: str
    where: str
    """The table or figure that reports the number."""
    dataset: str
    top1: str
    """The linear top-1 accuracy (%) the paper reports, as it prints it."""
    values: Values
    note: str
    """What the paper does not state, and where hcl's value comes from instead."""
    reported: str = ""
    """More of what the paper reports beside ``top1`` (a spread, the baselines of the same row)."""

    @property
    def reported_top1(self) -> str:
        """``top-1 93.98%``, or what the paper gives instead of a number (``top-1: figure only``)."""
        return f"top-1 {self.top1}%" if self.top1.replace(".", "", 1).isdigit() else f"top-1: {self.top1}"

    def groups(self) -> dict[str, dict[str, Any]]:
        """The groups this preset writes: every parameter of each, checked, except the machine keys it does not name."""
        groups = {}
        for group, named in self.values.items():
            if group not in CONFIGS:
                raise UsageError(f"preset {self.name}: {group} is not a params.yaml group")
            config = CONFIGS[group].from_sources(named, {})
            kept = set(MACHINE_KEYS.get(group, ())) - set(named)
            groups[group] = {key: value for key, value in config.params().items() if key not in kept}
        return groups


DATASETS: dict[str, tuple[str, dict[str, Any], str]] = {
    "stl10": (
        "STL-10",
        {"dataset": "stl10", "image_size": 32},
        "STL-10 at 32 px: HCL's code pretrains on RandomResizedCrop(32) views with the CIFAR stem (hcl's stem at 64 px or less); "
        "its readout scores the 96-px test images, hcl's the 32-px ones.",
    ),
    "cifar10": ("CIFAR-10", {"dataset": "cifar10"}, ""),
    "cifar100": ("CIFAR-100", {"dataset": "cifar100"}, ""),
    "tinyimagenet": (
        "tinyImageNet",
        {"dataset": "imagefolder", "path": "data/raw/tiny-imagenet-200", "image_size": 64},
        "tinyImageNet as an image folder in data/raw/tiny-imagenet-200: its train/ as unpacked (the box .txt files are skipped), "
        "and a test/ of the val/ images sorted into class folders by val_annotations.txt (the papers do not say which split they test on).",
    ),
}
"""``--dataset`` key -> (name, the prepare values, a note when hcl reads it differently from the papers)."""

TRAINING_IMAGES: dict[str, tuple[int, int, dict[str, int]]] = {
    "STL-10": (32, 10, {"train": 5000, "unlabeled": 100000}),
    "CIFAR-10": (32, 10, {"train": 50000}),
    "CIFAR-100": (32, 100, {"train": 50000}),
    "tinyImageNet": (64, 200, {"train": 100000}),
}
"""Each image dataset as its presets prepare it, for their cost estimate (:mod:`~hcl_cli.presets.cost`): the side in
pixels, the classes, and the images of each split that pretraining may read (the datasets' published sizes)."""

PAPER_LINEAR = {"protocol": "paper", "optimizer": "adam", "epochs": 100, "batch_size": 512, "lr": 1e-3, "weight_decay": 1e-6}
"""The linear evaluation of HCL's code (image/linear.py), which H-SCL, HCL-OT and UnDiMix reuse."""

MOCO_V2_METHOD = {
    "queue_size": 65536,
    "queue_mode": "moco",
    "momentum": 0.999,
    "temperature": 0.2,
    "projection_hidden": 0,
    "projection_batchnorm": False,
}
"""MoCo-v2's method without its optimizer: the queue, the momentum encoder, the temperature and the ``--mlp`` head."""
MOCO_V2 = {**MOCO_V2_METHOD, "optimizer": "sgd", "lr": 0.03, "sgd_momentum": 0.9, "weight_decay": 1e-4, "lr_schedule": "cosine"}
"""MoCo-v2 as its official code runs it: ``main_moco.py --moco-k 65536 --moco-m 0.999`` (the defaults) and the
README's v2 recipe ``--moco-t 0.2 --mlp --cos``; one view's queries against the other's keys and the K queued keys;
``torch.optim.SGD(lr 0.03, momentum 0.9, weight_decay 1e-4)`` (main_moco.py's defaults) with the cosine schedule; the
``--mlp`` head (moco/builder.py: Linear(2048, 2048), ReLU, then the 128-d fc)."""

MOCO_NOTE = (
    "MoCo-v2 from facebookresearch/moco: K 65536 and m 0.999 (main_moco.py --moco-k, --moco-m defaults), T 0.2 (the README's "
    "v2 recipe --moco-t 0.2), ResNet-50 (main_moco.py -a default; hcl's CIFAR stem), queries of one view against keys of the other "
    "and the queue (moco/builder.py), the key encoder's BatchNorm shuffled in splits (the CIFAR demo's --bn-splits 8), SGD lr 0.03, "
    "momentum 0.9, weight decay 1e-4 (main_moco.py defaults) with the cosine schedule (--cos; hcl sets it every step, the code "
    "every epoch) and the --mlp head (hidden as wide as the features, no BatchNorm). The CIFAR demo notebook would give T 0.1, "
    "m 0.99, K 4096 instead."
)


def simclr_setup(*, epochs: int, batch_size: int) -> dict[str, Any]:
    """HCL App. D.1: ResNet-50, a 128-d projection, Adam at lr 1e-3 and weight decay 1e-6; from HCL's code
    (image/main.py, image/utils.py): temperature 0.5 and SimCLR's augmentation with Gaussian blur (kernel 3 at 32 px, p 0.5)."""
    return {
        "arch": "resnet50",
        "projection_dim": 128,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": 1e-3,
        "weight_decay": 1e-6,
        "blur": True,
        "temperature": 0.5,
    }


def experiment(
    name: str, paper: str, where: str, dataset: str, top1: str, pretrain: Mapping[str, Any], note: str, reported: str = ""
) -> Preset:
    """A preset on ``dataset`` (a key of :data:`DATASETS`), read out with the papers' protocol."""
    title, prepare, dataset_note = DATASETS[dataset]
    values = {"prepare": prepare, "pretrain": dict(pretrain), "linear": PAPER_LINEAR}
    return Preset(name, paper, where, title, top1, values, " ".join(filter(None, [note, dataset_note])), reported)
